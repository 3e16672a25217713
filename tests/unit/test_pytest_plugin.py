"""The pytest plugin with real flows: the tool-loop agent recorded against the fake upstream,
then collected and replayed by an inner pytest (pytester), with -k, -x, --junitxml and -n 2,
its failures reported as spec text and lines, and its skips as pytest skips.
"""

from __future__ import annotations

import os
import shutil
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.e2e.flows import DEFAULT_STEPS, set_agent_env, write_flow
from tests.fakes.fake_upstream import FakeUpstream

pytest_plugins = ["pytester"]

# Autoload off, plugins named: the inner run is the same whether or not this checkout's
# entry point is installed, and nothing of the outer session leaks in.
PLUGINS = ("-p", "flowproof_cli.pytest_plugin", "-p", "no:cacheprovider")


@pytest.fixture(autouse=True)
def _inner_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # `flowproof` even before a reinstall
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "FLOWPROOF_AGENT_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("FLOWPROOF_AGENT_UPSTREAM", raising=False)
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")


def record(spec: Path) -> None:
    """Recorded by the CLI in its own process: pytester restores sys.modules after each test,
    and the proxy engine's native modules cannot be imported a second time."""
    with FakeUpstream() as fake:
        upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "k"}
        result = run_cli("record", spec, env=upstream)
    assert result.code == 0, result.output


@pytest.fixture
def flows(pytester: pytest.Pytester) -> Iterator[Path]:
    """flows/: `weather` and `forecast` recorded, `later` with no trace yet."""
    folder = pytester.path / "flows"
    folder.mkdir()
    for name in ("weather", "forecast"):
        record(write_flow(folder, name=name))
    write_flow(folder, name="later")
    yield folder


def outcomes(result: pytest.RunResult) -> dict[str, int]:
    return result.parseoutcomes()


@pytest.mark.slow
def test_flows_replay_as_items_and_a_missing_trace_is_a_skip(
    pytester: pytest.Pytester, flows: Path
) -> None:
    result = pytester.runpytest_subprocess(*PLUGINS, "-rs", "flows")
    assert result.ret == 0, result.stdout.str()
    assert outcomes(result) == {"passed": 2, "skipped": 1}
    result.stdout.fnmatch_lines(
        ["SKIPPED *flows/later.flow.yaml:1: no trace; record it: flowproof record *later.flow.yaml"]
    )


