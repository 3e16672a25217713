"""The import budget of the light paths, pinned by the modules they load (never by a time).

`flowproof --help`, every `flowproof CMD --help`, `schema`, `audit`, `check`, `diff`, `show`
and `match` run in every CI job; importing the proxy engine (mitmproxy), the divergence
explainer (deepdiff) or the schema checker (jsonschema) for them is paid on every call. Each
path runs in a fresh interpreter that reports which modules the CLI added to sys.modules.
The embedded proxy, for its part, must import mitmproxy without its ~30 default addons
(flowproof_cli/runner/minimal_mitmproxy.py) while `default_addons` stays importable.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import pytest

from flowproof_cli.cli.main import COMMANDS, cli
from flowproof_cli.evidence.records import FORMAT, REPORT, RUNS
from tests.conftest import run_command

#: Never loaded by a light path: the proxy engine and what only a replay or a record uses.
HEAVY = (
    "mitmproxy",
    "deepdiff",
    "jsonschema",
    "flowproof_addons",
    "flowproof_cli.egress",
    "flowproof_cli.runner.proxy_engine",
    "flowproof_cli.runner.flow",
    "flowproof_cli.runner.run_proxy",
    "flowproof_cli.runner.port_scoped",
)
#: Nor by a `--help`: the spec models (pydantic), and the runner, except the doctor's defaults.
SPEC_MODELS = tuple(
    f"flowproof_cli.spec.{name}" for name in ("base", "agent", "tools", "steps", "models")
)
HELP_HEAVY = (*HEAVY, "pydantic", *SPEC_MODELS, "flowproof_cli.runner.job")
#: All `flowproof --help` loads of the project: the group, its error tree, nothing else.
HELP_MODULES = [
    "flowproof_cli",
    "flowproof_cli.cli",
    "flowproof_cli.cli.main",
    "flowproof_cli.errors",
]

#: Default addons the embedded proxy never adds (and what they import).
UNUSED = ("mitmproxy.addons.clientplayback", "mitmproxy.addons.onboardingapp", "flask", "ldap3")

_CLI_PROBE = """\
import json, sys
before = set(sys.modules)
PRELUDE
code = None
out, args = sys.argv[1], json.loads(sys.argv[2])
sys.argv = ["flowproof", *args]
from flowproof_cli.cli.main import exit_code
try:
    code = exit_code()
except SystemExit as exc:  # a command that exits by itself
    code = exc.code
with open(out, "w") as handle:
    json.dump({"code": code, "modules": sorted(set(sys.modules) - before)}, handle)
