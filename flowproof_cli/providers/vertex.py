"""Vertex AI: google-genai in Vertex mode appends `/v1beta1/projects/...` to
GOOGLE_VERTEX_BASE_URL, `AnthropicVertex` appends `/projects/...` to
ANTHROPIC_VERTEX_BASE_URL (so it gets `/v1`). Both authenticate with Application Default
Credentials: the agent gets placeholder ones (`google_credentials.py`), which start
offline, and the proxy drops the token they make."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from flowproof_cli.providers.base import Provider
from flowproof_cli.providers.google_credentials import (
    CREDENTIALS_FILE,
    CREDENTIALS_VARIABLE,
    credentials_path,
    placeholder_service_account_json,
)

#: What google-genai puts in its client headers.
_GENAI_CLIENT = "google-genai-sdk/"


@dataclass(frozen=True)
class VertexProvider(Provider):
    def agent_files(self, folder: str) -> dict[str, str]:
        return {CREDENTIALS_FILE: placeholder_service_account_json()}

    def file_variables(self, folder: str) -> dict[str, str]:
        return {CREDENTIALS_VARIABLE: credentials_path(folder)}

    def unknown_path_hint(self, path: str, headers: Mapping[str, str]) -> str:
        """Why google-genai called the bare base URL, when it did: in Vertex mode with a
        custom base URL and no project passed in code (only GOOGLE_CLOUD_PROJECT/LOCATION),
        it sends every call to the base URL itself, without path, project, method or
        credential (its "API gateway" mode)."""
        if path.split("?", 1)[0].strip("/"):
            return ""
        said = f"{headers.get('x-goog-api-client', '')} {headers.get('user-agent', '')}"
        if _GENAI_CLIENT not in said:
            return ""
        return (
            ". google-genai sent this model call without its path: in Vertex AI mode "
            "(GOOGLE_GENAI_USE_VERTEXAI) it does so when the project and location come from "
            "the environment alone. Fix: pass them in code, genai.Client(vertexai=True, "
            "project=..., location=...) (docs/vertex.md)"
        )


VERTEX = VertexProvider(
    "vertex",
    root_url_variables=("GOOGLE_VERTEX_BASE_URL",),
    v1_url_variables=("ANTHROPIC_VERTEX_BASE_URL",),
)
