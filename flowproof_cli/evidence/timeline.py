"""A trace as a readable timeline (`flowproof show`): what was sent, what came back, in order.

    turn 2: openai-chat, model gpt-4o-mini, the same tools
      get_weather result: {"city": "Nairobi", "forecast": "sunny"}
      get_time result (mocked): {"now":"2026-01-01T09:00:00Z"}
      reply: The weather in Nairobi is sunny.

Each model turn shows only the messages that are new since the earlier turn it continues
(the one sharing the longest history with it), so a long conversation reads once. The model's
answers are shown as answers: an echo of one in a later request is not repeated. MCP lanes
follow the model turns, one server at a time, calls in arrival order with the server's own
notifications and requests where they crossed; a trace holds no clock to interleave them
with model turns. Blocked egress comes last.

A conversation's trace reads turn by turn: each conversation turn is a heading with its
message (`conversation turn 2 (simulated): "..."`), its model calls under it by the tag the
call was recorded with (never by position, so a call of turn 2 is never shown under turn 1),
each turn's last answer as its `reply`; the simulated user's lane is listed after them.
"""

from __future__ import annotations

from typing import Any

from flowproof_cli.cassette.conversation import UserCall, turn_label
from flowproof_cli.cassette.diff import show
from flowproof_cli.dialects.base import MessageOutline
from flowproof_cli.evidence.trace_view import (
    TurnView,
    echoes_output,
    is_result_part,
    is_text,
    text_of,
    tool_results,
    trajectory_of,
    turn_views,
)
from flowproof_cli.mcp.lane import Call, Lane, ServerEvent
from flowproof_cli.quoting import quoted
from flowproof_cli.trace import Trace

SHOWN = 200  # characters of one value shown on a timeline line


def timeline(trace: Trace, source: str) -> list[str]:
    """Every line of the timeline; raises TraceError naming `source` for a turn it cannot read."""
    views = turn_views(trace, source)
    lines = [f"{source}: {trace.flow}"]
    if trace.mocks:
        lines.append(f"mocked tools: {', '.join(sorted(trace.mocks))}")
    if trace.match:
        lines.append(f"match rules in force: {len(trace.match)}")
    if not views and trace.conversation is None:
        lines.append("no model turns")
    if trace.conversation is not None:
        lines.extend(_conversation(trace, views))
    else:
        lines.extend(_calls(trace, views, views, []))
    for server in sorted(trace.mcp):
        lines.extend(_lane(server, trace.mcp[server]))
    lines.extend(_egress(trace.egress_blocked))
    return lines


def _calls(
    trace: Trace,
    views: list[TurnView],
    every: list[TurnView],
    chat: list[TurnView],
    *,
    numbered: bool = False,
) -> list[str]:
    """`views` as headings with their new messages and answers. `every`: all the trace's
    calls (tool call names are looked up there); `chat`: the chat calls shown so far, which
    grows (a call shows only what is new since the one it continues); `numbered`: headed by
    their position in their conversation turn (`model call 2 (trace turn 5)`)."""
    reply = trajectory_of(views).main_thread
    reply_turn = reply[-1].turn if reply and not reply[-1].tool_calls else None
    names = {
        call.call_id: call.name
        for view in every
        if view.answer is not None
        for call in view.answer.tool_calls
    }
    lines: list[str] = []
    for position, view in enumerate(views, start=1):
        heading = _heading(view, chat[-1] if chat else None)
        if numbered:
            heading = heading.replace(
                f"turn {view.number}:", f"model call {position} (trace turn {view.number}):", 1
            )
        lines.append(heading)
        if (fault := trace.turns[view.number - 1].fault) is not None:
            lines.extend(_indent([f"fault: {fault}"]))
        if view.is_endpoint:
            asked = (
                view.endpoint.asked
                if view.endpoint
                else _value([m.content for m in view.outline.messages])
            )
            lines.extend(_indent([f"asked: {show(asked, SHOWN)}"]))
            lines.extend(_indent(_answer(view, reply_turn)))
            continue
        sent = _new_messages(view, chat)
        chat.append(view)
        lines.extend(_indent(line for message in sent for line in _message(message, names, trace)))
        lines.extend(_indent(_answer(view, reply_turn)))
    return lines


