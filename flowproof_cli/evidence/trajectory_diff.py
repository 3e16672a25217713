"""What changed between two recordings of one flow: the diff a reviewer approves at a re-record.

    what the agent did differently:
      tool calls: search_flights, create_booking -> search_flights, check_visa, create_booking
        + check_visa: call 2, new
      create_booking.flight.id: KQ311 -> KQ999 (asserted)
      model calls: 2 -> 3
      reply: Booked. -> Booked KQ999.
    what it was told differently:
      model: gpt-4o-mini -> gpt-4o
      tools offered:
        + check_visa

The calls and argument paths the spec asserts are marked: those are the intent a reviewer
defends; the rest the trace merely happens to pin. Values minted anew on every recording
(response, call and tool-use ids; `created` and usage, which live only in responses) are not
compared, so a re-record that differs in nothing else is "trajectory unchanged". Output is
deterministic: the same two traces give the same lines.

Two recordings of a conversation are also compared turn by turn: a turn's message changed,
a turn added or no longer reached (`what it was told`), a tool call made in another turn, a
turn's model calls or its reply changed (`what the agent did`), each named by its turn.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flowproof_cli.canonical import canonical_json
from flowproof_cli.cassette.conversation import turn_label
from flowproof_cli.cassette.diff import FieldChange, changes, first_difference, line_diff, window
from flowproof_cli.cassette.diff import show as _show
from flowproof_cli.dialects.base import MessageOutline
from flowproof_cli.evidence.trace_view import (
    SYSTEM_ROLES,
    TurnView,
    echoes_output,
    is_result_part,
    is_text,
    system_prompt,
    text_of,
    tool_results,
    trajectory_of,
    turn_views,
    without_minted,
)
from flowproof_cli.mcp.lane import Lane
from flowproof_cli.quoting import looks_alike, named, unmasked
from flowproof_cli.trace import Trace
from flowproof_cli.trajectory import EndpointCall, ToolCall

if TYPE_CHECKING:
    from flowproof_cli.spec import FlowSpec

UNCHANGED = "trajectory unchanged"
MAX_SHOWN = 80  # characters of a value shown whole on one line
ASSERTED = " (asserted)"


@dataclass(frozen=True)
class Intent:
    """What the spec asserts: the tools its steps name and the argument paths they read."""

    tools: frozenset[str] = frozenset()
    paths: frozenset[tuple[str, str]] = frozenset()  # (tool, dotted path of a where clause)

    def tool_mark(self, tool: str) -> str:
        return ASSERTED if tool in self.tools else ""

    def path_mark(self, tool: str, path: str) -> str:
        """Marked when the changed path is an asserted one, inside one, or contains one."""
        for name, asserted in self.paths:
            if name == tool and (
                path == asserted
                or path.startswith(f"{asserted}.")
                or asserted.startswith(f"{path}.")
                or path == "(root)"
            ):
                return ASSERTED
        return ""


def intent_of(spec: FlowSpec) -> Intent:
    """The tools `assert_tool_call` / `assert_no_tool_call` name, and their clauses' paths."""
    from flowproof_cli.spec.steps import NoToolCallStep, ToolCallStep  # noqa: PLC0415

    tools: set[str] = set()
    paths: set[tuple[str, str]] = set()
    for step in spec.steps:
        if isinstance(step, ToolCallStep | NoToolCallStep):
            assertion = step.assertion
            tools.add(assertion.tool)
            paths.update((assertion.tool, clause.path_text) for clause in assertion.clauses)
    return Intent(frozenset(tools), frozenset(paths))


@dataclass(frozen=True)
class TrajectoryDiff:
    did: tuple[str, ...]  # what the agent did differently
    told: tuple[str, ...]  # what it was told differently

    @property
    def unchanged(self) -> bool:
        return not self.did and not self.told

    def lines(self) -> list[str]:
        """The two sections, each line indented under its heading, or `trajectory unchanged`."""
        if self.unchanged:
            return [UNCHANGED]
        return [
            "what the agent did differently:",
            *_indent(self.did or ("nothing",)),
            "what it was told differently:",
            *_indent(self.told or ("nothing",)),
        ]


