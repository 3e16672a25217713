"""A fake Azure OpenAI resource: the scripted fake upstream behind Azure's paths and auth.

It answers what a resource at ``https://<resource>.openai.azure.com`` answers, and refuses
what Azure refuses, so a record that passes against it proves the forwarding is right:

* ``POST /openai/deployments/<deployment>/chat/completions?api-version=...``,
  ``/openai/deployments/<deployment>/responses?api-version=...``,
  ``/openai/responses?api-version=...`` and the ``/openai/v1/...`` API (no api-version);
  anything else is a 404 in Azure's error shape;
* the key only in ``api-key``: a missing or wrong key is a 401, and so is the key sent as
  ``Authorization: Bearer`` (Azure reads that header as an Entra ID token, never a key);
* a versioned route without ``api-version`` is a 404, as Azure answers it.

The deployment named in the path is checked against ``deployments`` and kept on each
request (``fake.deployments_seen``). Ids and timestamps are minted as the base fake does.

    with AzureUpstream(key="azure-key-123", deployments={"weather-gpt"}) as azure:
        azure.base_url  # FLOWPROOF_UPSTREAM_AZURE
"""

from __future__ import annotations

import json
import re
import socketserver
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes import endpoints_upstream as endpoints
from tests.fakes.fake_upstream import FakeUpstream, Script, _Handler, _Server

_ROUTES = r"(chat/completions|responses|embeddings|completions)"
_VERSIONED = re.compile(rf"^/openai/(?:deployments/([^/]+)/)?{_ROUTES}$")
_V1 = re.compile(rf"^/openai/v1/{_ROUTES}$")
#: Azure's endpoints around chat, answered as OpenAI's are (their key was checked above).
_ENDPOINTS = {"embeddings": endpoints._embeddings, "completions": endpoints._completions}


def azure_error(code: str, message: str) -> dict[str, Any]:
    """Azure's error body (OpenAI's shape, Azure's codes)."""
    return {"error": {"code": code, "message": message}}


class AzureUpstream(FakeUpstream):
    thread_name = "fake-azure"

    def __init__(
        self,
        *,
        key: str,
        deployments: set[str] | frozenset[str] = frozenset({"weather-gpt"}),
        script: Script | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(script=script, seed=seed)
        self.key = key
        self.deployments = set(deployments)
        self.deployments_seen: list[str | None] = []
        self.refused: list[str] = []

    def make_server(self, port: int) -> socketserver.TCPServer:
        server = _Server(self, port)
        server.RequestHandlerClass = _AzureHandler
        return server

    def refusal(self, path: str, headers: Any) -> tuple[int, dict[str, Any]] | None:
        """Why Azure would refuse this request (status, body), or None."""
        parts = urlsplit(path)
        versioned = _VERSIONED.match(parts.path.rstrip("/"))
        if versioned is None and _V1.match(parts.path.rstrip("/")) is None:
            return 404, azure_error("404", f"Resource not found: {parts.path}")
        if versioned is not None and not parse_qs(parts.query).get("api-version"):
            return 404, azure_error("404", "Resource not found (no api-version)")
        if headers.get("authorization"):
            return 401, azure_error(
                "401",
                "Access denied due to invalid subscription key or wrong API endpoint. "
                "(A key sent as Bearer is read as an Entra ID token.)",
            )
        if headers.get("api-key") != self.key:
            return 401, azure_error("401", "Access denied due to invalid subscription key.")
        deployment = versioned.group(1) if versioned else None
        if deployment is not None and deployment not in self.deployments:
            return 404, azure_error("DeploymentNotFound", f"{deployment} does not exist")
        self.deployments_seen.append(deployment)
        return None


class _AzureHandler(_Handler):
    def do_POST(self) -> None:
        fake = self.server.fake
        assert isinstance(fake, AzureUpstream)
        refused = fake.refusal(self.path, self.headers)
        route = urlsplit(self.path).path.rstrip("/")
        name = route.rsplit("/", 1)[-1]
        if refused is None and name in _ENDPOINTS and not route.endswith("/chat/completions"):
            body = json.loads(self._read_body() or b"{}")
            self._record(body, name)
            self._send_json(*_ENDPOINTS[name](fake.rng(), body))
            return
        if refused is None:
            super().do_POST()
            return
        status, body = refused
        fake.refused.append(f"{status} {self.path}")
        self._read_body()
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)
