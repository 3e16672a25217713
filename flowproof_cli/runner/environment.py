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
from flowproof_cli.providers import (
    PLACEHOLDER_KEY,
    WITHHELD_VARIABLES,
    ProxyAddress,
    agent_variables,
    file_variables,
    provider_named,
    write_agent_files,
)
from flowproof_cli.spec.variables import (
    PROMPT_FILE_HANDLE,
    PROMPT_FILE_VARIABLE,
    PROMPT_HANDLE,
    PROMPT_VARIABLE,
)

#: flowproof's own variable naming the proxy (with `/v1`), unique to a flow's listener:
#: what tells its agent's orphans from another flow's.
ORPHAN_MARKER_VARIABLE = "FLOWPROOF_LLM_PROXY"
#: The variables the wiring hints name: the base URLs most agents' clients read.
OPENAI_URL_VARIABLES = (*provider_named("openai").v1_url_variables, ORPHAN_MARKER_VARIABLE)
#: flowproof's own record configuration, and real credentials: never handed to the agent
#: (each provider withholds its own, `flowproof_cli/providers/`).
REMOVED_VARIABLES = tuple(
    name
    for name in (*RECORD_KEY_VARIABLES, *RECORD_UPSTREAM_VARIABLES, *WITHHELD_VARIABLES)
    if name not in OPENAI_URL_VARIABLES
)


def proxy_handles(port: int) -> dict[str, str]:
    """The proxy's `${flowproof.*}` handles (the only ones `agent.headers` may use)."""
    proxy = ProxyAddress.on_port(port)
    return {"proxy_url": proxy.v1, "proxy_url_no_v1": proxy.root}


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
    than one environment string carries. Its folder also holds the providers' private
    files (placeholder credentials, `Provider.agent_files`)."""
    folder = held_temp_folder("flowproof-task-")
    try:
        path = os.path.join(folder, "prompt.txt")
        with open(path, "w", encoding="utf-8", newline="") as stream:
            stream.write(prompt)
        write_agent_files(folder)  # named by the providers' `file_variables`
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


def injected_variables(
    port: int, prompt: str, prompt_file: str = "", inherited: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Every variable flowproof sets for the agent: the proxy for each provider's clients,
    their placeholder credentials and private files (`flowproof_cli/providers/`), the
    defaults `inherited` lacks (all of them when it is None), and the task."""
    proxy = ProxyAddress.on_port(port)
    injected = {ORPHAN_MARKER_VARIABLE: proxy.v1}
    injected.update(agent_variables(inherited or {}, proxy))
    if prompt_file:
        injected[PROMPT_FILE_VARIABLE] = prompt_file
        injected.update(file_variables(os.path.dirname(prompt_file)))
    if prompt_note(prompt) is None:  # else too long for exec: the file alone carries it
        injected[PROMPT_VARIABLE] = prompt
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
    environment.update(injected_variables(port, prompt, prompt_file, environment))
    environment.update(mcp or {})
    environment.update(spec_env)
    return environment


def wiring_hint() -> str:
    """What to check when no request reached the proxy."""
    names = ", ".join(
        (
            *OPENAI_URL_VARIABLES,
            *provider_named("anthropic").root_url_variables,
            *provider_named("gemini").root_url_variables,
        )
    )
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
