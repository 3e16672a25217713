"""Record against the fake model, stop it, replay offline: the core promise, end to end.

Every behaviour has its red path: each failure checks the exit code and the message.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, computed_once, run_cli, run_command, start_cli
from tests.e2e.flows import copy_recording, replay_fails, set_agent_env, write_flow
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow


def record(spec: Path, fake: FakeUpstream, *extra: str, **env: str):
    variables = {
        "FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1",
        "FLOWPROOF_AGENT_KEY": "sk-secret-123",
    }
    variables.update(env)
    return run_cli("record", spec, *extra, env=variables)


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The flow recorded once per session against a fake that is stopped before any test
    replays it (`computed_once`): its folder, never written to again."""

    def record_once() -> str:
        spec = write_flow(tmp_path_factory.mktemp("recording"))
        with FakeUpstream() as fake:
            result = record(spec, fake)
            assert result.code == 0, result.output
            assert fake.model_requests()[0].headers["authorization"] == "Bearer sk-secret-123"
        return str(spec.parent)

    return Path(computed_once(tmp_path_factory, "core-recording", record_once))


@pytest.fixture
def recorded(recording: Path, tmp_path: Path) -> Path:
    """The test's own copy of the recorded flow and its trace: each test edits and replays
    it as its own (a record of the same flow stores the same requests; a record twice
    stores the same bytes: test_recording_is_deterministic)."""
    return copy_recording(recording, tmp_path)


def trace_of(spec: Path) -> Path:
    return spec.with_name(spec.name.replace(".flow.yaml", ".trace.yaml"))


def test_record_then_replay_offline(recorded: Path) -> None:
    trace_text = trace_of(recorded).read_text()
    assert "sk-secret-123" not in trace_text
    assert "authorization" not in trace_text.lower()
    assert "2026-01-01T09:00:00Z" in trace_text  # the mock, not the volatile real time
    assert """content: '{"now":"2026-01-01T09:00:00Z"}'""" in trace_text  # substituted result
    assert time.strftime("%Y-%m-%dT", time.gmtime()) not in trace_text  # no real timestamp

    result = run_cli("run", recorded)
    assert result.code == 0, result.output
    assert result.stdout.startswith("PASS: weather flow")


def test_directory_run_and_json(recorded: Path) -> None:
    result = run_cli("run", recorded.parent, "--json")
    assert result.code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["passed"] is True
    assert payload["flows"][0]["model_calls"] == 2


