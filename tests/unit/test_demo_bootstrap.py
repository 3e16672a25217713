"""`make demo`'s bootstrap installs only what the demo needs, in one line per step.

scripts/bootstrap.sh runs in a copy of the checkout's few files it reads, with `python`,
`npm` and `apt-get` replaced by recorders: what it would install is what it called them with.
The demo's path runs no apt, makes no cookbook venv and installs the `demo` extra alone; its
stamp never passes for the full bootstrap's, and a full bootstrap serves the demo.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]

#: What the recorders answer. `python -m venv DIR` makes DIR/bin/python a recorder too;
#: `-c` runs the real interpreter (the version check), except for the base-interpreter query.
FAKE_PYTHON = """#!/bin/bash
echo "python $*" >> "$CALLS"
case "$1" in
  -c) case "$2" in *_base_executable*) echo "$0"; exit 0;; esac; exec {real} "$@";;
  --version) echo "Python 3.12.0"; exit 0;;
esac
if [[ "$1 $2" == "-m venv" ]]; then d="${{@: -1}}"; mkdir -p "$d/bin"; cp "$0" "$d/bin/python"; exit 0; fi
if [[ "$1 $2" == "-m pip" && -n "${{FAIL_PIP:-}}" ]]; then echo "ERROR: no matching wheel"; exit 1; fi
# With WITH_UV, installing `uv` puts its recorder beside this interpreter.
if [[ -n "${{WITH_UV:-}}" && " $* " == *" uv "* ]]; then cp {uv} "$(dirname "$0")/uv"; fi
{make_targets}exit 0
"""
#: What pip and uv do that the bootstrap relies on: the folder after `--target` exists.
MAKE_TARGETS = """args=("$@")
for i in "${!args[@]}"; do
  [[ "${args[$i]}" == --target ]] && mkdir -p "${args[$((i + 1))]}"
done
"""
FAKE_UV = f"""#!/bin/bash
echo "uv $*" >> "$CALLS"
{MAKE_TARGETS}exit 0
"""
FAKE_NPM = """#!/bin/bash
echo "npm $*" >> "$CALLS"
echo "npm warn EBADENGINE Unsupported engine"
args=("$@")
for i in "${!args[@]}"; do
  [[ "${args[$i]}" == --prefix ]] && mkdir -p "${args[$((i + 1))]}/node_modules/.bin"
