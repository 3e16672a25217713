"""Google Gemini `generateContent` (`.../models/<model>:generateContent`), plain and streamed.

Gemini carries two things in the URL that other APIs carry in the body: the model
(`/v1beta/models/gemini-2.5-flash:generateContent`) and the streaming choice
(`:streamGenerateContent?alt=sse`). `normalize` folds both into the body (`model`, and the
transport field `stream`), so matching, outlines and `wants_stream` work as for the others.

Requests carry `contents` (`{role: user|model, parts}`), `systemInstruction` (a Content),
`tools` (`[{functionDeclarations: [{name, description, parameters}]}]`), `toolConfig` and
`generationConfig`. A tool call is a `functionCall {name, args, id?}` part of the model's
content; its result goes back as a `functionResponse {name, response, id?}` part (role `user`,
or `function` in older clients), where `response` must be a JSON object. A response is a
GenerateContentResponse `{candidates: [{content, finishReason, ...}], usageMetadata,
modelVersion, responseId}`; the stream (`alt=sse`) is `data:` events, each one a complete
GenerateContentResponse holding the next parts, no `[DONE]`. Without `alt=sse` the stream
is one JSON array of those chunks.

Keys are read in their camelCase form (what the SDKs send), with the snake_case spelling the
API also accepts as a fallback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlencode

from flowproof_cli.canonical import canonical_json, parse_or
from flowproof_cli.dialects.base import (
    JSON,
    Dialect,
    MessageOutline,
    MockLookup,
    PlainMessages,
    Rendered,
    bare_key,
    text_of,
    without_transport,
)
from flowproof_cli.dialects.sse import data_event, piece_size, split_deltas
from flowproof_cli.trajectory import AssistantTurn, ToolCall

GENERATE = ":generateContent"
STREAM_GENERATE = ":streamGenerateContent"

#: An API version path segment: `v1`, `v1beta`, `v1alpha`, `v1beta1`, ...
_VERSION = re.compile(r"/v\d+(?:[a-z]+\d*)?(?=/)")
#: Query parameters never forwarded upstream: the stream format (record always asks for the
#: plain JSON answer) and the agent's placeholder key (the record key travels in a header).
_DROPPED_QUERY = frozenset({"alt", "key"})
#: Response fields every stream chunk repeats; the others ride on the last chunk.
_CHUNK_HEAD = ("modelVersion", "responseId", "createTime")
#: Google's canonical status name (google.rpc.Code) of each HTTP status, by the mapping in
#: google/rpc/code.proto. Statuses that mapping has no code for get the nearest by meaning:
#: 415 (a body flowproof cannot decode) INVALID_ARGUMENT, 422 (a mock's results ran out)
#: FAILED_PRECONDITION, 502 UNAVAILABLE (gRPC's own mapping of 502).
_CANONICAL_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    415: "INVALID_ARGUMENT",
    422: "FAILED_PRECONDITION",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def canonical_status(status: int) -> str:
    """The google.rpc.Code name an error body answered with HTTP `status` carries."""
    if status in _CANONICAL_STATUS:
        return _CANONICAL_STATUS[status]
    return "FAILED_PRECONDITION" if status < 500 else "INTERNAL"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def _get(obj: Any, key: str) -> Any:
    """`obj[key]` in camelCase, else its snake_case spelling (None when neither is there)."""
    if not isinstance(obj, dict):
        return None
    if key in obj:
        return obj[key]
    return obj.get(_snake(key))


def _key_of(obj: JSON, key: str) -> str:
    """Which spelling of `key` the object uses (camelCase when neither)."""
    return key if key in obj or _snake(key) not in obj else _snake(key)


def _dicts(value: Any) -> list[JSON]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _parts(content: Any) -> list[JSON]:
    """The dict parts of a Content (a bare string counts as one text part)."""
    if isinstance(content, str):
        return [{"text": content}]
    return _dicts(_get(content, "parts"))


def _text(content: Any) -> str | None:
    """The answer text of a Content: its text parts joined, thoughts left out (None: none)."""
    texts = [
        part["text"]
        for part in _parts(content)
        if isinstance(part.get("text"), str) and not part.get("thought")
    ]
    return "".join(texts) if texts else None


def _calls(content: Any) -> list[JSON]:
    """The `functionCall` objects of a Content's parts, in order."""
    calls = (_get(part, "functionCall") for part in _parts(content))
    return [call for call in calls if isinstance(call, dict)]


