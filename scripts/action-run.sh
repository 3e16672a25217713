#!/usr/bin/env bash
# The replay step of the GitHub Action (action.yml at the repository's root), kept out of
# the YAML so a test runs it as it is (tests/e2e/test_github_action.py).
#
#   INPUT_PATH=specs INPUT_SHARD=2/4 bash scripts/action-run.sh
#
# Runs `flowproof run PATH [--shard K/N] [--jobs N]` with the `flowproof` on PATH, then
# writes for the upload step, to $GITHUB_OUTPUT: `junit=` the JUnit file a directory run
# writes (PATH/.flowproof/suite-junit.xml; empty when there is none: a single spec's run,
# or a run that stopped before any flow) and `artifact=` a name unique per shard. Exits
# with flowproof's own code: 0 every flow passed, 1 a flow failed, 2 flowproof could not run.
# The inputs come as environment variables, never pasted into the script's text.
set -uo pipefail

path="${INPUT_PATH:-.}"
shard="${INPUT_SHARD:-}"
jobs="${INPUT_JOBS:-}"
artifact="${INPUT_ARTIFACT_NAME:-flowproof-junit}"
outputs="${GITHUB_OUTPUT:-/dev/null}"

args=(run "$path")
if [[ -n "$shard" ]]; then
    args+=(--shard "$shard")
    artifact="$artifact-shard-${shard//\//-of-}"  # 2/4 -> ...-shard-2-of-4
fi
if [[ -n "$jobs" ]]; then
    args+=(--jobs "$jobs")
fi

junit="$path/.flowproof/suite-junit.xml"
# A report left by an earlier run in this workspace must not pass for this run's.
if [[ -d "$path" ]]; then
    rm -f "$junit"
fi

echo "flowproof ${args[*]}"
flowproof "${args[@]}"
code=$?

if [[ -f "$junit" ]]; then
    echo "junit=$junit" >> "$outputs"
else
    echo "::notice::flowproof wrote no JUnit file at $junit (a single spec's run writes none: give a folder)"
    echo "junit=" >> "$outputs"
fi
echo "artifact=$artifact" >> "$outputs"
exit "$code"