@pytest.mark.slow
def test_a_divergence_names_the_spec_line_and_no_internal_traceback(
    pytester: pytest.Pytester, flows: Path
) -> None:
    set_agent_env(flows / "weather.flow.yaml", AGENT_SYSTEM="You are terse.")
    result = pytester.runpytest_subprocess(*PLUGINS, "flows/weather.flow.yaml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = result.stdout.str()
    prompt_line = 1 + next(
        number
        for number, line in enumerate((flows / "weather.flow.yaml").read_text().splitlines())
        if "prompt:" in line
    )
    assert f"\nflows/weather.flow.yaml:{prompt_line}: flow 'weather flow' failed\n" in text
    assert "FAIL divergence at turn 1" in text
    assert "flowproof_cli/" not in text  # no frame of flowproof's own
    assert "Captured agent stderr" in text and "409" in text  # the agent's side, apart
    assert outcomes(result) == {"failed": 1}
    assert "every changed field" not in text
    every = pytester.runpytest_subprocess(
        *PLUGINS, "--flowproof-all-changes", "flows/weather.flow.yaml"
    )
    assert "every changed field of the request (1):" in every.stdout.str()
    assert "messages.0.content: recorded " in every.stdout.str()


@pytest.mark.slow
def test_an_assertion_failure_points_at_its_step_line(
    pytester: pytest.Pytester, flows: Path
) -> None:
    spec = flows / "forecast.flow.yaml"
    steps = [*DEFAULT_STEPS[:-1], {"assert": "reply contains snow"}]
    write_flow(flows, name="forecast", steps=steps)  # same agent, same trace, a new check
    line = 1 + spec.read_text().splitlines().index("- assert: reply contains snow")
    result = pytester.runpytest_subprocess(*PLUGINS, "flows/forecast.flow.yaml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [f"flows/forecast.flow.yaml:{line}: flow 'forecast flow' failed", "*FAIL *snow*"]
    )


@pytest.mark.slow
def test_k_selects_by_name_and_x_stops_at_the_first_failure(
    pytester: pytest.Pytester, flows: Path
) -> None:
    selected = pytester.runpytest_subprocess(*PLUGINS, "flows", "-k", "forecast")
    assert outcomes(selected) == {"passed": 1, "deselected": 2}
    for name in ("forecast", "weather"):
        set_agent_env(flows / f"{name}.flow.yaml", AGENT_SYSTEM="You are terse.")
    stopped = pytester.runpytest_subprocess(*PLUGINS, "flows", "-x")
    assert stopped.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(stopped) == {"failed": 1}  # forecast, alone: -x ended the session
    assert "stopping after 1 failures" in stopped.stdout.str()


@pytest.mark.slow
def test_junitxml_carries_each_flow_and_its_failure(pytester: pytest.Pytester, flows: Path) -> None:
    set_agent_env(flows / "weather.flow.yaml", AGENT_SYSTEM="You are terse.")
    result = pytester.runpytest_subprocess(*PLUGINS, "flows", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    cases = {
        case.get("name"): case for case in ET.parse(pytester.path / "junit.xml").iter("testcase")
    }
    assert set(cases) == {"forecast", "later", "weather"}
    failure = cases["weather"].find("failure")
    assert failure is not None and "divergence at turn 1" in (failure.text or "")
    assert cases["later"].find("skipped") is not None
    assert list(cases["forecast"]) == [] or cases["forecast"].find("failure") is None


@pytest.mark.slow
def test_xdist_workers_each_run_their_flows(pytester: pytest.Pytester, flows: Path) -> None:
    result = pytester.runpytest_subprocess(*PLUGINS, "-p", "xdist.plugin", "-n", "2", "flows")
    assert result.ret == 0, result.stdout.str()
    assert outcomes(result) == {"passed": 2, "skipped": 1}
    assert "2 workers [3 items]" in result.stdout.str()


@pytest.mark.slow
def test_record_mode_leaves_a_changed_recording_for_review(
    pytester: pytest.Pytester, flows: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = flows / "weather.flow.yaml"
    set_agent_env(spec, AGENT_EXTRA_TOOL="check_visa")
    with FakeUpstream() as fake:
        monkeypatch.setenv("FLOWPROOF_AGENT_UPSTREAM", f"{fake.base_url}/v1")
        monkeypatch.setenv("FLOWPROOF_AGENT_KEY", "k")
        result = pytester.runpytest_subprocess(*PLUGINS, "--flowproof-record", str(spec))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = result.stdout.str()
    assert "re-record not approved" in text
    assert "| " in text and "check_visa" in text  # the trajectory diff, as the CLI prints it
    assert f"flowproof record --yes {spec}" in text
    assert (flows / "weather.trace.candidate.yaml").is_file()


def test_flows_are_not_collected_unless_a_path_names_them(pytester: pytest.Pytester) -> None:
    """A bare `pytest` reading `testpaths` (this project's own run) collects no flow; a path
    given on the command line, or `flowproof_collect = always`, does."""
    (pytester.path / "tests").mkdir()
    write_flow(pytester.path / "tests", name="weather")
    pytester.makepyfile(**{"tests/test_plain.py": "def test_plain():\n    assert True\n"})
    pytester.makeini("[pytest]\ntestpaths = tests\n")
    bare = pytester.runpytest_subprocess(*PLUGINS, "--collect-only", "-q")
    assert "weather.flow.yaml" not in bare.stdout.str()
    assert "tests/test_plain.py::test_plain" in bare.stdout.str()
    named = pytester.runpytest_subprocess(*PLUGINS, "--collect-only", "-q", "tests")
    named.stdout.fnmatch_lines(["tests/weather.flow.yaml::weather"])
    always = pytester.runpytest_subprocess(
        *PLUGINS, "--collect-only", "-q", "-o", "flowproof_collect=always"
    )
    always.stdout.fnmatch_lines(["tests/weather.flow.yaml::weather"])


def test_a_bad_collect_mode_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*PLUGINS, "-o", "flowproof_collect=sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*flowproof_collect = 'sometimes': use one of explicit, always, never*"]
    )


def test_shard_splits_the_collected_flows(pytester: pytest.Pytester) -> None:
    folder = pytester.path / "flows"
    folder.mkdir()
    for name in ("a", "b", "c", "d", "e"):
        write_flow(folder, name=name)
    seen = []
    for k in (1, 2):
        result = pytester.runpytest_subprocess(
            *PLUGINS, "--collect-only", "-q", f"--flowproof-shard={k}/2", "flows"
        )
        seen.append(sorted(line for line in result.outlines if ".flow.yaml::" in line))
    assert [len(names) for names in seen] == [3, 2]
    assert not set(seen[0]) & set(seen[1])
    assert seen[0] == [f"flows/{n}.flow.yaml::{n}" for n in ("a", "c", "e")]


@pytest.mark.parametrize("value", ["3/2", "0/2", "1", "a/b", "1/0"])
def test_a_bad_shard_is_a_usage_error_naming_the_form(
    pytester: pytest.Pytester, value: str
) -> None:
    result = pytester.runpytest_subprocess(*PLUGINS, f"--flowproof-shard={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--flowproof-shard*expected K/N*1 <= K <= N*"])