done
if [[ -n "${FAIL_NPM:-}" ]]; then echo "npm error network ETIMEDOUT"; exit 1; fi
exit 0
"""
FAKE_APT = """#!/bin/bash
echo "apt-get $*" >> "$CALLS"
"""


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    calls: list[str]


class Checkout:
    """The files scripts/bootstrap.sh reads, in a temporary folder, with the recorders."""

    def __init__(self, root: Path, *, npm: bool = True) -> None:
        self.root = root
        for name in (
            "scripts/bootstrap.sh",
            "pyproject.toml",
            "examples/package.json",
            "examples/package-lock.json",
            "tests/cookbook-requirements.txt",
            "tests/package.json",
            "tests/package-lock.json",
        ):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / name, root / name)
        self.bin = root / "fake-bin"
        self.bin.mkdir()
        fakes = {
            "python3.12": FAKE_PYTHON.format(
                real=sys.executable, uv=self.bin / "uv-recorder", make_targets=MAKE_TARGETS
            ),
            "uv-recorder": FAKE_UV,
            "apt-get": FAKE_APT,
        }
        if npm:
            fakes["npm"] = FAKE_NPM
        for name, text in fakes.items():
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)
        self.calls = root / "calls.log"

    def bootstrap(
        self, *args: str, fail_pip: bool = False, fail_npm: bool = False, uv: bool = False
    ) -> Run:
        self.calls.write_text("")
        # Without npm the real one must not be found either: PATH then holds only what the
        # script itself uses, linked one by one.
        path = str(self.bin) if not (self.bin / "npm").exists() else f"{self.bin}:/usr/bin:/bin"
        if not (self.bin / "npm").exists():
            for tool in ("bash", "cat", "dirname", "sha256sum", "cut", "mkdir", "rm", "tail", "cp"):
                if (found := shutil.which(tool)) and not (self.bin / tool).exists():
                    (self.bin / tool).symlink_to(found)
        env = {
            "PATH": path,
            "HOME": str(self.root),
            "CALLS": str(self.calls),
            "FLOWPROOF_PYTHON": str(self.bin / "python3.12"),
        }
        if fail_pip:
            env["FAIL_PIP"] = "1"
        if fail_npm:
            env["FAIL_NPM"] = "1"
        if uv:
            env["WITH_UV"] = "1"
        result = subprocess.run(
            ["/bin/bash", str(self.root / "scripts" / "bootstrap.sh"), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        calls = self.calls.read_text().splitlines()
        return Run(result.returncode, result.stdout, result.stderr, calls)


def _installs(run: Run) -> list[str]:
    return [call for call in run.calls if " install" in call or call.startswith("npm ci")]


def test_the_demo_installs_the_demo_extra_and_the_examples_npm_packages_only(
    tmp_path: Path,
) -> None:
    checkout = Checkout(tmp_path)
    run = checkout.bootstrap("demo")
    assert run.code == 0, run.stderr
    assert sorted(_installs(run)) == [  # npm works while pip does
        "npm ci --prefix examples --no-audit --no-fund --prefer-offline",
        "python -m pip install -e .[demo]",
    ]
    assert not any(call.startswith("apt-get") for call in run.calls)
    assert not (tmp_path / ".deps").exists()  # no cookbook venv, no mcp 1.x
    assert not (tmp_path / ".venv" / ".bootstrap-stamp").exists()  # not the full one's stamp
    # One line per step, each naming its log; the tools' own output only in the logs.
    lines = run.stdout.splitlines()
    assert len(lines) == 3, run.stdout
    for line, log in zip(lines, ("venv.log", "pip-demo.log", "npm-demo.log"), strict=True):
        assert re.fullmatch(rf"bootstrap: .+ \.\.\. done \(\d+s; log: \.venv/logs/{log}\)", line)
    assert "EBADENGINE" not in run.stdout + run.stderr
    assert "EBADENGINE" in (tmp_path / ".venv" / "logs" / "npm-demo.log").read_text()


def test_a_second_demo_installs_nothing(tmp_path: Path) -> None:
    checkout = Checkout(tmp_path)
    assert checkout.bootstrap("demo").code == 0
    run = checkout.bootstrap("demo")
    assert run.code == 0, run.stderr
    assert _installs(run) == []
    assert run.stdout == "bootstrap: .venv is ready (nothing to install)\n"


def test_the_demos_stamp_does_not_pass_for_the_full_bootstrap(tmp_path: Path) -> None:
    checkout = Checkout(tmp_path)
    assert checkout.bootstrap("demo").code == 0
    run = checkout.bootstrap()
    assert run.code == 0, run.stderr
    installs = _installs(run)
    assert "python -m pip install --quiet -e .[dev,agents]" in installs
    assert "python -m pip install --quiet -r tests/cookbook-requirements.txt" in installs
    assert (tmp_path / ".venv" / ".bootstrap-stamp").exists()


def test_the_full_bootstrap_installs_with_uv_once_uv_is_in_the_venv(tmp_path: Path) -> None:
    """uv resolves the same pins and compiles the byte code pip would; only the wheelhouse
    (`pip wheel`, which uv has no form of) still goes through pip."""
    checkout = Checkout(tmp_path)
    (tmp_path / "tests" / "aider-requirements.txt").write_text("aider-chat==0.86.2\n")
    run = checkout.bootstrap(uv=True)
    assert run.code == 0, run.stderr
    uv = [call.removeprefix("uv pip install --quiet --compile-bytecode --python ") for call in
          run.calls if call.startswith("uv ")]  # fmt: skip
    assert sorted(uv) == [  # side by side, in any order
        ".deps/aider/bin/python -r tests/aider-requirements.txt",
        ".deps/cookbook/bin/python -r tests/cookbook-requirements.txt",
        ".venv/bin/python --target .deps/mcp1 mcp==1.30.0",
        ".venv/bin/python -e .[dev,agents]",
    ]
    assert not any(" -m pip install --quiet -e" in call for call in run.calls)
    lines = run.stdout.splitlines()
    for title in ("tests/node_modules", ".deps/mcp1", ".deps/cookbook", ".deps/aider"):
        assert any(title in line and " ... done (" in line for line in lines), run.stdout
    assert (tmp_path / ".venv" / ".bootstrap-stamp").exists()
    assert _installs(checkout.bootstrap(uv=True)) == [], "a second run installs nothing"


def test_a_failing_background_step_fails_the_bootstrap_and_names_its_log(tmp_path: Path) -> None:
    run = Checkout(tmp_path).bootstrap(fail_npm=True)
    assert run.code == 1
    assert "FAILED (log: .deps/logs/npm-tests.log)" in run.stdout
    assert "npm error network ETIMEDOUT" in run.stderr
    assert not (tmp_path / ".venv" / ".bootstrap-stamp").exists()


def test_a_demo_after_the_full_bootstrap_installs_nothing(tmp_path: Path) -> None:
    """`make test` then `make demo`: the agents extra and tests/node_modules serve the demo."""
    checkout = Checkout(tmp_path)
    assert checkout.bootstrap().code == 0
    claude = tmp_path / "tests" / "node_modules" / ".bin" / "claude"
    claude.parent.mkdir(parents=True, exist_ok=True)
    claude.write_text("#!/bin/sh\n")
    claude.chmod(0o755)
    run = checkout.bootstrap("demo")
    assert run.code == 0, run.stderr
    assert _installs(run) == []


def test_a_failing_step_names_its_log_and_shows_its_end(tmp_path: Path) -> None:
    run = Checkout(tmp_path).bootstrap("demo", fail_pip=True)
    assert run.code == 1
    assert "FAILED (log: .venv/logs/pip-demo.log)" in run.stdout
    assert "ERROR: no matching wheel" in run.stderr
    assert not (tmp_path / ".venv" / ".bootstrap-demo-stamp").exists()


def test_a_failing_npm_costs_only_the_node_examples(tmp_path: Path) -> None:
    """No registry, say: the Python flows still run, the Node ones skip (no half-filled folder
    for `make demo` to hand them), and the next run tries npm again."""
    checkout = Checkout(tmp_path)
    run = checkout.bootstrap("demo", fail_npm=True)
    assert run.code == 0, run.stderr
    assert "FAILED (log: .venv/logs/npm-demo.log)" in run.stdout
    assert "the Node and Claude Code examples will SKIP" in run.stdout
    assert "npm error network ETIMEDOUT" in run.stderr
    assert not (tmp_path / "examples" / "node_modules").exists()
    again = checkout.bootstrap("demo")
    assert _installs(again) == ["npm ci --prefix examples --no-audit --no-fund --prefer-offline"]


def test_without_npm_the_node_examples_are_skipped_with_a_hint(tmp_path: Path) -> None:
    run = Checkout(tmp_path, npm=False).bootstrap("demo")
    assert run.code == 0, run.stderr
    assert not any(call.startswith("npm") for call in run.calls)
    assert "npm not found: the Node and Claude Code examples will SKIP" in run.stdout


def test_an_unknown_mode_is_refused(tmp_path: Path) -> None:
    run = Checkout(tmp_path).bootstrap("dmeo")
    assert run.code == 2
    assert "unknown mode 'dmeo'" in run.stderr
    assert run.calls == []


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _example_imports() -> set[str]:
    """Top-level modules the example agents and servers import, the standard library aside."""
    found: set[str] = set()
    for source in (REPO / "examples").glob("*/*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"__future__"}


def test_the_demo_extra_is_every_sdk_the_examples_import() -> None:
    distributions = importlib.metadata.packages_distributions()
    needed = set()
    for module in _example_imports():
        if module in {"flowproof", "flowproof_cli", "tests"}:
            continue  # the product (examples/ci, examples/record.py); tests/ is record's only
        assert module in distributions, f"{module}: not installed, so no extra provides it"
        needed |= {_name(name) for name in distributions[module]}
    assert needed == {_name(requirement) for requirement in EXTRAS["demo"]}


def test_the_full_bootstraps_agents_extra_names_every_demo_sdk() -> None:
    agents = {_name(requirement) for requirement in EXTRAS["agents"]}
    assert {_name(requirement) for requirement in EXTRAS["demo"]} <= agents


def test_the_demos_npm_packages_are_pinned_as_the_tests_are() -> None:
    demo = json.loads((REPO / "examples" / "package.json").read_text(encoding="utf-8"))
    tests = json.loads((REPO / "tests" / "package.json").read_text(encoding="utf-8"))
    assert set(demo["dependencies"]) == {"openai", "@anthropic-ai/claude-code"}
    for name, version in demo["dependencies"].items():
        assert version == tests["dependencies"][name], name
    lock = json.loads((REPO / "examples" / "package-lock.json").read_text(encoding="utf-8"))
    assert lock["packages"][""]["dependencies"] == demo["dependencies"]


def test_make_demo_uses_the_demo_bootstrap() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^demo: bootstrap-demo$", makefile, re.MULTILINE)
    assert re.search(r"^bootstrap-demo:\n\t@bash scripts/bootstrap.sh demo$", makefile, re.M)


@pytest.mark.parametrize(("target", "runs"), [("demo", "flowproof run"), ("test", "pytest")])
def test_make_compiles_the_checkout_before_it_runs_flowproof(target: str, runs: str) -> None:
    """An environment with PYTHONDONTWRITEBYTECODE never caches the checkout's byte code, so
    every flowproof process would compile its modules again: `make` compiles them first."""
    planned = subprocess.run(
        ["make", "-n", target], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    compiles = [n for n, line in enumerate(planned) if "-m compileall" in line]
    runs_at = [n for n, line in enumerate(planned) if runs in line and "compileall" not in line]
    assert compiles and runs_at and compiles[0] < runs_at[0], "\n".join(planned)
    compiled = planned[compiles[0]]
    assert all(folder in compiled.split() for folder in ("flowproof_cli", "addons")), compiled


def test_make_test_runs_one_pytest_worker_more_than_the_cores() -> None:
    planned = subprocess.run(
        ["make", "-n", "test"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    cores = len(os.sched_getaffinity(0))  # what `nproc` counts
    assert f"-m pytest -n {cores + 1} --dist worksteal" in planned, planned
