# Prints PATH with a virtualenv's bin/ first: .deps/cookbook, or .deps/$1 when given
# (`sh ../venv-path.sh aider`), or the project's own .venv with `--project`. A suite.yaml's
# env_from runs this in its own folder.
root="$(cd "$(dirname "$0")/../../.." && pwd)"
case "${1:-cookbook}" in
    --project) bin="$root/.venv/bin" ;;
    *) bin="$root/.deps/${1:-cookbook}/bin" ;;
esac
if [ ! -x "$bin/python" ]; then
    echo "$bin/python is missing. Fix: run scripts/bootstrap.sh, which creates it" >&2
    exit 1
fi
echo "PATH=$bin:$PATH"
