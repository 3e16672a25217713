"""The `tools:` and `mcp:` keys of a flow: the tools the agent may call, mocked or declared
only, and the MCP servers it uses with their tools; the checks on tool names they share."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Self

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from flowproof_cli.dialects.base import ResultSequence
from flowproof_cli.quoting import looks_alike, named, odd_note, skeleton, unmasked
from flowproof_cli.spec.base import _Model
from flowproof_cli.spec.fields import (
    first_repeat,
    key_not_text,
    listed,
    nul_problem,
    optional_list,
    optional_port,
    optional_text,
    shown_key,
    url_fix,
    url_problem,
)
from flowproof_cli.spec.problems import spec_problem
from flowproof_cli.spec.variables import resolve_variables


def _check_json(value: Any, what: str = "the result", at: tuple[str | int, ...] = ()) -> Any:
    """`value` is JSON with text keys (a number key would pass json.dumps as text, and then
    break every sorted dump of the mocks, at record and at replay alike)."""
    found = key_not_text(value)
    if found is not None:
        key, path = found
        raise spec_problem(
            f"{what} has the key {shown_key(key)}, and JSON keys are text. Fix: quote it: "
            f"`'{shown_key(key).split(' ')[0]}': ...`",
            (*at, *path),
        )
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise spec_problem(
            f"{what} is not JSON (a YAML tag or a set?). Fix: use strings, numbers, "
            "booleans, null, lists and mappings only",
            at,
        ) from None
    return value


class ToolSpec(_Model):
    """A tool the agent may call: declared only, or mocked when `result` (every call) or
    `results` (call by call) is given."""

    model_config = ConfigDict(json_schema_extra={"not": {"required": ["result", "results"]}})

    name: str = Field(min_length=1, description="The tool name as the model calls it.")
    result: Any = Field(
        default=None,
        description=(
            "What the mocked tool returns on every call (any JSON value, `null` included). "
            "Omit the key to declare the tool without mocking it."
        ),
    )
    results: list[Any] | None = optional_list(
        "What the mocked tool returns call by call: the k-th call gets the k-th value; a "
        "call beyond the list fails the flow. Not with `result`."
    )

    @field_validator("result", mode="after")
    @classmethod
    def _json_result(cls, value: Any) -> Any:
        return _check_json(value)

    @field_validator("results", mode="before")
    @classmethod
    def _results_shape(cls, value: Any) -> Any:
        if not isinstance(value, list):
            raise spec_problem(
                f"`results` must be a list of the values the tool returns call by call, got "
                f"{type(value).__name__}. Fix: write `results: [first, second]`, or `result:` "
                "for one value every call gets"
            )
        if not value:
            raise spec_problem(
                "`results` is empty, so no call of the tool could be answered. Fix: list at "
                "least one value, or remove `results` to declare the tool without mocking it"
            )
        for index, item in enumerate(value):
            _check_json(item, f"result {index + 1} of `results`", (index,))
        return value

    @model_validator(mode="after")
    def _one_mock_form(self) -> Self:
        if "result" in self.model_fields_set and "results" in self.model_fields_set:
            raise spec_problem(
                f"tool `{self.name}` has both `result` and `results`. Fix: keep `result` for "
                "one value every call gets, or `results` for one value per call",
                ("results",),
            )
        return self

    @model_serializer(mode="wrap")
    def _omit_unmocked_result(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Dump only the mock key the spec wrote, so a dump loads back the same."""
        data = handler(self)
        if isinstance(data, dict):
            for key in ("result", "results"):
                if key not in self.model_fields_set:
                    data.pop(key, None)
        return data

    @property
    def is_mocked(self) -> bool:
        """True when the spec gave a `result` key (even `result: null`) or `results`."""
        return "result" in self.model_fields_set or self.results is not None

    @property
    def mock(self) -> Any:
        """The mock as the boundaries take it: the value, or a ResultSequence."""
        return ResultSequence(self.results) if self.results is not None else self.result


_MCP_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


def mcp_variable_suffix(name: str) -> str:
    """`files-v2` -> `FILES_V2`: upper-cased, every other character `_`."""
    return "".join(char if char.isascii() and char.isalnum() else "_" for char in name.upper())


def _refuse_repeated_tools(tools: Sequence[ToolSpec], under: str) -> None:
    """A tool name given twice in one list is a spec error at the second entry, and so is
    a name that only looks like an earlier one (a Cyrillic letter, a zero-width space)."""
    twice = first_repeat(tool.name for tool in tools)
    if twice is None:
        _refuse_look_alike_tools(tools, under)
        return
    index, first = twice
    tool = tools[index]
    what = "mocked" if tool.is_mocked and tools[first].is_mocked else "listed"
    raise spec_problem(
        f"tool `{tool.name}` is {what} twice under {under} (first as entry {first + 1}). "
        f"Fix: keep one entry for `{tool.name}`",
        ("tools", index),
    )


def _refuse_look_alike_tools(tools: Sequence[ToolSpec], under: str) -> None:
    first_by_look: dict[str, int] = {}
    for index, tool in enumerate(tools):
        first = first_by_look.setdefault(skeleton(tool.name), index)
        if first == index:
            continue
        other = tools[first].name
        raise spec_problem(
            f"tool {named(tool.name, other, '`')} under {under} only looks like "
            f"{named(other, tool.name, '`')} (entry {first + 1}): the two are different names, so "
            "a call, a mock or an assertion meant for one never applies to the other. Fix: "
            f"keep one entry, named `{unmasked(skeleton(tool.name))}`",
            ("tools", index),
        )


