"""The environment a command agent starts with: pointed at the proxy, holding no real key."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence

from flowproof_cli.cassette.upstream import (
    RECORD_KEY_VARIABLES,
    RECORD_UPSTREAM_VARIABLES,
    record_keys,
)
from flowproof_cli.errors import ConfigError
from flowproof_cli.process import (
    ARG_LIMIT,
    encoded_size,
    fits_one_string,
    held_temp_folder,
    remove_held_folder,
    working_directory,
)
from flowproof_cli.runner.aws_environment import REMOVED_AWS_VARIABLES, aws_agent_variables
from flowproof_cli.runner.google_credentials import (
    credentials_variables,
    write_placeholder_credentials,
)
from flowproof_cli.spec.variables import (
    PROMPT_FILE_HANDLE,
    PROMPT_FILE_VARIABLE,
    PROMPT_HANDLE,
    PROMPT_VARIABLE,
)

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
#: Set to the proxy without `/v1`, each read by a provider's own clients (found in their
#: code): Azure OpenAI's (they append `/openai/...`; the Node client prefers
#: OPENAI_BASE_URL, whose `/v1/deployments/...` paths reach the Azure dialect too),
#: the ollama client's, the cohere SDK's and google-genai's
#: Vertex mode (it appends `/v1beta1/projects/...`).
PROVIDER_URL_VARIABLES = (
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_API_BASE",  # LiteLLM's `azure/` models
    "OLLAMA_HOST",
    "CO_API_URL",
    "GOOGLE_VERTEX_BASE_URL",
)
#: Set to the proxy with `/v1` (AnthropicVertex appends `/projects/...` to it).
PROVIDER_URL_V1_VARIABLES = ("ANTHROPIC_VERTEX_BASE_URL",)
#: Placeholder credentials so a provider's client that refuses to start without one starts
#: (Bedrock's AWS variables, a region among them: runner/aws_environment.py).
PROVIDER_PLACEHOLDER_VARIABLES = (
    "AZURE_OPENAI_API_KEY",
    "AZURE_API_KEY",
    "CO_API_KEY",
    "COHERE_API_KEY",
)
#: Set only when the agent's environment has none: Azure clients require an API version,
#: and the one the user chose is kept.
DEFAULT_VARIABLES = {"OPENAI_API_VERSION": "2024-10-21"}
#: Real cloud credentials that would travel beside the placeholders (an AWS session token
#: is sent with every signed request; a Bedrock API key replaces the signature).
CREDENTIAL_VARIABLES = ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_BEARER_TOKEN_BEDROCK")
#: flowproof's own record configuration, and real credentials: never handed to the agent.
REMOVED_VARIABLES = tuple(
    name
    for name in (*RECORD_KEY_VARIABLES, *RECORD_UPSTREAM_VARIABLES, *CREDENTIAL_VARIABLES)
    if name not in OPENAI_URL_VARIABLES
)


def proxy_handles(port: int) -> dict[str, str]:
    """The proxy's `${flowproof.*}` handles (the only ones `agent.headers` may use)."""
    base = f"http://127.0.0.1:{port}"
    return {"proxy_url": f"{base}/v1", "proxy_url_no_v1": base}


def runtime_handles(
    port: int, prompt: str, mcp: Mapping[str, str] | None = None, *, prompt_file: str = ""
) -> dict[str, str]:
    """Every `${flowproof.*}` handle `agent.command` and `agent.env` may use: the proxy's,
    the task (`prompt`, the same text as FLOWPROOF_PROMPT, and `prompt_file`, the file
    holding it) and the MCP servers' (`mcp`)."""
    handles = {**proxy_handles(port), PROMPT_HANDLE: prompt}
    if prompt_file:
        handles[PROMPT_FILE_HANDLE] = prompt_file
    return {**handles, **(mcp or {})}


@contextlib.contextmanager
def task_file(prompt: str) -> Iterator[str]:
    """A private file holding the task (FLOWPROOF_PROMPT_FILE), removed when the agent is
    done (by the keeper if flowproof is killed): the one way to hand an agent a task larger
    than one environment string carries. Its folder also holds the placeholder Google
    credentials (GOOGLE_APPLICATION_CREDENTIALS, runner/google_credentials.py)."""
    folder = held_temp_folder("flowproof-task-")
    try:
        path = os.path.join(folder, "prompt.txt")
        with open(path, "w", encoding="utf-8", newline="") as stream:
            stream.write(prompt)
        write_placeholder_credentials(folder)  # GOOGLE_APPLICATION_CREDENTIALS, beside it
        yield path
    finally:
        remove_held_folder(folder)


