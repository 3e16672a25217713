"""Azure OpenAI: the `openai` package's `AzureOpenAI` reads AZURE_OPENAI_ENDPOINT (and
appends `/openai/...`), LiteLLM's `azure/` models read AZURE_API_BASE; the Node client
prefers OPENAI_BASE_URL, whose `/v1/deployments/...` paths reach the Azure dialects too.
Every Azure client requires an API version: one is set only when the agent has none."""

from __future__ import annotations

from flowproof_cli.providers.base import PLACEHOLDER_KEY, Provider

AZURE = Provider(
    "azure",
    root_url_variables=("AZURE_OPENAI_ENDPOINT", "AZURE_API_BASE"),
    placeholders={"AZURE_OPENAI_API_KEY": PLACEHOLDER_KEY, "AZURE_API_KEY": PLACEHOLDER_KEY},
    defaults={"OPENAI_API_VERSION": "2024-10-21"},
)
