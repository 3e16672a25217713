#!/usr/bin/env bash
# Start npm @modelcontextprotocol/server-everything, loopback only.
#   run_everything.sh stdio              newline-delimited JSON-RPC on stdin/stdout
#   PORT=N run_everything.sh streamableHttp   http://127.0.0.1:N/mcp
# The server binds every interface and honours no HOST variable; the loopback_only.cjs
# preload makes its listen() bind 127.0.0.1. Needs `npm ci` in tests/ (tests/node_modules) and Node >= 20.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tests="$(cd "$here/.." && pwd)"
entry="$tests/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
if [[ ! -f "$entry" ]]; then
    echo "run_everything.sh: $entry is missing: run 'npm ci' in $tests" >&2
    exit 2
fi
mode="${1:-stdio}"
case "$mode" in
    stdio) ;;
    streamableHttp)
        if [[ -z "${PORT:-}" ]]; then
            echo "run_everything.sh: streamableHttp needs PORT=<free port> (bound on 127.0.0.1)" >&2
            exit 2
        fi ;;
    *) echo "run_everything.sh: mode must be stdio or streamableHttp, got '$mode'" >&2; exit 2 ;;
esac
exec node --require "$here/loopback_only.cjs" "$entry" "$mode"
