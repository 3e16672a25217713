"""A conversation in every view, grouped by turn: `flowproof show`, `flowproof diff` (and so a
re-record's diff), mitmweb's comments and view, the text verdict, JUnit, the pytest report
and the run record. A call or a failure is placed by the turn it carries, never by its
position: a failure of turn 2 is never shown under turn 1."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Any

from mitmproxy.contentviews import make_metadata
from mitmproxy.test import taddons

from flowproof_addons.conversation import CONVERSATION_TURN, VIEW, ConversationViews
from flowproof_cli.cassette.conversation import UserCall
from flowproof_cli.cassette.turn import Turn
from flowproof_cli.cli.output import verdict_line
from flowproof_cli.evidence.audit import audit
from flowproof_cli.evidence.records import RunRecord, flow_row
from flowproof_cli.evidence.timeline import timeline
from flowproof_cli.evidence.trajectory_diff import diff_traces
from flowproof_cli.evidence.turns import turn_rows, turns_line
from flowproof_cli.inspect.live import FlowTap
from flowproof_cli.inspect.trace_flows import trace_flows
from flowproof_cli.pytest_plugin import _failure_line, _report
from flowproof_cli.runner.junit import junit_xml
from flowproof_cli.trace import Trace
from flowproof_cli.trace.conversation import RecordedConversation
from flowproof_cli.verdict import Failure, FlowResult

from .test_cassette_matching import reply
from .test_conversation_turns import HEAD
from .test_run_records import job

SYSTEM = {"role": "system", "content": "You are the support bot."}
FIRST, SECOND = "My order 4711 has not arrived.", "Then cancel it, please."
LOOKUP = ("call_1", "lookup_order", '{"order_id": 4711}')
CANCEL = ("call_2", "cancel_order", '{"order_id": 4711}')


def _request(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [SYSTEM, *messages]}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def support_trace(
    second: str = SECOND,
    *,
    cancel_in: int = 2,
    third: str | None = None,
    simulated: tuple[bool, ...] = (False, False),
) -> Trace:
    """Turn 1 looks the order up and answers; turn 2 cancels it (or turn 1 does, with
    `cancel_in=1`) and answers; an optional third turn just answers."""
    one = _request(_user(FIRST))
    calls_one = (LOOKUP, CANCEL) if cancel_in == 1 else (LOOKUP,)
    looked = {"role": "tool", "tool_call_id": "call_1", "content": "shipped"}
    turns = [
        Turn("openai-chat", one, 200, reply("", *calls_one), conversation_turn=1),
        Turn(
            "openai-chat", _request(_user(FIRST), looked), 200, reply("It shipped."), None, None, 1
        ),
    ]
    history = [_user(FIRST), looked, _said("It shipped."), _user(second)]
    if cancel_in == 2:
        turns.append(
            Turn("openai-chat", _request(*history), 200, reply("", CANCEL), conversation_turn=2)
        )
    cancelled = {"role": "tool", "tool_call_id": "call_2", "content": "cancelled"}
    last = _request(*history, cancelled)
    turns.append(Turn("openai-chat", last, 200, reply("Cancelled."), conversation_turn=2))
    messages = (FIRST, second)
    if third is not None:
        messages += (third,)
        answer = reply("Anything else?")
        asked = _request(*history, cancelled, _said("Cancelled."), _user(third))
        turns.append(Turn("openai-chat", asked, 200, answer, conversation_turn=3))
    flags = simulated + (False,) * (len(messages) - len(simulated))
    return Trace("support", turns, conversation=RecordedConversation("c1", messages, flags))


# -- flowproof show ---------------------------------------------------------------------------


def test_show_heads_each_conversation_turn_with_its_message_and_its_calls() -> None:
    lines = timeline(support_trace(), "s.trace.yaml")
    assert lines[:2] == ["s.trace.yaml: support", "conversation: 2 turn(s)"]
    first, second = (
        lines.index(f'conversation turn 1: "{FIRST}"'),
        lines.index(f'conversation turn 2: "{SECOND}"'),
    )
    assert lines[first + 1].startswith("  model call 1 (trace turn 1): openai-chat")
    assert '    -> lookup_order {"order_id": 4711}' in lines[first:second]
    assert "    reply: It shipped." in lines[first:second]  # each turn has its own reply
    assert lines[second + 1].startswith("  model call 1 (trace turn 3): openai-chat")
    assert lines[second + 2 :] == [
        f"    user: {SECOND}",
        '    -> cancel_order {"order_id": 4711}',
        "  model call 2 (trace turn 4): openai-chat, model gpt-4o-mini, the same tools",
        "    cancel_order result: cancelled",
        "    reply: Cancelled.",
    ]


def test_show_places_a_call_by_its_turn_never_by_its_position() -> None:
    """A call tagged turn 2 that comes first in the file is still shown under turn 2."""
    trace = support_trace()
    trace.turns.insert(0, trace.turns.pop(2))  # the cancel call (turn 2) now stored first
    lines = timeline(trace, "s.trace.yaml")
    second = lines.index(f'conversation turn 2: "{SECOND}"')
    cancel = lines.index('    -> cancel_order {"order_id": 4711}')
    assert cancel > second
    assert lines[cancel - 2].startswith("  model call 1 (trace turn 1)")


def test_show_marks_simulated_turns_lists_the_user_lane_and_a_turn_without_calls() -> None:
    trace = support_trace(simulated=(False, True))
    user = UserCall(2, "openai-chat", {"messages": []}, SECOND)
    done = UserCall(2, "openai-chat", {"messages": []}, "DONE")
    assert trace.conversation is not None
    trace.conversation = replace(
        trace.conversation, messages=(*trace.conversation.messages, "Thanks."), user=(user, done)
    )
    trace.turns.insert(0, Turn("openai-chat", _request(_user("warm up")), 200, reply("ok"), None))
    trace.turns[0] = replace(trace.turns[0], conversation_turn=0)
    lines = timeline(trace, "s.trace.yaml")
    assert f'conversation turn 2 (simulated): "{SECOND}"' in lines
    assert "the conversation, before its first message:" in lines  # a call before turn 1
    at = lines.index('conversation turn 3: "Thanks."')
    assert lines[at + 1] == "  no model calls"
    assert lines[-3:] == [
        "simulated user: 2 call(s) to the model",
        f"  1. for user step 2 (openai-chat): {SECOND}",
        "  2. for user step 2 (openai-chat): DONE",
    ]


# -- flowproof diff ---------------------------------------------------------------------------


def test_diff_of_the_same_conversation_is_unchanged() -> None:
    assert diff_traces(support_trace(), support_trace()).unchanged


def test_diff_names_a_changed_message_by_its_turn() -> None:
    lines = diff_traces(support_trace(), support_trace("Cancel it now.")).lines()
    told = lines[lines.index("what it was told differently:") :]
    assert told[1:3] == [
        "  conversation:",
        f"    ~ conversation turn 2: {SECOND} -> Cancel it now.",
    ]


def test_diff_names_a_turn_added_and_one_no_longer_reached() -> None:
    longer = diff_traces(support_trace(), support_trace(third="Thanks.")).lines()
    assert '    + conversation turn 3: "Thanks.", new' in longer
    assert '  conversation turn 3 ("Thanks."): model calls: 0 -> 1' in longer
    shorter = diff_traces(support_trace(third="Thanks."), support_trace()).lines()
    assert '    - conversation turn 3: "Thanks.", no longer reached' in shorter


def test_diff_names_a_tool_call_moved_between_turns() -> None:
    lines = diff_traces(support_trace(), support_trace(cancel_in=1)).lines()
    assert (
        f'  cancel_order: made in conversation turn 1 ("{FIRST}"), was in conversation turn 2 '
        f'("{SECOND}")'
    ) in lines
    assert (
        f'  conversation turn 1 ("{FIRST}"): tool calls: lookup_order -> lookup_order, cancel_order'
    ) in lines
    assert f'  conversation turn 2 ("{SECOND}"): tool calls: cancel_order -> (none)' in lines


def test_diff_of_a_one_turn_trace_and_a_conversation_says_so() -> None:
    one_turn = replace(support_trace(), conversation=None)
    lines = diff_traces(one_turn, support_trace()).lines()
    assert "  conversation: a one-turn flow -> 2 turn(s)" in lines


# -- mitmweb: flowproof inspect and run --inspect ----------------------------------------------


def test_inspect_comments_each_flow_with_the_turn_it_carries() -> None:
    trace = support_trace()
    trace.turns.insert(0, trace.turns.pop(2))  # the turn-2 call stored first
    comments = [flow.comment for flow in trace_flows(trace, "s.trace.yaml")]
    assert comments[0] == (
        f'conversation turn 2 ("{SECOND}"): turn 1, openai-chat, tools called: cancel_order'
    )
    assert comments[1].startswith(f'conversation turn 1 ("{FIRST}"): turn 2, openai-chat')


def test_the_view_heads_a_call_with_its_turn_and_the_live_tap_names_it() -> None:
    with taddons.context(ConversationViews()):  # make_metadata reads mitmproxy's options
        _the_view_and_the_tap()


def _the_view_and_the_tap() -> None:
    flow = trace_flows(support_trace(), "s.trace.yaml")[2]
    assert flow.metadata[CONVERSATION_TURN] == f'conversation turn 2 ("{SECOND}")'
    shown = VIEW.prettify(flow.request.content or b"", make_metadata(flow.request, flow))
    assert shown.splitlines()[0] == f'conversation turn 2 ("{SECOND}"):'
    assert flow.response is not None
    answer = VIEW.prettify(flow.response.content or b"", make_metadata(flow.response, flow))
    assert answer.splitlines()[0] == f'conversation turn 2 ("{SECOND}"):'

    class Sink:
        def feed(self, each: Any) -> None:
            pass

    flow.comment = ""
    FlowTap(Sink()).response(flow)  # type: ignore[arg-type]
    assert flow.comment == (
        f'conversation turn 2 ("{SECOND}"): turn 1, openai-chat, tools called: cancel_order'
    )


def test_a_one_turn_flow_has_no_turn_in_its_comment_or_view() -> None:
    flow = trace_flows(replace(support_trace(), conversation=None), "s.trace.yaml")[0]
    assert flow.comment == "turn 1, openai-chat, tools called: lookup_order"
    assert CONVERSATION_TURN not in flow.metadata


# -- verdicts: text, JUnit, pytest, the run record ---------------------------------------------


def _turn(number: int, message: str, failures: list[Failure], **extra: Any) -> dict[str, Any]:
    return {
        "turn": number,
        "message": message,
        "step": number,
        "simulated": False,
        "model_calls": 1,
        "status": None,
        "ended": True,
        "passed": not failures,
        "failures": [failure.to_json() for failure in failures],
        **extra,
    }


def failing_in_turn_two(root: Path) -> FlowResult:
    failure = Failure(f'conversation turn 2 ("{SECOND}"): no call to cancel_order', 12, 2)
    result = FlowResult("support", root / "s.flow.yaml", "replay", root / "s.trace.yaml")
    result.failures = [failure]
    result.conversation = [_turn(1, FIRST, []), _turn(2, SECOND, [failure])]
    return result


def test_the_verdict_line_says_which_turns_passed_and_which_failed(tmp_path: Path) -> None:
    lines = verdict_line(failing_in_turn_two(tmp_path)).splitlines()
    assert lines[0].startswith(f'FAIL: support - conversation turn 2 ("{SECOND}")')
    assert lines[-1] == f'    turns: 1 passed, 1 failed (conversation turn 2 ("{SECOND}"))'


def test_a_failure_of_turn_two_is_never_said_of_turn_one(tmp_path: Path) -> None:
    """The turn that failed is read from the failure's turn, not from where it stands."""
    result = failing_in_turn_two(tmp_path)
    assert result.conversation is not None
    result.conversation.reverse()  # turn 2's verdict listed first
    line = turns_line(result)
    assert line == f'turns: 1 passed, 1 failed (conversation turn 2 ("{SECOND}"))'
    assert FIRST not in line


