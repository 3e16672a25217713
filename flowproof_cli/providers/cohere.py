"""Cohere: the `cohere` Python SDK reads CO_API_URL and CO_API_KEY (`cohere-ai` for Node
reads the key only); some frameworks read COHERE_API_KEY."""

from __future__ import annotations

from flowproof_cli.providers.base import PLACEHOLDER_KEY, Provider

COHERE = Provider(
    "cohere",
    root_url_variables=("CO_API_URL",),
    placeholders={"CO_API_KEY": PLACEHOLDER_KEY, "COHERE_API_KEY": PLACEHOLDER_KEY},
)