def diff_traces(
    old: Trace,
    new: Trace,
    intent: Intent | None = None,
    *,
    old_source: str = "the old trace",
    new_source: str = "the new trace",
) -> TrajectoryDiff:
    """Compare two traces as stored. Raises TraceError naming a source it cannot outline."""
    intent = intent or Intent()
    old_views, new_views = turn_views(old, old_source), turn_views(new, new_source)
    did = _did(old, new, old_views, new_views, intent)
    told = _told(old, new, old_views, new_views, intent)
    return TrajectoryDiff(tuple(did), tuple(told))


# -- what the agent did --------------------------------------------------------------------


def _did(
    old: Trace, new: Trace, old_views: list[TurnView], new_views: list[TurnView], intent: Intent
) -> list[str]:
    before, after = trajectory_of(old_views), trajectory_of(new_views)
    old_calls, new_calls = before.tool_calls, after.tool_calls
    sequence = _sequence(
        [call.name for call in old_calls], [call.name for call in new_calls], intent.tool_mark
    )
    lines: list[str] = []
    if sequence.lines:
        lines.append(f"tool calls: {_names(old_calls, intent)} -> {_names(new_calls, intent)}")
        lines.extend(_indent(sequence.lines))
    lines.extend(_argument_lines(old_calls, new_calls, sequence.pairs, intent))
    lines.extend(_endpoint_lines(before.endpoint_calls, after.endpoint_calls))
    if len(old.turns) != len(new.turns):
        lines.append(f"model calls: {len(old.turns)} -> {len(new.turns)}")
    if old.conversation is not None or new.conversation is not None:
        moved = _moved_between_turns((old, old_views), (new, new_views), new_calls, sequence.pairs)
        lines.extend(moved)
        lines.extend(_per_turn(old, new, old_views, new_views))
    elif before.reply != after.reply:
        lines.extend(arrow("reply", before.reply, after.reply))
    lines.extend(_mcp_lines(old.mcp, new.mcp))
    lines.extend(_egress_lines(old.egress_blocked, new.egress_blocked))
    return lines


def _endpoint_lines(old: list[EndpointCall], new: list[EndpointCall]) -> list[str]:
    """Endpoint calls (embeddings, token counts, ...) added, no longer made or moved, by
    endpoint; what each asked is compared with the messages (`what it was told`)."""
    before, after = [call.protocol for call in old], [call.protocol for call in new]
    sequence = _sequence(before, after, lambda _: "")
    if not sequence.lines:
        return []
    shown = f"{', '.join(before) or '(none)'} -> {', '.join(after) or '(none)'}"
    return [f"endpoint calls: {shown}", *_indent(sequence.lines)]


def _names(calls: list[ToolCall], intent: Intent) -> str:
    return (
        ", ".join(unmasked(call.name) + intent.tool_mark(call.name) for call in calls) or "(none)"
    )


@dataclass(frozen=True)
class _Sequence:
    lines: list[str]
    pairs: list[tuple[int, int]]  # (old index, new index) of the same call on both sides


