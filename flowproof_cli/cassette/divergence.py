"""Why a replayed request matched no recorded turn, explained from coarse to fine.

The first line answers in one sentence (protocol, model, tools offered, conversation shape,
then the first changed message, argument drift as a path); details follow. A byte diff of two
long prompts is unreadable; "you added a tool" is a one-line answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from flowproof_cli.cassette.diff import field_changes, show
from flowproof_cli.cassette.turn import Turn
from flowproof_cli.dialects import Dialect, dialect_named
from flowproof_cli.dialects.base import MessageOutline, RequestOutline


@dataclass(frozen=True)
class Divergence:
    turn: int  # 1-based recorded turn the request was compared with (0: none left)
    summary: str
    details: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        return "\n".join((self.summary, *(f"  {line}" for line in self.details)))


def _parse(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _argument_drift(recorded: MessageOutline, replayed: MessageOutline) -> list[str] | None:
    """`tool.path: recorded X, replayed Y` for tool calls whose arguments moved."""
    if len(recorded.tool_calls) != len(replayed.tool_calls):
        return None
    lines: list[str] = []
    for (r_name, r_args), (p_name, p_args) in zip(
        recorded.tool_calls, replayed.tool_calls, strict=True
    ):
        if r_name != p_name:
            lines.append(f"tool call changed: recorded {r_name}, replayed {p_name}")
            continue
        if r_args == p_args:
            continue
        r_json, p_json = _parse(r_args), _parse(p_args)
        if r_json is None or p_json is None or r_json == p_json:
            # Not JSON (or only spacing/key order moved): show both payloads whole.
            lines.append(f"{r_name} arguments: recorded {r_args!r}, replayed {p_args!r}")
        else:
            lines.extend(field_changes(r_json, p_json, prefix=r_name))
    return lines


def _roles(outline: RequestOutline) -> list[str]:
    return [message.role for message in outline.messages]


def explain(turn_number: int, recorded: Turn, protocol: str, request: dict[str, Any]) -> Divergence:
    """Compare a replayed request with the recorded turn it most resembles."""
    here = f"turn {turn_number}"
    if recorded.protocol != protocol:
        return Divergence(
            turn_number,
            f"{here}: protocol changed: recorded {recorded.protocol}, replayed {protocol}",
        )
    dialect: Dialect = dialect_named(protocol)
    old, new = dialect.outline(recorded.request), dialect.outline(request)
    if old.model != new.model:
        return Divergence(
            turn_number,
            f"{here}: model changed: recorded {show(old.model)}, replayed {show(new.model)}",
        )
    if old.tools != new.tools or list(old.tools) != list(new.tools):
        added = sorted(set(new.tools) - set(old.tools))
        removed = sorted(set(old.tools) - set(new.tools))
        if added or removed:
            parts = [f"added {', '.join(added)}"] if added else []
            parts += [f"removed {', '.join(removed)}"] if removed else []
            return Divergence(
                turn_number,
                f"{here}: tools offered changed: {'; '.join(parts)}",
                (f"recorded: {sorted(old.tools)}", f"replayed: {sorted(new.tools)}"),
            )
        changed = [name for name in old.tools if old.tools[name] != new.tools[name]]
        if changed:
            name = changed[0]
            return Divergence(
                turn_number,
                f"{here}: tools offered changed: the declaration of {name} changed",
                tuple(field_changes(old.tools[name], new.tools[name], prefix=name)),
            )
        return Divergence(turn_number, f"{here}: tools offered changed: order of tools moved")
    if _roles(old) != _roles(new):
        return Divergence(
            turn_number,
            f"{here}: conversation shape changed",
            (f"recorded: {_roles(old)}", f"replayed: {_roles(new)}"),
        )
    for position, (r_msg, p_msg) in enumerate(zip(old.messages, new.messages, strict=True)):
        if r_msg == p_msg and r_msg.raw == p_msg.raw:
            continue
        drift = _argument_drift(r_msg, p_msg) if r_msg.tool_calls or p_msg.tool_calls else None
        if drift:
            return Divergence(
                turn_number,
                f"{here}: tool-call arguments drifted in message {position} ({r_msg.role}): "
                + drift[0],
                tuple(drift[1:]),
            )
        details: tuple[str, ...]
        if r_msg.content == p_msg.content and r_msg.tool_calls == p_msg.tool_calls:
            changes = field_changes(r_msg.raw, p_msg.raw, limit=5)
            return Divergence(
                turn_number,
                f"{here}: message {position} ({r_msg.role}) changed: {changes[0]}",
                tuple(changes[1:]),
            )
        if isinstance(r_msg.content, str) and isinstance(p_msg.content, str):
            details = (
                f"recorded: {show(r_msg.content, 300)}",
                f"replayed: {show(p_msg.content, 300)}",
            )
        else:
            details = tuple(field_changes(r_msg.content, p_msg.content, prefix="content", limit=5))
        return Divergence(
            turn_number, f"{here}: message {position} ({r_msg.role}) content changed", details
        )
    if old.parameters != new.parameters:
        changes = field_changes(old.parameters, new.parameters)
        return Divergence(
            turn_number, f"{here}: request parameters changed: {changes[0]}", tuple(changes[1:])
        )
    changes = field_changes(recorded.request, request)
    return Divergence(turn_number, f"{here}: request changed", tuple(changes))


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
