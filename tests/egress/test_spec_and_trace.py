"""`agent.allow_egress`, the bare `assert_no_egress` step, and the trace's egress section."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowproof_cli.cassette import Turn
from flowproof_cli.errors import SpecError, TraceError
from flowproof_cli.spec import parse_spec, spec_json_schema
from flowproof_cli.spec.steps import NoEgressStep
from flowproof_cli.trace import Trace, load, loads, save
from flowproof_cli.trace.storage import dumps

SPEC = """\
name: contained
app: agent
agent:
  command: python agent.py
  allow_egress:
    - api.example.com:443
    - 198.51.100.9:443
    - 10.0.0.0/8:443
    - api.example.com
    - ${SERVICE_HOST}:443
steps:
  - prompt: Book me a flight to Nairobi
  - assert_no_egress
"""


def parse(text: str):
    return parse_spec(text, "c.flow.yaml")


def error(text: str) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse(text)
    return caught.value


def test_allow_egress_is_stored_as_written() -> None:
    spec = parse(SPEC)
    assert spec.agent.allow_egress[-1] == "${SERVICE_HOST}:443"  # unresolved
    assert spec.agent.declares_egress and spec.asserts_no_egress and spec.engages_egress
    step = spec.steps[1]
    assert isinstance(step, NoEgressStep)
    assert (step.kind, step.text, step.line) == ("assert_no_egress", "assert_no_egress", 13)


def test_engagement() -> None:
    without = SPEC.replace("  - assert_no_egress\n", "")
    assert parse(without).engages_egress and not parse(without).asserts_no_egress
    empty = (
        SPEC.split("  allow_egress:", maxsplit=1)[0]
        + "  allow_egress: []\nsteps:\n  - prompt: hi\n"
    )
    assert parse(empty).agent.declares_egress  # declared empty: nothing off-host allowed
    plain = SPEC.split("  allow_egress:", maxsplit=1)[0] + "steps:\n  - prompt: hi\n"
    assert not parse(plain).engages_egress


def test_bad_entry_names_its_line() -> None:
    problem = error(SPEC.replace("198.51.100.9:443", "198.51.100.9:https"))
    assert problem.line == 7
    assert "port `https`" in str(problem) and "Fix:" in str(problem)


def test_allow_egress_on_a_url_agent_is_a_named_error() -> None:
    text = SPEC.replace(
        "  command: python agent.py\n", "  url: http://127.0.0.1:9/\n  proxy_port: 4646\n"
    )
    problem = error(text)
    assert "`agent.allow_egress` only applies to a `command` agent" in str(problem)


def test_assert_no_egress_on_a_url_agent_loads() -> None:
    """It fails at run time as a capability error, never at load time and never vacuously."""
    text = (
        SPEC.split("  command:", maxsplit=1)[0] + "  url: http://127.0.0.1:9/\n  proxy_port: 4646\n"
    )
    text += "steps:\n  - prompt: hi\n  - assert_no_egress\n"
    assert parse(text).asserts_no_egress


def test_bare_step_typo_and_value() -> None:
    typo = error(SPEC.replace("- assert_no_egress", "- assert_no_egres"))
    assert "Did you mean `assert_no_egress`?" in str(typo)
    valued = error(SPEC.replace("- assert_no_egress", "- assert_no_egress: true"))
    assert "takes no value" in str(valued)


def test_schema_lists_the_bare_step_and_the_key() -> None:
    schema = spec_json_schema()
    options = schema["properties"]["steps"]["items"]["oneOf"]
    assert {"const": "assert_no_egress"}.items() <= next(o for o in options if "const" in o).items()
    assert "allow_egress" in schema["$defs"]["AgentSpec"]["properties"]


# --- trace ------------------------------------------------------------------------------------


def trace(blocked: list[dict] | None = None) -> Trace:
    turn = Turn(
        protocol="openai-chat",
        request={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        status=200,
        response={"choices": [{"message": {"role": "assistant", "content": "ok"}}]},
    )
    return Trace(flow="f", turns=[turn], egress_blocked=blocked or [])


def test_empty_egress_leaves_the_trace_byte_identical() -> None:
    text = dumps(trace())
    assert "egress" not in text
    assert dumps(loads(text)) == text


def test_blocked_round_trip(tmp_path: Path) -> None:
    blocked = [
        {"destination": "203.0.113.7:443", "protocol": "tcp", "at_ms": 412},
        {"destination": "[2001:db8::7]:53", "protocol": "udp", "at_ms": 899},
    ]
    path = tmp_path / "f.trace.yaml"
    save(path, trace(blocked))
    text = path.read_text()
    assert text.endswith(
        "egress:\n  blocked:\n  - destination: 203.0.113.7:443\n    protocol: tcp\n"
        "    at_ms: 412\n  - destination: '[2001:db8::7]:53'\n    protocol: udp\n    at_ms: 899\n"
        "end_of_trace: true\n"
    )
    assert load(path).egress_blocked == blocked
    assert dumps(load(path)) == text


def test_malformed_egress_section_is_named() -> None:
    text = dumps(trace()) + "egress:\n  blocked:\n  - destination: x\n"
    with pytest.raises(TraceError, match="egress blocked entry 1 is malformed"):
        loads(text)
