"""A fake Ollama server for flowproof's tests (stdlib only): the native API as the `ollama`
clients call it.

* ``POST /api/chat``: the default tool loop of ``fake_upstream.decide`` (tools offered and no
  result yet: call them; else answer), as one JSON object with ``"stream": false``, else as
  NDJSON lines (Ollama streams by default): text in fragments, the tool calls whole in one
  line, a last ``done`` line with the counters. Tool call arguments are objects; calls carry
  no id (as most Ollama releases send them).
* ``POST /api/embed``: one vector per input, derived from the text, so a changed input
  changes the vector.
* ``POST /api/generate``: a completion of the `prompt` (its end quoted back), as one JSON
  object with ``"stream": false``, else as NDJSON `response` fragments and a last ``done``
  line with the counters and a freshly minted `context` (token ids).
* ``GET /api/tags``, ``GET /api/version``: what clients probe at start.

Every answer has a fresh ``created_at`` and random durations, so a replay that passes proves
flowproof answered from the trace. A local Ollama takes no key; built with ``key=...`` the
fake is Ollama's cloud and refuses (401) a request without ``Authorization: Bearer <key>``,
so a passing record proves the key travelled in that header.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from typing import Any

from tests.fakes.fake_upstream import (
    RecordedRequest,
    _chunks,
)
from tests.fakes.json_fake import JsonFake, JsonHandler, JsonScript

#: (request body) -> Reply; the default is the tool loop of `fake_upstream.decide`.
OllamaScript = JsonScript
EMBED_DIMENSIONS = 8


def vector_of(text: str, dimensions: int = EMBED_DIMENSIONS) -> list[float]:
    """A deterministic unit-ish vector for a text (a changed text, a changed vector)."""
    digest = hashlib.sha256(text.encode()).digest()
    return [round((byte - 128) / 128, 6) for byte in digest[:dimensions]]


class _Handler(JsonHandler):
    def _authorized(self) -> bool:
        key = self.server.fake.key
        if key is None or self.headers.get("authorization") == f"Bearer {key}":
            return True
        self._json(401, {"error": "unauthorized"})
        return False

    def do_GET(self) -> None:
        self._record({}, self.command, "ollama")
        if not self._authorized():
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/api/version":
            self._json(200, {"version": "0.12.0"})
        elif path == "/api/tags":
            self._json(200, {"models": [{"name": "llama3.2:latest", "model": "llama3.2:latest"}]})
        else:
            self._json(404, {"error": f"no route for GET {path}"})

    def do_POST(self) -> None:
        body = self._read_json()
        self._record(body if isinstance(body, dict) else {}, self.command, "ollama")
        if not self._authorized():
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        if not isinstance(body, dict):
            self._json(400, {"error": "invalid JSON body"})
        elif path == "/api/chat":
            self._chat(body)
        elif path == "/api/generate":
            self._generate(body)
        elif path == "/api/embed":
            inputs = body.get("input")
            texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
            fake = self.server.fake
            self._json(
                200,
                {
                    "model": body.get("model"),
                    "embeddings": [vector_of(str(text)) for text in texts],
                    **fake.counters(len(json.dumps(texts)) // 4),
                },
            )
        else:
            self._json(404, {"error": f"404 page not found: {path}"})

    def _chat(self, body: dict[str, Any]) -> None:
        fake = self.server.fake
        if not body.get("model"):
            self._json(400, {"error": "model is required"})
            return
        reply = fake.answer(body)
        if reply.status != 200:
            self._json(reply.status, reply.error_body or {"error": "fake upstream error"})
            return
        head = {"model": body["model"], "created_at": fake.created_at()}
        calls = [
            {"function": {"name": name, "arguments": json.loads(arguments or "{}")}}
            for name, arguments in reply.tool_calls
        ]
        text = reply.text or ""
        done = {
            **head,
            "done": True,
            "done_reason": "stop",
            **fake.counters(max(1, len(json.dumps(body)) // 4)),
        }
        if body.get("stream") is False:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                message["tool_calls"] = calls
            done["message"] = message
            self._json(200, done)
            return
        lines = [
            {**head, "message": {"role": "assistant", "content": piece}, "done": False}
            for piece in _chunks(text)
        ]
        if calls:
            lines.append(
                {
                    **head,
                    "message": {"role": "assistant", "content": "", "tool_calls": calls},
                    "done": False,
                }
            )
        lines.append({**done, "message": {"role": "assistant", "content": ""}})
        self._send(200, b"".join(json.dumps(line).encode() + b"\n" for line in lines), NDJSON)

    def _generate(self, body: dict[str, Any]) -> None:
        fake = self.server.fake
        if not body.get("model"):
            self._json(400, {"error": "model is required"})
            return
        text = f"Draft for: {str(body.get('prompt') or '')[-40:]}"
        head = {"model": body["model"], "created_at": fake.created_at()}
        done = {
            **head,
            "response": "",
            "done": True,
            "done_reason": "stop",
            "context": fake.context(),
            **fake.counters(max(1, len(json.dumps(body)) // 4)),
        }
        if body.get("stream") is False:
            self._json(200, {**done, "response": text})
            return
        lines = [{**head, "response": piece, "done": False} for piece in _chunks(text)]
        lines.append(done)
        self._send(200, b"".join(json.dumps(line).encode() + b"\n" for line in lines), NDJSON)


NDJSON = "application/x-ndjson"


class FakeOllama(JsonFake):
    """A fake Ollama server on 127.0.0.1 (see the module docstring)."""

    thread_name = "fake-ollama"

    handler = _Handler

    def model_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.method == "POST"]

    def created_at(self) -> str:
        """Now, with nanoseconds as Ollama writes them (random below the microsecond)."""
        now = datetime.datetime.now(datetime.UTC)
        with self._lock:
            nanos = self._rng.randrange(1000)
        return now.strftime("%Y-%m-%dT%H:%M:%S.%f") + f"{nanos:03d}Z"

    def context(self) -> list[int]:
        """The token ids `/api/generate` answers with (minted: they differ every call)."""
        with self._lock:
            return [self._rng.randrange(1, 128_000) for _ in range(6)]

    def counters(self, prompt_tokens: int) -> dict[str, int]:
        with self._lock:
            durations = [self._rng.randrange(10**6, 10**9) for _ in range(4)]
            produced = self._rng.randrange(5, 60)
        return {
            "total_duration": sum(durations),
            "load_duration": durations[0],
            "prompt_eval_count": prompt_tokens,
            "prompt_eval_duration": durations[1],
            "eval_count": produced,
            "eval_duration": durations[2],
        }