def test_a_broken_spec_is_its_items_error_not_a_collection_error(
    pytester: pytest.Pytester,
) -> None:
    folder = pytester.path / "flows"
    folder.mkdir()
    (folder / "broken.flow.yaml").write_text("name: broken\nagent: {command: x}\nnope: 1\n")
    skipped = write_flow(folder, name="skipped", skip_unless_env=["FLOWPROOF_TEST_UNSET"])
    result = pytester.runpytest_subprocess(*PLUGINS, "-rs", "flows")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(result) == {"failed": 1, "skipped": 1}
    text = result.stdout.str()
    assert "broken.flow.yaml" in text and "nope" in text
    assert "Traceback" not in text
    result.stdout.fnmatch_lines(["*SKIPPED*not set: FLOWPROOF_TEST_UNSET (skip_unless_env)*"])
    assert skipped.is_file()


def test_a_flow_that_is_not_a_regular_file_is_its_items_error(pytester: pytest.Pytester) -> None:
    """pytest walks only regular files: a FIFO or a link to /dev/zero named like a flow is
    still an item, whose error says what it is (never opened: a FIFO would block)."""
    folder = pytester.path / "flows"
    folder.mkdir()
    os.mkfifo(folder / "pipe.flow.yaml")
    (folder / "zero.flow.yaml").symlink_to("/dev/zero")
    (folder / "loop.flow.yaml").symlink_to("loop.flow.yaml")
    skip_unless = write_flow(folder, name="named", skip_unless_env=["${FLOWPROOF_TEST_UNSET}"])
    result = pytester.runpytest_subprocess(*PLUGINS, "flows", timeout=120)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(result) == {"failed": 4}
    result.stdout.fnmatch_lines_random(
        [
            "*pipe.flow.yaml*it is a FIFO (named pipe), not a regular file*",
            "*zero.flow.yaml*a symbolic link to /dev/zero, a character device, not a regular*",
            "*loop.flow.yaml*it is a symbolic link loop, not a regular file*",
            f"*{skip_unless.name}*Fix: write `FLOWPROOF_TEST_UNSET`*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_the_fixture_gives_the_verdict_of_a_skipped_flow(pytester: pytest.Pytester) -> None:
    write_flow(pytester.path, name="gated", skip_unless_env=["FLOWPROOF_TEST_UNSET"])
    pytester.makepyfile(
        test_api="""
        def test_gated(flowproof_run):
            run = flowproof_run("gated.flow.yaml")
            assert run.status == "skipped"
            assert not run.passed
            assert run.tool_calls == [] and run.reply is None
        """
    )
    result = pytester.runpytest_subprocess(*PLUGINS, "test_api.py")
    assert outcomes(result) == {"passed": 1}


@pytest.mark.slow
def test_the_fixture_gives_the_trajectory_for_custom_assertions(
    pytester: pytest.Pytester, flows: Path
) -> None:
    pytester.makepyfile(
        test_api="""
        def test_weather(flowproof_run):
            run = flowproof_run("flows/weather.flow.yaml")
            assert run.passed, run.failures
            assert [call.name for call in run.tool_calls] == ["get_weather", "get_time"]
            assert run.calls("get_weather")[0].arguments == {"city": "Nairobi"}
            assert "sunny" in run.reply
        """
    )
    result = pytester.runpytest_subprocess(*PLUGINS, "test_api.py")
    assert outcomes(result) == {"passed": 1}, result.stdout.str()


def test_sigterm_stops_the_session_after_the_flow_cleaned_up(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent signals pytest itself: the flow ends, no further flow starts, exit 143."""
    folder = pytester.path / "flows"
    folder.mkdir()
    marker = pytester.path / "second-ran"
    write_flow(folder, name="a_term", command="sh -c 'kill -TERM $PPID; sleep 5'")
    write_flow(folder, name="b_after", command=f"touch {marker}")
    monkeypatch.setenv("FLOWPROOF_AGENT_UPSTREAM", "http://127.0.0.1:9/v1")
    result = pytester.runpytest_subprocess(*PLUGINS, "--flowproof-record", "flows")
    assert result.ret == 143, result.stdout.str()
    assert "terminated by SIGTERM" in result.stdout.str() + result.stderr.str()
    assert not marker.exists()


def test_a_broken_suite_fails_each_of_its_flows_with_its_error(pytester: pytest.Pytester) -> None:
    folder = pytester.path / "flows"
    folder.mkdir()
    (folder / "suite.yaml").write_text("nope: 1\n")
    for name in ("a", "b"):
        write_flow(folder, name=name)
    result = pytester.runpytest_subprocess(*PLUGINS, "flows")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(result) == {"failed": 2}
    text = result.stdout.str()
    assert text.count("suite.yaml:1") >= 2 and "nope" in text, text
    assert "Traceback" not in text


@pytest.mark.slow
@pytest.mark.parametrize(
    ("anchor", "statement", "said"),
    [
        (
            '        """Called with a deep copy of each canonical request; returns the request to '
            'match."""\n',
            "        import sys; sys.exit(0)\n",
            "the matcher addon StripSession raised SystemExit: 0 in flowproof_normalize",
        ),
        ("import json\n", "raise KeyboardInterrupt\n", "does not import: KeyboardInterrupt"),
    ],
    ids=["exit-in-hook", "interrupt-at-import"],
)
def test_an_addon_that_exits_is_its_items_failure_not_the_sessions_end(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    anchor: str,
    statement: str,
    said: str,
) -> None:
    """A matcher addon's `sys.exit(0)` or own `KeyboardInterrupt` fails its flow's item;
    the session goes on to the other flow and ends with both outcomes."""
    demo = REPO / "examples" / "match-demo"
    for name in ("a", "b"):
        shutil.copytree(demo, pytester.path / "flows" / name)
    script = pytester.path / "flows" / "a" / "matchers" / "strip_session.py"
    text = script.read_text()
    assert anchor in text
    script.write_text(text.replace(anchor, anchor + statement, 1))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    result = pytester.runpytest_subprocess(*PLUGINS, "flows")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    counted = {kind: n for kind, n in outcomes(result).items() if kind != "warnings"}
    assert counted == {"failed": 1, "passed": 1}, result.stdout.str()
    assert said in result.stdout.str()


def test_the_failure_line_is_the_failures_data_never_its_text(tmp_path: Path) -> None:
    """The item points at `Failure.line`; text that merely reads like a line is not parsed
    (a reply quoting "(step at line 99)" points at the prompt, the flow's own fallback)."""
    from flowproof_cli.pytest_plugin import _failure_line
    from flowproof_cli.verdict import Failure, FlowResult

    spec = tmp_path / "f.flow.yaml"
    spec.write_text("name: f\napp: agent\nagent: {command: a}\nsteps:\n  - prompt: go\n")
    result = FlowResult("f", spec, "replay", tmp_path / "f.trace.yaml")
    result.failures = [Failure("divergence at turn 1"), Failure("reply was wrong", line=7)]
    assert _failure_line(result) == 7
    result.failures = [Failure('the reply was "see (step at line 99)"')]
    assert _failure_line(result) == 5
    result.failures = [Failure("x", line=3, turn=2)]
    assert _failure_line(result) == 3
