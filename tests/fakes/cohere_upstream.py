"""A fake Cohere API for flowproof's tests (stdlib only): v2 chat, embed and rerank, and v1
rerank, as the `cohere` SDK calls them.

* ``POST /v2/chat``: the default tool loop of ``fake_upstream.decide``, as Cohere answers it
  (`message.content` text blocks, `tool_plan`, `tool_calls` with JSON-string arguments and
  minted ids, `finish_reason`, `usage`), or with ``"stream": true`` as its named SSE events
  (`message-start`, `content-*`, `tool-plan-delta`, `tool-call-*`, `message-end`).
* ``POST /v2/embed``: one vector per text under each asked embedding type (`float`), derived
  from the text; ``POST /v2/rerank`` and ``/v1/rerank``: the documents scored by the words
  they share with the query.

Every answer mints random ids, so a replay that passes proves flowproof answered from the
trace. Every request must carry ``Authorization: Bearer <key>`` with the fake's key (Cohere
refuses anything else with 401 ``{"id", "message": "invalid api token"}``), so a passing
record proves the key travelled in that header and nowhere else.
"""

from __future__ import annotations

import json
import re
import string
import uuid
from typing import Any

from tests.fakes.fake_upstream import (
    _chunks,
)
from tests.fakes.json_fake import JsonFake, JsonHandler, JsonScript
from tests.fakes.ollama_upstream import vector_of

#: (request body) -> Reply; the default is the tool loop of `fake_upstream.decide`.
CohereScript = JsonScript
_ALNUM = string.ascii_lowercase + string.digits


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def _document_text(document: Any) -> str:
    if isinstance(document, dict):
        return str(document.get("text") or json.dumps(document, sort_keys=True))
    return str(document)


def _documents_as_text(body: dict[str, Any]) -> dict[str, Any]:
    """The request with each tool result's `document` blocks read as their data (what the
    model is told), so the default script quotes them."""
    messages = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and message.get("role") == "tool":
            texts = [
                str(block.get("document", {}).get("data", block.get("text", "")))
                for block in content
                if isinstance(block, dict)
            ]
            message = {**message, "content": "".join(texts)}
        messages.append(message)
    return {**body, "messages": messages}


def _sse(kind: str, payload: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n".encode()


class _Handler(JsonHandler):
    def _error(self, status: int, message: str) -> None:
        self._json(status, {"id": str(uuid.uuid4()), "message": message})

    def do_POST(self) -> None:
        body = self._read_json()
        fake = self.server.fake
        headers = self._record(body if isinstance(body, dict) else {})
        if headers.get("authorization") != f"Bearer {fake.key}":
            self._error(401, "invalid api token")
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        if not isinstance(body, dict):
            self._error(400, "invalid request: body is not a JSON object")
        elif path == "/v2/chat":
            self._chat(body)
        elif path == "/v2/embed":
            self._embed(body)
        elif path in ("/v2/rerank", "/v1/rerank"):
            self._rerank(body)
        else:
            self._error(404, f"no route for POST {path}")

    def _chat(self, body: dict[str, Any]) -> None:
        fake = self.server.fake
        reply = fake.answer(body)
        if reply.status != 200:
            self._json(reply.status, reply.error_body or {"message": "fake upstream error"})
            return
        response_id = str(uuid.uuid4())
        calls = [
            {
                "id": f"{name}_{fake.rand(12)}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            for name, arguments in reply.tool_calls
        ]
        plan = "I will call the tools." if calls else ""
        usage = {
            "billed_units": {"input_tokens": len(json.dumps(body)) // 4, "output_tokens": 9},
            "tokens": {"input_tokens": len(json.dumps(body)) // 4 + 200, "output_tokens": 9},
        }
        finish = "TOOL_CALL" if calls else "COMPLETE"
        if body.get("stream") is not True:
            message: dict[str, Any] = {"role": "assistant"}
            if calls:
                message.update(tool_plan=plan, tool_calls=calls)
            else:
                message["content"] = [{"type": "text", "text": reply.text or ""}]
            self._json(
                200,
                {"id": response_id, "message": message, "finish_reason": finish, "usage": usage},
            )
            return
        events = [
            _sse("message-start", {"id": response_id, "delta": {"message": {"role": "assistant"}}})
        ]
        if calls:
            events += [
                _sse("tool-plan-delta", {"delta": {"message": {"tool_plan": piece}}})
                for piece in _chunks(plan)
            ]
            for index, call in enumerate(calls):
                opened = {**call, "function": {**call["function"], "arguments": ""}}
                events.append(
                    _sse(
                        "tool-call-start",
                        {"index": index, "delta": {"message": {"tool_calls": opened}}},
                    )
                )
                arguments = call["function"]["arguments"]
                for piece in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
                    delta = {"message": {"tool_calls": {"function": {"arguments": piece}}}}
                    events.append(_sse("tool-call-delta", {"index": index, "delta": delta}))
                events.append(_sse("tool-call-end", {"index": index}))
        else:
            start = {"message": {"content": {"type": "text", "text": ""}}}
            events.append(_sse("content-start", {"index": 0, "delta": start}))
            events += [
                _sse("content-delta", {"index": 0, "delta": {"message": {"content": {"text": p}}}})
                for p in _chunks(reply.text or "")
            ]
            events.append(_sse("content-end", {"index": 0}))
        events.append(_sse("message-end", {"delta": {"finish_reason": finish, "usage": usage}}))
        self._send(200, b"".join(events), "text/event-stream")

    def _embed(self, body: dict[str, Any]) -> None:
        texts = [str(text) for text in body.get("texts") or []]
        kinds = body.get("embedding_types") or ["float"]
        self._json(
            200,
            {
                "id": str(uuid.uuid4()),
                "embeddings": {str(kind): [vector_of(text) for text in texts] for kind in kinds},
                "texts": texts,
                "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": 7}},
                "response_type": "embeddings_by_type",
            },
        )

    def _rerank(self, body: dict[str, Any]) -> None:
        query = _words(str(body.get("query") or ""))
        documents = list(body.get("documents") or [])
        scored = [
            (len(query & _words(_document_text(doc))) / (len(query) or 1), index)
            for index, doc in enumerate(documents)
        ]
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        top = body.get("top_n") or len(scored)
        results = [
            {"index": index, "relevance_score": round(score, 6)} for score, index in scored[:top]
        ]
        self._json(
            200,
            {
                "id": str(uuid.uuid4()),
                "results": results,
                "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
            },
        )


class FakeCohere(JsonFake):
    """A fake Cohere API on 127.0.0.1 (see the module docstring)."""

    thread_name = "fake-cohere"

    handler = _Handler
    default_key = "co-secret-key"

    def as_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        return _documents_as_text(body)

    def rand(self, length: int) -> str:
        with self._lock:
            return "".join(self._rng.choice(_ALNUM) for _ in range(length))
