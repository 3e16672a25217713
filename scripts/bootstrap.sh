#!/usr/bin/env bash
# Create .venv with a Python >= 3.12 and install what one of the two entry points needs.
# Finds the interpreter by itself (PATH, then pyenv), and says clearly when none exists.
#
#   scripts/bootstrap.sh        `make test`: flowproof with its test dependencies, every npm
#                               package of tests/, the cookbook venvs, apt tools when root
#   scripts/bootstrap.sh demo   `make demo`: flowproof and the examples' own SDKs (the `demo`
#                               extra), examples/package.json's npm packages; nothing else
set -euo pipefail
cd "$(dirname "$0")/.."

MODE="${1:-test}"
VENV=.venv
STAMP="$VENV/.bootstrap-stamp"  # the full (test) bootstrap's; the demo's never writes it
DEMO_STAMP="$VENV/.bootstrap-demo-stamp"
LOGS="$VENV/logs"
if [[ "$MODE" != test && "$MODE" != demo ]]; then
    echo "bootstrap: unknown mode '$MODE'. Fix: scripts/bootstrap.sh [demo]" >&2
    exit 2
fi

is_ok_python() {
    "$1" -c 'import sys; raise SystemExit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null
}

find_python() {
    if [[ -n "${FLOWPROOF_PYTHON:-}" ]] && is_ok_python "$FLOWPROOF_PYTHON"; then
        echo "$FLOWPROOF_PYTHON"; return 0
    fi
    local candidate
    for candidate in python3.13 python3.12 python3 python; do
        if command -v "$candidate" >/dev/null 2>&1 && is_ok_python "$(command -v "$candidate")"; then
            command -v "$candidate"; return 0
        fi
    done
    local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
    for candidate in "$pyenv_root"/versions/3.1[2-9]*/bin/python3 /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9]; do
        if [[ -x "$candidate" ]] && is_ok_python "$candidate"; then
            echo "$candidate"; return 0
        fi
    done
    return 1
}

