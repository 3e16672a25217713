# Prints PATH with the cookbook virtualenv's bin/ first (suite.yaml's env_from runs this
# in its own folder, tests/e2e/cookbook/).
bin="$(cd ../../.. && pwd)/.deps/cookbook/bin"
if [ ! -x "$bin/python" ]; then
    echo "$bin/python is missing. Fix: run scripts/bootstrap.sh, which creates it" >&2
    exit 1
fi
echo "PATH=$bin:$PATH"