def _mocked_part(part: Any, lookup: MockLookup) -> Any:
    """A `functionResponse` part answered by its mock (an object as the whole `response`,
    any other value as `{"output": value}`); any other part as it is."""
    result = _get(part, "functionResponse")
    if not isinstance(result, dict):
        return part
    call_id = result.get("id")
    text = lookup(None if call_id is None else str(call_id), result.get("name"))
    if text is None:
        return part
    value = parse_or(text, text)  # a text mock that is not JSON is the output as text
    response = value if isinstance(value, dict) else {"output": value}
    return {**part, _key_of(part, "functionResponse"): {**result, "response": response}}


def _first_candidate(response: JSON) -> JSON:
    candidates = _dicts(response.get("candidates"))
    return candidates[0] if candidates else {}


def _model_of(path: str) -> str | None:
    """`models/gemini-2.5-flash:generateContent` -> `gemini-2.5-flash`; a resource in another
    collection keeps its collection (`tunedModels/x`)."""
    clean = path.split("?", 1)[0].rstrip("/")
    segments = clean.split("/")
    name = segments[-1].rsplit(":", 1)[0] if ":" in segments[-1] else ""
    if not name:
        return None
    collection = segments[-2] if len(segments) > 1 else ""
    return name if collection in ("models", "") else f"{collection}/{name}"


