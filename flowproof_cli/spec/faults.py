"""The `faults:` key of a flow: each entry one fault at one named call of the recording.

    faults:
      - at: model call 2          # or `turn 2 model call 1`, or `mcp NAME call 2`
        answer: 429               # or stream, delay, malformed, connection (a model call)
        retry_after: 0.2          #    error, tool_error, crash, hang (an MCP call)
        times: 1

An entry holds `at`, exactly one fault kind and its options. Its shape is checked here, one
entry at a time; what needs the rest of the spec (a declared MCP server, the conversation's
turns, two faults at one call) is checked by `check_faults`, called from `FlowSpec`. Every
problem is a spec problem at the line of the key it is about. `FaultSpec.fault` is the plain
`Fault` every layer shares (faults/plan.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, Literal, Self

from pydantic import Field, PrivateAttr, model_validator

from flowproof_cli.faults.plan import (
    ANSWER,
    CRASH,
    CUT,
    DELAY,
    ERROR_EVENT,
    HANG,
    MALFORMED,
    MALFORMED_FORMS,
    MCP_ERROR,
    RESET,
    TOOL_ERROR,
    CallAt,
    Fault,
    call_at,
)
from flowproof_cli.spec.base import _Model
from flowproof_cli.spec.problems import spec_problem

#: The keys that name a fault's kind, by the boundary they apply to.
MODEL_FAULT_KEYS = ("answer", "stream", "delay", "malformed", "connection")
MCP_FAULT_KEYS = ("error", "tool_error", "crash", "hang")
FAULT_KEYS = (*MODEL_FAULT_KEYS, *MCP_FAULT_KEYS)
AT_FORMS = "`model call N`, `turn K model call N` or `mcp NAME call N`"
_STREAM = re.compile(r"(cut|error\s+event)\s+after\s+(\S+)\s+chunks?")
_NUMBER_WORD = re.compile(r"[0-9]+")


class McpErrorSpec(_Model):
    """The JSON-RPC error an MCP call answers with."""

    code: int = Field(description="The JSON-RPC error code, e.g. -32603.")
    message: str = Field(min_length=1, description="The error's message.")


class FaultSpec(_Model):
    """One fault: where (`at`) and exactly one kind, with its options."""

    at: str = Field(
        description=(
            "The call it hits: `model call N` (the flow's N-th distinct model call; a retry "
            "of the same request is not a new call), `turn K model call N` (within "
            "conversation turn K) or `mcp NAME call N` (server NAME's N-th `tools/call`)."
        )
    )
    answer: int | None = Field(
        default=None,
        ge=400,
        le=599,
        description="An HTTP error status (400..599), in the provider's own error shape.",
    )
    retry_after: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Seconds the `answer` tells the client to wait, as the provider sends it.",
    )
    times: int = Field(
        default=1,
        ge=1,
        description="Consecutive faulted attempts of the call before the recording serves it.",
    )
    stream: str | None = Field(
        default=None,
        description="`cut after N chunks` or `error event after N chunks` (a streamed call).",
        json_schema_extra={"pattern": r"^\s*(cut|error\s+event)\s+after\s+[0-9]+\s+chunks?\s*$"},
    )
    delay: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="Seconds before the recorded answer (the agent's own timeout under test).",
    )
    malformed: Literal["tool_arguments", "unknown_tool", "empty", "truncated", "refusal"] | None = (
        Field(default=None, description="A broken answer of this form.")
    )
    connection: Literal["reset"] | None = Field(
        default=None, description="`reset`: the connection closes without an answer."
    )
    error: McpErrorSpec | None = Field(
        default=None, description="`{code, message}`: the MCP call answers a JSON-RPC error."
    )
    tool_error: str | None = Field(
        default=None,
        min_length=1,
        description="The MCP call answers a tool result with `isError` and this text.",
    )
    crash: Literal[True] | None = Field(
        default=None,
        description="`crash: true` (or bare `crash:`): the MCP server exits (stdio) or drops "
        "the connection (HTTP).",
    )
    hang: Literal[True] | None = Field(
        default=None,
        description="`hang: true` (or bare `hang:`): the MCP call is never answered.",
    )

    _line: int | None = PrivateAttr(default=None)
    _kind_key: str = PrivateAttr(default="")

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            raise spec_problem(
                f"a fault is a mapping, got {type(value).__name__}. Fix: write e.g. "
                "`- at: model call 2` with `answer: 429` under it"
            )
        if "at" not in value:
            raise spec_problem(
                f"this fault has no `at`, so it names no call. Fix: add `at:` with {AT_FORMS}"
            )
        _check_at(value["at"])
        key = _kind_key(value)
        _check_value(key, value[key])
        _check_options(value, key)
        return value

    @model_validator(mode="after")
    def _remember_kind(self) -> Self:
        self._kind_key = next(key for key in FAULT_KEYS if key in self.model_fields_set)
        return self

    @property
    def line(self) -> int | None:
        return self._line

    @property
    def call(self) -> CallAt:
        found = call_at(" ".join(self.at.split()))
        assert found is not None  # checked by `_shape`
        return found

    @property
    def kind_key(self) -> str:
        """The key that names its kind, as written (`answer`, `stream`, ...)."""
        return self._kind_key

    @property
    def fault(self) -> Fault:
        """The plain fault every layer shares, with its spec line."""
        kind, value = self._kind_and_value()
        return Fault(self.call, kind, value, self.retry_after, self.times, line=self.line)

    def _kind_and_value(self) -> tuple[str, Any]:
        key = self._kind_key
        if key == "answer":
            return ANSWER, self.answer
        if key == "connection":
            return RESET, None
        if key == "delay":
            return DELAY, self.delay
        if key == "stream":
            match = _STREAM.fullmatch(" ".join(str(self.stream).split()))
            assert match is not None  # checked by `_shape`
            return (CUT if match.group(1) == "cut" else ERROR_EVENT), int(match.group(2))
        if key == "malformed":
            return MALFORMED, self.malformed
        if key == "error":
            assert self.error is not None
            return MCP_ERROR, {"code": self.error.code, "message": self.error.message}
        if key == "tool_error":
            return TOOL_ERROR, self.tool_error
        return (CRASH if key == "crash" else HANG), None


def _check_at(at: Any) -> None:
    text = " ".join(at.split()) if isinstance(at, str) else ""
    words = text.split()
    numbers = [words[-1]] if words else []
    if words[:1] == ["turn"] and len(words) > 1:
        numbers.append(words[1])
    found = call_at(text) if text else None
    readable = found is not None and all(_NUMBER_WORD.fullmatch(word) for word in numbers)
    if not readable or found is None or found.call < 1 or (found.turn or 1) < 1:
        raise spec_problem(
            f"cannot read `at: {at}`: write {AT_FORMS}, with N and K whole numbers from 1. "
            "Fix: e.g. `at: model call 2`",
            ("at",),
        )


def _kind_key(value: dict[str, Any]) -> str:
    """The one fault kind of an entry, or the problem of none or several."""
    keys = [key for key in FAULT_KEYS if key in value]
    if len(keys) == 1:
        return keys[0]
    if not keys:
        raise spec_problem(
            f"the fault `at: {value['at']}` says what happens there with no key. Fix: add one "
            f"of {', '.join(MODEL_FAULT_KEYS)} (a model call) or {', '.join(MCP_FAULT_KEYS)} "
            "(an MCP call), e.g. `answer: 429`",
            ("at",),
        )
    raise spec_problem(
        f"the fault `at: {value['at']}` has {len(keys)} kinds ({', '.join(keys)}); an entry "
        "holds one, and one call takes one fault. Fix: keep one of them",
        (keys[1],),
    )


def _check_value(key: str, value: Any) -> None:
    """The kind's own value, with the fix for that kind."""
    problem = None
    if key == "answer":
        if _whole(value) is None or not 400 <= value <= 599:
            problem = "must be an HTTP error status from 400 to 599. Fix: e.g. `answer: 429`"
    elif key == "stream":
        problem = _stream_problem(value)
    elif key == "delay":
        if _seconds(value) is None or value <= 0:
            problem = "must be a finite number of seconds > 0. Fix: e.g. `delay: 3`"
    elif key == "malformed":
        if value not in MALFORMED_FORMS:
            problem = f"must be one of {', '.join(MALFORMED_FORMS)}. Fix: e.g. " + (
                "`malformed: tool_arguments`"
            )
    elif key == "connection":
        if value != "reset":
            problem = "must be `reset` (the connection closes without an answer). Fix: " + (
                "`connection: reset`"
            )
    elif key == "error":
        problem = _error_problem(value)
    elif key == "tool_error":
        if not isinstance(value, str) or not value.strip():
            problem = "must be the text of the tool's error result. Fix: e.g. " + (
                "`tool_error: database unavailable`"
            )
    elif value is not None and value is not True:
        problem = f"turns the fault on with `{key}: true` (or a bare `{key}:`). Fix: " + (
            f"write `{key}: true`, or remove the entry to have no fault"
        )
    if problem is not None:
        raise spec_problem(f"`{key}: {_written(value)}` {problem}", (key,))