def test_a_whole_conversation_failure_and_a_failure_before_any_turn(tmp_path: Path) -> None:
    result = failing_in_turn_two(tmp_path)
    result.failures = [Failure("reply contains cancelled", 9)]
    result.conversation = [_turn(1, FIRST, []), _turn(2, SECOND, [])]
    assert (
        turns_line(result)
        == "turns: 2 passed, 0 failed (no turn failed: the failure is the flow's)"
    )
    result.conversation = []
    assert turns_line(result) == "turns: none was sent (the failure came before the first)"
    result.failures = []
    assert turns_line(result) is None  # a passing flow: nothing to say


def test_junit_leads_the_message_with_the_failed_turn_and_lists_every_turn(
    tmp_path: Path,
) -> None:
    result = failing_in_turn_two(tmp_path)
    failure = ET.fromstring(junit_xml([result], tmp_path, elapsed_s=0.0)).find(".//failure")
    assert failure is not None
    message = failure.get("message", "")
    assert message.splitlines()[0] == (
        f'turns: 1 passed, 1 failed (conversation turn 2 ("{SECOND}"))'
    )
    assert (failure.text or "").splitlines()[-2:] == [
        f'conversation turn 1 ("{FIRST}"): passed, 1 model call(s)',
        f'conversation turn 2 ("{SECOND}"): failed, 1 model call(s)',
    ]
    cases = ET.fromstring(junit_xml([result], tmp_path, elapsed_s=0.0)).iter("testcase")
    assert len(list(cases)) == 1  # the flow is the test; its turns are named in it


