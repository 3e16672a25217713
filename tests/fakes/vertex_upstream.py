"""A fake Vertex AI endpoint (stdlib only): Gemini and Claude under a project and location.

It answers what `{location}-aiplatform.googleapis.com` answers for the model calls flowproof
records, and checks them the way Vertex does, so a passing record proves the forwarding:

* ``POST /v1[beta1]/projects/<p>/locations/<l>/publishers/google/models/<m>:generateContent``
  (and ``:streamGenerateContent``, ``?alt=sse`` for SSE): Gemini's body and answer;
* ``POST /v1/projects/<p>/locations/<l>/publishers/anthropic/models/<m>:rawPredict`` (and
  ``:streamRawPredict``): an Anthropic Messages body that must carry ``anthropic_version``
  (in the body: Vertex takes no ``anthropic-version`` header) and no ``model`` (Vertex reads
  it from the URL).

Every request must carry ``Authorization: Bearer <token>`` with the token the fake was made
with (an OAuth access token); an API key header (``x-goog-api-key``, ``x-api-key``) is not
an OAuth token and is refused like a missing bearer: 401 ``UNAUTHENTICATED`` in Google's
error shape, as Vertex answers. Any other path is a 404 in that shape. Ids are minted at
random (the shared `Renderer` of tests/fakes/fake_upstream.py), so a replay that passes
proves flowproof answered from the trace.

    with VertexUpstream(token="ya29.fake") as fake:
        fake.base_url      # "http://127.0.0.1:PORT": FLOWPROOF_UPSTREAM_VERTEX
        fake.model_requests()[0].path

As a process, to record inside a network namespace with only loopback up (the fake and
flowproof both in it), playing a coding CLI's scripted model (tests/fakes/cli_scripts.py):

    python -m tests.fakes.vertex_upstream record SPEC [CLI]
"""

from __future__ import annotations

import json
import os
import re
import socketserver
import subprocess
import sys
from typing import Any

from tests.fakes.fake_upstream import (
    DIALECT_ANTHROPIC,
    DIALECT_GEMINI,
    FakeUpstream,
    Script,
    _Handler,
    _Server,
    error_body,
)

_PATH = re.compile(
    r"^/v1(?:beta1)?/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/publishers/"
    r"(?P<publisher>google|anthropic)/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$"
)
_METHODS = {
    ("google", "generateContent"): (DIALECT_GEMINI, False),
    ("google", "streamGenerateContent"): (DIALECT_GEMINI, True),
    ("anthropic", "rawPredict"): (DIALECT_ANTHROPIC, False),
    ("anthropic", "streamRawPredict"): (DIALECT_ANTHROPIC, True),
}


def _google_error(status: int, message: str) -> dict[str, Any]:
    return error_body(DIALECT_GEMINI, status, message)


class _VertexHandler(_Handler):
    server: _VertexServer

    def do_GET(self) -> None:
        self._record({}, None)
        self._send_json(404, _google_error(404, f"no route for GET {self.path}"))

    def do_POST(self) -> None:
        raw = self._read_body()
        try:
            parsed = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            parsed = None
        body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
        clean = self.path.split("?", 1)[0]
        found = _PATH.match(clean)
        method = _METHODS.get((found["publisher"], found["method"])) if found else None
        self._record(body, method[0] if method else None)
        if found is None or method is None:
            self._send_json(404, _google_error(404, f"no Vertex model route at POST {clean}"))
            return
        fake = self.server.fake
        auth = self.headers.get("authorization", "")
        if auth != f"Bearer {fake.token}":
            said = "no bearer token" if not auth.lower().startswith("bearer ") else "a bearer"
            self._send_json(
                401,
                _google_error(
                    401,
                    "Request had invalid authentication credentials. Expected OAuth 2 access "
                    f"token, login cookie or other valid authentication credential (got {said})",
                ),
            )
            return
        if not isinstance(parsed, dict):
            self._send_json(400, _google_error(400, "the request body is not a JSON object"))
            return
        dialect, stream = method
        if dialect == DIALECT_ANTHROPIC:
            problem = _anthropic_problem(body)
            if problem is not None:
                self._send_json(400, error_body(DIALECT_ANTHROPIC, 400, problem))
                return
            stream = stream or body.get("stream") is True
        body = {**body, "model": found["model"]}
        self._answer(dialect, body, stream, "fake Vertex")


def _anthropic_problem(body: dict[str, Any]) -> str | None:
    """What Vertex refuses in a Claude body (the model belongs in the URL)."""
    if not isinstance(body.get("anthropic_version"), str):
        return "anthropic_version: Field required"
    if "model" in body:
        return "model: Extra inputs are not permitted (the model is named in the URL)"
    return None


class _VertexServer(_Server):
    fake: VertexUpstream

    def __init__(self, fake: VertexUpstream, port: int) -> None:
        self.fake = fake
        socketserver.TCPServer.__init__(self, ("127.0.0.1", port), _VertexHandler)


class VertexUpstream(FakeUpstream):
    """The fake Vertex endpoint; `token` is the OAuth access token it accepts."""

    thread_name = "fake-vertex"

    def __init__(
        self,
        token: str = "ya29.fake-vertex-token",
        script: Script | None = None,
        *,
        port: int = 0,
    ) -> None:
        super().__init__(script, port=port)
        self.token = token

    def make_server(self, port: int) -> socketserver.TCPServer:
        return _VertexServer(self, port)


#: The token `main` records with (FLOWPROOF_KEY_VERTEX), and the only one its fake takes.
RECORD_TOKEN = "ya29.vertex-cli-record-token"


def main(argv: list[str]) -> int:
    """`record SPEC [CLI]`: serve the fake (CLI's scripted model, else the default one) and
    record SPEC through FLOWPROOF_UPSTREAM_VERTEX; flowproof's exit code."""
    if len(argv) not in (2, 3) or argv[0] != "record":
        print("usage: python -m tests.fakes.vertex_upstream record SPEC [CLI]", file=sys.stderr)
        return 2
    from tests.fakes.cli_scripts import SCRIPTS

    script = SCRIPTS[argv[2]]() if len(argv) == 3 else None
    with VertexUpstream(token=RECORD_TOKEN, script=script) as fake:
        environ = {
            **os.environ,
            "FLOWPROOF_UPSTREAM_VERTEX": fake.base_url,
            "FLOWPROOF_KEY_VERTEX": RECORD_TOKEN,
        }
        command = [sys.executable, "-m", "flowproof_cli", "record", argv[1]]
        return subprocess.run(command, env=environ, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
