"""Vertex AI: Gemini and Claude as Google Cloud serves them, under a project and a location.

Vertex carries in the URL what the public APIs carry in the body or in the host:

- Gemini (`google-genai` with `vertexai=True`):
  `/v1beta1/projects/<p>/locations/<l>/publishers/google/models/<m>:generateContent`
  (`:streamGenerateContent?alt=sse` streamed; a tuned model is
  `.../locations/<l>/endpoints/<id>:generateContent`). The body is Gemini's
  `generateContent` body, the answer Gemini's: `GeminiGenerateContent` reads both.
- Claude (`anthropic`'s `AnthropicVertex`):
  `/v1/projects/<p>/locations/<l>/publishers/anthropic/models/<m>:rawPredict`
  (`:streamRawPredict` streamed). The body is an Anthropic Messages body without `model`,
  with an `anthropic_version` field (the API version travels in the body here); the answer
  and its SSE stream are Anthropic's.

`normalize` folds the path's model, project and location into the body (`model`,
`project`, `location`), so each is matched strictly like any other field and a divergence
names the one that changed; `upstream_body` takes them out again, since the upstream reads
them from the URL. Record forwards to the Vertex upstream (`FLOWPROOF_UPSTREAM_VERTEX`, e.g.
`https://us-central1-aiplatform.googleapis.com`) with the record key as an OAuth bearer
token (`Authorization: Bearer`, what `gcloud auth print-access-token` prints), and always
asks for the plain answer (`:generateContent`, `:rawPredict`): the stream is synthesized, at
record and at replay alike.

Vertex's paths end like the public Gemini API's (`:generateContent`): they are told apart
by the path's shape (`projects/<p>/locations/<l>/...`, `publishers/<publisher>/models/...`),
which the public API never has, never by guessing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode

from flowproof_cli.dialects.anthropic import AnthropicMessages
from flowproof_cli.dialects.base import JSON, Dialect, without_transport
from flowproof_cli.dialects.gemini import GENERATE, STREAM_GENERATE, GeminiGenerateContent

RAW_PREDICT = ":rawPredict"
STREAM_RAW_PREDICT = ":streamRawPredict"

#: Fields `normalize` folds in from the path: matched, never sent upstream in the body.
PATH_FIELDS = ("model", "project", "location")

#: `[/v1beta1]/projects/<p>/locations/<l>/<resource>:<method>`, the resource a publisher's
#: model or a tuned model's endpoint; or the project-less form of Vertex's express mode
#: (`/v1/publishers/google/models/<m>:<method>`), which has no endpoints.
_RESOURCE = re.compile(
    r"(?:^|/)(?:projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/"
    r"(?:endpoints/(?P<endpoint>[^/:]+)|(?=publishers/)))?"
    r"(?:publishers/(?P<publisher>[^/]+)/models/(?P<model>[^/:]+))?"
    r":(?P<method>[A-Za-z]+)$"
)
#: An API version path segment: `v1`, `v1beta1`, ...
_VERSION = re.compile(r"/v\d+(?:[a-z]+\d*)?(?=/)")
#: Query parameters never forwarded: the stream format (record asks for the plain answer)
#: and a placeholder key a client may put in the query.
_DROPPED_QUERY = frozenset({"alt", "key"})
#: The model id AnthropicVertex counts tokens at (`.../models/count-tokens:rawPredict`):
#: not a conversation turn, so not this dialect's.
_COUNT_TOKENS_MODEL = "count-tokens"


@dataclass(frozen=True)
class VertexPath:
    """What a Vertex request path names."""

    project: str | None  # None in express mode (no project in the path)
    location: str | None
    publisher: str | None  # `google`, `anthropic`; None for a tuned model's endpoint
    model: str  # the model id, or `endpoints/<id>`
    method: str  # `generateContent`, `rawPredict`, ...


def vertex_path(path: str) -> VertexPath | None:
    """The parts of a Vertex model path (query string ignored), or None for any other."""
    clean = path.split("?", 1)[0].rstrip("/")
    found = _RESOURCE.search(clean)
    if found is None or (found["endpoint"] is None) == (found["model"] is None):
        return None  # exactly one of a model and an endpoint
    endpoint, project, location = found["endpoint"], found["project"], found["location"]
    return VertexPath(  # as named, not as escaped in the path (`%40` is `@`)
        project=unquote(project) if project is not None else None,
        location=unquote(location) if location is not None else None,
        publisher=found["publisher"],
        model=f"endpoints/{unquote(endpoint)}" if endpoint else unquote(found["model"]),
        method=found["method"],
    )


def _folded(path: str, body: JSON) -> JSON:
    """`body` with the path's project and location folded in (model: by the caller)."""
    parts = vertex_path(path)
    if parts is None:
        return body
    folded = dict(body)
    if parts.project is not None:
        folded["project"] = parts.project
    if parts.location is not None:
        folded["location"] = parts.location
    return folded