def test_replay_needs_no_upstream_and_no_key(recorded: Path) -> None:
    result = run_cli("run", recorded, env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert result.code == 0, result.output


def test_changed_prompt_diverges(recorded: Path) -> None:
    spec = yaml.safe_load(recorded.read_text())
    spec["steps"][0]["prompt"] = "What's the weather in Nairobi today? Use both tools."
    recorded.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = run_cli("run", recorded)
    assert result.code == 1
    assert (
        "FAIL: weather flow - divergence at turn 1: message 1 (user) content changed"
        in result.stdout
    )
    assert "replayed: What's the weather in Nairobi today?" in result.stdout


def env_change_fails(spec: Path, *said: str, **env: str) -> None:
    """The agent changed as `env` says: the replay fails, saying each of `said`."""
    set_agent_env(spec, **env)
    replay_fails(spec, *said)


def test_changed_system_prompt_diverges(recorded: Path) -> None:
    env_change_fails(
        recorded,
        "turn 1: message 0 (system) content changed",
        AGENT_SYSTEM="You are a terse weather assistant.",
    )


def test_added_tool_diverges(recorded: Path) -> None:
    env_change_fails(
        recorded, "turn 1: tools offered changed: added check_visa", AGENT_EXTRA_TOOL="check_visa"
    )


def test_changed_tool_schema_diverges(recorded: Path) -> None:
    env_change_fails(
        recorded,
        "turn 1: tools offered changed: the declaration of get_weather changed",
        "get_weather.function.parameters.properties.city.type: recorded string, replayed integer",
        AGENT_CITY_TYPE="integer",
    )


def test_changed_model_diverges(recorded: Path) -> None:
    env_change_fails(
        recorded,
        "turn 1: model changed: recorded gpt-4o-mini, replayed gpt-4o",
        AGENT_MODEL="gpt-4o",
    )


def test_argument_drift_names_the_path(recorded: Path) -> None:
    # The recording now says the model asked for Paris: the agent threads Paris into the
    # next request, which no longer matches the recorded Nairobi.
    trace = trace_of(recorded)
    text = trace.read_text()
    first, rest = text.split("- request:", 2)[1:]
    first = first.replace('"city": "Nairobi"', '"city": "Paris"', 1)
    trace.write_text(text.split("- request:", 1)[0] + "- request:" + first + "- request:" + rest)
    result = run_cli("run", recorded)
    assert result.code == 1
    assert (
        "turn 2: tool-call arguments drifted in message 2 (assistant): get_weather.city: recorded Nairobi, replayed Paris"
        in result.stdout
    )


def test_extra_call_fails(recorded: Path) -> None:
    env_change_fails(recorded, "extra call", AGENT_EXTRA_CALL="1")


def test_missing_call_fails(recorded: Path) -> None:
    env_change_fails(
        recorded,
        "the agent made 1 model call(s), the recording has 2 (turn(s) never requested: 2)",
        AGENT_STOP_AFTER="1",
    )


def test_swallowed_divergence_still_fails(recorded: Path) -> None:
    env_change_fails(recorded, "model changed", AGENT_SWALLOW_ERRORS="1", AGENT_MODEL="gpt-4o")


def test_dead_agent_reports_exit_code_and_stderr(recorded: Path) -> None:
    env_change_fails(
        recorded,
        "the agent exited with code 3 before making any model call",
        "agent: cannot load my configuration",
        AGENT_CRASH_FIRST="3",
    )


def test_hung_agent_is_killed_on_timeout(recorded: Path) -> None:
    """The bound leaves the agent time to start and make its first call on a slow, busy
    machine (at 3 s it had made none there); the hang after that call is what is killed."""
    set_agent_env(recorded, AGENT_HANG_AFTER="1")
    started = time.monotonic()
    result = run_cli("run", recorded, "--timeout", "12")
    assert time.monotonic() - started < 40
    assert result.code == 1
    assert (
        "did not finish within 12 s and was killed; it made 1 model call(s) of 2 recorded"
        in result.stdout
    )


def test_missing_trace_is_an_error_naming_the_record_command(tmp_path: Path) -> None:
    spec = write_flow(tmp_path)
    result = run_cli("run", spec)
    assert result.code == 2
    assert f"flowproof record {spec}" in result.stderr


def test_record_without_upstream_is_an_error(tmp_path: Path) -> None:
    result = run_cli("record", write_flow(tmp_path))
    assert result.code == 2
    assert "FLOWPROOF_AGENT_UPSTREAM" in result.stderr


def test_trace_override_paths(tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    spec = write_flow(tmp_path)
    custom = tmp_path / "elsewhere" / "custom.trace.yaml"
    assert record(spec, fake_upstream, "-o", str(custom)).code == 0
    assert custom.exists() and not trace_of(spec).exists()
    fake_upstream.stop()
    assert run_cli("run", spec, "-t", custom).code == 0


def unprivileged(*args: str | Path) -> list[str | Path]:
    """The CLI as a process file permissions apply to: as root, without its capabilities
    (`setpriv`, uid 0 kept so the interpreter stays readable), so a read-only folder is
    read-only to it as to any user."""
    command: list[str | Path] = [sys.executable, "-m", "flowproof_cli", *args]
    if os.geteuid() != 0:
        return command
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: no folder is read-only to root")
    drop = ["--securebits=+noroot,+noroot_locked,+no_setuid_fixup", "--bounding-set=-all"]
    return ["setpriv", *drop, "--inh-caps=-all", "--ambient-caps=-all", *command]


@pytest.mark.parametrize("where", ["beside the spec", "-o into a folder to create"])
def test_a_read_only_folder_for_the_trace_is_refused_before_the_agent_starts(
    tmp_path: Path, where: str
) -> None:
    """It was a PermissionError traceback once the agent had run (exit 1)."""
    spec = write_flow(tmp_path)
    if where == "beside the spec":
        folder, trace, extra = tmp_path, trace_of(spec), ()
    else:
        folder = tmp_path / "read-only"
        folder.mkdir()
        trace = folder / "new" / "x.trace.yaml"
        extra = ("-o", str(trace))
    folder.chmod(0o555)
    try:
        with FakeUpstream() as fake:
            upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"}
            result = run_command(unprivileged("record", spec, *extra), env=upstream, cwd=tmp_path)
            assert fake.model_requests() == []  # the agent never ran
    finally:
        folder.chmod(0o755)
    assert result.code == 2, result.output
    assert "Traceback" not in result.output
    assert (
        f"error: cannot write the trace {trace}: the folder {folder} is not writable "
        f"(Permission denied). Fix: make {folder} writable, or write the trace elsewhere "
        "with `-o PATH`"
    ) in result.stderr
    assert not trace.exists()
    assert not [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


def test_recording_is_deterministic(tmp_path: Path) -> None:
    spec = write_flow(tmp_path)
    texts = []
    for _ in range(2):
        with FakeUpstream(seed=7) as fake:
            assert record(spec, fake).code == 0
        texts.append(trace_of(spec).read_bytes())
    assert texts[0] == texts[1]


def test_failed_record_keeps_the_good_trace(recorded: Path) -> None:
    good = trace_of(recorded).read_bytes()
    spec = yaml.safe_load(recorded.read_text())
    spec["steps"].append({"assert": "reply contains snow"})
    recorded.write_text(yaml.safe_dump(spec, sort_keys=False))
    with FakeUpstream() as fake:
        result = record(recorded, fake)
    assert result.code == 1
    assert "no trace written" in result.stdout
    assert trace_of(recorded).read_bytes() == good
    assert not [p for p in recorded.parent.iterdir() if p.name.endswith(".tmp")]


def test_interrupted_record_writes_nothing(tmp_path: Path) -> None:
    spec = write_flow(tmp_path, env={"AGENT_HANG_AFTER": "1"})
    with FakeUpstream() as fake:
        process = start_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
        deadline = time.monotonic() + 30
        while not fake.model_requests() and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 128 + signal.SIGINT, stderr
    assert "interrupted" in stderr
    assert list(tmp_path.iterdir()) == [spec]


def test_zero_request_record_fails_and_names_the_wiring(
    tmp_path: Path, fake_upstream: FakeUpstream
) -> None:
    spec = write_flow(tmp_path, env={"AGENT_NO_MODEL": "1"})
    result = record(spec, fake_upstream)
    assert result.code == 1
    assert "no model request reached flowproof's proxy" in result.stdout
    assert "OPENAI_BASE_URL" in result.stdout and "${flowproof.proxy_url}" in result.stdout
    assert not trace_of(spec).exists()


def test_agent_never_sees_flowproof_keys(tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, runpy, sys\n"
        "assert 'FLOWPROOF_AGENT_KEY' not in os.environ, 'key leaked'\n"
        "assert os.environ['OPENAI_API_KEY'] != 'sk-secret-123'\n"
        "assert os.environ['ANTHROPIC_BASE_URL'] + '/v1' == os.environ['OPENAI_BASE_URL']\n"
        "assert os.environ['MAPPED'] == os.environ['OPENAI_BASE_URL']\n"
        f"sys.argv = ['agent']; runpy.run_path({str(REPO / 'tests/e2e/agents/tool_loop_agent.py')!r}, run_name='__main__')\n"
    )
    spec = write_flow(
        tmp_path, command=f"{sys.executable} {probe}", env={"MAPPED": "${flowproof.proxy_url}"}
    )
    result = record(spec, fake_upstream)
    assert result.code == 0, result.output


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ({"assert_tool_call": "get_weather where city equals Paris"}, 'city = "Nairobi"'),
        ({"assert_tool_call": "get_weather where city contains rob x"}, "get_weather"),
        ({"assert_tool_call": "get_weather where city matches ^P"}, "get_weather"),
        ({"assert_tool_call": "get_weather where country exists"}, "get_weather"),
        ({"assert_tool_call": "get_weather where city is absent"}, "get_weather"),
        ({"assert_no_tool_call": "get_time"}, "get_time"),
        ({"assert": "reply contains snow"}, "snow"),
    ],
)
def test_every_matcher_fails_at_record_and_writes_nothing(
    tmp_path: Path, fake_upstream: FakeUpstream, step: dict, expected: str
) -> None:
    steps = [{"prompt": "What's the weather in Nairobi right now? Use both tools."}, step]
    spec = write_flow(tmp_path, steps=steps)
    result = record(spec, fake_upstream)
    assert result.code == 1, result.output
    assert result.stdout.startswith("FAIL: weather flow - ")
    assert expected in result.stdout
    assert not trace_of(spec).exists()


def test_assertion_order_is_enforced(tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    steps = [
        {"prompt": "What's the weather in Nairobi right now? Use both tools."},
        {"assert_tool_call": "get_time"},
        {"assert_tool_call": "get_weather"},
    ]
    result = record(write_flow(tmp_path, steps=steps), fake_upstream)
    assert result.code == 1
    assert "get_weather" in result.stdout


def test_strict_mode_forbids_unlisted_calls(tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    steps = [
        {"prompt": "What's the weather in Nairobi right now? Use both tools."},
        {"assert_tool_call": "get_weather"},
    ]
    spec = write_flow(tmp_path, steps=steps, strict=True)
    result = record(spec, fake_upstream)
    assert result.code == 1
    assert "get_time" in result.stdout
    loose = write_flow(tmp_path, name="loose", steps=steps)
    assert record(loose, fake_upstream).code == 0


def test_bad_spec_is_an_error_with_file_and_line(tmp_path: Path) -> None:
    spec = tmp_path / "bad.flow.yaml"
    spec.write_text(
        "name: bad\napp: agent\nagent:\n  command: python x.py\nsteps:\n"
        "  - prompt: hi\n  - assert_tool_call: get_weather where city matches ([\n"
    )
    result = run_cli("run", spec)
    assert result.code == 2
    assert f"{spec}:7" in result.stderr


def test_schema_command_prints_json_schema() -> None:
    result = run_cli("schema")
    assert result.code == 0
    schema = json.loads(result.stdout)
    assert "steps" in json.dumps(schema)