def undeclared_tool(kind: str, name: str, declared: Sequence[str]) -> str:
    """Why a step's tool name is refused, and the fix. A name that only looks like a
    declared one (or like a plain name) is shown by code point and never proposed."""
    alike = next((tool for tool in declared if looks_alike(name, tool)), None)
    head = f"`{kind}` names tool `{unmasked(name)}`{odd_note(name, alike or skeleton(name))}"
    if alike is not None:
        plain = skeleton(name)
        if alike == plain:
            fix = f"write the name as `{plain}`"
        elif name == plain:
            fix = f"write the name under `tools` as `{plain}`"
        else:
            fix = f"write the name as `{unmasked(plain)}`, in the step and under `tools`"
        return (
            f"{head}, which is not declared under `tools`: it only looks like the declared "
            f"{named(alike, name, '`')}. Fix: {fix}"
        )
    listed = ", ".join(unmasked(tool) for tool in declared)
    plain = skeleton(name)
    fix = f"add `- name: {name}` under `tools`"
    if plain != name:
        fix = f"write it as `{unmasked(plain)}` and add `- name: {unmasked(plain)}` under `tools`"
    return (
        f"{head}, which is not declared under `tools` (declared: {listed}). Fix: {fix}, or "
        "correct the tool name"
    )


class McpToolSpec(ToolSpec):
    """A tool of an MCP server. With `result` (or `results`, one per `tools/call`) flowproof
    answers the call itself and it NEVER reaches the real server, at record or at replay."""


class McpServerSpec(_Model):
    """An MCP server the agent uses: a second record/replay boundary, one lane per server.
    A stdio server has `command` (flowproof's stand-in is launched in its place), a
    streamable-HTTP server has `url` (flowproof listens in its place)."""

    name: str = Field(
        min_length=1,
        pattern=_MCP_NAME_PATTERN,
        description=(
            "The server's name in the trace; also names the injected variable "
            "FLOWPROOF_MCP_SERVER_<NAME> / FLOWPROOF_MCP_URL_<NAME> (upper-cased, other "
            "characters `_`)."
        ),
    )
    command: str | None = optional_text(
        "The real stdio server's command, run only at record (`${VAR}` allowed)."
    )
    url: str | None = optional_text(
        "The real streamable-HTTP server's URL, reached only at record."
    )
    port: int | None = optional_port(
        "With `url`: a fixed loopback port for flowproof's listener (default: any)."
    )
    tools: list[McpToolSpec] = listed(
        "Tools of this server; a `result` (or `results`, one per call) mocks the tool "
        "(never forwarded)."
    )
    call_timeout: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Seconds the real server may take to answer each request at record (progress "
            "on the call starts the wait over) before the record fails naming the server, "
            "the call and this bound. Default: the upstream timeout (`record "
            "--upstream-timeout`, 120 s)."
        ),
    )

    @field_validator("command", mode="after")
    @classmethod
    def _command_exec_can_pass(cls, command: str | None) -> str | None:
        problem = nul_problem(command or "", "the MCP server's `command`")
        if problem is not None:
            raise spec_problem(problem)
        return command

    @field_validator("url", mode="after")
    @classmethod
    def _dialable_url(cls, url: str | None) -> str | None:
        """A URL written out is checked here; one from `${VAR}` when it is resolved."""
        problem = url_problem(url) if url is not None and "${" not in url else None
        if problem is not None:
            raise spec_problem(
                f"the MCP server's `url` {url!r} is not an http(s) URL: {problem}. "
                + url_fix("http://127.0.0.1:8931/mcp")
            )
        return url

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        if (self.command is None) == (self.url is None):
            both = self.command is not None
            raise spec_problem(
                f"MCP server `{self.name}` needs exactly one of `command` (a stdio server) and "
                f"`url` (a streamable-HTTP server){'; it has both' if both else ''}. Fix: keep "
                "one of them",
                ("url",) if both else (),
            )
        if self.command is not None and self.port is not None:
            raise spec_problem(
                f"`port` on the stdio MCP server `{self.name}`: a `command` server is spawned "
                "by the agent, not dialled, so it has no port. Fix: remove `port`, or give the "
                "server a `url`",
                ("port",),
            )
        _refuse_repeated_tools(self.tools, f"the MCP server `{self.name}`")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    @property
    def variable(self) -> str:
        """The variable flowproof injects for the agent's MCP config to point at."""
        kind = "SERVER" if self.command is not None else "URL"
        return f"FLOWPROOF_MCP_{kind}_{mcp_variable_suffix(self.name)}"

    @property
    def mocks(self) -> dict[str, Any]:
        return {tool.name: tool.mock for tool in self.tools if tool.is_mocked}

    def resolved_command(self, environ: Mapping[str, str]) -> str:
        return resolve_variables(self.command or "", environ, where=f"mcp.{self.name}.command")

    def resolved_url(self, environ: Mapping[str, str]) -> str:
        return resolve_variables(self.url or "", environ, where=f"mcp.{self.name}.url")
