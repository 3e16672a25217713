"""Anthropic: the `anthropic` SDKs append `/v1/messages` to the root themselves."""

from __future__ import annotations

from flowproof_cli.providers.base import PLACEHOLDER_KEY, Provider

ANTHROPIC = Provider(
    "anthropic",
    root_url_variables=("ANTHROPIC_BASE_URL",),
    placeholders={"ANTHROPIC_API_KEY": PLACEHOLDER_KEY},
)
