"""Azure OpenAI: the OpenAI wire formats under Azure's paths, with Azure's `api-key` header.

The `AzureOpenAI` clients send `/openai/deployments/<deployment>/chat/completions
?api-version=...` (a Node client whose base URL comes from OPENAI_BASE_URL sends
`/v1/deployments/<deployment>/...`), `/openai/responses?api-version=...`, and the newer
`/openai/v1/...`, with the key in `api-key`. The bodies are OpenAI's, so each dialect here
is the OpenAI one with Azure's routing, matching and upstream added:

* a request is Azure's when its path names a deployment, or when the client sent `api-key`:
  `/openai/v1/...` is also the path of OpenAI-compatible services (Groq), which send a
  Bearer key, so the auth the client sends tells them apart, never a guess;
* the deployment is part of matching (folded into the request as `deployment`), so a flow
  recorded against one deployment does not replay against another; `api-version` is not
  (a client upgrade changes it, not the conversation);
* record forwards to FLOWPROOF_UPSTREAM_AZURE (`https://<resource>.openai.azure.com`) under
  the same Azure path and query, with FLOWPROOF_KEY_AZURE in `api-key` and nowhere else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import parse_qsl

from flowproof_cli.dialects.base import JSON, Dialect, bare_key
from flowproof_cli.dialects.openai_chat import OpenAIChat
from flowproof_cli.dialects.openai_endpoints import OpenAICompletions, OpenAIEmbeddings
from flowproof_cli.dialects.openai_responses import OpenAIResponses

#: The request field the path's deployment is matched as.
DEPLOYMENT_FIELD = "deployment"
#: Azure's key header (OpenAI-compatible services send `authorization: Bearer`).
KEY_HEADER = "api-key"
_DEPLOYMENT = re.compile(r"/deployments/([^/?]+)/")
_AZURE_ROOT = re.compile(r"/openai(?:/v1)?/?$")


def deployment_of(path: str) -> str | None:
    """The deployment a request path names (`/openai/deployments/<d>/...`), else None."""
    found = _DEPLOYMENT.search(path.split("?", 1)[0])
    return found.group(1) if found else None


def azure_path(path: str) -> str:
    """The agent's path as Azure serves it, from `/openai/` on (query kept). A path reaching
    the proxy under another prefix (a Node client's `/v1/deployments/<d>/...` or
    `/v1/responses?api-version=...`) is put back under `/openai`: the versioned API when
    the query names an `api-version`, the `/openai/v1` API otherwise."""
    clean, _, query = path.partition("?")
    clean = "/" + clean.strip("/")
    suffix = f"?{query}" if query else ""
    if "/openai/" in clean:
        return clean[clean.index("/openai/") :] + suffix
    if (found := _DEPLOYMENT.search(clean + "/")) is not None:
        return "/openai" + clean[found.start() :] + suffix
    last = clean.rsplit("/v1/", 1)[-1].lstrip("/")
    versioned = any(name == "api-version" for name, _ in parse_qsl(query))
    return (f"/openai/{last}" if versioned else f"/openai/v1/{last}") + suffix


class AzureRoutes(Dialect):
    """What Azure adds to an OpenAI dialect: first in the bases of each class below, so
    its methods win over the OpenAI ones."""

    provider = "azure"

    #: The key an Azure client sends (`AzureOpenAI(api_key=...)`), or an Entra ID token.
    auth_headers = (KEY_HEADER, "authorization")
    plain_request = Dialect.plain_request  # its path needs a deployment: refused

    def claims(self, path: str, headers: Mapping[str, str]) -> bool | None:
        """Azure's when the path names a deployment or the client sent `api-key`; any
        other request is declined (the OpenAI dialect takes it)."""
        return deployment_of(path) is not None or KEY_HEADER in headers

    def normalize(self, path: str, body: JSON) -> JSON:
        normalized = super().normalize(path, body)
        deployment = deployment_of(path)
        if deployment is not None:
            normalized = {**normalized, DEPLOYMENT_FIELD: deployment}
        return normalized

    def upstream_url_for_path(self, base_url: str, path: str) -> str:
        """FLOWPROOF_UPSTREAM_AZURE (with or without `/openai` or `/openai/v1` at its
        end) plus the agent's Azure path and query."""
        base = _AZURE_ROOT.sub("", base_url.rstrip("/"))
        return f"{base}{azure_path(path)}"

    def upstream_auth(self, key: str) -> dict[str, str]:
        """Azure's `api-key` header, with any `Bearer ` prefix removed: Azure refuses a
        key sent as Bearer (that header is for Entra ID tokens)."""
        return {KEY_HEADER: bare_key(key)}

    def upstream_body(self, body: JSON) -> JSON | None:
        """The OpenAI body without the folded-in deployment: Azure reads it from the URL."""
        forwarded = super().upstream_body(body)
        if forwarded is None:
            return None
        return {k: v for k, v in forwarded.items() if k != DEPLOYMENT_FIELD}


class AzureChat(AzureRoutes, OpenAIChat):
    """Chat Completions under `/openai/deployments/<d>/chat/completions` or `/openai/v1`."""

    name = "azure-chat"
    example_path = "/openai/deployments/weather-gpt/chat/completions?api-version=2024-10-21"


class AzureResponses(AzureRoutes, OpenAIResponses):
    """The Responses API under `/openai/responses`, `/openai/deployments/<d>/responses` or
    `/openai/v1/responses`."""

    name = "azure-responses"
    example_path = "/openai/deployments/weather-gpt/responses?api-version=2025-04-01-preview"


class AzureEmbeddings(AzureRoutes, OpenAIEmbeddings):
    """Embeddings under `/openai/deployments/<d>/embeddings` or `/openai/v1/embeddings`: a
    RAG agent's retrieval on Azure, matched with its deployment like the chat beside it."""

    name = "azure-embeddings"
    example_path = "/openai/deployments/embed-small/embeddings?api-version=2024-10-21"


class AzureCompletions(AzureRoutes, OpenAICompletions):
    """Legacy completions under `/openai/deployments/<d>/completions` (never a chat path:
    routing takes the longer `chat/completions` suffix for those)."""

    name = "azure-completions"
    example_path = "/openai/deployments/instruct/completions?api-version=2024-10-21"

    def claims(self, path: str, headers: Mapping[str, str]) -> bool | None:
        if OpenAICompletions.claims(self, path, headers) is False:  # a chat path
            return False
        return AzureRoutes.claims(self, path, headers)
