"""`assert_no_secret_leak` end to end: a real agent records against the fake model (or a real
MCP server), and a declared secret found anywhere in the trajectory fails the flow, names
where and how it was encoded, and leaves the value nowhere: not on screen, not in a trace,
not in any run record. Each red path checks its exit code and its message.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowproof_cli.cassette.secret_forms import base64_cores
from tests.conftest import CliResult, run_cli
from tests.e2e import mcp_flows
from tests.e2e.flows import AGENTS, agent_command, write_flow
from tests.fakes.fake_upstream import FakeUpstream, Reply, sequence

pytestmark = pytest.mark.slow

SECRET_AGENT = AGENTS / "py_secret_agent.py"
# Spaces, '/', '+', '=' for URL-encoding; '>>>???' so base64 and base64url differ.
TOKEN = "tok>>>???>>>???x sk/9+q=Z"
STEP = {"assert_no_secret_leak": "${APP_TOKEN}"}
PROMPT = {"prompt": "Check the deployment config."}


def leak_flow(folder: Path, *, step: bool = True, **extra: Any) -> Path:
    steps = [PROMPT, STEP] if step else [PROMPT]
    return write_flow(
        folder, name="deploy", command=agent_command(SECRET_AGENT), tools=[], steps=steps, **extra
    )


def record(spec: Path, fake: FakeUpstream, token: str | None = TOKEN, **env: str) -> CliResult:
    variables = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", **env}
    if token is not None:
        variables["APP_TOKEN"] = token
    return run_cli("record", spec, env=variables)


def replay(spec: Path, token: str = TOKEN) -> CliResult:
    return run_cli("run", spec, env={"APP_TOKEN": token})


def trace_path(spec: Path) -> Path:
    return spec.with_name(spec.name.replace(".flow.yaml", ".trace.yaml"))


def assert_nowhere(value: str, result: CliResult, folder: Path) -> None:
    """Neither the value nor a base64 form of it in the output, a trace or a run record."""
    forms = [value, base64.b64encode(value.encode()).decode(), *base64_cores(value.encode())]
    files = [p for p in folder.rglob("*") if p.is_file() and ".flowproof" in p.parts]
    files += list(folder.glob("*.trace*.yaml"))
    for form in forms:
        assert form not in result.stdout
        assert form not in result.stderr
        for file in files:
            assert form not in file.read_text(errors="replace"), file


def set_env(spec: Path, **variables: str) -> None:
    document = yaml.safe_load(spec.read_text())
    document["agent"]["env"].update(variables)
    spec.write_text(yaml.safe_dump(document, sort_keys=False))


# -- model boundary ---------------------------------------------------------------------------


def test_leak_in_a_model_request_fails_record_and_writes_no_trace(tmp_path: Path) -> None:
    spec = leak_flow(tmp_path, env={"SECRET_SYSTEM": "1"})
    with FakeUpstream() as fake:
        result = record(spec, fake)
    assert result.code == 1, result.output
    assert (
        "FAIL: deploy flow - secret ${APP_TOKEN} leaked: turn 1 request, message 0 (system) "
        "(raw); turn 2 request, message 0 (system) (raw) (step at line" in result.stdout
    )
    assert "no trace written" in result.stdout
    assert not trace_path(spec).exists()
    assert_nowhere(TOKEN, result, tmp_path)


@pytest.mark.parametrize(
    ("encoding", "label"),
    [
        ("raw", "raw"),
        ("base64:0", "base64, alignment 0"),
        ("base64:1", "base64, alignment 1"),
        ("base64:2", "base64, alignment 2"),
        ("base64url:1", "base64url, alignment 1"),
        ("url", "URL-encoded"),
        ("hex", "hex"),
    ],
)
def test_leak_in_a_real_tool_result(tmp_path: Path, encoding: str, label: str) -> None:
    """The tool reads the secret from the environment and the agent forwards it to the model
    (the fake model then echoes it, so the response leaks it too)."""
    spec = leak_flow(tmp_path, env={"TOOL_ENCODING": encoding})
    with FakeUpstream() as fake:
        result = record(spec, fake)
    assert result.code == 1, result.output
    assert (
        f"secret ${{APP_TOKEN}} leaked: turn 2 request, message 3 (tool) ({label}); "
        f"turn 2 response ({label})" in result.stdout
    )
    assert not trace_path(spec).exists()
    assert_nowhere(TOKEN, result, tmp_path)


def test_a_mocked_tool_result_is_not_a_leak(tmp_path: Path) -> None:
    """The real tool still returns the secret, but the model is told the mock."""
    spec = leak_flow(tmp_path, env={"TOOL_ENCODING": "raw"})
    document = yaml.safe_load(spec.read_text())
    document["tools"] = [{"name": "read_config", "result": {"region": "eu-west-1"}}]
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    with FakeUpstream() as fake:
        recorded = record(spec, fake)
    assert recorded.code == 0, recorded.output
    assert_nowhere(TOKEN, recorded, tmp_path)
    replayed = replay(spec)
    assert replayed.code == 0, replayed.output


def test_the_secret_in_the_arguments_of_a_mocked_tool_is_a_leak(tmp_path: Path) -> None:
    """A mock replaces the result, never the arguments the model asked for."""
    spec = leak_flow(tmp_path)
    document = yaml.safe_load(spec.read_text())
    document["tools"] = [{"name": "send_token", "result": "sent"}]
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    script = sequence(
        Reply(tool_calls=[("send_token", json.dumps({"token": TOKEN}))]), Reply(text="Done.")
    )
    with FakeUpstream(script=script) as fake:
        result = record(spec, fake)
    assert result.code == 1, result.output
    assert (
        "secret ${APP_TOKEN} leaked: turn 1 response (raw); "
        "turn 2 request, message 2 (assistant) (raw)" in result.stdout
    )
    assert_nowhere(TOKEN, result, tmp_path)


def test_clean_flow_records_replays_and_a_later_leak_keeps_the_trace(tmp_path: Path) -> None:
    spec = leak_flow(tmp_path)
    with FakeUpstream() as fake:
        recorded = record(spec, fake)
    assert recorded.code == 0, recorded.output
    trace = trace_path(spec)
    before = trace.read_bytes()
    replayed = replay(spec)
    assert replayed.code == 0, replayed.output
    assert replayed.stdout.startswith("PASS: deploy flow")

    set_env(spec, TOOL_ENCODING="raw")
    with FakeUpstream() as fake:
        leaked = record(spec, fake)
    assert leaked.code == 1, leaked.output
    assert "secret ${APP_TOKEN} leaked" in leaked.stdout
    assert trace.read_bytes() == before
    assert not list(tmp_path.glob("*.candidate*"))
    assert_nowhere(TOKEN, leaked, tmp_path)


def test_replay_scans_the_served_trajectory(tmp_path: Path) -> None:
    """A trace recorded before the step was added holds the secret: replay fails on it."""
    spec = leak_flow(tmp_path, step=False, env={"TOOL_ENCODING": "hex"})
    with FakeUpstream() as fake:
        recorded = record(spec, fake)
    assert recorded.code == 0, recorded.output
    document = yaml.safe_load(spec.read_text())
    document["steps"].append(STEP)
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    result = replay(spec)
    assert result.code == 1, result.output
    assert (
        "FAIL: deploy flow - secret ${APP_TOKEN} leaked: turn 2 request, message 3 (tool) (hex); "
        "turn 2 response (hex)" in result.stdout
    )
    assert TOKEN not in result.output
    assert TOKEN.encode().hex() not in result.output


def test_a_match_rule_cannot_hide_what_the_agent_sent(tmp_path: Path) -> None:
    """The normalize rule rewrites the secret in the stored request; the agent still sent
    it, at record (upstream) and at replay, and the scan reads what was sent."""
    token = "tok_live_4eC39HqLyjWD"
    rule = {"normalize": [{"pattern": "tok_live_[A-Za-z0-9]+", "replace": "<token>"}]}
    spec = leak_flow(tmp_path, step=False, env={"SECRET_SYSTEM": "1"}, match=rule)
    with FakeUpstream() as fake:
        recorded = record(spec, fake, token)
    assert recorded.code == 0, recorded.output
    assert token not in trace_path(spec).read_text()
    document = yaml.safe_load(spec.read_text())
    document["steps"].append(STEP)
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    expected = "secret ${APP_TOKEN} leaked: turn 1 request, message 0 (system) (raw)"

    replayed = replay(spec, token)
    assert replayed.code == 1, replayed.output
    assert expected in replayed.stdout
    with FakeUpstream() as fake:
        rerecorded = record(spec, fake, token)
    assert rerecorded.code == 1, rerecorded.output
    assert expected in rerecorded.stdout
    assert_nowhere(token, rerecorded, tmp_path)


# -- MCP lanes ----------------------------------------------------------------------------------


def notes_flow(folder: Path, note_text: str) -> Path:
    """The MCP client writing `note_text` to the notes server and reading it back."""
    agent = mcp_flows.client("py_client_v2.py", "--transport", "stdio", "--steps", "write,read")
    steps = [{"prompt": "Use the MCP server."}, STEP]
    return mcp_flows.stdio_notes_flow(folder, agent, {"NOTE_TEXT": note_text}, steps=steps)


def test_leak_in_an_mcp_lane_arguments_and_result(tmp_path: Path) -> None:
    spec = notes_flow(tmp_path, "${APP_TOKEN}")
    result = mcp_flows.record(spec, APP_TOKEN=TOKEN)
    assert result.code == 1, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("FAIL: mcp flow - secret ${APP_TOKEN} leaked: MCP server notes, call ")
    assert "(tools/call write_note) arguments (raw)" in first
    assert "(tools/call read_note) result (raw)" in first
    assert not (tmp_path / "mcp.trace.yaml").exists()
    assert_nowhere(TOKEN, result, tmp_path)


def test_clean_mcp_flow_records_and_replays(tmp_path: Path) -> None:
    spec = notes_flow(tmp_path, "nothing secret here")
    recorded = mcp_flows.record(spec, APP_TOKEN=TOKEN)
    assert recorded.code == 0, recorded.output
    replayed = mcp_flows.replay(spec, APP_TOKEN=TOKEN)
    assert replayed.code == 0, replayed.output


# -- refused before the agent starts ----------------------------------------------------------


def test_too_short_secret_is_refused_before_the_agent_starts(tmp_path: Path) -> None:
    spec = leak_flow(tmp_path)
    with FakeUpstream() as fake:
        result = record(spec, fake, "abc1234")
        assert fake.model_requests() == []
    assert result.code == 2, result.output
    assert (
        f"error: {spec}:9: assert_no_secret_leak: ${{APP_TOKEN}} is too short to scan for"
        in result.stderr
    )
    assert "abc1234" not in result.output
    assert not trace_path(spec).exists()


def test_unset_secret_is_an_error_naming_it(tmp_path: Path) -> None:
    spec = leak_flow(tmp_path)
    with FakeUpstream() as fake:
        result = record(spec, fake, None)
        assert fake.model_requests() == []
    assert result.code == 2, result.output
    assert (
        f"error: {spec}:9: assert_no_secret_leak: environment variable APP_TOKEN is not set"
        in result.stderr
    )