def _conversation(trace: Trace, views: list[TurnView]) -> list[str]:
    """The model calls under the conversation turn each was recorded in, then the user lane."""
    conversation = trace.conversation
    assert conversation is not None
    tags = [trace.turns[view.number - 1].conversation_turn for view in views]
    numbers = sorted(
        set(range(1, len(conversation.messages) + 1)) | {tag for tag in tags if tag is not None}
    )
    lines = [f"conversation: {len(conversation.messages)} turn(s)"]
    chat: list[TurnView] = []
    groups: list[tuple[int | None, str]] = []
    if None in tags:  # a hand-edited trace: shown, never put under a turn
        groups.append((None, "calls outside any conversation turn:"))
    groups.extend((number, _turn_heading(trace, number)) for number in numbers)
    for tagged, heading in groups:
        mine = [view for view, tag in zip(views, tags, strict=True) if tag == tagged]
        if tagged == 0 and not mine:
            continue
        lines.append(heading)
        body = _calls(trace, mine, views, chat, numbered=True) if mine else ["no model calls"]
        lines.extend(_indent(body))
    if conversation.user:
        lines.append(f"simulated user: {len(conversation.user)} call(s) to the model")
        lines.extend(_indent(_user_call(n, call) for n, call in enumerate(conversation.user, 1)))
    return lines


def _turn_heading(trace: Trace, number: int) -> str:
    """`conversation turn 2: "Then cancel it, please."`, `(simulated)` when it was."""
    conversation = trace.conversation
    assert conversation is not None
    if number == 0:
        return f"{turn_label(0, None)}:"
    message = conversation.message(number)
    simulated = number <= len(conversation.simulated) and conversation.simulated[number - 1]
    said = f' "{quoted(message, SHOWN)}"' if message is not None else " (no message recorded)"
    return f"conversation turn {number}{' (simulated)' if simulated else ''}:{said}"


def _user_call(number: int, call: UserCall) -> str:
    return f"{number}. for user step {call.step} ({call.protocol}): {show(call.answer, SHOWN)}"


def _indent(lines: Any) -> list[str]:
    return [f"  {line}" for line in lines]


def _heading(view: TurnView, previous: TurnView | None) -> str:
    outline = view.outline
    if view.is_endpoint:  # a call around the conversation, not a turn of it
        return f"turn {view.number}: {view.protocol} (endpoint), model {show(outline.model)}"
    tools = list(outline.tools)
    if previous is not None and list(previous.outline.tools) == tools:
        offered = "the same tools"
    elif tools:
        offered = f"{len(tools)} tool(s) offered ({', '.join(tools)})"
    else:
        offered = "no tools"
    return f"turn {view.number}: {view.protocol}, model {show(outline.model)}, {offered}"


def _same(left: MessageOutline, right: MessageOutline) -> bool:
    return left == right and left.raw == right.raw


def _shared(view: TurnView, earlier: TurnView) -> int:
    """How many leading messages the two requests have in common."""
    count = 0
    for left, right in zip(view.outline.messages, earlier.outline.messages, strict=False):
        if not _same(left, right):
            break
        count += 1
    return count


def _new_messages(view: TurnView, earlier: list[TurnView]) -> list[MessageOutline]:
    """The messages after the longest history this request shares with an earlier one,
    less echoes of answers already shown."""
    start = max((_shared(view, other) for other in earlier), default=0)
    answers = [other.answer for other in earlier if other.answer is not None]
    return [m for m in view.outline.messages[start:] if not echoes_output(m, answers)]