def prompt_note(prompt: str) -> str | None:
    """Why FLOWPROOF_PROMPT is not set for this task, or None when it is."""
    if fits_one_string(f"{PROMPT_VARIABLE}={prompt}"):
        return None
    size = encoded_size(f"{PROMPT_VARIABLE}={prompt}")
    return (
        f"{PROMPT_VARIABLE} is not set: the task is {size:,} bytes as a variable, and "
        f"{ARG_LIMIT}; the agent can read it from the file named by {PROMPT_FILE_VARIABLE}"
    )


def injected_variables(port: int, prompt: str, prompt_file: str = "") -> dict[str, str]:
    handles = proxy_handles(port)
    injected = dict.fromkeys(OPENAI_URL_VARIABLES, handles["proxy_url"])
    injected.update(dict.fromkeys(ANTHROPIC_URL_VARIABLES, handles["proxy_url_no_v1"]))
    injected.update(dict.fromkeys(GEMINI_URL_VARIABLES, handles["proxy_url_no_v1"]))
    injected.update(dict.fromkeys(PLACEHOLDER_KEY_VARIABLES, PLACEHOLDER_KEY))
    injected.update(provider_variables(port))
    if prompt_file:
        injected[PROMPT_FILE_VARIABLE] = prompt_file
        injected.update(credentials_variables(prompt_file))
    if prompt_note(prompt) is None:  # else too long for exec: the file alone carries it
        injected[PROMPT_VARIABLE] = prompt
    return injected


def provider_variables(port: int) -> dict[str, str]:
    """The base URLs and placeholder credentials of the providers' own clients."""
    handles = proxy_handles(port)
    injected = dict.fromkeys(PROVIDER_URL_VARIABLES, handles["proxy_url_no_v1"])
    injected.update(dict.fromkeys(PROVIDER_URL_V1_VARIABLES, handles["proxy_url"]))
    injected.update(dict.fromkeys(PROVIDER_PLACEHOLDER_VARIABLES, PLACEHOLDER_KEY))
    return injected


def _placeholder_for_keys(value: str, keys: Mapping[str, str]) -> str:
    for key in keys.values():
        value = value.replace(key, PLACEHOLDER_KEY)
    return value


def refuse_record_key(
    environ: Mapping[str, str],
    spec: str,
    *,
    argv: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> None:
    """A spec field that would give the agent a record key (`${FLOWPROOF_AGENT_KEY}`, or
    any variable holding the same value) is a ConfigError (exit 2), named by field and
    variable, never by value: the agent gets a placeholder, the proxy adds the real key."""
    fields = {"agent.command": " ".join(argv)}
    fields.update({f"agent.env.{name}": value for name, value in (env or {}).items()})
    fields.update({f"agent.headers.{name}": value for name, value in (headers or {}).items()})
    keys = record_keys(environ)
    for where, value in fields.items():
        for name, key in keys.items():
            if key in value:
                block = ".".join(where.split(".")[:2])
                raise ConfigError(
                    f"{spec}: {where} would hand the agent flowproof's record key (the value "
                    f"of {name}); the agent gets the placeholder {PLACEHOLDER_KEY} and "
                    "flowproof adds the real key to upstream requests itself. Fix: remove it "
                    f"from {block}"
                )


def agent_environment(
    inherited: Mapping[str, str],
    *,
    port: int,
    prompt: str,
    spec_env: Mapping[str, str],
    mcp: Mapping[str, str] | None = None,
    prompt_file: str = "",
    cwd: str | os.PathLike[str] | None = None,
) -> dict[str, str]:
    """Inherited environment, minus flowproof's keys, plus the injection (`PWD` for `cwd`,
    the folder the agent starts in; the model proxy; then `mcp`:
    FLOWPROOF_MCP_SERVER_<NAME> / FLOWPROOF_MCP_URL_<NAME>); `agent.env` last. An inherited
    variable holding a record key under another name holds the placeholder in its place
    (`refuse_record_key` keeps one out of `agent.env`)."""
    keys = record_keys(inherited)
    environment = {
        k: _placeholder_for_keys(v, keys)
        for k, v in inherited.items()
        if k not in REMOVED_VARIABLES
    }
    for name in (PROMPT_VARIABLE, PROMPT_FILE_VARIABLE):  # never an inherited task
        environment.pop(name, None)
    if cwd is not None:
        environment.update(working_directory(cwd))
    for name, value in DEFAULT_VARIABLES.items():
        environment.setdefault(name, value)
    environment.update(injected_variables(port, prompt, prompt_file))
    for name in REMOVED_AWS_VARIABLES:  # Bedrock clients: runner/aws_environment.py
        environment.pop(name, None)
    environment.update(aws_agent_variables(environment, proxy_handles(port)["proxy_url_no_v1"]))
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
