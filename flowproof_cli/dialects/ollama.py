"""Ollama's native chat API (`.../api/chat`), plain and streamed as NDJSON.

Ollama is not OpenAI-shaped where it matters to a record/replay boundary:

* **Streaming is the default.** A request without `"stream": false` is answered with
  newline-delimited JSON (`application/x-ndjson`), one ChatResponse object a line, the last
  with `"done": true` and the run's counters. `stream` is transport here too (never stored,
  never matched), so a plain recording serves a streaming client and the other way round.
* **Tool calls carry objects, not strings.** `message.tool_calls[].function.arguments` is a
  JSON object; an id (`id`, and `function.index`) exists only in newer servers. A tool's
  result comes back as a `{"role": "tool", "content": ..., "tool_name": ...}` message
  (`tool_call_id` where the client kept the call's id; older clients send neither). A result
  is attributed to its tool by its `tool_call_id`, else its `tool_name`, else by position
  among the calls of the assistant message before it, the way the server itself pairs them.

A response is `{model, created_at, message: {role, content, thinking?, tool_calls?}, done,
done_reason, total_duration, load_duration, prompt_eval_count, prompt_eval_duration,
eval_count, eval_duration}`. Errors are `{"error": "<text>"}`, which the `ollama` clients
raise as `ResponseError` with the status.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from flowproof_cli.canonical import canonical_json, compact_json
from flowproof_cli.dialects.base import (
    JSON,
    Dialect,
    MockLookup,
    MockText,
    Rendered,
    _ResultCounter,
    text_of,
    without_transport,
)
from flowproof_cli.dialects.function_messages import FunctionMessages, dicts, function_of
from flowproof_cli.dialects.sse import piece_size, split_deltas
from flowproof_cli.trajectory import AssistantTurn, ToolCall

#: The media type of Ollama's streamed answers.
NDJSON = "application/x-ndjson"
#: Fields of a response every streamed line repeats; the rest ride on the last (`done`) line.
_LINE_HEAD = ("model", "created_at")
_MESSAGE_FIELDS = ("role", "content", "thinking", "tool_calls")


def _arguments(function: JSON) -> str:
    """A call's arguments as the trajectory holds them: an object as canonical JSON, a
    string (a client that sends them encoded) as it is."""
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        return arguments
    return canonical_json({} if arguments is None else arguments)


def ndjson_line(payload: Any) -> str:
    return f"{compact_json(payload)}\n"


def ndjson_payloads(data: bytes) -> list[Any]:
    """The JSON values of an NDJSON body, one a non-empty line; a line that is not JSON is
    skipped (a reader that must go on)."""
    found = []
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def is_ndjson(data: bytes, content_type: str | None) -> bool:
    """An Ollama stream: by its media type, else by holding more than one JSON line."""
    if content_type:
        return content_type.split(";")[0].strip() == NDJSON
    return len(ndjson_payloads(data)) > 1


def wants_ndjson_stream(body: Mapping[str, Any]) -> bool:
    """Ollama streams unless the request says `"stream": false`."""
    return body.get("stream") is not False


def ndjson_render(
    dialect: Dialect, request: JSON, status: int, response: JSON, *, stream: bool
) -> Rendered:
    """A recorded answer as Ollama serves it: JSON, or (a successful turn asked for as a
    stream) the NDJSON lines synthesized from it. Errors are always JSON."""
    if not stream or status != 200:
        return Rendered(status, "application/json", compact_json(response).encode())
    return Rendered(200, NDJSON, dialect.stream_events(request, response).encode())


def ollama_upstream_url(base_url: str, route: str, query: str) -> str:
    """`<host>/api/<route>` under a base URL given as the server (`http://localhost:11434`),
    as its API root (`.../api`), or as its OpenAI-compatible root (`.../v1`)."""
    base = base_url.rstrip("/")
    for tail in ("/api", "/v1"):
        if base.endswith(tail):
            base = base[: -len(tail)]
            break
    url = f"{base}/{route}"
    return f"{url}?{query}" if query else url


def ollama_error_body(message: str, kind: str, status: int) -> JSON:
    """Ollama's error shape, `{"error": "<text>"}`; flowproof's kind leads the text."""
    return {"error": f"{kind}: {message}"}


class OllamaChat(FunctionMessages, Dialect):
    """`messages` with `tool_calls` (arguments as objects) on assistant entries, answered by
    `tool` entries named by `tool_name`; streamed as NDJSON unless `stream` is false."""

    call_arguments = staticmethod(_arguments)

    name = "ollama-chat"
    provider = "ollama"
    route_suffixes = ("api/chat",)
    auth_headers = ("authorization",)  # Ollama's cloud takes a Bearer key; a local one none
    stream_media_type = NDJSON
    example_request: ClassVar[JSON] = {
        "model": "llama3.2",
        "messages": [{"role": "user", "content": "Say hello."}],
        "stream": False,
    }
    conversation_key = "messages"

    def wants_stream(self, body: JSON) -> bool:
        return wants_ndjson_stream(body)

    # --- mocks ----------------------------------------------------------------------------

    def _calls_in(self, entry: JSON) -> Iterator[tuple[str, str]]:
        if entry.get("role") == "assistant":
            for call in dicts(entry.get("tool_calls")):
                if call.get("id") is not None:
                    yield str(call["id"]), str(function_of(call).get("name"))

    def apply_mocks(
        self, body: JSON, mocks: Mapping[str, MockText], known_calls: dict[str, str]
    ) -> JSON:
        """As every dialect (the k-th result of a tool gets the k-th text), with each
        result's tool found by `tool_call_id`, else `tool_name`, else its position among
        the calls of the assistant message before it."""
        entries = body.get(self.conversation_key)
        if not mocks or not isinstance(entries, list):
            return body
        in_request: dict[str, str] = {}
        for entry in dicts(entries):
            in_request.update(self._calls_in(entry))
        counter = _ResultCounter(mocks, in_request, known_calls)
        rewritten: list[Any] = []
        pending: list[str] = []  # names of the last assistant message's calls, unanswered
        for entry in entries:
            answered = entry
            if isinstance(entry, dict) and entry.get("role") == "assistant":
                pending = [str(function_of(c).get("name")) for c in dicts(entry.get("tool_calls"))]
            elif isinstance(entry, dict) and entry.get("role") == "tool":
                call_id = entry.get("tool_call_id")
                name = entry.get("tool_name") or (pending[0] if pending else None)
                if name in pending:
                    pending.remove(name)
                text = counter.lookup(None if call_id is None else str(call_id), name)
                if text is not None:
                    answered = {**entry, "content": text}
            rewritten.append(answered)
        return {**body, self.conversation_key: rewritten}

    def _mock_results(self, entry: JSON, lookup: MockLookup) -> JSON:
        """Unused: `apply_mocks` pairs results with calls across messages itself."""
        return entry

    # --- trajectory -----------------------------------------------------------------------

    def assistant_turn(self, request: JSON, response: JSON, turn: int) -> AssistantTurn:
        message = response.get("message")
        message = message if isinstance(message, dict) else {}
        calls = tuple(
            ToolCall(
                name=str(function_of(call).get("name", "")),
                raw_arguments=_arguments(function_of(call)),
                turn=turn,
                call_id=str(call["id"]) if call.get("id") is not None else None,
            )
            for call in dicts(message.get("tool_calls"))
        )
        content = message.get("content")
        return AssistantTurn(
            turn=turn,
            text=text_of(content) if content not in (None, "") or not calls else None,
            tool_calls=calls,
            thread_key=self._system_prompt(request),
            request_size=len(json.dumps(request.get("messages", []))),
        )

    # --- rendering ------------------------------------------------------------------------

    def render(self, request: JSON, status: int, response: JSON, *, stream: bool) -> Rendered:
        return ndjson_render(self, request, status, response, stream=stream)

    def stream_events(self, request: JSON, response: JSON) -> str:
        """The NDJSON lines Ollama sends for this answer: the thinking, then the text, in
        fragments; the tool calls whole in one line (as the server sends them); a last
        `done` line with the rest of the response (its counters, `done_reason`)."""
        head = {key: response[key] for key in _LINE_HEAD if key in response}
        message = response.get("message")
        message = message if isinstance(message, dict) else {}
        role = message.get("role", "assistant")
        size = piece_size(response)

        def line(**fields: Any) -> str:
            return ndjson_line({**head, "message": {"role": role, **fields}, "done": False})

        lines = [
            line(content="", thinking=fragment)
            for fragment in split_deltas(str(message.get("thinking") or ""), size)
        ]
        lines += [
            line(content=fragment)
            for fragment in split_deltas(text_of(message.get("content")), size)
        ]
        if message.get("tool_calls"):
            lines.append(line(content="", tool_calls=message["tool_calls"]))
        extra = {k: v for k, v in message.items() if k not in _MESSAGE_FIELDS}
        last: JSON = {**head, "message": {"role": role, "content": "", **extra}}
        last.update((k, v) for k, v in response.items() if k not in (*_LINE_HEAD, "message"))
        last["done"] = True
        lines.append(ndjson_line(last))
        return "".join(lines)

    def answer_from_body(self, data: bytes, content_type: str | None) -> tuple[Any, str]:
        """The answer a body carries: an NDJSON stream reassembled, else the JSON."""
        if is_ndjson(data, content_type):
            lines = ndjson_payloads(data)
            return self.reassembled(data), f", reassembled from {len(lines)} NDJSON lines"
        return json.loads(data), ""

    def reassembled(self, data: bytes) -> JSON:
        """The response an NDJSON stream carries: the lines' texts and thinking joined, their
        tool calls gathered, the last line's counters."""
        lines = dicts(ndjson_payloads(data))
        if not lines:
            raise ValueError("an NDJSON stream without one JSON object line")
        content, thinking, calls = "", "", []
        for payload in lines:
            message = payload.get("message")
            message = message if isinstance(message, dict) else {}
            content += str(message.get("content") or "")
            thinking += str(message.get("thinking") or "")
            calls += dicts(message.get("tool_calls"))
        whole: JSON = {"role": "assistant", "content": content}
        if thinking:
            whole["thinking"] = thinking
        if calls:
            whole["tool_calls"] = calls
        return {**lines[-1], "message": whole}

    def canned_response(self, request: JSON, text: str) -> JSON:
        return {
            "model": request.get("model") or "flowproof-doctor",
            "created_at": "2026-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": text},
            "done": True,
            "done_reason": "stop",
        }

    # --- upstream -------------------------------------------------------------------------

    def upstream_url(self, base_url: str, query: str) -> str:
        return ollama_upstream_url(base_url, self.route_suffixes[0], query)

    def upstream_body(self, body: JSON) -> JSON:
        """Always the plain answer: `stream: false` said, since Ollama streams by default."""
        return {**without_transport(body), "stream": False}

    def error_body(self, message: str, kind: str, status: int) -> JSON:
        return ollama_error_body(message, kind, status)
