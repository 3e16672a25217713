"""Gemini's public API: google-genai appends `/v1/models/...` or `/v1beta/...` to the root;
it takes its key from either variable."""

from __future__ import annotations

from flowproof_cli.providers.base import PLACEHOLDER_KEY, Provider

GEMINI = Provider(
    "gemini",
    root_url_variables=("GOOGLE_GEMINI_BASE_URL",),
    placeholders={"GEMINI_API_KEY": PLACEHOLDER_KEY, "GOOGLE_API_KEY": PLACEHOLDER_KEY},
)
