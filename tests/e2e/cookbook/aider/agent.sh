# aider edits weather.py in a git repository of its own, made fresh for each run, and the
# run fails unless the file changed. The task is the first argument.
set -eu
metadata="$(pwd)/model-metadata.json"
repo="$(mktemp -d)"
trap 'rm -rf "$repo"' EXIT
cp weather.py "$repo/"
cd "$repo"
git init --quiet
git add weather.py
git -c user.name=cookbook -c user.email=cookbook@example.com commit --quiet -m "forecasts"
aider --model gpt-4o-mini --model-metadata-file "$metadata" \
    --message "$1" --yes-always --no-auto-commits weather.py
if git diff --quiet; then
    echo "aider left weather.py unchanged" >&2
    exit 1
fi
git diff
