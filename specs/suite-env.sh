#!/bin/sh
# env_from of specs/suite.yaml: run in specs/, it prints KEY=VALUE lines for every flow.
set -eu
root=$(cd .. && pwd)
python="$root/.venv/bin/python"
if [ ! -x "$python" ]; then
    echo "specs/suite-env.sh: $python is missing: run scripts/bootstrap.sh (make bootstrap)" >&2
    exit 1
fi
# The agents call a bare `python`; the project's venv, which holds their SDKs, comes first.
echo "PATH=$root/.venv/bin:$PATH"
# contained.flow.yaml certifies its egress only where this host can contain an agent (Linux
# x86_64 with seccomp user notification); elsewhere it is skipped, naming this variable.
if "$python" -c 'from flowproof_cli.egress import unavailable_reason as r; raise SystemExit(r() is not None)'; then
    echo "SPECS_HOST_CONTAINS=yes"
fi
