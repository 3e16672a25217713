"""A stored trace read the way a reviewer reads it: each turn outlined, and the trajectory.

Shared by the trajectory diff (`flowproof diff`, a reviewed re-record) and the timeline
(`flowproof show`). Traces are read as stored: relocated `{cwd}` placeholders and normalized
spans stay as they are, so two traces are compared in the form a reviewer sees in the file.
Nothing here imports the proxy engine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from flowproof_cli.dialects import ENDPOINT, dialect_named
from flowproof_cli.dialects.base import MessageOutline, RequestOutline
from flowproof_cli.dialects.base import text_of as dialect_text_of
from flowproof_cli.errors import TraceError
from flowproof_cli.trace import Trace
from flowproof_cli.trajectory import AssistantTurn, EndpointCall, Trajectory

#: Roles whose entries are the system prompt (every dialect's outline names it `system`).
SYSTEM_ROLES = frozenset({"system", "developer"})
#: Roles whose entries are the model's own earlier output, echoed back in later requests.
MODEL_ROLES = frozenset({"assistant", "model", "reasoning"})
#: Keys whose values the model or the API mints anew on every recording. Two recordings of one
#: trajectory differ in them, so they are not compared.
MINTED_KEYS = frozenset({"tool_call_id", "tool_use_id", "call_id", "previous_response_id"})
#: Where tool arguments live inside content blocks: user data, never stripped of anything.
ARGUMENT_KEYS = frozenset({"input", "args", "arguments"})


@dataclass(frozen=True)
class TurnView:
    """One recorded model turn: the request outlined, and what the model answered."""

    number: int  # 1-based, in recorded order
    protocol: str
    status: int
    outline: RequestOutline
    response: Any
    answer: AssistantTurn | None  # None: an error status, a body that is not JSON, an endpoint
    #: An endpoint's answered call (embeddings, token counts, ...): listed, never the reply.
    endpoint: EndpointCall | None = None
    is_endpoint: bool = False  # a call of an endpoint dialect, answered or not


def turn_views(trace: Trace, source: str) -> list[TurnView]:
    """Every turn of the trace, outlined by its dialect; an unknown protocol names the turn."""
    views = []
    for number, turn in enumerate(trace.turns, start=1):
        try:
            dialect = dialect_named(turn.protocol)
        except KeyError as exc:
            raise TraceError(f"{source}: turn {number}: {exc.args[0]}") from None
        answer = None
        if turn.status == 200 and isinstance(turn.response, dict):
            answer = dialect.read_answer(turn.request, turn.response, number)
        views.append(
            TurnView(
                number=number,
                protocol=turn.protocol,
                status=turn.status,
                outline=dialect.outline(turn.request),
                response=turn.response,
                answer=answer if isinstance(answer, AssistantTurn) else None,
                endpoint=answer if isinstance(answer, EndpointCall) else None,
                # or a call beside the conversation on a chat route (Bedrock's invoke)
                is_endpoint=dialect.kind == ENDPOINT or isinstance(answer, EndpointCall),
            )
        )
    return views


def trajectory_of(views: list[TurnView]) -> Trajectory:
    """The trajectory assertions read: every answered turn, in recorded order, and the
    endpoint calls beside them."""
    return Trajectory(
        [view.answer for view in views if view.answer is not None],
        [view.endpoint for view in views if view.endpoint is not None],
    )


def text_of(content: Any) -> str:
    """The text of a message as the dialects read it (the string, or the `text` of its parts
    joined); for a reviewer, also a bare `{text}` object's text, and any other value as JSON
    with its characters kept."""
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return str(content["text"])
    if content is None or isinstance(content, str | list):
        return dialect_text_of(content)
    return json.dumps(content, ensure_ascii=False, sort_keys=True)


def is_text(content: Any) -> bool:
    """A string, or a list of parts that carry nothing but text."""
    if isinstance(content, str):
        return True
    return (
        isinstance(content, list)
        and bool(content)
        and all(
            isinstance(part, dict)
            and isinstance(part.get("text"), str)
            and set(part) <= {"type", "text"}
            for part in content
        )
    )


def without_minted(value: Any) -> Any:
    """The value without minted ids, at any depth: the MINTED_KEYS, and the `id` of an API
    object (a dict with a `type`: a content block, an input item). Tool arguments inside
    such objects are left whole."""
    if isinstance(value, list):
        return [without_minted(item) for item in value]
    if not isinstance(value, dict):
        return value
    typed = "type" in value
    return {
        key: item if key in ARGUMENT_KEYS else without_minted(item)
        for key, item in value.items()
        if key not in MINTED_KEYS and not (typed and key == "id")
    }


def system_prompt(outline: RequestOutline) -> str:
    """The request's system prompt: its system and developer entries' text, joined."""
    return "\n".join(
        text_of(message.content) for message in outline.messages if message.role in SYSTEM_ROLES
    )


def echoes_output(message: MessageOutline, answers: list[AssistantTurn]) -> bool:
    """An assistant entry that only repeats what the model answered earlier in the trace:
    each of its tool calls and its text were a response. (A few-shot example the agent
    wrote itself is not an echo.)"""
    if message.role not in MODEL_ROLES:
        return False
    if message.role == "reasoning":  # the model's reasoning items: output by definition
        return True
    calls = {(call.name, call.raw_arguments) for answer in answers for call in answer.tool_calls}
    texts = {answer.text or "" for answer in answers}
    text = text_of(message.content) if message.content is not None else ""
    return all(call in calls for call in message.tool_calls) and (not text or text in texts)


def tool_results(message: MessageOutline) -> list[tuple[str | None, str | None, Any]]:
    """(call id, tool name, content) of each tool result the message carries, in the shapes
    the dialects use: a `tool` entry (OpenAI Chat and Responses), `tool_result` blocks
    (Anthropic), `functionResponse` parts (Gemini). Either id or name may be None."""
    if message.role == "tool":
        raw = message.raw if isinstance(message.raw, dict) else {}
        return [(raw.get("tool_call_id") or raw.get("call_id"), None, message.content)]
    found: list[tuple[str | None, str | None, Any]] = []
    for part in message.content if isinstance(message.content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "tool_result":
            found.append((part.get("tool_use_id"), None, part.get("content")))
        response = part.get("functionResponse") or part.get("function_response")
        if isinstance(response, dict):
            found.append((response.get("id"), response.get("name"), response.get("response")))
    return found


def is_result_part(part: Any) -> bool:
    """A content part that is a tool result (the rest of such a message is ordinary text)."""
    return isinstance(part, dict) and (
        part.get("type") == "tool_result"
        or "functionResponse" in part
        or "function_response" in part
    )
