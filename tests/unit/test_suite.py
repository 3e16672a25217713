"""suite.yaml: loading (file:line errors), finding it, its environment, hooks, and the
pieces of a directory run that need no agent: skip rules, JUnit XML, the job JSON, result order."""

from __future__ import annotations

import asyncio
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from flowproof_cli.cassette import Mode
from flowproof_cli.cli.output import summary_line, verdict_line
from flowproof_cli.errors import ConfigError, SpecError, TraceError
from flowproof_cli.runner.discovery import discover_specs, nearest_suite
from flowproof_cli.runner.job import FlowJob, error_row, plan_jobs, skip_reason
from flowproof_cli.runner.junit import junit_xml, write_junit
from flowproof_cli.runner.parallel import execute
from flowproof_cli.runner.suite import Hooks, _in_own_group, prepare_suite, run_hook
from flowproof_cli.spec import parse_spec
from flowproof_cli.spec.suite import load_suite, parse_suite
from flowproof_cli.verdict import Failure, FlowResult

SPEC = """\
name: needs keys
app: agent
agent:
  command: python agent.py
skip_unless_env: [NEEDED_ONE, NEEDED_TWO]
steps:
  - prompt: hi
"""


# --- loading ---------------------------------------------------------------------------------


def test_full_suite_loads() -> None:
    suite = parse_suite(
        "env:\n  A: '1'\n  B: ${HOME}/x\nenv_from: ./secrets.sh\n"
        "before_each: make up\nafter_each: make down\n",
        "suite.yaml",
    )
    assert suite.env == {"A": "1", "B": "${HOME}/x"}
    assert (suite.env_from, suite.before_each, suite.after_each) == (
        "./secrets.sh",
        "make up",
        "make down",
    )


def test_empty_suite_is_empty() -> None:
    assert parse_suite("", "suite.yaml").env == {}
    assert parse_suite("# nothing yet\n", "suite.yaml").before_each is None


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        (
            "env: {}\nbefor_each: x\n",
            2,
            "unknown key `befor_each` at the top level. Did you mean `before_each`?",
        ),
        ("env:\n  A: '1'\n  A: '2'\n", 3, "duplicate key `A`"),
        ("env:\n  PORT: 8080\n", 2, "`env.PORT` must be non-empty text, got 8080"),
        ("env:\n  A: '1'\n  BAD-NAME: x\n", 3, "`BAD-NAME` is not a variable name"),
        ("env: [A]\n", 1, "`env` must be a mapping"),
        ("before_each: ''\n", 1, "`before_each` must be non-empty text"),
        ("- env\n", 1, "the top level is a list, not a mapping"),
        ("env: {A: [\n", 2, "invalid YAML"),
    ],
)
def test_suite_errors_name_file_and_line(text: str, line: int, expected: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_suite(text, "x/suite.yaml")
    assert caught.value.path == "x/suite.yaml"
    assert caught.value.line == line, str(caught.value)
    assert expected in str(caught.value)
    assert str(caught.value).startswith(f"x/suite.yaml:{line}: ")


def test_unreadable_suite_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read the suite file"):
        load_suite(tmp_path)


# --- finding the suite -----------------------------------------------------------------------


def test_nearest_suite_walks_up(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text("")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert nearest_suite(deep / "x.flow.yaml") == (tmp_path / "suite.yaml").resolve()
    (tmp_path / "a" / "suite.yaml").write_text("")
    assert nearest_suite(deep / "x.flow.yaml") == (tmp_path / "a" / "suite.yaml").resolve()


def test_nearest_suite_stops_at_the_repository_root(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text("")  # outside the repository: never used
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "flows").mkdir()
    assert nearest_suite(repo / "flows" / "x.flow.yaml") is None
    (repo / "suite.yaml").write_text("")  # the repository root itself is still searched
    assert nearest_suite(repo / "flows" / "x.flow.yaml") == (repo / "suite.yaml").resolve()


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda path: os.mkfifo(path), "it is a FIFO (named pipe), not a regular file"),
        (lambda path: path.symlink_to("/dev/zero"), "a symbolic link to /dev/zero"),
        (lambda path: path.symlink_to(path), "it is a symbolic link loop"),
        (lambda path: path.symlink_to("gone.yaml"), "a symbolic link to gone.yaml, which does"),
    ],
    ids=["fifo", "device", "link-loop", "broken-link"],
)
def test_a_suite_file_that_is_not_a_regular_file_is_found_and_refused(
    tmp_path: Path, make: Callable[[Path], object], said: str
) -> None:
    """A `suite.yaml` that is a FIFO, a device or a bad link was passed over as if there were
    none: the flows below it ran without its env, hooks and match rules, and could pass.
    It is the flow's suite, and loading it says what it is (exit 2 for the run)."""
    suite = tmp_path / "suite.yaml"
    make(suite)
    assert nearest_suite(tmp_path / "x.flow.yaml") == suite
    with pytest.raises(SpecError) as caught:
        load_suite(suite)
    assert said in str(caught.value)
    assert str(suite) in str(caught.value)


