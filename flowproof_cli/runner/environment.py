"""The environment a command agent starts with: pointed at the proxy, holding no real key."""

from __future__ import annotations

from collections.abc import Mapping

from flowproof_cli.cassette.upstream import KEY_VARIABLES, UPSTREAM_VARIABLES
from flowproof_cli.spec.variables import PROMPT_HANDLE

PLACEHOLDER_KEY = "flowproof-placeholder-key"

#: Base-URL variables set to the proxy with `/v1` (what OpenAI-style clients append to).
OPENAI_URL_VARIABLES = ("OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_BASE", "FLOWPROOF_LLM_PROXY")
#: Unique to a flow's listener: what tells its agent's orphans from another flow's.
ORPHAN_MARKER_VARIABLE = "FLOWPROOF_LLM_PROXY"
#: Set to the proxy without `/v1` (Anthropic SDKs append `/v1/messages` themselves).
ANTHROPIC_URL_VARIABLES = ("ANTHROPIC_BASE_URL",)
#: Set to the proxy without `/v1` (google-genai appends `/v1/models/...` or `/v1beta/...`).
GEMINI_URL_VARIABLES = ("GOOGLE_GEMINI_BASE_URL",)
PLACEHOLDER_KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
)
#: flowproof's own record configuration: never handed to the agent.
REMOVED_VARIABLES = tuple(
    name for name in (*KEY_VARIABLES, *UPSTREAM_VARIABLES) if name not in OPENAI_URL_VARIABLES
)


def proxy_handles(port: int) -> dict[str, str]:
    """The proxy's `${flowproof.*}` handles (the only ones `agent.headers` may use)."""
    base = f"http://127.0.0.1:{port}"
    return {"proxy_url": f"{base}/v1", "proxy_url_no_v1": base}


def runtime_handles(port: int, prompt: str, mcp: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every `${flowproof.*}` handle `agent.command` and `agent.env` may use: the proxy's,
    the task (`prompt`, the same text as FLOWPROOF_PROMPT) and the MCP servers' (`mcp`)."""
    return {**proxy_handles(port), PROMPT_HANDLE: prompt, **(mcp or {})}


def injected_variables(port: int, prompt: str) -> dict[str, str]:
    handles = proxy_handles(port)
    injected = dict.fromkeys(OPENAI_URL_VARIABLES, handles["proxy_url"])
    injected.update(dict.fromkeys(ANTHROPIC_URL_VARIABLES, handles["proxy_url_no_v1"]))
    injected.update(dict.fromkeys(GEMINI_URL_VARIABLES, handles["proxy_url_no_v1"]))
    injected.update(dict.fromkeys(PLACEHOLDER_KEY_VARIABLES, PLACEHOLDER_KEY))
    injected["FLOWPROOF_PROMPT"] = prompt
    return injected


def agent_environment(
    inherited: Mapping[str, str],
    *,
    port: int,
    prompt: str,
    spec_env: Mapping[str, str],
    mcp: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Inherited environment, minus flowproof's keys, plus the injection (the model proxy,
    then `mcp`: FLOWPROOF_MCP_SERVER_<NAME> / FLOWPROOF_MCP_URL_<NAME>); `agent.env` last."""
    environment = {k: v for k, v in inherited.items() if k not in REMOVED_VARIABLES}
    environment.update(injected_variables(port, prompt))
    environment.update(mcp or {})
    environment.update(spec_env)
    return environment


def wiring_hint() -> str:
    """What to check when no request reached the proxy."""
    names = ", ".join((*OPENAI_URL_VARIABLES, *ANTHROPIC_URL_VARIABLES, *GEMINI_URL_VARIABLES))
    return (
        f"flowproof injected {names}; if the agent's model client reads another variable "
        "(or a config file), map it in the spec's agent.env with the handle "
        '"${flowproof.proxy_url}" (includes /v1) or "${flowproof.proxy_url_no_v1}"'
    )


def service_wiring_hint(port: int) -> str:
    """What to set in a service flowproof did not start, so its model calls reach the proxy."""
    handles = proxy_handles(port)
    return (
        "Fix: start the service with its model client pointed at flowproof's proxy: "
        f"OPENAI_BASE_URL={handles['proxy_url']} (OpenAI clients), "
        f"ANTHROPIC_BASE_URL={handles['proxy_url_no_v1']} (Anthropic clients) or "
        f"GOOGLE_GEMINI_BASE_URL={handles['proxy_url_no_v1']} (google-genai)"
    )