"""


def loaded_by(tmp_path: Path, *args: str | Path, prelude: str = "") -> list[str]:
    """The modules `flowproof ARGS` adds to a fresh interpreter's sys.modules; the command
    must succeed (a budget met by failing early proves nothing)."""
    out = tmp_path / "modules.json"
    probe = _CLI_PROBE.replace("PRELUDE", prelude)
    done = run_command([sys.executable, "-c", probe, out, json.dumps([str(arg) for arg in args])])
    assert done.code == 0, done.output
    found = json.loads(out.read_text())
    assert found["code"] == 0, f"flowproof {' '.join(map(str, args))} exited {found['code']}"
    modules: list[str] = found["modules"]
    return modules


def over_budget(modules: list[str], forbidden: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden)]


def third_party(modules: list[str]) -> set[str]:
    return {name.split(".")[0] for name in modules} - sys.stdlib_module_names


def test_top_level_help_loads_click_and_the_group_only(tmp_path: Path) -> None:
    modules = loaded_by(tmp_path, "--help")
    assert third_party(modules) == {"click", "flowproof_cli"}
    assert [m for m in modules if m.startswith("flowproof_cli")] == HELP_MODULES


@pytest.mark.parametrize("command", list(COMMANDS))
def test_command_help_loads_no_engine_and_no_spec_models(tmp_path: Path, command: str) -> None:
    modules = loaded_by(tmp_path, command, "--help")
    assert f"flowproof_cli.cli.{COMMANDS[command].module}" in modules  # it did load the command
    assert over_budget(modules, HELP_HEAVY) == []


def test_help_of_a_subcommand_loads_no_engine(tmp_path: Path) -> None:
    assert over_budget(loaded_by(tmp_path, "match", "show", "--help"), HELP_HEAVY) == []
    learn = loaded_by(tmp_path, "match", "learn", "--help")
    assert over_budget(learn, (*HELP_HEAVY, "flowproof_cli.runner", "flowproof_cli.cassette")) == []


@pytest.fixture
def run_record(tmp_path: Path) -> Path:
    """A directory holding one run record with one passed control, as `run` writes it."""
    record = tmp_path / "suite" / RUNS / "20260101T120000.000Z-abcd" / REPORT
    record.parent.mkdir(parents=True)
    flow = {"name": "x", "control": {"id": "C-1", "verdict": "pass", "lanes": ["model"]}}
    record.write_text(json.dumps({"format": FORMAT, "flows": [flow], "argv": ["run"]}))
    return tmp_path / "suite"


@pytest.mark.parametrize(
    "args",
    [
        ("schema",),
        ("diff", "specs/chat.trace.yaml", "specs/chat.trace.yaml"),
        ("show", "specs/chat.trace.yaml"),
        ("match", "list"),
        ("match", "show", "dates"),
    ],
    ids=lambda args: " ".join(args),
)
def test_light_commands_load_no_engine(tmp_path: Path, args: tuple[str, ...]) -> None:
    modules = loaded_by(tmp_path, *args)
    assert over_budget(modules, (*HEAVY, "flowproof_cli.runner")) == []


def test_check_loads_no_engine(tmp_path: Path) -> None:
    """`flowproof check` (a pre-commit hook, every CI job) reads specs, suites and traces:
    no proxy, no flow runner, no divergence explainer. (A spec's `allow_egress` entries are
    parsed by egress/policy.py as the spec loads: that part of egress is the spec's.)"""
    modules = loaded_by(tmp_path, "check", "specs")
    assert "flowproof_cli.runner.staleness" in modules  # it did compare the traces
    spec_loads = ("flowproof_cli.egress",)
    forbidden = (*(m for m in HEAVY if m not in spec_loads), "flowproof_cli.runner.job")
    assert over_budget(modules, (*forbidden, "flowproof_cli.runner.suite")) == []


def test_audit_reads_json_only(tmp_path: Path, run_record: Path) -> None:
    modules = loaded_by(tmp_path, "audit", run_record)
    assert "flowproof_cli.evidence.audit" in modules  # it did audit
    assert over_budget(modules, (*HEAVY, "pydantic", "flowproof_cli.runner")) == []


@pytest.mark.slow
def test_a_replay_loads_only_what_it_uses(tmp_path: Path) -> None:
    """A passing one-spec replay: no divergence to explain (deepdiff), no MCP output schema
    (jsonschema), no directory run (JUnit), and none of mitmproxy's unused default addons."""
    modules = loaded_by(tmp_path, "run", "specs/chat.flow.yaml")
    assert "flowproof_cli.runner.proxy_engine" in modules  # it did replay through the proxy
    unused = ("deepdiff", "jsonschema", "flowproof_cli.runner.junit", *UNUSED)
    assert over_budget(modules, unused) == []


def test_the_budget_sees_a_planted_eager_import(tmp_path: Path) -> None:
    """Red path for the probe itself: a heavy module loaded on the way is reported."""
    modules = loaded_by(tmp_path, "--help", prelude="import mitmproxy.http")
    assert "mitmproxy.http" in over_budget(modules, HEAVY)
    assert "mitmproxy" in third_party(modules)


def test_the_command_list_is_the_commands_own_first_sentences() -> None:
    """`flowproof --help` lists COMMANDS' summaries; each must still be its command's help."""
    context = click.Context(cli)
    for name, entry in COMMANDS.items():
        command = cli.get_command(context, name)
        assert command is not None, name
        assert command.get_short_help_str(10**6) == entry.summary, name
    lazy = click.HelpFormatter(width=80)
    cli.format_commands(context, lazy)
    eager = click.HelpFormatter(width=80)
    click.Group.format_commands(cli, context, eager)  # click's own: imports every command
    assert lazy.getvalue() == eager.getvalue()


# -- the embedded proxy's mitmproxy ---------------------------------------------------------------


def loaded_after(code: str) -> dict[str, object]:
    probe = (
        "import json, sys\n"
        f"{code}\n"
        "print(json.dumps({'modules': sorted(sys.modules), 'result': locals().get('result')}))\n"
    )
    done = run_command([sys.executable, "-c", probe])
    assert done.code == 0, done.output
    found: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_the_embedded_proxy_imports_mitmproxy_without_the_default_addons() -> None:
    found = loaded_after("import flowproof_cli.runner.proxy_engine")
    modules = found["modules"]
    assert isinstance(modules, list)
    assert "mitmproxy.master" in modules and "mitmproxy.addons.proxyserver" in modules
    assert [name for name in UNUSED if name in modules] == []


def test_default_addons_are_still_importable_after_the_embedded_proxy() -> None:
    found = loaded_after(
        "import flowproof_cli.runner.proxy_engine\n"
        "from mitmproxy.addons import default_addons\n"
        "from mitmproxy import addons\n"
        "result = [len(default_addons()), type(addons.clientplayback).__name__]"
    )
    count, kind = found["result"]  # type: ignore[misc]
    assert count > 20 and kind == "module"
    assert "mitmproxy.addons.clientplayback" in found["modules"]  # type: ignore[operator]


def test_without_the_installer_mitmproxy_master_loads_every_default_addon() -> None:
    """Red path: what the installer prevents does happen without it (the check can fail)."""
    modules = loaded_after("import mitmproxy.master")["modules"]
    assert isinstance(modules, list)
    assert "mitmproxy.addons.clientplayback" in modules and "flask" in modules


def test_the_installer_leaves_an_imported_addons_package_alone() -> None:
    """Under stock mitmdump the package is whole already: installing changes nothing."""
    found = loaded_after(
        "import mitmproxy.addons\n"
        "from flowproof_cli.runner import minimal_mitmproxy\n"
        "minimal_mitmproxy.install()\n"
        "result = [sys.modules['mitmproxy.addons'] is mitmproxy.addons,\n"
        "          '__getattr__' in vars(mitmproxy.addons)]"
    )
    assert found["result"] == [True, False]


def test_a_name_the_package_does_not_have_is_an_attribute_error() -> None:
    found = loaded_after(
        "from flowproof_cli.runner import minimal_mitmproxy\n"
        "minimal_mitmproxy.install()\n"
        "import mitmproxy.addons\n"
        "probe = hasattr(mitmproxy.addons, '__wrapped__')\n"
        "untouched = 'mitmproxy.addons.clientplayback' not in sys.modules\n"
        "try:\n"
        "    mitmproxy.addons.no_such_addon\n"
        "except AttributeError as exc:\n"
        "    result = [probe, untouched, str(exc)]"
    )
    assert found["result"] == [
        False,
        True,
        "module 'mitmproxy.addons' has no attribute 'no_such_addon'",
    ]