def test_a_folder_named_suite_yaml_is_no_suite(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").mkdir()
    assert nearest_suite(tmp_path / "x.flow.yaml") is None


# --- environment -----------------------------------------------------------------------------


def _suite(folder: Path, text: str) -> Path:
    path = folder / "suite.yaml"
    path.write_text(text)
    return path


def test_env_resolves_from_the_environment_and_env_from_adds(tmp_path: Path) -> None:
    path = _suite(
        tmp_path,
        "env:\n  GREETING: hello ${WHO}\n"
        "env_from: printf '# secrets\\n\\nexport TOKEN=t-1=2\\nSEEN=%s:%s\\n' \"$GREETING\" "
        '"$(basename "$PWD")"\n',
    )
    suite = prepare_suite(path, {"WHO": "world", "PATH": "/usr/bin:/bin"})
    assert suite.environ["GREETING"] == "hello world"
    assert suite.environ["TOKEN"] == "t-1=2"
    assert suite.environ["SEEN"] == f"hello world:{tmp_path.name}"  # env first, cwd = folder
    assert suite.environ["WHO"] == "world"
    assert suite.hooks.folder == str(tmp_path)


def test_no_suite_keeps_the_environment() -> None:
    suite = prepare_suite(None, {"A": "1"})
    assert suite.environ == {"A": "1"} and suite.hooks == Hooks()


def test_unset_variable_in_env_names_it(tmp_path: Path) -> None:
    path = _suite(tmp_path, "env:\n  X: ${NOT_THERE_AT_ALL}\n")
    with pytest.raises(
        ConfigError, match=r"NOT_THERE_AT_ALL is not set \(used in .*suite.yaml env.X\)"
    ):
        prepare_suite(path, {})


def test_failing_env_from_names_command_code_and_stderr(tmp_path: Path) -> None:
    path = _suite(tmp_path, "env_from: echo out; echo vault sealed >&2; exit 7\n")
    with pytest.raises(ConfigError) as caught:
        prepare_suite(path, {"PATH": "/usr/bin:/bin"})
    message = str(caught.value)
    assert (
        "env_from command `echo out; echo vault sealed >&2; exit 7` exited with code 7" in message
    )
    assert message.endswith("its stderr ends with:\nvault sealed")
    assert caught.value.exit_code == 2


def test_env_from_rejects_a_line_that_is_not_an_assignment(tmp_path: Path) -> None:
    path = _suite(tmp_path, "env_from: printf 'A=1\\nnot an assignment\\n'\n")
    with pytest.raises(
        ConfigError, match="printed line 2 `not an assignment`, which is not KEY=VALUE"
    ):
        prepare_suite(path, {"PATH": "/usr/bin:/bin"})


# --- hooks -----------------------------------------------------------------------------------


def test_hook_runs_in_the_suite_folder_with_spec_and_env(tmp_path: Path) -> None:
    hooks = Hooks(str(tmp_path), before_each='echo "$FLOWPROOF_SPEC $SUITE_VAR" > seen.txt')
    spec = tmp_path / "a" / "x.flow.yaml"
    assert (
        asyncio.run(
            run_hook(hooks, "before_each", spec, {"SUITE_VAR": "v", "PATH": "/usr/bin:/bin"})
        )
        is None
    )
    assert (tmp_path / "seen.txt").read_text() == f"{spec.resolve()} v\n"
    assert (
        asyncio.run(run_hook(hooks, "after_each", spec, {})) is None
    )  # no after_each: nothing to do


def test_suite_commands_get_pwd_naming_their_folder(tmp_path: Path, monkeypatch) -> None:
    """Hooks and env_from run in the suite's folder; PWD says so (not flowproof's own)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "suite").mkdir()
    options = _in_own_group(Path("suite"), {"PWD": "/somewhere/else", "X": "1"})
    assert options["cwd"] == Path("suite")
    assert options["env"] == {"PWD": str((tmp_path / "suite").resolve()), "X": "1"}


def test_failing_hook_is_named(tmp_path: Path) -> None:
    hooks = Hooks(str(tmp_path), after_each="echo db gone >&2; exit 4")
    message = asyncio.run(
        run_hook(hooks, "after_each", tmp_path / "x.flow.yaml", {"PATH": "/usr/bin:/bin"})
    )
    assert message == (
        "after_each hook `echo db gone >&2; exit 4` exited with code 4; its stderr ends with:\n"
        "db gone"
    )


# --- skipping --------------------------------------------------------------------------------


def _job(tmp_path: Path, environ: dict[str, str], *, in_directory: bool = True) -> FlowJob:
    spec = tmp_path / "x.flow.yaml"
    spec.write_text(SPEC)
    return FlowJob(
        spec,
        tmp_path / "x.trace.yaml",
        Mode.REPLAY,
        environ,
        Hooks(str(tmp_path)),
        None,
        in_directory,
    )


def test_skip_unless_env_names_the_missing_variables(tmp_path: Path) -> None:
    job = _job(tmp_path, {"NEEDED_TWO": "yes", "NEEDED_ONE": ""})
    spec = parse_spec(SPEC, str(job.spec_path))
    assert skip_reason(spec, job) == "not set: NEEDED_ONE (skip_unless_env)"
    result = execute(job)
    assert result.status == "skipped" and result.exit_code == 0
    assert verdict_line(result, with_time=True) == (
        "SKIP: needs keys - not set: NEEDED_ONE (skip_unless_env)"
    )


def test_missing_trace_skips_in_a_directory_and_errors_alone(tmp_path: Path) -> None:
    job = _job(tmp_path, {"NEEDED_ONE": "1", "NEEDED_TWO": "2"})
    result = execute(job)
    assert result.skipped == f"no trace; record it: flowproof record {job.spec_path}"
    single = _job(tmp_path, {"NEEDED_ONE": "1", "NEEDED_TWO": "2"}, in_directory=False)
    with pytest.raises(TraceError, match=f"record it first: flowproof record {single.spec_path}"):
        execute(single)


def test_bad_spec_in_a_directory_is_an_error_row(tmp_path: Path) -> None:
    spec = tmp_path / "bad.flow.yaml"
    spec.write_text("name: x\nap: agent\n")
    (job,) = plan_jobs([spec], mode=Mode.REPLAY, environ={}, in_directory=True)
    result = execute(job)
    assert result.status == "error" and result.name == "bad.flow.yaml"
    assert f"{spec}:2: unknown key `ap`" in (result.error or "")


# --- reporting -------------------------------------------------------------------------------


def _results(tmp_path: Path) -> list[FlowResult]:
    passed = FlowResult("ok", tmp_path / "a" / "ok.flow.yaml", "replay", tmp_path / "t")
    passed.duration_s = 1.25
    failed = FlowResult("bad <one>", tmp_path / "bad.flow.yaml", "replay", tmp_path / "t")
    failed.failures = [
        Failure("divergence at turn 1: model changed\n  recorded x\x1b[0m"),
        Failure("also this"),
    ]
    failed.stderr_tail = "Traceback\n"
    skipped = FlowResult("later", tmp_path / "s.flow.yaml", "replay", tmp_path / "t")
    skipped.skipped = "no trace; record it: flowproof record s.flow.yaml"
    broken = FlowResult("broken.flow.yaml", tmp_path / "broken.flow.yaml", "replay", tmp_path / "t")
    broken.error = "broken.flow.yaml:2: unknown key"
    return [passed, failed, skipped, broken]


def test_junit_counts_cases_and_full_failure_text(tmp_path: Path) -> None:
    path = write_junit(_results(tmp_path), tmp_path, elapsed_s=3.5)
    assert path == tmp_path / ".flowproof" / "suite-junit.xml"
    assert (tmp_path / ".flowproof" / ".gitignore").read_text().endswith("\n*\n")
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    for element in (root, suite):
        assert {k: element.get(k) for k in ("tests", "failures", "errors", "skipped", "time")} == {
            "tests": "4",
            "failures": "1",
            "errors": "1",
            "skipped": "1",
            "time": "3.500",
        }
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("a/ok.flow.yaml", "ok"),
        ("bad.flow.yaml", "bad <one>"),
        ("s.flow.yaml", "later"),
        ("broken.flow.yaml", "broken.flow.yaml"),
    ]
    assert cases[0].get("time") == "1.250" and list(cases[0]) == []
    failure = cases[1].find("failure")
    assert failure is not None
    expected = "divergence at turn 1: model changed\n  recorded x\ufffd[0m\nalso this"
    assert failure.get("message") == expected and failure.text == expected
    assert cases[1].findtext("system-err") == "Traceback\n"
    skipped = cases[2].find("skipped")
    assert skipped is not None and "flowproof record s.flow.yaml" in (skipped.get("message") or "")
    error = cases[3].find("error")
    assert error is not None and error.get("message") == "broken.flow.yaml:2: unknown key"


def test_junit_is_stable_but_for_times(tmp_path: Path) -> None:
    results = _results(tmp_path)
    first = junit_xml(results, tmp_path, elapsed_s=1)
    results[0].duration_s = 9
    assert junit_xml(results, tmp_path, elapsed_s=1) != first
    assert junit_xml(_results(tmp_path), tmp_path, elapsed_s=1) == first


def test_summary_line_always_counts_skips() -> None:
    results = _results(Path("/x"))
    assert summary_line(results[:1]) == "1 passed, 0 failed, 0 skipped"
    assert summary_line(results) == "1 passed, 1 failed, 1 skipped, 1 error(s)"


def test_results_and_jobs_survive_json(tmp_path: Path) -> None:
    for result in _results(tmp_path):
        assert FlowResult.from_json(result.to_json()) == result
    job = FlowJob(
        tmp_path / "x.flow.yaml",
        tmp_path / "x.trace.yaml",
        Mode.RECORD,
        {"A": "1"},
        Hooks("f", "b", None),
        2.5,
        True,
        keep_going=True,
    )
    assert FlowJob.from_json(job.to_json()) == job
    assert FlowJob.from_json({**job.to_json(), "keep_going": None}).keep_going is False


def test_results_are_handed_on_in_the_order_of_the_jobs(tmp_path: Path) -> None:
    """Flows finish in any order under -j N; output streams in the order they were given."""
    from flowproof_cli.runner.parallel import _InOrder

    seen: list[str] = []
    ordered = _InOrder(3, lambda result: seen.append(result.name))
    rows = [error_row(_job(tmp_path, {}), "x", name=name) for name in ("a", "b", "c")]
    ordered.done(2, rows[2])
    ordered.done(1, rows[1])
    assert seen == []  # the first is not done: nothing may be printed yet
    ordered.done(0, rows[0])
    assert seen == ["a", "b", "c"]
    assert ordered.results == rows


def test_directory_discovery_skips_tool_folders_and_keeps_path_order(tmp_path: Path) -> None:
    """docs/suites.md: `run DIR` skips `.flowproof/`, `.git/`, `node_modules/`, `.venv/`
    (at any depth), and runs the rest in path order."""
    wanted = ["a.flow.yaml", "b/c.flow.yaml", "b/d/e.flow.yaml", "z.flow.yaml"]
    ignored = [
        ".flowproof/x.flow.yaml",
        ".git/x.flow.yaml",
        "node_modules/pkg/x.flow.yaml",
        "b/.venv/x.flow.yaml",
    ]
    for name in [*reversed(wanted), *ignored]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("name: x\n")
    (tmp_path / "folder.flow.yaml").mkdir()  # a folder named like a spec is not one
    assert discover_specs(tmp_path) == [tmp_path / name for name in wanted]