def test_junit_of_a_one_turn_flow_is_as_before(tmp_path: Path) -> None:
    result = failing_in_turn_two(tmp_path)
    result.conversation = None
    failure = ET.fromstring(junit_xml([result], tmp_path, elapsed_s=0.0)).find(".//failure")
    assert failure is not None
    assert failure.get("message") == failure.text == result.failure_texts[0]


def test_turn_rows_say_how_each_turn_went(tmp_path: Path) -> None:
    result = failing_in_turn_two(tmp_path)
    result.conversation = [_turn(1, FIRST, [], simulated=True, ended=False, status=500)]
    assert turn_rows(result) == [
        f'conversation turn 1 ("{FIRST}"): passed, 1 model call(s), simulated, did not end, '
        "HTTP 500"
    ]


SPEC = (
    HEAD
    + """\
steps:
  - user: My order 4711 has not arrived.
  - assert_tool_call: lookup_order
  - user: Then cancel it, please.
  - assert_tool_call: cancel_order
"""
)


def test_the_pytest_report_names_the_turn_and_points_at_its_user_step(tmp_path: Path) -> None:
    result = failing_in_turn_two(tmp_path)
    (tmp_path / "s.flow.yaml").write_text(SPEC)
    assert _report(result).splitlines()[:2] == [
        "flow 'support' failed",
        f'  turns: 1 passed, 1 failed (conversation turn 2 ("{SECOND}"))',
    ]
    assert _failure_line(result) == 12  # the failed step's own line first
    divergence = Failure(f'divergence in conversation turn 2 ("{SECOND}"), model call 1', None, 2)
    result.failures = [divergence]
    assert _failure_line(result) == 10  # no step line: the `user:` step that opened turn 2
    result.failures = [replace(divergence, turn=1)]
    assert _failure_line(result) == 8


def test_the_run_record_keeps_each_turns_verdict_and_audit_reads_an_older_one(
    tmp_path: Path,
) -> None:
    result = failing_in_turn_two(tmp_path)
    (tmp_path / "s.flow.yaml").write_text(SPEC)
    result.control = {"id": "sup.cancel", "verdict": "fail", "reason": "x"}
    record = RunRecord(tmp_path, [job(tmp_path, "s")])
    record.results = [result]
    path = record.write(1)
    assert path is not None
    document = json.loads(path.read_text())
    (row,) = document["flows"]
    assert [(turn["turn"], turn["passed"]) for turn in row["conversation"]] == [
        (1, True),
        (2, False),
    ]
    assert row["conversation"][1]["failures"][0]["turn"] == 2
    del row["conversation"]  # as a record written before turns were kept
    path.write_text(json.dumps(document))
    (failing,) = audit(tmp_path).failing
    assert failing["id"] == "sup.cancel"


def test_a_one_turn_flows_record_row_has_no_conversation_key(tmp_path: Path) -> None:
    result = failing_in_turn_two(tmp_path)
    result.conversation = None
    assert "conversation" not in flow_row(result, tmp_path)
