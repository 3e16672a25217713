"""The `*.flow.yaml` data model (pydantic v2, unknown keys forbidden everywhere).

Validation is split in two so every error can carry a YAML line: pydantic checks shapes and
the prose grammar here, raising errors whose `loc` the loader maps to a line; checks that
span fields (no prompt, a tool declared twice, an undeclared assert target) raise a
`PydanticCustomError` of type ``flowproof_spec`` whose context carries ``at``, the `loc` of
the offending node, for the same mapping.

Adding a step kind: subclass ``StepBase`` with one field named like the YAML key and a
``kind`` ClassVar, then add it to ``Step`` and ``STEP_TYPES`` below. A bare-string step
(e.g. ``- assert_no_egress``) needs ``_step_tag`` to return the string as its tag and a
``mode="before"`` validator on its class turning the string into a mapping.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    Tag,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_serializer,
    model_validator,
)

from flowproof_cli.dialects.base import ResultSequence
from flowproof_cli.errors import SpecError
from flowproof_cli.process import (
    ARG_LIMIT,
    BIG_DATA_FIX,
    encoded_size,
    env_name_problem,
    fits_one_string,
)
from flowproof_cli.quoting import (
    closest_name,
    looks_alike,
    named,
    odd_note,
    skeleton,
    unmasked,
)
from flowproof_cli.spec.fields import (
    HEADER_FIX,
    first_repeat,
    header_problem,
    key_not_text,
    listed,
    not_a_variable_name,
    nul_problem,
    optional,
    optional_list,
    optional_port,
    optional_text,
    shown_key,
    url_fix,
    url_problem,
)
from flowproof_cli.spec.grammar import (
    ReplyAssertion,
    ToolCallAssertion,
    parse_reply_assertion,
    parse_tool_assertion,
)
from flowproof_cli.spec.match import MatchSpec
from flowproof_cli.spec.problems import SPEC_ERROR_TYPE, spec_problem
from flowproof_cli.spec.variables import PROMPT_HANDLE, find_handles, resolve_variables

DEFAULT_TIMEOUT = 300.0

_TOOL_ASSERTION_PATTERN = r"^\s*\S+(\s+where\s+\S[\s\S]*)?\s*$"
_REPLY_PATTERN = r"^\s*reply\s+(contains|is)\s+\S[\s\S]*$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


class AgentSpec(_Model):
    """How to drive the agent under test: a `command` flowproof starts, or the `url` of a
    service that is already running (exactly one of the two)."""

    command: str | None = Field(
        default=None,
        min_length=1,
        description="Shell command that starts the agent; `${VAR}` is resolved at run time.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Extra environment for a `command` agent; values may use `${VAR}`.",
    )
    url: str | None = Field(
        default=None,
        min_length=1,
        description=(
            'URL of an already-running service: flowproof POSTs {"prompt": ...} to it. The '
            "service must point its model client at http://127.0.0.1:<proxy_port>/v1."
        ),
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="Headers of the trigger POST to `url`; `${VAR}` allowed, never stored.",
    )
    proxy_port: int | None = optional_port(
        "With `url`: the fixed loopback port the proxy binds (required)."
    )
    allow_egress: list[str] = Field(
        default_factory=list,
        description=(
            "Destinations a `command` agent may reach (Linux: enforced by a seccomp "
            "supervisor): `host:port`, `ip:port`, `cidr:port`, `[ipv6]:port`, a bare `host` or "
            "`ip` (any port but 53), `${VAR}:port`. Loopback is always allowed. Stored as "
            "written; add the `assert_no_egress` step to certify it."
        ),
    )

    @field_validator("allow_egress", mode="after")
    @classmethod
    def _check_allow_egress(cls, entries: list[str]) -> list[str]:
        # Imported here: the egress package is heavy, and most specs (and `flowproof
        # schema`) never write allow_egress.
        from flowproof_cli.egress.policy import EntryError, parse_entry  # noqa: PLC0415

        for index, entry in enumerate(entries):
            try:
                parse_entry(entry)
            except EntryError as exc:
                raise spec_problem(
                    f"{exc}. Fix: write `host:port`, `ip:port`, `cidr:port`, `[ipv6]:port`, a "
                    "bare host or ip, or `${VAR}:port`",
                    (index,),
                ) from None
        return entries

    @field_validator("command", mode="after")
    @classmethod
    def _command_exec_can_pass(cls, command: str | None) -> str | None:
        problem = nul_problem(command or "", "`agent.command`")
        if problem is not None:
            raise spec_problem(problem)
        return command

    @field_validator("env", mode="after")
    @classmethod
    def _env_exec_can_pass(cls, env: dict[str, str]) -> dict[str, str]:
        for name, value in env.items():
            bad_name = env_name_problem(name)
            if bad_name is not None:
                meant = name.split("=", 1)[0] if "=" in name.lstrip("=") else ""
                fix = (
                    f"name the variable `{meant}` and put the rest in its value"
                    if meant and "\x00" not in meant
                    else "write a name of letters, digits and `_`"
                )
                raise spec_problem(f"the `agent.env` name {bad_name}. Fix: {fix}", (name,))
            problem = nul_problem(value, f"`agent.env.{name}`")
            if problem is None and not fits_one_string(f"{name}={value}"):
                size = encoded_size(f"{name}={value}")
                problem = f"`agent.env.{name}` is {size:,} bytes; {ARG_LIMIT}. {BIG_DATA_FIX}"
            if problem is not None:
                raise spec_problem(problem, (name,))
        return env

    @field_validator("headers", mode="after")
    @classmethod
    def _sendable_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            problem = header_problem(name, value)
            if problem is not None:
                raise spec_problem(f"`agent.headers`: {problem}. {HEADER_FIX}", (name,))
        return headers

    @field_validator("url", mode="after")
    @classmethod
    def _dialable_url(cls, url: str | None) -> str | None:
        problem = url_problem(url) if url is not None else None
        if problem is not None:
            raise spec_problem(
                f"`agent.url` {url!r} is not an http(s) URL: {problem}. "
                + url_fix("http://127.0.0.1:8000/run")
            )
        return url

    @property
    def declares_egress(self) -> bool:
        """`allow_egress` is written in the spec (even empty: nothing off-host allowed)."""
        return "allow_egress" in self.model_fields_set

    @model_validator(mode="after")
    def _one_driver(self) -> Self:
        if self.command is None and self.url is None:
            raise spec_problem(
                "`agent` needs `command` (a process flowproof starts) or `url` (a running "
                "service flowproof triggers). Fix: add one of them",
            )
        if self.command is not None and self.url is not None:
            raise spec_problem(
                "`agent` has both `command` and `url`. Fix: keep exactly one driver",
                ("url",),
            )
        if self.command is not None:
            for key in ("headers", "proxy_port"):
                if getattr(self, key):
                    raise spec_problem(
                        f"`agent.{key}` only applies to a `url` agent. Fix: remove it, or "
                        "drive a running service with `url` instead of `command`",
                        (key,),
                    )
        else:
            if self.declares_egress:
                raise spec_problem(
                    "`agent.allow_egress` only applies to a `command` agent: flowproof contains "
                    "the processes it starts, and a `url` service is already running outside "
                    "any containment. Fix: remove `allow_egress`, or start the agent with "
                    "`command`",
                    ("allow_egress",),
                )
            if self.env:
                raise spec_problem(
                    "`agent.env` only applies to a `command` agent: flowproof cannot set the "
                    "environment of a service it did not start. Fix: remove it and start the "
                    "service with its model base URL pointed at the proxy",
                    ("env",),
                )
            if self.proxy_port is None:
                raise spec_problem(
                    "a `url` agent needs `proxy_port`, the fixed port the service's model "
                    "client points at (http://127.0.0.1:<proxy_port>/v1). Fix: add e.g. "
                    "`proxy_port: 4646`",
                    ("url",),
                )
        return self

    def resolved_command(
        self, environ: Mapping[str, str], handles: Mapping[str, str] | None = None
    ) -> str:
        return resolve_variables(self.command or "", environ, handles, where="agent.command")

    def resolved_headers(
        self, environ: Mapping[str, str], handles: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        return self._resolved_mapping("headers", environ, handles)

    def resolved_env(
        self, environ: Mapping[str, str], handles: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        return self._resolved_mapping("env", environ, handles)

    def _resolved_mapping(
        self,
        field: Literal["env", "headers"],
        environ: Mapping[str, str],
        handles: Mapping[str, str] | None,
    ) -> dict[str, str]:
        values: dict[str, str] = getattr(self, field)
        return {
            key: resolve_variables(value, environ, handles, where=f"agent.{field}.{key}")
            for key, value in values.items()
        }

    def resolved_egress_host(self, host: str, environ: Mapping[str, str]) -> str:
        """The host of an `allow_egress` entry with its `${VAR}` substituted (at run start)."""
        return resolve_variables(host, environ, where="agent.allow_egress").strip()


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


class StepBase(_Model):
    """One entry of `steps:`; the YAML line is kept for failure messages."""

    kind: ClassVar[str]
    _line: int | None = PrivateAttr(default=None)

    @property
    def line(self) -> int | None:
        return self._line

    @property
    def text(self) -> str:
        """The step's value as written (the prompt or the prose assertion)."""
        return str(getattr(self, next(iter(type(self).model_fields))))


