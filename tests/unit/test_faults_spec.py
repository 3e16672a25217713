"""`faults:` in a flow spec: the plain faults it builds (with their lines), and every misuse
refused at its line with the fix (exit 2)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flowproof_cli.errors import SpecError
from flowproof_cli.faults.plan import (
    ANSWER,
    CRASH,
    CUT,
    DELAY,
    ERROR_EVENT,
    HANG,
    MALFORMED,
    MCP_ERROR,
    RESET,
    TOOL_ERROR,
    CallAt,
    Fault,
)
from flowproof_cli.spec import parse_spec, spec_json_schema
from tests.conftest import run_cli

HEAD = """\
name: faults
app: agent
agent:
  command: run
mcp:
  - name: notes
    command: notes-server
  - name: calendar
    command: calendar-server
"""
STEPS = """\
steps:
  - prompt: Book me a flight
"""


def spec_text(faults: str, steps: str = STEPS, head: str = HEAD) -> str:
    return head + "faults:\n" + textwrap.indent(textwrap.dedent(faults), "  ") + steps


def refused(faults: str, steps: str = STEPS, head: str = HEAD) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_text(faults, steps, head), "f.flow.yaml")
    return caught.value


#: Line 10 of every spec is the first fault's `- at:` (HEAD is 9 lines, then `faults:`).
FIRST = 11


def test_every_kind_becomes_its_fault_with_its_line() -> None:
    spec = parse_spec(
        spec_text("""\
            - at: model call 2
              answer: 429
              retry_after: 0.2
              times: 2
            - at: model call  3
              stream: cut after 4 chunks
            - at: model call 4
              stream: error event after 1 chunk
            - at: model call 5
              delay: 3
            - at: model call 6
              malformed: tool_arguments
            - at: model call 7
              connection: reset
            - at: mcp notes call 2
              error: { code: -32603, message: database unavailable }
            - at: mcp notes call 3
              tool_error: no such note
            - at: mcp calendar call 1
              crash:
            - at: mcp calendar call 2
              hang: true
            """),
        "f.flow.yaml",
    )
    assert spec.fault_plan == (
        Fault(CallAt("model", 2), ANSWER, 429, 0.2, 2),
        Fault(CallAt("model", 3), CUT, 4),
        Fault(CallAt("model", 4), ERROR_EVENT, 1),
        Fault(CallAt("model", 5), DELAY, 3.0),
        Fault(CallAt("model", 6), MALFORMED, "tool_arguments"),
        Fault(CallAt("model", 7), RESET),
        Fault(
            CallAt("mcp", 2, server="notes"),
            MCP_ERROR,
            {"code": -32603, "message": "database unavailable"},
        ),
        Fault(CallAt("mcp", 3, server="notes"), TOOL_ERROR, "no such note"),
        Fault(CallAt("mcp", 1, server="calendar"), CRASH),
        Fault(CallAt("mcp", 2, server="calendar"), HANG),
    )
    lines = [fault.line for fault in spec.fault_plan]
    assert lines == [FIRST, *range(FIRST + 4, FIRST + 22, 2)]
    assert spec.fault_plan[0].label == "model call 2: answer: 429, retry_after: 0.2 (times 2)"


def test_no_faults_is_an_empty_plan() -> None:
    spec = parse_spec(HEAD + STEPS, "f.flow.yaml")
    assert spec.faults == [] and spec.fault_plan == ()


def test_a_turn_of_a_conversation() -> None:
    head = HEAD.replace("  command: run\n", "  command: run\n  conversation: {until: '^> $'}\n")
    steps = "steps:\n  - user: hello\n  - user: and then?\n"
    spec = parse_spec(spec_text("- at: turn 2 model call 1\n  answer: 500\n", steps, head), "f")
    assert spec.fault_plan == (Fault(CallAt("model", 1, turn=2), ANSWER, 500),)


BAD: list[tuple[str, str, int, str]] = [
    # (name, the faults text, its line offset from FIRST, a fragment of the message)
    ("no at", "- answer: 429\n", 0, "this fault has no `at`"),
    (
        "unreadable at",
        "- at: model 2\n  answer: 429\n",
        0,
        "cannot read `at: model 2`: write "
        "`model call N`, `turn K model call N` or `mcp NAME call N`",
    ),
    ("at zero", "- at: model call 0\n  answer: 429\n", 0, "cannot read `at: model call 0`"),
    ("at not text", "- at: 2\n  answer: 429\n", 0, "cannot read `at: 2`"),
    ("no kind", "- at: model call 2\n  times: 2\n", 0, "says what happens there with no key"),
    (
        "two kinds",
        "- at: model call 2\n  answer: 429\n  delay: 3\n",
        2,
        "has 2 kinds (answer, delay)",
    ),
    (
        "retry_after without answer",
        "- at: model call 2\n  delay: 3\n  retry_after: 1\n",
        2,
        "`retry_after` goes with `answer`",
    ),
    (
        "retry_after negative",
        "- at: model call 2\n  answer: 429\n  retry_after: -1\n",
        2,
        "`retry_after: -1` must be a finite number of seconds >= 0",
    ),
    (
        "answer 200",
        "- at: model call 2\n  answer: 200\n",
        1,
        "`answer: 200` must be an HTTP error status from 400 to 599",
    ),
    (
        "answer text",
        "- at: model call 2\n  answer: slow\n",
        1,
        "`answer: slow` must be an HTTP error status",
    ),
    (
        "times zero",
        "- at: model call 2\n  answer: 429\n  times: 0\n",
        2,
        "`times: 0` must be a whole number of faulted attempts >= 1",
    ),
    (
        "times half",
        "- at: model call 2\n  answer: 429\n  times: 1.5\n",
        2,
        "`times: 1.5` must be a whole number",
    ),
    (
        "stream",
        "- at: model call 2\n  stream: cut at 4\n",
        1,
        "`stream: cut at 4` must be `cut after N chunks` or `error event after N chunks`",
    ),
    (
        "stream zero",
        "- at: model call 2\n  stream: cut after 0 chunks\n",
        1,
        "N a whole number from 1",
    ),
    (
        "delay zero",
        "- at: model call 2\n  delay: 0\n",
        1,
        "`delay: 0` must be a finite number of seconds > 0",
    ),
    ("delay inf", "- at: model call 2\n  delay: .inf\n", 1, "`delay: inf` must be a finite number"),
    (
        "malformed",
        "- at: model call 2\n  malformed: garbage\n",
        1,
        "must be one of tool_arguments, unknown_tool, empty, truncated, refusal",
    ),
    (
        "connection",
        "- at: model call 2\n  connection: close\n",
        1,
        "`connection: close` must be `reset`",
    ),
    (
        "error text",
        "- at: mcp notes call 2\n  error: boom\n",
        1,
        "must be a mapping `{code: INTEGER, message: TEXT}`",
    ),
    (
        "error no code",
        "- at: mcp notes call 2\n  error: {message: boom}\n",
        1,
        "must be a mapping `{code: INTEGER",
    ),
    (
        "error unknown key",
        "- at: mcp notes call 2\n  error: {code: 1, message: b, data: 2}\n",
        1,
        "unknown key `data`",
    ),
    (
        "tool_error empty",
        "- at: mcp notes call 2\n  tool_error: ''\n",
        1,
        "must be the text of the tool's error result",
    ),
    (
        "crash false",
        "- at: mcp notes call 2\n  crash: false\n",
        1,
        "`crash: false` turns the fault on with `crash: true`",
    ),
    (
        "hang text",
        "- at: mcp notes call 2\n  hang: forever\n",
        1,
        "`hang: forever` turns the fault on with `hang: true`",
    ),
    (
        "unknown key",
        "- at: model call 2\n  answr: 429\n",
        1,
        "unknown key `answr` in `faults.0`. Did you mean `answer`?",
    ),
    (
        "model kind at mcp",
        "- at: mcp notes call 2\n  delay: 3\n",
        1,
        "`delay` is a fault of a model call, and `at: mcp notes call 2` is an MCP call",
    ),
    (
        "mcp kind at model",
        "- at: model call 2\n  tool_error: boom\n",
        1,
        "`tool_error` is a fault of an MCP call, and `at: model call 2` is a model call",
    ),
    (
        "undeclared server",
        "- at: mcp note call 2\n  crash: true\n",
        0,
        "names the MCP server `note`, which is not under `mcp:` (declared: notes, calendar)",
    ),
    (
        "turn outside a conversation",
        "- at: turn 1 model call 1\n  answer: 500\n",
        0,
        "counts within a conversation turn, and this flow is not a conversation",
    ),
    (
        "two at one call",
        "- at: model call 2\n  answer: 429\n- at: model call 2\n  delay: 3\n",
        2,
        "two faults at `model call 2` (the first is fault 1)",
    ),
    ("not a mapping", "- model call 2\n", 0, "a fault is a mapping, got str"),
]


@pytest.mark.parametrize(
    ("faults", "offset", "fragment"), [case[1:] for case in BAD], ids=[case[0] for case in BAD]
)
def test_misuse_is_refused_at_its_line_with_a_fix(faults: str, offset: int, fragment: str) -> None:
    error = refused(faults)
    assert error.line == FIRST + offset, str(error)
    assert fragment in error.detail, error.detail
    assert "Fix:" in error.detail, error.detail


def test_a_turn_beyond_the_conversation() -> None:
    head = HEAD.replace("  command: run\n", "  command: run\n  conversation: {until: '^> $'}\n")
    steps = "steps:\n  - user: hello\n  - user: and then?\n"
    error = refused("- at: turn 3 model call 1\n  answer: 500\n", steps, head)
    assert error.line == FIRST + 1
    assert "names turn 3, and this conversation has 2 turn(s)" in error.detail
    assert "Fix: name a turn from 1 to 2" in error.detail


def test_no_mcp_server_declared() -> None:
    head = HEAD.split("mcp:", maxsplit=1)[0]
    error = refused("- at: mcp notes call 1\n  crash:\n", STEPS, head)
    assert "this flow declares no `mcp:` server" in error.detail


def test_the_cli_exits_2_naming_file_line_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "bad.flow.yaml"
    path.write_text(spec_text("- at: model call 2\n  answer: 200\n"), encoding="utf-8")
    result = run_cli("run", path)
    assert result.code == 2, result.output
    assert f"{path}:{FIRST + 1}:" in result.output
    assert "Fix: e.g. `answer: 429`" in result.output


def test_the_schema_shows_faults() -> None:
    schema = spec_json_schema()
    assert "faults" in schema["properties"]
    keys = set(schema["$defs"]["FaultSpec"]["properties"])
    assert keys == {
        "at",
        "answer",
        "retry_after",
        "times",
        "stream",
        "delay",
        "malformed",
        "connection",
        "error",
        "tool_error",
        "crash",
        "hang",
    }
