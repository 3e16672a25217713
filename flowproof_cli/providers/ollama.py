"""Ollama's native API: the `ollama` Python client reads OLLAMA_HOST (the JS client reads
no variable: the agent passes its host). A local Ollama takes no key."""

from __future__ import annotations

from flowproof_cli.providers.base import Provider

OLLAMA = Provider("ollama", root_url_variables=("OLLAMA_HOST",), keyless=True)
