"""OpenAI Responses API (`.../responses`), plain and streamed.

Requests carry `input` (a string or a list of items) and flat function tools; a run may chain
requests with `previous_response_id`, in which case a request sends only the tool outputs and
the calls they answer live in an earlier response. The stream is named events, each with a
`sequence_number`, ending in `response.completed` carrying the full response (no `[DONE]`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from flowproof_cli.dialects.base import (
    JSON,
    Dialect,
    MessageOutline,
    MockLookup,
    PlainMessages,
    text_of,
)
from flowproof_cli.dialects.sse import named_event, piece_size, split_deltas
from flowproof_cli.trajectory import AssistantTurn, ToolCall


def _items(request: JSON) -> list[JSON]:
    """The input items of a request (a string input has none)."""
    items = request.get("input")
    if not isinstance(items, list):
        return []
    return [item for item in items if isinstance(item, dict)]


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _is_message(item: JSON) -> bool:
    return "role" in item and item.get("type", "message") == "message"


def _tool_name(tool: JSON) -> str:
    """Function (and custom) tools by name; built-in tools (`web_search`) by type."""
    name = tool.get("name")
    if isinstance(name, str) and name:
        return name
    kind = str(tool.get("type", "?"))
    label = tool.get("server_label")
    return f"{kind}:{label}" if isinstance(label, str) and label else kind


#: Tool calls the model makes: JSON-argument functions, and free-form custom tools (Codex's
#: `apply_patch`), whose text `input` the trajectory exposes as the argument `input`.
_CALL_KINDS = ("function_call", "custom_tool_call")
#: Stream events that carry the whole response at the end.
_FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")
_OUTPUT_KINDS = ("function_call_output", "custom_tool_call_output")


def _raw_arguments(item: JSON) -> str:
    if item.get("type") == "custom_tool_call":
        return json.dumps({"input": item.get("input", "")}, ensure_ascii=False)
    return str(item.get("arguments") or "")


def _item_outline(item: JSON) -> MessageOutline:
    """An input item as a conversation entry: a message, a call, a call's output, or any
    other item (reasoning, ...) under its type."""
    kind = item.get("type")
    if _is_message(item):
        return MessageOutline(role=str(item["role"]), content=item.get("content"), raw=item)
    if kind == "function_call":
        call = (str(item.get("name")), str(item.get("arguments") or ""))
        return MessageOutline(role="assistant", content=None, tool_calls=(call,), raw=item)
    if kind == "function_call_output":
        return MessageOutline(role="tool", content=item.get("output"), raw=item)
    rest = {key: value for key, value in item.items() if key != "type"}
    return MessageOutline(role=str(kind), content=rest, raw=item)


class OpenAIResponses(Dialect):
    """`input` items: `function_call` / `custom_tool_call`, answered by their `_output` items."""

    name = "openai-responses"
    provider = "openai"
    route_suffixes = ("responses",)
    example_request: ClassVar[JSON] = {"model": "gpt-4o-mini", "input": "Say hello."}
    conversation_key = "input"
    system_fields = ("instructions",)
    websocket = True  # `response.create` frames (dialects/websocket.py)

    def _calls_in(self, entry: JSON) -> Iterator[tuple[str, str]]:
        if entry.get("type") in _CALL_KINDS:
            yield str(entry.get("call_id")), str(entry.get("name"))

    def _mock_results(self, entry: JSON, lookup: MockLookup) -> JSON:
        if entry.get("type") in _OUTPUT_KINDS:
            text = lookup(str(entry.get("call_id")), None)
            if text is not None:
                return {**entry, "output": text}
        return entry

    # --- trajectory -----------------------------------------------------------------------

    def assistant_turn(self, request: JSON, response: JSON, turn: int) -> AssistantTurn:
        output = [item for item in response.get("output") or [] if isinstance(item, dict)]
        messages = [item for item in output if item.get("type") == "message"]
        text = (
            "".join(
                str(part.get("text", ""))
                for item in messages
                for part in item.get("content") or []
                if isinstance(part, dict) and part.get("type") == "output_text"
            )
            if messages
            else None
        )
        calls = tuple(
            ToolCall(
                name=str(item.get("name", "")),
                raw_arguments=_raw_arguments(item),
                turn=turn,
                call_id=item.get("call_id"),
            )
            for item in output
            if item.get("type") in _CALL_KINDS
        )
        instructions = request.get("instructions")
        return AssistantTurn(
            turn=turn,
            text=text,
            tool_calls=calls,
            thread_key=self._thread_key(request),
            response_id=_text_or_none(response.get("id")),
            continues=_text_or_none(request.get("previous_response_id")),
            request_size=len(json.dumps(request.get("input", "")))
            + (len(json.dumps(instructions)) if instructions is not None else 0),
        )

    @staticmethod
    def _thread_key(request: JSON) -> str:
        instructions = request.get("instructions")
        if instructions:
            return text_of(instructions)
        return "\n".join(
            text_of(item.get("content"))
            for item in _items(request)
            if _is_message(item) and item.get("role") in ("system", "developer")
        )

    # --- divergence -----------------------------------------------------------------------

    def _tools_in(self, request: JSON) -> Iterator[tuple[str, Any]]:
        for tool in request.get("tools") or []:
            if isinstance(tool, dict):
                yield _tool_name(tool), tool

    def _messages_in(self, request: JSON) -> Iterator[MessageOutline]:
        instructions = request.get("instructions")
        if instructions is not None:
            yield MessageOutline(role="system", content=instructions)
        raw_input = request.get("input")
        if isinstance(raw_input, str):
            yield MessageOutline(role="user", content=raw_input)
        for item in _items(request):
            yield _item_outline(item)

    # --- rendering ------------------------------------------------------------------------

    def error_body(self, message: str, kind: str, status: int) -> JSON:
        return {"error": {"message": message, "type": kind, "code": kind, "param": None}}

    def stream_events(self, request: JSON, response: JSON) -> str:
        events: list[str] = []

        def emit(kind: str, **fields: Any) -> None:
            payload = {"type": kind, "sequence_number": len(events), **fields}
            events.append(named_event(kind, payload))

        pending = {**response, "status": "in_progress", "output": []}
        if "usage" in pending:
            pending["usage"] = None
        emit("response.created", response=pending)
        emit("response.in_progress", response=pending)
        output = [item for item in response.get("output") or [] if isinstance(item, dict)]
        size = piece_size(response)
        for index, item in enumerate(output):
            kind = item.get("type")
            item_id = str(item.get("id", ""))
            added = dict(item)
            if "status" in item or kind in ("message", "function_call"):
                added["status"] = "in_progress"
            if kind == "message":
                added["content"] = []
            elif kind == "function_call":
                added["arguments"] = ""
            emit("response.output_item.added", output_index=index, item=added)
            if kind == "message":
                self._message_parts(emit, item, index, item_id, size)
            elif kind == "function_call":
                arguments = str(item.get("arguments") or "")
                for fragment in split_deltas(arguments, size):
                    emit(
                        "response.function_call_arguments.delta",
                        item_id=item_id,
                        output_index=index,
                        delta=fragment,
                    )
                emit(
                    "response.function_call_arguments.done",
                    item_id=item_id,
                    output_index=index,
                    name=item.get("name"),
                    arguments=arguments,
                )
            emit("response.output_item.done", output_index=index, item=item)
        emit("response.completed", response=response)
        return "".join(events)

    def reassemble_events(self, events: list[tuple[str, Any]]) -> JSON:
        """The final response event carries the response whole; else the items done."""
        items = []
        for _, payload in events:
            if not isinstance(payload, dict):
                continue
            kind = payload.get("type")
            final = payload.get("response")
            if kind in _FINAL_EVENTS and isinstance(final, dict):
                return final
            if kind == "response.output_item.done" and isinstance(payload.get("item"), dict):
                items.append(payload["item"])
        return {"output": items}

    def plain_request(self, model: str, system: str, messages: PlainMessages) -> tuple[str, JSON]:
        entries = [{"role": role, "content": text} for role, text in messages]
        return "/v1/responses", {"model": model, "instructions": system, "input": entries}

    def canned_response(self, request: JSON, text: str) -> JSON:
        return {
            "id": "resp_flowproof_doctor",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": request.get("model") or "flowproof-doctor",
            "output": [
                {
                    "type": "message",
                    "id": "msg_flowproof_doctor",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "temperature": 1.0,
            "top_p": 1.0,
            "text": {"format": {"type": "text"}},
            "usage": {
                "input_tokens": 1,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 1,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 2,
            },
        }

    @staticmethod
    def _message_parts(
        emit: Callable[..., None], item: JSON, index: int, item_id: str, size: int
    ) -> None:
        where = {"item_id": item_id, "output_index": index}
        for position, part in enumerate(item.get("content") or []):
            if not isinstance(part, dict):
                continue
            at = {**where, "content_index": position}
            if part.get("type") == "refusal":
                refusal = str(part.get("refusal") or "")
                emit("response.content_part.added", **at, part={**part, "refusal": ""})
                for fragment in split_deltas(refusal, size):
                    emit("response.refusal.delta", **at, delta=fragment)
                emit("response.refusal.done", **at, refusal=refusal)
            else:
                text = str(part.get("text") or "")
                empty = {**part, "text": ""}
                if "annotations" in part:
                    empty["annotations"] = []
                emit("response.content_part.added", **at, part=empty)
                for fragment in split_deltas(text, size):
                    emit("response.output_text.delta", **at, delta=fragment, logprobs=[])
                emit("response.output_text.done", **at, text=text, logprobs=[])
            emit("response.content_part.done", **at, part=part)