def _message(message: MessageOutline, names: dict[str | None, str], trace: Trace) -> list[str]:
    """A sent message as lines: its text by role, each tool result by tool, mocked marked."""
    results = tool_results(message)
    if not results:
        return [f"{message.role}: {_value(message.content)}"]
    lines = []
    for call_id, name, content in results:
        # Ids and names as text only: a hand-edited trace may hold any JSON there.
        known = names.get(call_id) if isinstance(call_id, str) else None
        tool = (name if isinstance(name, str) else None) or known or "tool"
        mocked = " (mocked)" if tool in trace.mocks else ""
        lines.append(f"{tool} result{mocked}: {_value(content)}")
    parts = message.content if isinstance(message.content, list) else []
    rest = [part for part in parts if not is_result_part(part)]
    if rest:
        lines.append(f"{message.role}: {_value(rest)}")
    return lines


def _value(content: Any) -> str:
    return show(text_of(content) if is_text(content) else content, SHOWN)


def _answer(view: TurnView, reply_turn: int | None) -> list[str]:
    """What the model answered: tool calls with their arguments, text, or an error status;
    for an endpoint call, what came back."""
    if view.endpoint is not None:
        return [f"<- {show(view.endpoint.answered, SHOWN)}"]
    if view.answer is None:
        return [f"answered status {view.status}: {show(view.response, SHOWN)}"]
    lines = [f"-> {call.name} {show(call.raw_arguments, SHOWN)}" for call in view.answer.tool_calls]
    if view.answer.text:
        label = "reply" if view.number == reply_turn else "assistant"
        lines.append(f"{label}: {show(view.answer.text, SHOWN)}")
    return lines or ["(an empty answer)"]


def _lane(server: str, lane: Lane) -> list[str]:
    """One MCP server's calls in order, each server message placed where it crossed."""
    lines = [f"mcp {server}: {len(lane.calls)} call(s)"]
    first = [e for e in lane.server if e.during is None and e.after == 0]
    lines.extend(_indent(f"before any call: {_event(event)}" for event in first))
    for number, call in enumerate(lane.calls, start=1):
        lines.extend(_indent(_call(number, call)))
        during = [event for event in lane.server if event.during == number]
        lines.extend(_indent(f"   during call {number}: {_event(event)}" for event in during))
        after = [e for e in lane.server if e.during is None and e.after == number]
        lines.extend(_indent(f"after {number} call(s): {_event(event)}" for event in after))
    late = [e for e in lane.server if e.during is None and e.after > len(lane.calls)]
    lines.extend(_indent(f"after {event.after} call(s): {_event(event)}" for event in late))
    return lines


def _call(number: int, call: Call) -> list[str]:
    arguments = call.params.get("arguments") if call.tool and call.params else call.params
    head = f"{number}. {call.label()}"
    if arguments is not None:
        head += f" {show(arguments, SHOWN)}"
    if call.mocked:
        head += " (mocked)"
    if call.conversation_turn is not None:
        head += f" (conversation turn {call.conversation_turn})"
    lines = [head]
    if call.error is not None:
        lines.append(f"   error: {show(call.error, SHOWN)}")
    elif call.answered:
        lines.append(f"   result: {show(call.result, SHOWN)}")
    else:
        lines.append("   never answered")
    return lines


def _event(event: ServerEvent) -> str:
    kind = "request" if event.request is not None else "notification"
    params = event.message.get("params")
    text = f"{kind} {event.method}" + (f" {show(params, SHOWN)}" if params is not None else "")
    if event.answer is not None:
        text += f", answered {show(event.answer, SHOWN)}"
    return text


def _egress(blocked: list[dict[str, Any]]) -> list[str]:
    if not blocked:
        return []
    rows = [
        f"{item['destination']} {item['protocol']}, {item['at_ms']} ms after the agent started"
        for item in blocked
    ]
    return [f"egress blocked: {len(blocked)} destination(s)", *_indent(rows)]