def _sequence(old: list[str], new: list[str], mark: Callable[[str], str]) -> _Sequence:
    """Calls added (+), no longer made (-) and moved (*), by name, in a stable order."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    pairs: list[tuple[int, int]] = []
    removed: list[int] = []
    added: list[int] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs.extend(zip(range(i1, i2), range(j1, j2), strict=True))
        else:
            removed.extend(range(i1, i2))
            added.extend(range(j1, j2))
    moved: list[tuple[int, int]] = []
    for i in list(removed):  # a name that left one place and arrived at another moved
        j = next((j for j in added if new[j] == old[i]), None)
        if j is not None:
            removed.remove(i)
            added.remove(j)
            moved.append((i, j))
    gone, came = [old[i] for i in removed], [new[j] for j in added]
    entries = [
        (i, 0, f"- {_beside(old[i], came)}{mark(old[i])}: call {i + 1}, no longer made")
        for i in removed
    ]
    entries += [
        (j, 1, f"* {unmasked(new[j])}{mark(new[j])}: moved from call {i + 1} to call {j + 1}")
        for i, j in moved
    ]
    entries += [
        (j, 2, f"+ {_beside(new[j], gone)}{mark(new[j])}: call {j + 1}, new") for j in added
    ]
    return _Sequence(
        [text for *_, text in sorted(entries)], sorted([*pairs, *moved], key=lambda p: p[1])
    )


def _call_label(calls: list[ToolCall], index: int) -> str:
    """`get_weather`, or `get_weather[2]` for the second of several calls of one tool."""
    name = calls[index].name
    same = [n for n, call in enumerate(calls) if call.name == name]
    return name if len(same) == 1 else f"{name}[{same.index(index) + 1}]"


def _argument_lines(
    old: list[ToolCall], new: list[ToolCall], pairs: list[tuple[int, int]], intent: Intent
) -> list[str]:
    """Argument changes of the calls made on both sides, as paths under the call."""
    lines: list[str] = []
    for i, j in pairs:
        before, after = old[i], new[j]
        if before.raw_arguments == after.raw_arguments:
            continue
        label = _call_label(new, j)
        if not (before.arguments_are_json and after.arguments_are_json):
            lines.extend(arrow(f"{label} arguments", before.raw_arguments, after.raw_arguments))
        elif before.arguments == after.arguments:
            lines.append(f"{label}: the same arguments, spaced or ordered differently")
        else:
            for change in changes(before.arguments, after.arguments):
                mark = intent.path_mark(after.name, change.path)
                lines.extend(_change_lines(label, change, mark))
    return lines


def _mcp_lines(old: dict[str, Lane], new: dict[str, Lane]) -> list[str]:
    """MCP calls per server: added, no longer made, moved (in the lane, or to another
    conversation turn), and their changed params."""
    lines: list[str] = []
    for server in sorted(set(old) | set(new)):
        if server not in new:
            lines.append(f"mcp {server}: no longer in the trace (it had {_count(old[server])})")
            continue
        if server not in old:
            lines.append(f"mcp {server}: new server ({_count(new[server])})")
            continue
        before, after = old[server].calls, new[server].calls
        sequence = _sequence(
            [call.label() for call in before], [call.label() for call in after], lambda _: ""
        )
        if sequence.lines:
            lines.append(f"mcp {server} calls: {len(before)} -> {len(after)}")
            lines.extend(_indent(sequence.lines))
        for i, j in sequence.pairs:
            label = f"mcp {server} {after[j].label()}"
            was, now = before[i].conversation_turn, after[j].conversation_turn
            if was is not None and now is not None and was != now:
                lines.append(f"{label}: call {j + 1} moved from conversation turn {was} to {now}")
            for change in changes(before[i].params, after[j].params):  # no ids are stored
                lines.extend(_change_lines(label, change, "", separator=": "))
    return lines


def _count(lane: Lane) -> str:
    return f"{len(lane.calls)} call(s)"


def _egress_lines(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    def destinations(items: list[dict[str, Any]]) -> list[str]:
        return _unique(f"{item['destination']} ({item['protocol']})" for item in items)

    before, after = destinations(old), destinations(new)
    lines = [f"egress blocked: - {item}, no longer tried" for item in before if item not in after]
    return lines + [f"egress blocked: + {item}, new" for item in after if item not in before]


# -- a conversation, turn by turn --------------------------------------------------------------


def _tag(trace: Trace, recorded: int) -> int | None:
    """The conversation turn of the trace's `recorded`-th call (1-based), None outside one."""
    return trace.turns[recorded - 1].conversation_turn if 0 < recorded <= len(trace.turns) else None


def _turn_name(trace: Trace, number: int | None) -> str:
    if number is None:
        return "no conversation turn"
    message = trace.conversation.message(number) if trace.conversation is not None else None
    return turn_label(number, message)


def _call_turns(trace: Trace, views: list[TurnView]) -> list[int | None]:
    """The conversation turn of each tool call of the trajectory, in its order."""
    answers = trajectory_of(views).turns
    return [_tag(trace, answer.turn) for answer in answers for _ in answer.tool_calls]


def _moved_between_turns(
    old_side: tuple[Trace, list[TurnView]],
    new_side: tuple[Trace, list[TurnView]],
    new_calls: list[ToolCall],
    pairs: list[tuple[int, int]],
) -> list[str]:
    """Tool calls made on both sides (`pairs` of their indexes), but in another turn."""
    (old, old_views), (new, new_views) = old_side, new_side
    old_turns, new_turns = _call_turns(old, old_views), _call_turns(new, new_views)
    lines = []
    for i, j in pairs:
        if old_turns[i] != new_turns[j]:
            lines.append(
                f"{_call_label(new_calls, j)}: made in {_turn_name(new, new_turns[j])}, "
                f"was in {_turn_name(old, old_turns[i])}"
            )
    return lines