def upstream_url(base_url: str, path: str, plain: Mapping[str, str]) -> str:
    """The base URL plus the agent's path from its API version segment on, the streaming
    method replaced by its plain twin (`plain`: streaming -> plain method suffix), and the
    query without `alt` or `key`.

    `https://us-central1-aiplatform.googleapis.com` + `/v1/projects/p/...:rawPredict`. A
    prefix before the version (a proxy base with `/v1`) is dropped; a base that itself ends
    in a version segment has it replaced by the agent's.
    """
    clean, _, query = path.partition("?")
    clean = "/" + clean.strip("/")
    versions = list(_VERSION.finditer(clean))
    rest = clean[versions[-1].start() :] if versions else clean
    for streaming, twin in plain.items():
        if rest.endswith(streaming):
            rest = rest[: -len(streaming)] + twin
    base = base_url.rstrip("/")
    if versions:
        base = re.sub(r"/v\d+(?:[a-z]+\d*)?$", "", base)
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k not in _DROPPED_QUERY]
    url = f"{base}{rest}"
    return f"{url}?{urlencode(kept)}" if kept else url


def _bearer(key: str) -> dict[str, str]:
    """An OAuth access token as Google Cloud takes it (a bare token is Bearer-wrapped)."""
    return {"authorization": key if key.lower().startswith("bearer ") else f"Bearer {key}"}


class VertexGemini(GeminiGenerateContent):
    """Gemini's `generateContent` under a Vertex project and location."""

    name = "vertex-gemini"
    example_path = (
        "/v1/projects/demo/locations/us-central1/publishers/google/models/"
        "gemini-2.5-flash:generateContent"
    )
    provider = "vertex"
    route_suffixes = (GENERATE, STREAM_GENERATE)
    auth_headers = ("authorization", "x-goog-api-key")
    plain_request = Dialect.plain_request  # its path needs a project: refused

    def claims(self, path: str, headers: Mapping[str, str]) -> bool:
        """Any Vertex-shaped path ending in a generateContent method (its suffixes are the
        public Gemini API's too, which never has that shape: declined there)."""
        parts = vertex_path(path)
        return parts is not None and f":{parts.method}" in self.route_suffixes

    def normalize(self, path: str, body: JSON) -> JSON:
        """Gemini's (the model and the streaming choice from the path), plus the project
        and location."""
        normalized = _folded(path, super().normalize(path, body))
        parts = vertex_path(path)
        if parts is not None:
            normalized["model"] = parts.model
        return normalized

    def upstream_url_for_path(self, base_url: str, path: str) -> str:
        return upstream_url(base_url, path, {STREAM_GENERATE: GENERATE})

    def upstream_auth(self, key: str) -> dict[str, str]:
        return _bearer(key)

    def upstream_body(self, body: JSON) -> JSON:
        """The path's fields and the transport fields dropped: the upstream reads the model,
        project and location from the URL."""
        return {k: v for k, v in without_transport(body).items() if k not in PATH_FIELDS}


class VertexAnthropic(AnthropicMessages):
    """Anthropic Messages as Vertex serves Claude (`rawPredict`, `streamRawPredict`)."""

    name = "vertex-anthropic"
    example_path = (
        "/v1/projects/demo/locations/us-east5/publishers/anthropic/models/"
        "claude-sonnet-4@20250514:rawPredict"
    )
    provider = "vertex"
    # AnthropicMessages's one suffix reads as tuple[str]: Dialect's type is tuple[str, ...].
    route_suffixes = (RAW_PREDICT, STREAM_RAW_PREDICT)  # type: ignore[assignment]
    auth_headers = ("authorization", "x-api-key")
    plain_request = Dialect.plain_request  # its path needs a project: refused

    def claims(self, path: str, headers: Mapping[str, str]) -> bool:
        """A Claude model's `rawPredict` under a Vertex path; token counting declined."""
        parts = vertex_path(path)
        return (
            parts is not None
            and parts.publisher == "anthropic"
            and parts.model != _COUNT_TOKENS_MODEL
            and f":{parts.method}" in self.route_suffixes
        )

    def normalize(self, path: str, body: JSON) -> JSON:
        """The path's model, project and location folded in; `:streamRawPredict` as the
        transport field `stream: True` (the SDK sends `stream` in the body too)."""
        normalized = _folded(path, without_transport(body))
        parts = vertex_path(path)
        if parts is not None:
            normalized["model"] = parts.model
            if f":{parts.method}" == STREAM_RAW_PREDICT:
                normalized["stream"] = True
        return normalized

    def upstream_url_for_path(self, base_url: str, path: str) -> str:
        return upstream_url(base_url, path, {STREAM_RAW_PREDICT: RAW_PREDICT})

    def upstream_auth(self, key: str) -> dict[str, str]:
        return _bearer(key)

    def upstream_default_headers(self) -> dict[str, str]:
        """None: Vertex reads the API version from the body's `anthropic_version`."""
        return {}

    def upstream_body(self, body: JSON) -> JSON:
        return {k: v for k, v in without_transport(body).items() if k not in PATH_FIELDS}