def _check_tool_assertion(value: str) -> str:
    try:
        parse_tool_assertion(value)
    except SpecError as exc:
        raise spec_problem(exc.detail) from None
    return value


class PromptStep(StepBase):
    """Part of the task given to the agent; all prompt steps are joined into one task."""

    kind: ClassVar[str] = "prompt"
    prompt: str = Field(description="Text of the task; every `prompt` step is joined with \\n.")


ToolAssertionText = Annotated[str, AfterValidator(_check_tool_assertion)]

_MATCH_KEYS = ("name", "call", "args", "args_exact", "times")


class ToolCallMatch(_Model):
    """A tool assertion: the prose text (`call`), or the structured form (`name` with
    `args` or `args_exact`); `times` counts the matching calls. A step written as a plain
    string is the prose form."""

    name: str | None = Field(
        default=None,
        min_length=1,
        description="The tool name (structured form; not with `call`).",
        json_schema_extra={"pattern": r"^\S+$"},
    )
    call: ToolAssertionText | None = Field(
        default=None,
        description=(
            "The prose form, `NAME [where PATH MATCHER [VALUE] [and ...]]` (not with `name`)."
        ),
        json_schema_extra={"pattern": _TOOL_ASSERTION_PATTERN},
    )
    args: dict[str, Any] | None = Field(
        default=None,
        description=(
            "Partial match: every leaf given equals the call's argument at that path (as "
            "`where PATH equals VALUE`); other arguments are ignored. Lists compare whole."
        ),
    )
    args_exact: dict[str, Any] | None = Field(
        default=None,
        description="Exact match: these arguments and no others (leaves as for `args`).",
    )
    times: int | None = Field(
        default=None,
        ge=1,
        description="Exactly this many calls match (`assert_tool_call` only).",
    )

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [{"required": ["name"]}, {"required": ["call"]}],
            "not": {"required": ["args", "args_exact"]},
        }
    )

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"call": value}
        if not isinstance(value, dict):
            raise spec_problem(
                f"a tool assertion is the prose text or a mapping, got {type(value).__name__}. "
                "Fix: write e.g. `get_weather where city equals Nairobi` or "
                "`{name: get_weather, args: {city: Nairobi}}`"
            )
        for key in value:
            if key not in _MATCH_KEYS:
                close = closest_name(str(key), _MATCH_KEYS)
                hint = f" Did you mean `{close}`?" if close else ""
                odd = odd_note(str(key), close or skeleton(str(key)))
                raise spec_problem(
                    f"unknown key `{unmasked(str(key))}`{odd} in the tool assertion.{hint} Fix: "
                    "use one of the "
                    f"allowed keys: {', '.join(_MATCH_KEYS)}",
                    (str(key),),
                )
        for key in ("args", "args_exact"):
            if key in value and not isinstance(value[key], dict):
                raise spec_problem(
                    f"`{key}` must be a mapping of argument names to values, got "
                    f"{type(value[key]).__name__}. Fix: write e.g. `{key}: {{city: Nairobi}}`"
                    + ("" if key == "args" else " (every argument of the call)"),
                    (key,),
                )
        if "times" in value:
            times = value["times"]
            if isinstance(times, bool) or not isinstance(times, int) or times < 1:
                raise spec_problem(
                    f"`times` must be a whole number of calls >= 1, got {times!r}. Fix: write "
                    "e.g. `times: 2`; to assert that no call matches, use "
                    "`assert_no_tool_call` instead",
                    ("times",),
                )
        return value

    @model_validator(mode="after")
    def _one_form(self) -> Self:
        if (self.name is None) == (self.call is None):
            both = self.name is not None
            raise spec_problem(
                "a tool assertion mapping needs exactly one of `name` (the structured form) "
                f"and `call` (the prose form){'; it has both' if both else ''}. Fix: write "
                "`{name: TOOL, args: {...}}` or `{call: TOOL where ..., times: N}`",
                ("call",) if both else (),
            )
        if self.name is not None and re.search(r"\s", self.name):
            raise spec_problem(
                f"the tool name `{self.name}` has a space. Fix: tool names have no spaces; "
                "for prose conditions write `call: ...` instead of `name: ...`",
                ("name",),
            )
        if self.args is not None and self.args_exact is not None:
            raise spec_problem(
                "a tool assertion has both `args` (partial) and `args_exact` (exact). Fix: "
                "keep one of them",
                ("args_exact",),
            )
        if self.call is not None and (self.args is not None or self.args_exact is not None):
            key = "args" if self.args is not None else "args_exact"
            raise spec_problem(
                f"`{key}` goes with `name`, not with the prose `call`. Fix: write the "
                f"conditions in the prose (`where ...`), or use `name:` with `{key}:`",
                (key,),
            )
        for key in ("args", "args_exact"):
            expected = getattr(self, key)
            if expected is not None:
                _check_json(expected, f"`{key}`", (key,))
        return self

    @model_serializer(mode="wrap")
    def _dump_as_written(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The prose form alone dumps back as its text; a mapping keeps the keys given."""
        if self.model_fields_set == {"call"}:
            return self.call
        data = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set}

    def __str__(self) -> str:
        """The assertion as failure messages quote it."""
        if self.call is not None:
            text = self.call.strip()
        else:
            text = str(self.name)
            if self.args is not None:
                text += f" with args {_compact_json(self.args)}"
            if self.args_exact is not None:
                text += f" with exactly args {_compact_json(self.args_exact)}"
        return text if self.times is None else f"{text} (times: {self.times})"

    @property
    def assertion(self) -> ToolCallAssertion:
        if self.call is not None:
            parsed = parse_tool_assertion(self.call)
            return ToolCallAssertion(
                tool=parsed.tool, clauses=parsed.clauses, source=str(self), times=self.times
            )
        exact = self.args_exact is not None
        return ToolCallAssertion(
            tool=str(self.name),
            clauses=(),
            source=str(self),
            args=self.args_exact if exact else self.args,
            exact=exact,
            times=self.times,
        )


def _compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _either_form(schema: dict[str, Any]) -> None:
    """The step's JSON Schema: the prose text, or the mapping."""
    ref = schema.pop("$ref", None)
    prose = {"type": "string", "pattern": _TOOL_ASSERTION_PATTERN}
    schema["anyOf"] = [prose, {"$ref": ref}] if ref else [prose]


class _ToolAssertionStep(StepBase):
    """A step whose value is a tool assertion (prose text or structured mapping)."""

    @property
    def assertion(self) -> ToolCallAssertion:
        match: ToolCallMatch = getattr(self, self.kind)
        return match.assertion


class ToolCallStep(_ToolAssertionStep):
    """The agent called a tool (in order with the other `assert_tool_call` steps)."""

    kind: ClassVar[str] = "assert_tool_call"
    assert_tool_call: ToolCallMatch = Field(
        description=(
            "`NAME [where PATH MATCHER [VALUE] [and ...]]` (matchers: equals (is), contains, "
            "matches, exists, is absent (is missing)), or a mapping: `{name, args | "
            "args_exact, times}` or `{call: PROSE, times}`."
        ),
        json_schema_extra=_either_form,
    )


class NoToolCallStep(_ToolAssertionStep):
    """No call in the whole trajectory matches this tool and its conditions."""

    kind: ClassVar[str] = "assert_no_tool_call"
    assert_no_tool_call: ToolCallMatch = Field(
        description=(
            "As for assert_tool_call: the prose text, or `{name, args | args_exact}` (no `times`)."
        ),
        json_schema_extra=_either_form,
    )

    @field_validator("assert_no_tool_call", mode="after")
    @classmethod
    def _no_times(cls, value: ToolCallMatch) -> ToolCallMatch:
        if value.times is not None:
            raise spec_problem(
                "`times` does not apply to `assert_no_tool_call`, which already means no call "
                "matches. Fix: remove `times`, or use `assert_tool_call` with `times: N`",
                ("times",),
            )
        return value


class ReplyStep(StepBase):
    """The agent's final reply contains a text."""

    kind: ClassVar[str] = "assert"
    assert_: str = Field(
        alias="assert",
        description="`reply contains TEXT` (alias `reply is TEXT`, also a substring check).",
        json_schema_extra={"pattern": _REPLY_PATTERN},
    )

    @field_validator("assert_", mode="after")
    @classmethod
    def _check(cls, value: str) -> str:
        try:
            parse_reply_assertion(value)
        except SpecError as exc:
            raise spec_problem(exc.detail) from None
        return value

    @property
    def assertion(self) -> ReplyAssertion:
        return parse_reply_assertion(self.assert_)


class NoEgressStep(StepBase):
    """Certify the run: contained, and no undeclared destination attempted. Written bare:
    `- assert_no_egress`. Where containment is unavailable it fails (`cannot certify`)."""

    kind: ClassVar[str] = "assert_no_egress"
    assert_no_egress: None = Field(
        default=None,
        description="Bare step, no value: `- assert_no_egress`.",
    )

    @model_validator(mode="before")
    @classmethod
    def _bare(cls, value: Any) -> Any:
        if value == cls.kind:
            return {"assert_no_egress": None}
        if isinstance(value, dict) and value.get(cls.kind) is not None:
            raise spec_problem(
                "`assert_no_egress` takes no value. Fix: write the bare step `- assert_no_egress`"
            )
        return value

    @property
    def text(self) -> str:
        return self.kind


_SECRET_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class NoSecretLeakStep(StepBase):
    """A declared secret appears nowhere in the trajectory (model requests and responses,
    every MCP lane), raw or in a common encoding. Names `${VAR}` references only: the
    value is resolved at run time and never stored or printed."""

    kind: ClassVar[str] = "assert_no_secret_leak"
    assert_no_secret_leak: str | list[str] = Field(
        description="`${VAR}`, or a list of them: the variables whose values must not leak.",
    )

    @field_validator("assert_no_secret_leak", mode="after")
    @classmethod
    def _references(cls, value: str | list[str]) -> str | list[str]:
        items = [value] if isinstance(value, str) else value
        if not items:
            raise spec_problem(
                "`assert_no_secret_leak` names no variable. Fix: write "
                "`- assert_no_secret_leak: ${API_KEY}` (or a list of `${VAR}`)"
            )
        for item in items:
            if not isinstance(item, str) or not _SECRET_REFERENCE.fullmatch(item.strip()):
                raise spec_problem(
                    "`assert_no_secret_leak` takes `${VAR}` references only (the value written "
                    "here is not one, and is not repeated in this message). Fix: "
                    "name the environment variable that holds the secret, e.g. "
                    "`${STRIPE_KEY}`; never write the secret itself into the spec"
                )
        return value

    @property
    def variables(self) -> list[str]:
        items = (
            [self.assert_no_secret_leak]
            if isinstance(self.assert_no_secret_leak, str)
            else (self.assert_no_secret_leak)
        )
        return [_SECRET_REFERENCE.fullmatch(item.strip()).group(1) for item in items]  # type: ignore[union-attr]

    @property
    def text(self) -> str:
        return f"{self.kind}: {', '.join('${' + name + '}' for name in self.variables)}"


#: Steps written as a bare string (`- assert_no_egress`) rather than a one-key mapping.
BARE_STEP_KINDS: tuple[str, ...] = (NoEgressStep.kind,)

STEP_TYPES: tuple[type[StepBase], ...] = (
    PromptStep,
    ToolCallStep,
    NoToolCallStep,
    ReplyStep,
    NoEgressStep,
    NoSecretLeakStep,
)
STEP_KINDS: dict[str, type[StepBase]] = {cls.kind: cls for cls in STEP_TYPES}


def _step_tag(value: Any) -> str | None:
    """The step kind: the single key of a mapping, or the kind of a built step."""
    if isinstance(value, StepBase):
        return value.kind
    if isinstance(value, str) and value in BARE_STEP_KINDS:
        return value
    if isinstance(value, dict) and len(value) == 1:
        (key,) = value
        return key if isinstance(key, str) else None
    return None


Step = Annotated[
    Annotated[PromptStep, Tag("prompt")]
    | Annotated[ToolCallStep, Tag("assert_tool_call")]
    | Annotated[NoToolCallStep, Tag("assert_no_tool_call")]
    | Annotated[ReplyStep, Tag("assert")]
    | Annotated[NoSecretLeakStep, Tag("assert_no_secret_leak")]
    | Annotated[
        NoEgressStep,
        Tag("assert_no_egress"),
        WithJsonSchema(
            {
                "const": "assert_no_egress",
                "description": "Certify that the contained run reached nothing undeclared.",
            }
        ),
    ],
    Discriminator(
        _step_tag,
        custom_error_type=SPEC_ERROR_TYPE,
        custom_error_message=(
            "a step must be a mapping with exactly one of the keys "
            + ", ".join(STEP_KINDS)
            + ". Fix: write e.g. `- prompt: ...` or `- assert_tool_call: get_weather`"
        ),
    ),
]


CONTROL_ID_PATTERN = r"^[a-z0-9._-]+$"


class ControlSpec(_Model):
    """What the flow evidences, for an auditor: every run records this control's row
    (verdict, lanes asserted, containment enforced) and `flowproof audit` reads it back."""

    id: str = Field(
        description=(
            "Stable id of the control, unique within a directory run: lowercase letters, "
            "digits, `.`, `_`, `-` (e.g. `sec.egress.declared`)."
        ),
        json_schema_extra={"pattern": CONTROL_ID_PATTERN},
    )
    title: str | None = optional_text("One line for reports.")
    description: str | None = optional_text("What the control guarantees, for reviewers.")

    @field_validator("id", mode="after")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not re.fullmatch(CONTROL_ID_PATTERN, value):
            suggestion = re.sub(r"[^a-z0-9._-]+", "-", value.lower()).strip("-") or "sec.egress"
            raise spec_problem(
                f"control id {value!r} may hold only lowercase letters, digits, `.`, `_` and "
                f"`-`. Fix: write e.g. `id: {suggestion}`"
            )
        return value


class FlowSpec(_Model):
    """One `*.flow.yaml`: the agent to run, the tools to mock, and the steps to check."""

    model_config = ConfigDict(
        title="flowproof flow spec",
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    name: str = Field(min_length=1, description="What the flow checks, shown in reports.")
    app: Literal["agent"] = Field(description="The kind of app under test; only `agent` now.")
    agent: AgentSpec = Field(description="How to start the agent under test.")
    tools: list[ToolSpec] = listed(
        "Tools the agent may call. With `result` (or `results`, one per call) the tool is "
        "mocked; without either, declared only. When non-empty, assertions may only name "
        "tools listed here."
    )
    mcp: list[McpServerSpec] = listed(
        "MCP servers the agent calls: each is recorded once and replayed with the real "
        "server never started; a tool given `result` or `results` is never forwarded."
    )
    strict: bool = Field(
        default=False,
        description="Also forbid tool calls not asserted by an `assert_tool_call` step.",
    )
    match: MatchSpec | None = Field(
        default=None,
        description=(
            "Declared relaxations of strict request matching (presets, ignore, normalize, "
            "addons, relocate), applied to both sides at record and replay, reported each run."
        ),
    )
    timeout: float = Field(
        default=DEFAULT_TIMEOUT,
        gt=0,
        allow_inf_nan=False,
        description="Seconds the agent may run before it fails.",
    )
    skip_unless_env: list[str] = listed(
        "Skip the flow (reported as skipped) unless all these variables are set: their "
        "names (`STAGING_URL`), not `${STAGING_URL}`."
    )
    control: ControlSpec | None = optional(
        "`{id, title?, description?}`: this flow evidences a control; each run records "
        "its row, which `flowproof audit` reads."
    )
    steps: list[Step] = Field(
        description=(
            "One-key mappings, in order: `prompt`, `assert_tool_call`, `assert_no_tool_call`, "
            "`assert`, `assert_no_secret_leak`; or the bare step `assert_no_egress`. At least "
            "one `prompt`."
        ),
        json_schema_extra={"minItems": 1},
    )

    _source_path: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check_across_fields(self, info: ValidationInfo) -> Self:
        if not self.steps:
            raise spec_problem(
                "`steps` is empty. Fix: add at least a `- prompt: ...` step", ("steps",)
            )
        if not any(isinstance(step, PromptStep) for step in self.steps):
            raise spec_problem(
                "no `prompt` step, so there is no task for the agent. Fix: add a step "
                "`- prompt: <what the agent should do>`",
                ("steps",),
            )
        _refuse_repeated_tools(self.tools, "`tools`")
        self._check_mcp()
        seen = {tool.name: 0 for tool in self.tools}
        seen.update({tool.name: -1 for server in self.mcp for tool in server.tools})
        if self.tools:
            for index, step in enumerate(self.steps):
                if isinstance(step, ToolCallStep | NoToolCallStep):
                    name = step.assertion.tool
                    if name not in seen:
                        raise spec_problem(
                            undeclared_tool(step.kind, name, list(seen)),
                            ("steps", index, step.kind),
                        )
        context = info.context if isinstance(info.context, dict) else {}
        source = context.get("source_path")
        self._source_path = Path(source) if source is not None else None
        lines = context.get("step_lines") or []
        for step, line in zip(self.steps, lines, strict=False):
            step._line = line
        return self

    @field_validator("skip_unless_env", mode="after")
    @classmethod
    def _variable_names(cls, names: list[str]) -> list[str]:
        for index, name in enumerate(names):
            problem = not_a_variable_name(name)
            if problem is not None:
                raise spec_problem(f"`skip_unless_env` entry {name!r} {problem}", (index,))
        return names

    @model_validator(mode="after")
    def _task_exec_can_pass(self) -> Self:
        """A command agent gets the task in its environment (FLOWPROOF_PROMPT) and where
        `${flowproof.prompt}` is written: each must be a string exec can pass."""
        if self.agent.command is None:
            return self  # a url agent gets it in a JSON body, which carries anything
        carrier = (
            "no environment variable can hold, and a command agent gets the task as "
            "FLOWPROOF_PROMPT"
        )
        for index, step in enumerate(self.steps):
            if isinstance(step, PromptStep) and "\x00" in step.prompt:
                problem = nul_problem(step.prompt, "the prompt", carrier)
                raise spec_problem(str(problem), ("steps", index, "prompt"))
        task, agent = self.task_prompt, self.agent
        places: list[tuple[str, tuple[str, ...], str, str]]
        places = [("`agent.command`", ("command",), "", str(agent.command))]
        places += [(f"`agent.env.{k}`", ("env", k), f"{k}=", v) for k, v in agent.env.items()]
        for where, at, prefix, text in places:
            if PROMPT_HANDLE in find_handles(text) and not fits_one_string(prefix + task):
                raise spec_problem(
                    f"{where} passes the task with ${{flowproof.{PROMPT_HANDLE}}}, and the task "
                    f"is {encoded_size(task) - 1:,} bytes; {ARG_LIMIT}. {BIG_DATA_FIX}",
                    ("agent", *at),
                )
        return self

    def _check_mcp(self) -> None:
        """Across `mcp` entries, and between `mcp` and the rest of the spec."""
        names: dict[str, int] = {}
        variables: dict[str, str] = {}
        top_level = {tool.name for tool in self.tools}
        for index, server in enumerate(self.mcp):
            if server.name in names:
                raise spec_problem(
                    f"MCP server `{server.name}` is declared twice under `mcp` (first as entry "
                    f"{names[server.name] + 1}). Fix: give each server its own name",
                    ("mcp", index, "name"),
                )
            names[server.name] = index
            suffix = mcp_variable_suffix(server.name)
            if suffix in variables:
                raise spec_problem(
                    f"MCP servers `{variables[suffix]}` and `{server.name}` would share the "
                    f"variable suffix {suffix}. Fix: rename one of them",
                    ("mcp", index, "name"),
                )
            variables[suffix] = server.name
            for tool_index, tool in enumerate(server.tools):
                if tool.name in top_level:
                    raise spec_problem(
                        f"tool `{tool.name}` is both in the top-level `tools` and under the MCP "
                        f"server `{server.name}`. Fix: keep it under the server (a `result` "
                        "there is what the server call answers)",
                        ("mcp", index, "tools", tool_index),
                    )
            if server.command is not None and self.agent.url is not None:
                raise spec_problem(
                    f"the stdio MCP server `{server.name}` needs an agent flowproof starts: a "
                    "running service (`agent.url`) cannot be handed the stand-in's command. "
                    "Fix: drive the agent with `command`, or serve the MCP server over HTTP "
                    "(`url` and a fixed `port`)",
                    ("mcp", index, "command"),
                )
            if server.url is not None and self.agent.url is not None and server.port is None:
                raise spec_problem(
                    f"the MCP server `{server.name}` has a `url` and the agent is a running "
                    "service (`agent.url`), which cannot be handed flowproof's listener port at "
                    "launch. Fix: add a fixed `port:` to the server and point the service's MCP "
                    "config at http://127.0.0.1:<port>/mcp",
                    ("mcp", index, "url"),
                )

    @property
    def mcp_mocks(self) -> dict[str, dict[str, Any]]:
        return {server.name: server.mocks for server in self.mcp}

    @property
    def asserts_no_egress(self) -> bool:
        return any(isinstance(step, NoEgressStep) for step in self.steps)

    @property
    def secret_variables(self) -> list[str]:
        """The variables every `assert_no_secret_leak` step names, in order, once each."""
        names: list[str] = []
        for step in self.steps:
            if isinstance(step, NoSecretLeakStep):
                names.extend(name for name in step.variables if name not in names)
        return names

    @property
    def engages_egress(self) -> bool:
        """The flow declares `allow_egress` or asserts `assert_no_egress`: its agent runs
        contained where the host can contain it."""
        return self.agent.declares_egress or self.asserts_no_egress

    @property
    def source_path(self) -> Path | None:
        """The file this spec was loaded from (not part of the spec itself)."""
        return self._source_path

    @property
    def task_prompt(self) -> str:
        """Every `prompt` step joined with newlines, wherever it appears in `steps`."""
        return "\n".join(step.prompt for step in self.steps if isinstance(step, PromptStep))

    @property
    def mocks(self) -> dict[str, Any]:
        """Tool name -> result, for mocked tools only (a `null` result is a mock); a
        `results:` list as a ResultSequence."""
        return {tool.name: tool.mock for tool in self.tools if tool.is_mocked}

    @property
    def declared_tools(self) -> list[str]:
        return [tool.name for tool in self.tools]