def _stream_problem(value: Any) -> str | None:
    match = _STREAM.fullmatch(" ".join(value.split())) if isinstance(value, str) else None
    if match is not None and _NUMBER_WORD.fullmatch(match.group(2)) and int(match.group(2)) >= 1:
        return None
    return (
        "must be `cut after N chunks` or `error event after N chunks`, N a whole number from "
        "1 (for no answer at all, `connection: reset`). Fix: e.g. `stream: cut after 4 chunks`"
    )


def _error_problem(value: Any) -> str | None:
    if (
        isinstance(value, dict)
        and _whole(value.get("code")) is not None
        and isinstance(value.get("message"), str)
        and value["message"].strip()
    ):
        return None
    return (
        "must be a mapping `{code: INTEGER, message: TEXT}`. Fix: e.g. "
        "`error: {code: -32603, message: database unavailable}`"
    )


def _check_options(value: dict[str, Any], key: str) -> None:
    """`retry_after` (with `answer` only) and `times`."""
    if "retry_after" in value:
        if key != "answer":
            raise spec_problem(
                f"`retry_after` goes with `answer` (the status that carries it), and this "
                f"fault is `{key}`. Fix: remove `retry_after`, or fault the call with "
                "`answer: 429`",
                ("retry_after",),
            )
        seconds = value["retry_after"]
        if _seconds(seconds) is None or seconds < 0:
            raise spec_problem(
                f"`retry_after: {_written(seconds)}` must be a finite number of seconds >= 0. "
                "Fix: e.g. `retry_after: 0.2`",
                ("retry_after",),
            )
    if "times" in value:
        times = value["times"]
        whole = _whole(times)
        if whole is None or whole < 1:
            raise spec_problem(
                f"`times: {_written(times)}` must be a whole number of faulted attempts >= 1. "
                "Fix: e.g. `times: 2` (the call's first two attempts get the fault)",
                ("times",),
            )


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _written(value: Any) -> str:
    """A value as a spec writes it, for messages."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."


# -- across the spec -----------------------------------------------------------------------------


def check_faults(
    faults: Sequence[FaultSpec], *, mcp_servers: Sequence[str], user_turns: int | None
) -> None:
    """Each fault against the rest of the spec: its call's boundary and kind agree, its MCP
    server is declared, its turn exists (`user_turns`: the most turns the conversation can
    have, None when the flow is not one), and no call takes two faults."""
    seen: dict[CallAt, int] = {}
    for index, fault in enumerate(faults):
        at = fault.call
        _check_boundary(fault, index)
        if at.boundary == "mcp" and at.server not in mcp_servers:
            declared = (
                f"declared: {', '.join(mcp_servers)}"
                if mcp_servers
                else "this flow declares no `mcp:` server"
            )
            raise spec_problem(
                f"`at: {at}` names the MCP server `{at.server}`, which is not under `mcp:` "
                f"({declared}). Fix: name a declared server, or declare `{at.server}`",
                ("faults", index, "at"),
            )
        if at.turn is not None:
            _check_turn(at, user_turns, index)
        if at in seen:
            raise spec_problem(
                f"two faults at `{at}` (the first is fault {seen[at] + 1}); a call takes one "
                "fault. Fix: keep one of them (to fault its retries too, use `times: N`)",
                ("faults", index, "at"),
            )
        seen[at] = index


def _check_boundary(fault: FaultSpec, index: int) -> None:
    key, at = fault.kind_key, fault.call
    if at.boundary == "mcp" and key in MODEL_FAULT_KEYS:
        raise spec_problem(
            f"`{key}` is a fault of a model call, and `at: {at}` is an MCP call. Fix: for an "
            f"MCP call use one of {', '.join(MCP_FAULT_KEYS)}; or point `at` at a model call",
            ("faults", index, key),
        )
    if at.boundary == "model" and key in MCP_FAULT_KEYS:
        raise spec_problem(
            f"`{key}` is a fault of an MCP call, and `at: {at}` is a model call. Fix: for a "
            f"model call use one of {', '.join(MODEL_FAULT_KEYS)}; or write `at: mcp NAME "
            "call N`",
            ("faults", index, key),
        )


def _check_turn(at: CallAt, user_turns: int | None, index: int) -> None:
    if user_turns is None:
        raise spec_problem(
            f"`at: {at}` counts within a conversation turn, and this flow is not a "
            "conversation (it has no `user:` steps). Fix: write `at: model call N`",
            ("faults", index, "at"),
        )
    if at.turn is not None and at.turn > user_turns:
        raise spec_problem(
            f"`at: {at}` names turn {at.turn}, and this conversation has {user_turns} "
            f"turn(s) (its `user:` steps). Fix: name a turn from 1 to {user_turns}",
            ("faults", index, "at"),
        )
