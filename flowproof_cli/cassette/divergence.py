"""Why a replayed request matched no recorded turn, explained from coarse to fine.

The first line answers in one sentence (protocol, model, tools offered, conversation shape,
then the first changed message, argument drift as a path); details follow. A byte diff of two
long prompts is unreadable; "you added a tool" is a one-line answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from flowproof_cli.canonical import parse_or
from flowproof_cli.cassette.diff import (
    MAX_SHOWN,
    FieldChange,
    changes,
    contrast,
    field_changes,
    side_by_side,
)
from flowproof_cli.cassette.turn import Turn
from flowproof_cli.dialects import ENDPOINT, dialect_named
from flowproof_cli.dialects.base import MessageOutline, RequestOutline
from flowproof_cli.quoting import looks_alike, named, unmasked

MAX_TEXT_SHOWN = 300  # plain message text is shown whole up to this many characters


#: The status of the answer that tells the agent its request matched no recorded turn.
DIVERGENCE_STATUS = 409


@dataclass(frozen=True)
class Divergence:
    turn: int  # 1-based recorded turn the request was compared with (0: none left)
    summary: str
    details: tuple[str, ...] = ()
    # Every changed field of the request, over canonical-request paths, with both values
    # whole: the message clips long values, `--json` must not. Not part of equality: two
    # reports are the same when they say the same.
    changes: tuple[FieldChange, ...] = field(default=(), compare=False)
    #: The agent's `product/version` recorded and replayed, when they differ (the summary
    #: then leads with it).
    agents: tuple[str, str] | None = field(default=None, compare=False)
    #: The conversation turn open when the request came (cassette/conversation.py); None in
    #: a one-turn flow.
    conversation_turn: int | None = None
    #: "user": a simulated user's call to the model (runner/simulated_user.py), not the
    #: agent's; None for the agent's calls.
    lane: str | None = None

    @property
    def message(self) -> str:
        return "\n".join((self.summary, *(f"  {line}" for line in self.details)))

    def to_json(self) -> dict[str, Any]:
        document = {
            "turn": self.turn,
            "summary": self.summary,
            "details": list(self.details),
            "message": self.message,
            "changes": [change.to_json() for change in self.changes],
        }
        if self.conversation_turn is not None:
            document["conversation_turn"] = self.conversation_turn
        if self.lane is not None:
            document["lane"] = self.lane
        if self.agents is not None:
            document["agent_changed"] = {"recorded": self.agents[0], "replayed": self.agents[1]}
        return document


Report = tuple[str, tuple[str, ...]]  # summary, details


def _headed(head: str, lines: list[str]) -> Report:
    """A summary that ends with the first line of a change; the rest become details."""
    first, *rest = lines or [""]
    return f"{head}{first}", tuple(rest)


def _argument_drift(recorded: MessageOutline, replayed: MessageOutline) -> list[str] | None:
    """`tool.path: recorded X, replayed Y` for tool calls whose arguments moved."""
    if len(recorded.tool_calls) != len(replayed.tool_calls):
        return None
    lines: list[str] = []
    for (r_name, r_args), (p_name, p_args) in zip(
        recorded.tool_calls, replayed.tool_calls, strict=True
    ):
        if r_name != p_name:
            lines.append(f"tool call changed: {contrast(r_name, p_name)[0]}")
            continue
        if r_args == p_args:
            continue
        r_json, p_json = parse_or(r_args), parse_or(p_args)
        if r_json is not None and p_json is not None and r_json != p_json:
            lines.extend(field_changes(r_json, p_json, prefix=r_name))
        elif max(len(r_args), len(p_args)) <= MAX_SHOWN:
            # Not JSON (or only spacing/key order moved): short payloads are shown whole.
            lines.append(f"{r_name} arguments: recorded {r_args!r}, replayed {p_args!r}")
        else:
            head, *rest = contrast(r_args, p_args)
            lines += [f"{r_name} arguments: {head}", *rest]
    return lines


def _message_changed(
    position: int, r_msg: MessageOutline, p_msg: MessageOutline, endpoint: str | None = None
) -> Report:
    # An endpoint's entries are the request fields holding what it asks (`input`).
    where = f"the {endpoint} `{r_msg.role}`" if endpoint else f"message {position} ({r_msg.role})"
    drift = _argument_drift(r_msg, p_msg) if r_msg.tool_calls or p_msg.tool_calls else None
    if drift:
        return _headed(f"tool-call arguments drifted in {where}: ", drift)
    if r_msg.content == p_msg.content and r_msg.tool_calls == p_msg.tool_calls:
        return _headed(f"{where} changed: ", field_changes(r_msg.raw, p_msg.raw, limit=5))
    if isinstance(r_msg.content, str) and isinstance(p_msg.content, str):
        details = side_by_side(r_msg.content, p_msg.content, MAX_TEXT_SHOWN)
    else:
        details = field_changes(r_msg.content, p_msg.content, prefix="content", limit=5)
    return f"{where} content changed", tuple(details)


@dataclass(frozen=True)
class Compared:
    """A replayed request beside the recorded turn it is compared with. The outlines are read
    only once the protocols agree (a request is outlined by its own dialect)."""

    recorded: Turn
    protocol: str
    request: dict[str, Any]

    @cached_property
    def old(self) -> RequestOutline:
        return dialect_named(self.protocol).outline(self.recorded.request)

    @cached_property
    def new(self) -> RequestOutline:
        return dialect_named(self.protocol).outline(self.request)


#: A check reports the difference it looks for, or None when it finds none.
Check = Callable[[Compared], Report | None]


def _protocol(c: Compared) -> Report | None:
    if c.recorded.protocol == c.protocol:
        return None
    return f"protocol changed: recorded {c.recorded.protocol}, replayed {c.protocol}", ()


def _model(c: Compared) -> Report | None:
    if c.old.model == c.new.model:
        return None
    return _headed("model changed: ", contrast(c.old.model, c.new.model))


def _tools(c: Compared) -> Report | None:
    old, new = c.old.tools, c.new.tools
    if old == new and list(old) == list(new):
        return None
    added, removed = sorted(set(new) - set(old)), sorted(set(old) - set(new))
    if added or removed:
        parts = [f"added {', '.join(map(unmasked, added))}"] if added else []
        parts += [f"removed {', '.join(map(unmasked, removed))}"] if removed else []
        return (
            f"tools offered changed: {'; '.join(parts)}",
            (
                *_look_alikes(added, removed),
                f"recorded: {_names(sorted(old))}",
                f"replayed: {_names(sorted(new))}",
            ),
        )
    changed = [name for name in old if old[name] != new[name]]
    if changed:
        name = changed[0]
        return (
            f"tools offered changed: the declaration of {name} changed",
            tuple(field_changes(old[name], new[name], prefix=name)),
        )
    return "tools offered changed: order of tools moved", ()


def _look_alikes(added: list[str], removed: list[str]) -> list[str]:
    """A tool offered under a name that only looks like a recorded one, by code point."""
    return [
        f"{named(name, was)} only looks like {named(was, name)}"
        for name in added
        for was in removed
        if looks_alike(name, was)
    ]


def _names(names: list[str]) -> str:
    """A list of names as Python prints it, each unmasked (a look-alike by its escape)."""
    return (
        "["
        + ", ".join(
            f"'{unmasked(name)}'" if name != unmasked(name) else repr(name) for name in names
        )
        + "]"
    )


def _shape(c: Compared) -> Report | None:
    old = [message.role for message in c.old.messages]
    new = [message.role for message in c.new.messages]
    if old == new:
        return None
    return "conversation shape changed", (f"recorded: {old}", f"replayed: {new}")


def _messages(c: Compared) -> Report | None:
    """The first message that changed (the shape check made both lists equally long)."""
    for position, (r_msg, p_msg) in enumerate(zip(c.old.messages, c.new.messages, strict=True)):
        if r_msg != p_msg or r_msg.raw != p_msg.raw:
            dialect = dialect_named(c.protocol)
            fields = getattr(dialect, "input_fields", ()) if dialect.kind == ENDPOINT else ()
            endpoint = dialect.name if r_msg.role in fields else None
            return _message_changed(position, r_msg, p_msg, endpoint)
    return None


def _parameters(c: Compared) -> Report | None:
    if c.old.parameters == c.new.parameters:
        return None
    return _headed(
        "request parameters changed: ", field_changes(c.old.parameters, c.new.parameters)
    )


#: Coarse to fine: the first check that finds a difference names the divergence.
CHECKS: tuple[Check, ...] = (_protocol, _model, _tools, _shape, _messages, _parameters)


def _compare(recorded: Turn, protocol: str, request: dict[str, Any]) -> Report:
    """The coarsest difference between the recorded turn and the request."""
    compared = Compared(recorded, protocol, request)
    for check in CHECKS:
        found = check(compared)
        if found is not None:
            return found
    return "request changed", tuple(field_changes(recorded.request, request))


def explain(turn_number: int, recorded: Turn, protocol: str, request: dict[str, Any]) -> Divergence:
    """Compare a replayed request with the recorded turn it most resembles."""
    summary, details = _compare(recorded, protocol, request)
    return Divergence(
        turn_number,
        f"turn {turn_number}: {summary}",
        details,
        tuple(changes(recorded.request, request)),
    )


def led_by_version(
    divergence: Divergence, turns: list[Turn], replayed: str | None, record_command: str
) -> Divergence:
    """The divergence led by the agent's version change, when the recorded turn it compared
    (of `turns`) and the request name different agents (`product/version`,
    match/agents.py): a new release of a coding CLI changes its requests, and that is the
    first thing to know. The coarsest difference follows as the first detail. Unchanged when
    either is not known, or both are the same, or no recorded turn was compared (an extra
    call)."""
    recorded = turns[divergence.turn - 1].agent if divergence.turn > 0 else None
    if recorded is None or replayed is None or recorded == replayed:
        return divergence
    _, _, said = divergence.summary.partition(": ")  # after "turn N"
    return Divergence(
        divergence.turn,
        f"turn {divergence.turn}: the agent changed version: recorded {recorded}, replayed "
        f"{replayed}; re-record ({record_command})",
        (said, *divergence.details),
        divergence.changes,
        (recorded, replayed),
    )


def _common_prefix(a: RequestOutline, b: RequestOutline) -> int:
    count = 0
    for left, right in zip(a.messages, b.messages, strict=False):
        if left != right or left.raw != right.raw:
            break
        count += 1
    return count


def nearest_turn(
    turns: list[Turn], candidates: list[int], protocol: str, request: dict[str, Any]
) -> int:
    """The candidate turn most like the request; ties go to the earliest."""
    dialect = dialect_named(protocol)
    new = dialect.outline(request)  # once, not once per candidate

    def score(position: int) -> tuple[int, int, int, int, int, int]:
        turn = turns[position]
        if turn.protocol != protocol:
            return (0, 0, 0, 0, 0, -position)
        old = dialect.outline(turn.request)
        return (
            1,
            int(old.model == new.model),
            int(set(old.tools) == set(new.tools)),
            _common_prefix(old, new),
            -abs(len(old.messages) - len(new.messages)),
            -position,
        )

    return max(candidates, key=score)