def _views_by_turn(trace: Trace, views: list[TurnView]) -> dict[int | None, list[TurnView]]:
    grouped: dict[int | None, list[TurnView]] = {}
    for view in views:
        grouped.setdefault(_tag(trace, view.number), []).append(view)
    return grouped


def _per_turn(
    old: Trace, new: Trace, old_views: list[TurnView], new_views: list[TurnView]
) -> list[str]:
    """Each conversation turn's tool calls, model calls and reply, where they changed."""
    before, after = _views_by_turn(old, old_views), _views_by_turn(new, new_views)
    numbers = sorted(set(before) | set(after), key=lambda n: -1 if n is None else n)
    lines: list[str] = []
    for number in numbers:
        mine, theirs = before.get(number, []), after.get(number, [])
        name = _turn_name(new if number in after else old, number)
        calls = (
            [c.name for c in trajectory_of(mine).tool_calls],
            [c.name for c in trajectory_of(theirs).tool_calls],
        )
        if calls[0] != calls[1]:
            shown = [", ".join(map(unmasked, side)) or "(none)" for side in calls]
            lines.append(f"{name}: tool calls: {shown[0]} -> {shown[1]}")
        if len(mine) != len(theirs):
            lines.append(f"{name}: model calls: {len(mine)} -> {len(theirs)}")
        replies = trajectory_of(mine).reply, trajectory_of(theirs).reply
        if replies[0] != replies[1]:
            lines.extend(arrow(f"{name}: reply", *replies))
    return lines


def _conversation_lines(old: Trace, new: Trace) -> list[str]:
    """The user's side, turn by turn: a message changed, a turn added or no longer reached,
    a message now (or no longer) played by the simulated user."""
    if old.conversation is None and new.conversation is None:
        return []
    before = old.conversation.messages if old.conversation is not None else ()
    after = new.conversation.messages if new.conversation is not None else ()
    if old.conversation is None or new.conversation is None:
        shape = [f"{len(side)} turn(s)" if side else "a one-turn flow" for side in (before, after)]
        return [f"conversation: {shape[0]} -> {shape[1]}"]
    rows: list[str] = []
    for number in range(1, max(len(before), len(after)) + 1):
        was, now = old.conversation.message(number), new.conversation.message(number)
        if was is None and now is not None:
            rows.append(f"+ conversation turn {number}: {_quoted(now)}, new")
        elif now is None and was is not None:
            rows.append(f"- conversation turn {number}: {_quoted(was)}, no longer reached")
        elif was != now:
            rows.extend(arrow(f"~ conversation turn {number}", was, now))
        elif _simulated(old, number) != _simulated(new, number):
            said = "now" if _simulated(new, number) else "no longer"
            rows.append(f"~ conversation turn {number}: {said} the simulated user's")
    return ["conversation:", *_indent(rows)] if rows else []


def _quoted(text: str) -> str:
    return f'"{_show(text)}"'


def _simulated(trace: Trace, number: int) -> bool:
    flags = trace.conversation.simulated if trace.conversation is not None else ()
    return number <= len(flags) and flags[number - 1]


# -- what it was told ----------------------------------------------------------------------


def _told(
    old: Trace, new: Trace, old_views: list[TurnView], new_views: list[TurnView], intent: Intent
) -> list[str]:
    lines: list[str] = _conversation_lines(old, new)
    for label, values in (
        ("protocol", lambda views: _unique(view.protocol for view in views)),
        ("model", lambda views: _unique(_show(view.outline.model) for view in views)),
    ):
        before, after = values(old_views), values(new_views)
        if before != after:
            lines.append(f"{label}: {', '.join(before)} -> {', '.join(after)}")
    lines.extend(_tool_lines(_offered(old_views), _offered(new_views), intent))
    lines.extend(
        _paired(
            "system prompt",
            _unique(p for p in (system_prompt(view.outline) for view in old_views) if p),
            _unique(p for p in (system_prompt(view.outline) for view in new_views) if p),
            arrow,
        )
    )
    messages = _message_lines(_told_messages(old_views), _told_messages(new_views))
    if messages:
        lines.append("messages:")
        lines.extend(_indent(messages))
    lines.extend(
        _paired("request parameters", _parameters(old_views), _parameters(new_views), _changed)
    )
    for change in changes(old.mocks, new.mocks):
        lines.extend(_change_lines("mocks", change, ""))
    lines.extend(_match_lines(old.match, new.match))
    return lines


