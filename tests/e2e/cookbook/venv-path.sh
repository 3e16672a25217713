# Prints PATH with a cookbook virtualenv's bin/ first: .deps/cookbook, or .deps/$1 when
# given (`sh ../venv-path.sh aider`). A suite.yaml's env_from runs this in its own folder.
venv="${1:-cookbook}"
bin="$(cd "$(dirname "$0")/../../.." && pwd)/.deps/$venv/bin"
if [ ! -x "$bin/python" ]; then
    echo "$bin/python is missing. Fix: run scripts/bootstrap.sh, which creates it" >&2
    exit 1
fi
echo "PATH=$bin:$PATH"
