"""OpenAI: the `openai` SDKs (Python and Node) and the many clients that read the same
variables (LiteLLM, LangChain, the Agents SDK); they append their paths to `/v1`."""

from __future__ import annotations

from flowproof_cli.providers.base import PLACEHOLDER_KEY, Provider

OPENAI = Provider(
    "openai",
    v1_url_variables=("OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_BASE"),
    placeholders={"OPENAI_API_KEY": PLACEHOLDER_KEY},
)