def _offered(views: list[TurnView]) -> dict[str, Any]:
    """Every tool offered in any turn, by name, as first declared."""
    tools: dict[str, Any] = {}
    for view in views:
        for name, declaration in view.outline.tools.items():
            tools.setdefault(name, declaration)
    return tools


def _tool_lines(old: dict[str, Any], new: dict[str, Any], intent: Intent) -> list[str]:
    added, removed = sorted(set(new) - set(old)), sorted(set(old) - set(new))
    rows = [f"+ {_beside(name, removed)}{intent.tool_mark(name)}" for name in added]
    rows += [f"- {_beside(name, added)}{intent.tool_mark(name)}" for name in removed]
    for name in sorted(set(old) & set(new)):
        if old[name] != new[name]:
            rows.append(f"~ {name}{intent.tool_mark(name)}: its declaration changed")
            for change in changes(old[name], new[name]):
                rows.extend(_indent(_change_lines(name, change, "")))
    return ["tools offered:", *_indent(rows)] if rows else []


def _beside(name: str, others: list[str]) -> str:
    """A tool name beside those on the other side: one that only looks like one of them is
    unmasked with its odd characters by code point, so `+` and `-` never print alike."""
    alike = next((other for other in others if looks_alike(name, other)), None)
    return named(name, alike) if alike is not None else unmasked(name)


def _told_messages(views: list[TurnView]) -> list[tuple[str, Any]]:
    """What the agent sent besides the system prompt, as (label, value): `user message`,
    `get_time result`. Each distinct entry once, in the order first sent (a request repeats
    the history before it). The model's own output echoed back is left out: the calls and
    the reply already compare it."""
    answers = [view.answer for view in views if view.answer is not None]
    names = {call.call_id: call.name for answer in answers for call in answer.tool_calls}
    seen: dict[str, tuple[str, Any]] = {}
    for view in views:
        for message in view.outline.messages:
            if message.role in SYSTEM_ROLES or echoes_output(message, answers):
                continue
            for label, value in _entries(message, names):
                seen.setdefault(canonical_json([label, value]), (label, value))
    return list(seen.values())


def _entries(message: MessageOutline, names: dict[str | None, str]) -> list[tuple[str, Any]]:
    """A message as compared: each tool result it carries by its tool, the rest by role."""
    results = tool_results(message)
    entries = [
        (f"{name or names.get(call_id) or 'tool'} result", without_minted(content))
        for call_id, name, content in results
    ]
    value: Any = message.content
    if results:
        parts = value if isinstance(value, list) else []
        value = [part for part in parts if not is_result_part(part)]
        if not value:
            return entries
    value = without_minted(value)
    if message.tool_calls:
        value = {"content": value, "tool_calls": [list(call) for call in message.tool_calls]}
    return [*entries, (f"{message.role} message", value)]


def _message_lines(old: list[tuple[str, Any]], new: list[tuple[str, Any]]) -> list[str]:
    """`~` changed, `-` no longer sent and `+` new entries, in conversation order. Only
    entries of one label (a user message, one tool's result) are compared as a change."""
    keys = ([canonical_json(item) for item in old], [canonical_json(item) for item in new])
    matcher = difflib.SequenceMatcher(None, *keys, autojunk=False)
    lines: list[str] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        removed, added = old[i1:i2], new[j1:j2]
        while removed and added and removed[0][0] == added[0][0]:
            (label, before), (_, after) = removed.pop(0), added.pop(0)
            if is_text(before) and is_text(after):
                lines.extend(arrow(f"~ {label}", text_of(before), text_of(after)))
            else:
                lines.extend(_changed(f"~ {label}", before, after))
        lines += [f"- {label}: {_brief(value)}" for label, value in removed]
        lines += [f"+ {label}: {_brief(value)}" for label, value in added]
    return lines


