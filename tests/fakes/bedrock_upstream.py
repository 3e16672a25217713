"""A fake Amazon Bedrock runtime for flowproof's tests (stdlib only).

It answers the plain operations record forwards:

* ``POST /model/<modelId>/converse``: Converse (tool calls as ``toolUse`` blocks)
* ``POST /model/<modelId>/invoke``: InvokeModel with an Anthropic Messages body
  (``anthropic_version: bedrock-2023-05-31``), a Titan embedding body (``inputText``) or a
  Cohere embedding body (``texts``)

and refuses the streaming twins (``converse-stream``, ``invoke-with-response-stream``) with
a 400: record must forward the plain call and synthesize the stream itself.

Every request must be signed with AWS SigV4 for service ``bedrock`` by the one credential
pair the fake knows (``ACCESS_KEY`` / ``SECRET_KEY``), or carry its one Bedrock API key
(``API_KEY``, as ``Authorization: Bearer``), as Bedrock checks them: the canonical
request is rebuilt from what arrived (the path URI-encoded again, the signed headers, the
body's SHA-256), the signing key derived from the secret, date, region and service. An
unsigned request is answered 403 ``MissingAuthenticationTokenException``, an unknown key
403 ``UnrecognizedClientException``, a wrong signature 403 ``InvalidSignatureException``,
each with the ``x-amzn-ErrorType`` header Bedrock sends. So a record that passes proves the
forwarded request was re-signed with flowproof's credentials, for the upstream's host.

Ids (``tooluse_``, ``toolu_bdrk_``, ``msg_bdrk_``) and embedding values are random, so a
replay that passes proves flowproof answered from the trace.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import random
import re
import socketserver
import string
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from tests.fakes.fake_upstream import (
    HOST,
    Conversation,
    Headers,
    RecordedRequest,
    Reply,
    ThreadServed,
    decide,
)

ACCESS_KEY = "AKIAFLOWPROOFTEST0001"
SECRET_KEY = "fakeBedrockSecret/K7MDENG+bPxRfiCYEXAMPLEKEY"
REGION = "us-east-1"
#: The one Bedrock API key the fake accepts (as `Authorization: Bearer`).
API_KEY = "ABSKZmxvd3Byb29mLWZha2UtYmVkcm9jay1hcGkta2V5"
SERVICE = "bedrock"
_ALNUM = string.ascii_letters + string.digits
_AUTH = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, ?SignedHeaders=(?P<signed>[a-z0-9;-]+), ?"
    r"Signature=(?P<signature>[0-9a-f]{64})$"
)
#: How far the request's X-Amz-Date may be from the fake's clock (Bedrock allows 5 min).
_SKEW = datetime.timedelta(minutes=5)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def expected_signature(
    method: str, raw_path: str, headers: Headers, body: bytes, signed: list[str], scope: str
) -> str:
    """The SigV4 signature AWS computes for this request (non-S3 rules: the path is
    URI-encoded a second time, the query sorted)."""
    path, _, query = raw_path.partition("?")
    canonical_query = "&".join(
        sorted(
            f"{quote(unquote(k), safe='-_.~')}={quote(unquote(v), safe='-_.~')}"
            for k, _, v in (pair.partition("=") for pair in query.split("&") if pair)
        )
    )
    canonical_headers = "".join(
        f"{name}:{' '.join(str(headers.get(name, '')).split())}\n" for name in signed
    )
    canonical = "\n".join(
        [
            method,
            quote(path, safe="/~"),
            canonical_query,
            canonical_headers,
            ";".join(signed),
            hashlib.sha256(body).hexdigest(),
        ]
    )
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            str(headers.get("x-amz-date")),
            scope,
            hashlib.sha256(canonical.encode()).hexdigest(),
        ]
    )
    date, region, service, _ = scope.split("/")
    key = _hmac(("AWS4" + SECRET_KEY).encode(), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def auth_problem(method: str, raw_path: str, headers: Headers, body: bytes) -> str | None:
    """Why Bedrock would refuse this request's signature (None: it is good). The answer's
    error type and message, as `Type: message`."""
    authorization = headers.get("authorization")
    if not authorization:
        return "MissingAuthenticationTokenException: Missing Authentication Token"
    if authorization.lower().startswith("bearer "):  # a Bedrock API key
        if authorization[len("bearer ") :].strip() == API_KEY:
            return None
        return "UnrecognizedClientException: Invalid API Key format: Must start with pre-defined prefix"
    found = _AUTH.match(authorization)
    if found is None:
        return "IncompleteSignatureException: Authorization header requires a SigV4 signature."
    if found["key"] != ACCESS_KEY:
        return "UnrecognizedClientException: The security token included in the request is invalid."
    signed = found["signed"].split(";")
    if "host" not in signed or "x-amz-date" not in signed:
        return "IncompleteSignatureException: host and x-amz-date must be signed."
    if found["service"] != SERVICE or found["region"] != REGION:
        return (
            f"InvalidSignatureException: Credential should be scoped to a valid region "
            f"({REGION}) and service ({SERVICE})."
        )
    try:
        stamp = datetime.datetime.strptime(str(headers.get("x-amz-date")), "%Y%m%dT%H%M%SZ")
    except ValueError:
        return "IncompleteSignatureException: X-Amz-Date is not a SigV4 date."
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    if abs(now - stamp) > _SKEW:
        return "InvalidSignatureException: Signature expired."
    scope = f"{found['date']}/{found['region']}/{found['service']}/aws4_request"
    expected = expected_signature(method, raw_path, headers, body, signed, scope)
    if not hmac.compare_digest(expected, found["signature"]):
        return (
            "InvalidSignatureException: The request signature we calculated does not match "
            "the signature you provided."
        )
    return None


def _text(blocks: Any) -> str:
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        return ""
    return "".join(str(b["text"]) for b in blocks if isinstance(b, dict) and "text" in b)


def converse_conversation(body: dict[str, Any]) -> Conversation:
    conv = Conversation(system=_text(body.get("system")))
    config = body.get("toolConfig") or {}
    for tool in config.get("tools") or []:
        spec = tool.get("toolSpec") if isinstance(tool, dict) else None
        if isinstance(spec, dict) and spec.get("name"):
            conv.tools.append(str(spec["name"]))
    for message in body.get("messages") or []:
        if message.get("role") != "user":
            continue
        results = [b["toolResult"] for b in message.get("content") or [] if "toolResult" in b]
        if results:
            conv.tool_results += [_text(r.get("content")) or json.dumps(r) for r in results]
        else:
            conv.user_texts.append(_text(message.get("content")))
    return conv


def anthropic_conversation(body: dict[str, Any]) -> Conversation:
    conv = Conversation(system=_text(body.get("system")))
    conv.tools = [str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)]
    for message in body.get("messages") or []:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            conv.tool_results += [_text(r.get("content")) for r in results]
        else:
            conv.user_texts.append(_text(content))
    return conv


class BedrockFake(ThreadServed):
    """A scripted fake Bedrock runtime on 127.0.0.1 (see the module docstring).

    ``script(operation, body) -> Reply`` overrides the default tool loop; ``operation`` is
    ``converse`` or ``invoke``. A Reply with a status other than 200 answers with Bedrock's
    error shape and ``x-amzn-ErrorType``.
    """

    thread_name = "fake-bedrock"

    def __init__(self, script: Any = None, *, port: int = 0) -> None:
        super().__init__(port)
        self.script = script
        self.requests: list[RecordedRequest] = []
        self._rng = random.Random()
        self._lock = threading.Lock()

    def make_server(self, port: int) -> socketserver.TCPServer:
        fake = self

        class Handler(_Handler):
            owner = fake

        server = ThreadingHTTPServer((HOST, port), Handler)
        server.daemon_threads = True
        return server

    def rand_id(self, prefix: str, length: int = 24) -> str:
        with self._lock:
            return prefix + "".join(self._rng.choice(_ALNUM) for _ in range(length))

    def vector(self, size: int = 8) -> list[float]:
        with self._lock:
            return [round(self._rng.uniform(-1, 1), 6) for _ in range(size)]

    # ---- answers ----

    def reply(self, operation: str, body: dict[str, Any]) -> Reply:
        if self.script is not None:
            reply: Reply = self.script(operation, body)
            return reply
        if operation == "converse":
            return decide(converse_conversation(body))
        return decide(anthropic_conversation(body))

    def converse(self, model: str, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"text": reply.text})
        for name, arguments in reply.tool_calls:
            use = {"toolUseId": self.rand_id("tooluse_"), "name": name}
            content.append({"toolUse": {**use, "input": json.loads(arguments or "{}")}})
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": "tool_use" if reply.tool_calls else "end_turn",
            "usage": {"inputTokens": 57, "outputTokens": 21, "totalTokens": 78},
            "metrics": {"latencyMs": self._rng.randint(200, 900)},
        }

    def invoke(self, model: str, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        if "inputText" in body:  # Titan text embeddings
            return {"embedding": self.vector(), "inputTextTokenCount": len(body["inputText"])}
        if "texts" in body:  # Cohere embed
            return {
                "id": self.rand_id("", 8) + "-" + self.rand_id("", 4),
                "embeddings": [self.vector() for _ in body["texts"]],
                "texts": body["texts"],
                "response_type": "embeddings_floats",
            }
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for name, arguments in reply.tool_calls:
            content.append(
                {
                    "type": "tool_use",
                    "id": self.rand_id("toolu_bdrk_"),
                    "name": name,
                    "input": json.loads(arguments or "{}"),
                }
            )
        return {
            "id": self.rand_id("msg_bdrk_"),
            "type": "message",
            "role": "assistant",
            "model": model.split(".", 1)[-1] if "." in model else model,
            "content": content,
            "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 57, "output_tokens": 21},
        }


class _Handler(BaseHTTPRequestHandler):
    owner: BedrockFake
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: Any, error_type: str | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("x-amzn-RequestId", self.owner.rand_id("", 32))
        if error_type:
            self.send_header("x-amzn-ErrorType", f"{error_type}:http://internal.amazon.com/")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, problem: str) -> None:
        kind, _, message = problem.partition(": ")
        self._send(status, {"message": message}, kind)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        headers = Headers((k, v) for k, v in self.headers.items())
        headers["host"] = self.headers.get("host", "")
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        found = re.match(r"^/model/([^/]+)/([a-z-]+)$", urlsplit(self.path).path)
        operation = found.group(2) if found else None
        self.owner.requests.append(
            RecordedRequest(self.path, dict(headers), body, "POST", operation)
        )
        problem = auth_problem("POST", self.path, headers, raw)
        if problem is not None:
            self._error(403, problem)
            return
        if found is None or operation not in ("converse", "invoke"):
            self._error(
                400 if found else 404,
                f"ValidationException: the fake answers only converse and invoke, not "
                f"{self.path} (record forwards the plain operation)",
            )
            return
        model = unquote(found.group(1))
        reply = self.owner.reply(operation, body)
        if reply.status != 200:
            self._send(
                reply.status,
                reply.error_body or {"message": "scripted failure"},
                "ThrottlingException" if reply.status == 429 else "ValidationException",
            )
            return
        answer = (
            self.owner.converse(model, body, reply)
            if operation == "converse"
            else self.owner.invoke(model, body, reply)
        )
        self._send(200, answer)