# The egress tests (tests/egress/) run contained agents in network namespaces: they need `ip`
# (iproute2), `unshare`/`nsenter`/`setpriv` (util-linux) and a C compiler for one small
# helper. Installed with apt when missing and possible (root, Debian/Ubuntu); else skipped.
has_libseccomp() {
    # grep without -q reads all of ldconfig's output (pipefail: no SIGPIPE on an early match)
    { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | grep 'libseccomp\.so\.2' >/dev/null
}

ensure_egress_tools() {
    local missing=()
    command -v ip >/dev/null 2>&1 || missing+=(iproute2)
    { command -v unshare && command -v nsenter && command -v setpriv; } >/dev/null 2>&1 \
        || missing+=(util-linux)
    { command -v gcc || command -v cc; } >/dev/null 2>&1 || missing+=(gcc libc6-dev)
    # libfaketime: the coding-CLI tests (tests/e2e/test_cli_agents.py) replay on a later day
    command -v faketime >/dev/null 2>&1 || missing+=(faketime)
    # libseccomp2: egress/rules.py compiles the seccomp filter with it (through pyseccomp);
    # without it every run reports `not contained (libseccomp not found)`
    has_libseccomp || missing+=(libseccomp2)
    # chromium: the headless-browser test of `flowproof inspect` (tests/e2e/test_inspect.py)
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    [[ ${#missing[@]} -eq 0 ]] && return 0
    if [[ "$(id -u)" == "0" ]] && command -v apt-get >/dev/null 2>&1; then
        echo "bootstrap: installing ${missing[*]} for the egress tests"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
    else
        echo "bootstrap: ${missing[*]} missing; egress containment tests will be skipped" >&2
    fi
}

# `stamp_is FILE VALUE`: FILE holds VALUE. Every step's readiness is its stamp file holding
# the hash of what it was installed from; `digest` hashes standard input.
stamp_is() { [[ -f "$1" ]] && [[ "$(cat "$1")" == "$2" ]]; }
digest() { sha256sum | cut -d' ' -f1; }

fingerprint() {
    local f
    for f in pyproject.toml tests/package.json tests/package-lock.json tests/cookbook-requirements.txt \
        tests/aider-requirements.txt; do
        if [[ -f "$f" ]]; then cat "$f"; fi
    done | digest
}

# The `mcp` 1.x SDK, side by side with the venv's 2.x, for the MCP test fixtures
# (tests/mcp_fixtures/sdk_path.py finds it). Installed with the venv's interpreter.
MCP1_SPEC="mcp==1.30.0"
MCP1_DIR=.deps/mcp1
mcp1_ready() { stamp_is "$MCP1_DIR/.stamp" "$MCP1_SPEC"; }

# The agent frameworks of the wiring cookbook (docs/agents.md, tests/e2e/test_cookbook.py),
# pinned in tests/cookbook-requirements.txt, get a virtualenv of their own: their dependency
# trees are heavy (pip takes minutes) and conflict with .venv's. aider, which pins every one
# of its dependencies exactly and so conflicts with the frameworks, gets another one, from
# tests/aider-requirements.txt. Each is built from the same interpreter as .venv (a venv made
# by a venv's python nests badly). Its stamp is its requirements file's hash, so an edit of
# the pins reinstalls it.
COOKBOOK_VENVS=(cookbook aider)  # .deps/NAME from tests/NAME-requirements.txt
venv_requirements() { echo "tests/$1-requirements.txt"; }
venv_stamp() { digest < "$(venv_requirements "$1")"; }
venv_ready() {
    local requirements dir=".deps/$1"
    requirements="$(venv_requirements "$1")"
    [[ ! -f "$requirements" ]] || stamp_is "$dir/.stamp" "$(venv_stamp "$1")"
}
venv_install() {
    local base requirements dir=".deps/$1"
    requirements="$(venv_requirements "$1")"
    base="$("$VENV/bin/python" -c 'import sys; print(sys._base_executable)')"
    rm -rf "$dir"
    if [[ -n "$UV" ]]; then "$base" -m venv --without-pip "$dir"; else "$base" -m venv "$dir"; fi
    if ! py_install "$dir/bin/python" -r "$requirements"; then
        rm -rf "$dir"
        echo "bootstrap: could not install $requirements (see above)" >&2
        return 1
    fi
    venv_stamp "$1" > "$dir/.stamp"
}
cookbook_ready() {
    local name
    for name in "${COOKBOOK_VENVS[@]}"; do venv_ready "$name" || return 1; done
}

# The installed-package test (tests/e2e/test_installed_package.py) installs the built wheel
# and sdist into fresh virtualenvs with no network: from this wheelhouse of flowproof's
# runtime dependencies, its build requirements (the sdist builds on install) and pytest
# (for the plugin). Its stamp is that requirement list.
WHEELHOUSE=.deps/wheelhouse
wheelhouse_requirements() {
    "$VENV/bin/python" - <<'PY'
import tomllib
with open("pyproject.toml", "rb") as handle:
    project = tomllib.load(handle)
print(*project["project"]["dependencies"], *project["build-system"]["requires"], sep="\n")
PY
    echo "pytest>=8"
}
wheelhouse_ready() {
    [[ -x "$VENV/bin/python" ]] && stamp_is "$WHEELHOUSE/.stamp" "$(wheelhouse_requirements | digest)"
}
wheelhouse_install() {
    echo "bootstrap: filling $WHEELHOUSE with flowproof's runtime dependencies (offline installs)"
    rm -rf "$WHEELHOUSE"
    mkdir -p "$WHEELHOUSE"
    if ! "$VENV/bin/python" -m pip wheel --quiet --wheel-dir "$WHEELHOUSE" \
        -r <(wheelhouse_requirements) 2> >(grep -v "is ignored: it is neither" >&2); then
        rm -rf "$WHEELHOUSE"
        echo "bootstrap: pip could not fill $WHEELHOUSE; the installed-package test will be skipped" >&2
        return 0
    fi
    wheelhouse_requirements | digest > "$WHEELHOUSE/.stamp"
}

# The Node agents, MCP servers and coding CLIs of the e2e tests, pinned in tests/package.json
# and tests/package-lock.json, live in tests/node_modules (a lockfile edit changes the fingerprint).
# Its stamp is package.json's and the lockfile's hash, written once `npm ci` has finished.
tests_npm_fingerprint() { cat tests/package.json tests/package-lock.json | digest; }
npm_ready_with_stamp() { stamp_is tests/node_modules/.stamp "$(tests_npm_fingerprint)"; }
npm_ready() { [[ ! -f tests/package.json ]] || ! command -v npm >/dev/null 2>&1 || npm_ready_with_stamp; }

full_ready() { stamp_is "$STAMP" "$(fingerprint)"; }

require_python() {
    if ! PY="$(find_python)"; then
        echo "bootstrap: flowproof needs Python >= 3.12 (mitmproxy 12 requires it), and none was found." >&2
        echo "bootstrap: looked on PATH (python3.13, python3.12, python3) and in \$PYENV_ROOT/versions." >&2
        echo "bootstrap: install one (for example 'pyenv install 3.12') or set FLOWPROOF_PYTHON=/path/to/python3.12." >&2
        exit 2
    fi
}

# ---- make demo -------------------------------------------------------------------------
# The demo's bootstrap: one line per step; each step's full output (pip, npm, setuptools'
# warnings) goes to a log under .venv/logs/, named in the line and shown when the step fails.
# Ready when the full bootstrap is (its `agents` extra holds the demo's SDKs and
# tests/node_modules the demo's npm packages), so `make demo` after `make test` installs
# nothing; its own stamp never stands in for the full one, so `make test` after `make demo`
# still installs everything.
DEMO_NODE=examples/node_modules
demo_fingerprint() { digest < pyproject.toml; }
demo_npm_fingerprint() { cat examples/package.json examples/package-lock.json | digest; }
demo_python_ready() {
    [[ -x "$VENV/bin/python" ]] && { full_ready || stamp_is "$DEMO_STAMP" "$(demo_fingerprint)"; }
}
demo_npm_ready() {
    [[ -x tests/node_modules/.bin/claude ]] || stamp_is "$DEMO_NODE/.stamp" "$(demo_npm_fingerprint)"
}

# A step's one line: `bootstrap: TITLE ... done (Ns; log: LOG)`. On failure the log's last
# lines follow on stderr and the status is 1.
step_begin() { printf 'bootstrap: %s ... ' "$1"; }
step_end() {  # LOG START STATUS
    if [[ $3 == 0 ]]; then
        echo "done ($((SECONDS - $2))s; log: $1)"
        return 0
    fi
    echo "FAILED (log: $1)"
    echo "---- last 40 lines of $1 ----" >&2
    tail -n 40 "$1" >&2
    return 1
}
step() {  # LOG TITLE COMMAND...
    local log="$LOGS/$1" start=$SECONDS status=0
    step_begin "$2"
    shift 2
    "$@" > "$log" 2>&1 || status=$?
    step_end "$log" "$start" "$status"
}

demo_npm_install() {
    # `npm ci` installs examples/package-lock.json as committed; the stamp goes in after it,
    # since `npm ci` empties node_modules first. A half-filled folder would make the Node
    # flows fail where they should skip: it goes.
    npm ci --prefix examples --no-audit --no-fund --prefer-offline \
        && demo_npm_fingerprint > "$DEMO_NODE/.stamp" \
        || { rm -rf "$DEMO_NODE"; return 1; }
}

demo_bootstrap() {
    local ready=1 python_ready=1 npm_pid="" npm_start=$SECONDS npm_log="$LOGS/npm-demo.log"
    demo_python_ready || python_ready=0
    if [[ $python_ready == 0 ]]; then
        require_python
        if [[ ! -x "$VENV/bin/python" ]] || ! is_ok_python "$VENV/bin/python"; then
            rm -rf "$VENV"
        fi
    fi
    mkdir -p "$LOGS"
    # npm works in the background while pip does (each mostly waits on the network and the
    # disk); its line comes after pip's.
    if ! demo_npm_ready; then
        if command -v npm >/dev/null 2>&1; then
            demo_npm_install > "$npm_log" 2>&1 &
            npm_pid=$!
        else
            echo "bootstrap: npm not found: the Node and Claude Code examples will SKIP" \
                "(install Node.js and npm, then make demo again)"
        fi
    fi
    local python_ok=1
    if [[ $python_ready == 0 ]]; then
        ready=0
        if [[ ! -x "$VENV/bin/python" ]]; then
            step venv.log "creating .venv with $("$PY" --version 2>&1)" "$PY" -m venv "$VENV" \
                || python_ok=0
        fi
        if [[ $python_ok == 1 ]]; then
            step pip-demo.log "installing flowproof and the examples' SDKs into .venv" \
                "$VENV/bin/python" -m pip install -e ".[demo]" || python_ok=0
        fi
        if [[ $python_ok == 1 ]]; then demo_fingerprint > "$DEMO_STAMP"; fi
    fi
    if [[ -n $npm_pid ]]; then
        ready=0
        local npm_status=0
        wait "$npm_pid" || npm_status=$?
        # A failed npm install (no registry, say) costs only the two Node flows, not the demo.
        step_begin "installing the Node examples' npm packages into $DEMO_NODE"
        step_end "$npm_log" "$npm_start" "$npm_status" \
            || echo "bootstrap: the Node and Claude Code examples will SKIP" \
                "(the next make demo tries npm again)"
    fi
    if [[ $python_ok == 0 ]]; then exit 1; fi
    if [[ $ready == 1 ]]; then echo "bootstrap: .venv is ready (nothing to install)"; fi
}

if [[ "$MODE" == demo ]]; then
    demo_bootstrap
    exit 0
fi

# ---- make test -------------------------------------------------------------------------
# Everything at once where it can be: npm fills tests/node_modules in the background from the
# start, and once .venv holds flowproof, the mcp 1.x folder, the two cookbook venvs and the
# wheelhouse fill side by side. Python packages go in with uv where it installs (a wheel from
# PyPI into .venv), else with pip: uv resolves the same pins, installs the cookbook's 2 GB from
# its cache in seconds and compiles their byte code on both cores, where pip took minutes one
# after another. Each step's output goes to a log under .deps/logs/, named in its line and shown
# when it fails.
ensure_egress_tools

if [[ -x "$VENV/bin/python" ]] && full_ready && mcp1_ready && cookbook_ready && npm_ready \
    && wheelhouse_ready; then
    exit 0
fi

require_python

TEST_LOGS=.deps/logs
mkdir -p "$TEST_LOGS"
echo "bootstrap: using $PY ($("$PY" --version 2>&1))"

# This machine's pip config names local mirror folders that may not exist: hide that noise.
without_pip_noise() { grep -v "is ignored: it is neither" || true; }

tests_npm_install() {
    # `npm ci` refuses a lockfile whose optional platform packages (opencode's and Qwen
    # Code's native builds for other systems) the registry does not list; a clean `npm
    # install --no-save` then installs the same locked versions (the lockfile is left as
    # committed) and links each CLI's own package in .bin, not an older alias.
    # --prefer-offline: what npm's cache holds is taken without asking the registry again
    # (a fresh clone on a machine that installed them before: 27 s against 36 s).
    if ! npm ci --prefix tests --no-audit --no-fund --loglevel=error --prefer-offline; then
        echo "npm ci refused the lockfile; installing the locked versions with npm install"
        rm -rf tests/node_modules
        npm install --prefix tests --no-save --no-audit --no-fund --loglevel=error --prefer-offline \
            || return 1
    fi
    tests_npm_fingerprint > tests/node_modules/.stamp
}

# Background steps: `begin_job NAME TITLE COMMAND...` starts one; `finish_jobs` waits for all,
# prints each one's line (with the seconds it took) in the order they began and fails when
# one did.
JOB_NAMES=() JOB_TITLES=() JOB_PIDS=() JOB_STARTS=()
begin_job() {
    local name="$1" title="$2"
    shift 2
    (
        status=0
        "$@" || status=$?
        echo "$SECONDS" > "$TEST_LOGS/$name.ended"
        exit "$status"
    ) > "$TEST_LOGS/$name.log" 2>&1 &
    JOB_NAMES+=("$name") JOB_TITLES+=("$title") JOB_PIDS+=("$!") JOB_STARTS+=("$SECONDS")
}
finish_jobs() {
    local index status failed=0 name took
    for index in "${!JOB_PIDS[@]}"; do
        status=0 name="${JOB_NAMES[$index]}"
        wait "${JOB_PIDS[$index]}" || status=$?
        # step_end counts from START to now: shift START by the time since the job ended
        took=$(( $(cat "$TEST_LOGS/$name.ended" 2>/dev/null || echo "$SECONDS") - JOB_STARTS[index] ))
        rm -f "$TEST_LOGS/$name.ended"
        step_begin "${JOB_TITLES[$index]}"
        step_end "$TEST_LOGS/$name.log" "$((SECONDS - took))" "$status" || failed=1
    done
    JOB_NAMES=() JOB_TITLES=() JOB_PIDS=() JOB_STARTS=()
    return "$failed"
}

if [[ -f tests/package.json ]] && ! npm_ready_with_stamp; then
    if command -v npm >/dev/null 2>&1; then
        begin_job npm-tests "installing tests/package.json's npm packages into tests/node_modules" \
            tests_npm_install
    else
        echo "bootstrap: npm not found; Node agent tests will be skipped" >&2
    fi
fi

if [[ ! -x "$VENV/bin/python" ]] || ! is_ok_python "$VENV/bin/python"; then
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip uv 2>&1 | without_pip_noise || true
UV="$VENV/bin/uv"
[[ -x "$UV" ]] || UV=""

# `py_install PYTHON ARGS...`: pip's install arguments, into PYTHON's environment.
py_install() {
    local python="$1"
    shift
    if [[ -n "$UV" ]]; then
        "$UV" pip install --quiet --compile-bytecode --python "$python" "$@"
    else
        "$python" -m pip install --quiet "$@" 2>&1 | without_pip_noise
    fi
}

# The side-by-side steps need only .venv's interpreter (and uv): they start before flowproof
# itself goes into .venv.
mcp1_install() {
    rm -rf "$MCP1_DIR"
    py_install "$VENV/bin/python" --target "$MCP1_DIR" "$MCP1_SPEC" && echo "$MCP1_SPEC" > "$MCP1_DIR/.stamp"
}
mcp1_ready || begin_job mcp1 "installing $MCP1_SPEC into $MCP1_DIR" mcp1_install
for name in "${COOKBOOK_VENVS[@]}"; do
    venv_ready "$name" \
        || begin_job "$name" "installing $(venv_requirements "$name") into .deps/$name" venv_install "$name"
done
wheelhouse_ready || begin_job wheelhouse "filling $WHEELHOUSE with flowproof's runtime dependencies" \
    wheelhouse_install
step_begin "installing flowproof with its dev and agents extras into $VENV"
flowproof_start=$SECONDS flowproof_status=0
py_install "$VENV/bin/python" -e ".[dev,agents]" > "$TEST_LOGS/venv.log" 2>&1 || flowproof_status=$?
if ! step_end "$TEST_LOGS/venv.log" "$flowproof_start" "$flowproof_status"; then
    finish_jobs || true
    exit 1
fi
finish_jobs || exit 1
wheelhouse_ready || echo "bootstrap: $WHEELHOUSE could not be filled (log: $TEST_LOGS/wheelhouse.log);" \
    "the installed-package test will be skipped" >&2

fingerprint > "$STAMP"
echo "bootstrap: ready ($VENV)"