def _parameters(views: list[TurnView]) -> list[Any]:
    """The distinct sampling parameters (temperature, tool_choice, ...), ids left out."""
    found: dict[str, Any] = {}
    for view in views:
        parameters = without_minted(view.outline.parameters)
        found.setdefault(canonical_json(parameters), parameters)
    return list(found.values())


def _match_lines(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    before = [canonical_json(rule) for rule in old]
    after = [canonical_json(rule) for rule in new]
    lines = [f"match rules: - {rule}" for rule in before if rule not in after]
    return lines + [f"match rules: + {rule}" for rule in after if rule not in before]


# -- rendering values ----------------------------------------------------------------------


def _indent(lines: Iterable[str]) -> list[str]:
    return [f"  {line}" for line in lines]


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _shown(value: Any) -> str:
    return "(none)" if value is None else _show(value)


def _brief(value: Any) -> str:
    return _show(text_of(value)) if is_text(value) else _show(value)


def _where(at: int, old: int, new: int, unit: str) -> str:
    if old == new:
        return f"differs at {unit} {at} of {old}"
    return f"differs at {unit} {at} ({old} -> {new} {unit}s)"


def _too_long(text: str) -> bool:
    return len(text.replace("\n", "\\n")) > MAX_SHOWN


def arrow(label: str, old: Any, new: Any) -> list[str]:
    """`label: OLD -> NEW`. A long string is shown as a window around its first difference,
    multi-line text as its changed lines, numbered (`-` old, `+` new)."""
    if not (isinstance(old, str) and isinstance(new, str)) or not (
        _too_long(old) or _too_long(new)
    ):
        return [f"{label}: {_shown(old)} -> {_shown(new)}"]
    if "\n" in old or "\n" in new:
        old_lines, new_lines = old.split("\n"), new.split("\n")
        pairs = enumerate(zip(old_lines, new_lines, strict=False))
        at = next((n for n, (a, b) in pairs if a != b), min(len(old_lines), len(new_lines))) + 1
        body = [_relabel(line) for line in line_diff(old, new)[1:]]
        return [f"{label}: {_where(at, len(old_lines), len(new_lines), 'line')}", *_indent(body)]
    at = first_difference(old, new)
    where = _where(at, len(old), len(new), "char")
    return [f"{label}: {where}: {window(old, at)} -> {window(new, at)}"]


def _relabel(line: str) -> str:
    """The line diff's cap notes speak of a replay; here the sides are the old and new trace."""
    if line.lstrip().startswith("... "):
        return line.replace(" recorded ", " old ").replace(" replayed ", " new ")
    return line


def _change_lines(prefix: str, change: FieldChange, mark: str, separator: str = ".") -> list[str]:
    """One changed path under `prefix`: `prefix.path: OLD -> NEW`, added or removed."""
    path = prefix if change.path == "(root)" else f"{prefix}{separator}{change.path}"
    if change.kind == "added":
        return [f"{path}: added ({_shown(change.replayed)}){mark}"]
    if change.kind == "removed":
        return [f"{path}: removed (was {_shown(change.recorded)}){mark}"]
    head, *rest = arrow(path, change.recorded, change.replayed)
    return [head + mark, *rest]


def _changed(label: str, old: Any, new: Any) -> list[str]:
    """Two structured values as their changed paths under `label`."""
    return [line for change in changes(old, new) for line in _change_lines(label, change, "", ": ")]


def _paired(
    label: str, old: list[Any], new: list[Any], describe: Callable[[str, Any, Any], list[str]]
) -> list[str]:
    """Distinct values compared position by position when both sides have as many, else
    listed as no longer sent (-) and new (+)."""
    if old == new:
        return []
    if len(old) == len(new):
        lines: list[str] = []
        for number, (before, after) in enumerate(zip(old, new, strict=True), start=1):
            if before != after:
                name = label if len(old) == 1 else f"{label} {number}"
                lines.extend(describe(name, before, after))
        return lines
    rows = [f"- {_brief(value)}" for value in old if value not in new]
    rows += [f"+ {_brief(value)}" for value in new if value not in old]
    return [f"{label}: {len(old)} distinct -> {len(new)} distinct", *_indent(rows)]