class GeminiGenerateContent(Dialect):
    """`contents` of parts: `functionCall` by the model, answered by `functionResponse`; the
    system prompt in `systemInstruction`."""

    name = "gemini"
    provider = "gemini"
    #: Methods on a model resource: routed on the end of the last path segment.
    route_suffixes: tuple[str, ...] = (GENERATE, STREAM_GENERATE)
    auth_headers = ("x-goog-api-key", "authorization")
    example_request: ClassVar[JSON] = {
        "model": "gemini-2.5-flash",
        "contents": [{"role": "user", "parts": [{"text": "Say hello."}]}],
    }
    conversation_key = "contents"
    system_fields = ("systemInstruction", "system_instruction")

    # --- the path ---------------------------------------------------------------------------

    def normalize(self, path: str, body: JSON) -> JSON:
        """Fold the path's model in as `model`, and `:streamGenerateContent` as `stream: True`
        (with `stream_options.alt = "json"` when the client asked for the JSON-array stream
        rather than `alt=sse`); both stream fields are transport, never matched."""
        clean, _, query = path.partition("?")
        normalized = without_transport(body)
        model = _model_of(clean)
        if model is not None:
            normalized["model"] = model
        if clean.rstrip("/").endswith(STREAM_GENERATE):
            normalized["stream"] = True
            if dict(parse_qsl(query)).get("alt") != "sse":
                normalized["stream_options"] = {"alt": "json"}
        return normalized

    def _calls_in(self, entry: JSON) -> Iterator[tuple[str, str]]:
        for call in _calls(entry):
            if call.get("id") is not None:
                yield str(call["id"]), str(call.get("name"))

    def _mock_results(self, entry: JSON, lookup: MockLookup) -> JSON:
        """Rewrite the `functionResponse.response` of every result of a mocked tool.

        The tool is the part's `functionResponse.name` (Gemini requires it; a part without one
        is looked up by its `id` among the calls seen). Gemini's `response` must be a JSON
        object, and the API reads an object with neither `output` nor `error` key as the whole
        function output. So a mock whose value is an object becomes the `response` verbatim:
        the model is told exactly the mock, with no wrapper the spec did not write. A mock of
        any other JSON value (string, number, list, null) is wrapped as `{"output": value}`,
        the key the API documents for a function's output.
        """
        parts = _get(entry, "parts")
        if not isinstance(parts, list):
            return entry
        return {**entry, _key_of(entry, "parts"): [_mocked_part(part, lookup) for part in parts]}

    # --- trajectory -------------------------------------------------------------------------

    def assistant_turn(self, request: JSON, response: JSON, turn: int) -> AssistantTurn:
        content = _get(_first_candidate(response), "content")
        calls = tuple(
            ToolCall(
                name=str(call.get("name", "")),
                raw_arguments=canonical_json(call.get("args") or {}),
                turn=turn,
                call_id=str(call["id"]) if call.get("id") is not None else None,
            )
            for call in _calls(content)
        )
        return AssistantTurn(
            turn=turn,
            text=_text(content),
            tool_calls=calls,
            thread_key=self._system_text(request),
            request_size=len(json.dumps(_get(request, "contents") or [])),
        )

    @staticmethod
    def _system_text(request: JSON) -> str:
        return text_of(_parts(_get(request, "systemInstruction")), "\n")

    # --- divergence -------------------------------------------------------------------------

    def _tools_in(self, request: JSON) -> Iterator[tuple[str, Any]]:
        for tool in _dicts(_get(request, "tools")):
            declarations = _get(tool, "functionDeclarations")
            if isinstance(declarations, list):
                for declaration in _dicts(declarations):
                    yield str(declaration.get("name", "?")), declaration
            else:  # built-in tools (googleSearch, codeExecution, ...) by their kind
                yield from tool.items()

    def _messages_in(self, request: JSON) -> Iterator[MessageOutline]:
        system = _get(request, "systemInstruction")
        if system is not None:
            yield MessageOutline(role="system", content=self._system_text(request), raw=system)
        for content in _get(request, "contents") or []:
            if not isinstance(content, dict):
                continue
            calls = tuple(
                (str(call.get("name")), canonical_json(call.get("args") or {}))
                for call in _calls(content)
            )
            yield MessageOutline(
                role=str(content.get("role", "user")),
                content=_get(content, "parts"),
                tool_calls=calls,
                raw=content,
            )

    # --- rendering --------------------------------------------------------------------------

    def render(self, request: JSON, status: int, response: JSON, *, stream: bool) -> Rendered:
        """As every dialect, except that a stream the client asked for without `alt=sse` is
        the JSON array of the chunks, as Google serves it."""
        options = request.get("stream_options")
        if stream and status == 200 and isinstance(options, dict) and options.get("alt") == "json":
            body = json.dumps(self.stream_chunks(response), ensure_ascii=False).encode()
            return Rendered(200, "application/json", body)
        return super().render(request, status, response, stream=stream)

    def stream_events(self, request: JSON, response: JSON) -> str:
        return "".join(data_event(chunk) for chunk in self.stream_chunks(response))

    @staticmethod
    def stream_chunks(response: JSON) -> list[JSON]:
        """The response as the stream's chunks, deterministically.

        Each text part is split into several fragments (thought parts keep `thought` on
        every fragment, a `thoughtSignature` rides on the last); any other part (a function
        call, inline data, ...) goes whole in one chunk. Every chunk repeats `modelVersion`,
        `responseId` (and `createTime`); the candidate's last chunk carries its own
        remaining fields (`finishReason`, safety ratings, ...), and the stream's last chunk
        carries the response's remaining fields (`usageMetadata`, ...).
        """
        head = {key: response[key] for key in _CHUNK_HEAD if key in response}
        tail = {
            key: value
            for key, value in response.items()
            if key not in _CHUNK_HEAD and key != "candidates"
        }
        candidates = _dicts(response.get("candidates"))
        if not candidates:
            return [dict(response)]
        several = len(candidates) > 1
        size = piece_size(response)
        pieces: list[JSON] = []  # one candidate each, in stream order
        for position, candidate in enumerate(candidates):
            content = _get(candidate, "content")
            extra = {k: v for k, v in candidate.items() if k not in ("content", "index")}
            index: JSON = {}
            if "index" in candidate or several:
                index = {"index": candidate.get("index", position)}
            parts = _parts(content) if isinstance(content, dict) else []
            if not parts:
                pieces.append({**candidate, **index})
                continue
            shell = {k: v for k, v in content.items() if k != "parts"}
            fragments = [fragment for part in parts for fragment in _fragments(part, size)]
            for number, fragment in enumerate(fragments):
                piece: JSON = {"content": {"parts": [fragment], **shell}, **index}
                if number == len(fragments) - 1:
                    piece.update(extra)
                pieces.append(piece)
        chunks = [{"candidates": [piece], **head} for piece in pieces]
        chunks[-1] = {"candidates": chunks[-1]["candidates"], **tail, **head}
        return chunks

    def answer_from_body(self, data: bytes, content_type: str | None) -> tuple[Any, str]:
        """As every dialect, and the stream asked for without `alt=sse`: a JSON array of
        the chunks."""
        answer, how = super().answer_from_body(data, content_type)
        if isinstance(answer, list):
            return self.reassemble_events([("", chunk) for chunk in answer]), ", a chunk array"
        return answer, how

    def reassemble_events(self, events: list[tuple[str, Any]]) -> JSON:
        """Every chunk's first-candidate parts in order; the last chunk's other fields."""
        parts: list[Any] = []
        last: JSON = {}
        for _, payload in events:
            if not isinstance(payload, dict):
                continue
            for candidate in _dicts(payload.get("candidates")):
                content = candidate.get("content")
                if isinstance(content, dict):
                    parts.extend(_dicts(content.get("parts")))
                last = {k: v for k, v in candidate.items() if k not in ("content", "index")}
                break
        candidate = {"content": {"role": "model", "parts": parts}, **last}
        return {"candidates": [candidate]}

    def plain_request(self, model: str, system: str, messages: PlainMessages) -> tuple[str, JSON]:
        """The model goes in the path; the body has it folded in, as `normalize` does."""
        path = f"/v1beta/models/{model}{GENERATE}"
        contents = [
            {"role": "model" if role == "assistant" else "user", "parts": [{"text": text}]}
            for role, text in messages
        ]
        body = {"systemInstruction": {"parts": [{"text": system}]}, "contents": contents}
        return path, self.normalize(path, body)

    def canned_response(self, request: JSON, text: str) -> JSON:
        model = request.get("model")
        return {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": text}]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 1,
                "candidatesTokenCount": 1,
                "totalTokenCount": 2,
            },
            "modelVersion": model or "flowproof-doctor",
            "responseId": "flowproof-doctor",
        }

    # --- upstream ---------------------------------------------------------------------------

    def upstream_url_for_path(self, base_url: str, path: str) -> str:
        """The base URL plus the agent's path from its API version segment on.

        `https://generativelanguage.googleapis.com` + `/v1beta/models/m:generateContent`. A
        prefix before the version (a proxy base with `/v1`) is dropped; a base that itself
        ends in a version segment has it replaced by the agent's. Record always asks for the
        plain answer (see `upstream_body`), so `:streamGenerateContent` becomes
        `:generateContent`, and `alt` and the agent's placeholder `key` leave the query.
        """
        clean, _, query = path.partition("?")
        clean = "/" + clean.strip("/")
        versions = list(_VERSION.finditer(clean))
        rest = clean[versions[-1].start() :] if versions else clean
        if rest.endswith(STREAM_GENERATE):
            rest = rest[: -len(STREAM_GENERATE)] + GENERATE
        base = base_url.rstrip("/")
        if versions:
            base = re.sub(r"/v\d+(?:[a-z]+\d*)?$", "", base)
        kept = [
            (k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k not in _DROPPED_QUERY
        ]
        url = f"{base}{rest}"
        return f"{url}?{urlencode(kept)}" if kept else url

    def upstream_auth(self, key: str) -> dict[str, str]:
        """Google's `x-goog-api-key` header, with any `Bearer ` prefix removed."""
        return {"x-goog-api-key": bare_key(key)}

    def upstream_body(self, body: JSON) -> JSON:
        """Transport fields dropped, and `model` too: the upstream reads it from the URL."""
        return {k: v for k, v in without_transport(body).items() if k != "model"}

    def error_body(self, message: str, kind: str, status: int) -> JSON:
        """Google's error shape: `code` is the HTTP status the body is sent with, `status`
        its canonical name; flowproof's own kind is the reason of an ErrorInfo detail."""
        info = {"@type": _ERROR_INFO, "reason": kind, "domain": "flowproof"}
        return {
            "error": {
                "code": status,
                "message": message,
                "status": canonical_status(status),
                "details": [info],
            }
        }


def _fragments(part: JSON, size: int) -> list[JSON]:
    """A text part split for streaming; any other part whole."""
    text = part.get("text")
    if not isinstance(text, str) or len(part.keys() - {"text", "thought", "thoughtSignature"}):
        return [part]
    pieces = split_deltas(text, size)
    if len(pieces) < 2:
        return [part]
    rest = {k: v for k, v in part.items() if k not in ("text", "thoughtSignature")}
    fragments = [{"text": piece, **rest} for piece in pieces]
    if "thoughtSignature" in part:
        fragments[-1]["thoughtSignature"] = part["thoughtSignature"]
    return fragments
