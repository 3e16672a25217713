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
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    Tag,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from flowproof_cli.errors import SpecError
from flowproof_cli.spec.grammar import (
    ReplyAssertion,
    ToolCallAssertion,
    parse_reply_assertion,
    parse_tool_assertion,
)
from flowproof_cli.spec.variables import resolve_variables

SPEC_ERROR_TYPE = "flowproof_spec"
DEFAULT_TIMEOUT = 300.0

_TOOL_ASSERTION_PATTERN = r"^\s*\S+(\s+where\s+\S[\s\S]*)?\s*$"
_REPLY_PATTERN = r"^\s*reply\s+(contains|is)\s+\S[\s\S]*$"


def spec_problem(detail: str, at: tuple[str | int, ...] = ()) -> PydanticCustomError:
    """A validation error the loader turns into a SpecError at the line of `at`."""
    return PydanticCustomError(SPEC_ERROR_TYPE, "{detail}", {"detail": detail, "at": at})


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
    proxy_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="With `url`: the fixed loopback port the proxy binds (required).",
    )

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

    def resolved_headers(self, environ: Mapping[str, str]) -> dict[str, str]:
        return {
            key: resolve_variables(value, environ, where=f"agent.headers.{key}")
            for key, value in self.headers.items()
        }

    def resolved_env(
        self, environ: Mapping[str, str], handles: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        return {
            key: resolve_variables(value, environ, handles, where=f"agent.env.{key}")
            for key, value in self.env.items()
        }


class ToolSpec(_Model):
    """A tool the agent may call: declared only, or mocked when `result` is given."""

    name: str = Field(min_length=1, description="The tool name as the model calls it.")
    result: Any = Field(
        default=None,
        description=(
            "What the mocked tool returns (any JSON value, `null` included). Omit the key to "
            "declare the tool without mocking it."
        ),
    )

    @field_validator("result", mode="after")
    @classmethod
    def _json_result(cls, value: Any) -> Any:
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise spec_problem(
                "the result is not JSON (a YAML tag or a set?). Fix: use strings, numbers, "
                "booleans, null, lists and mappings only"
            ) from None
        return value

    @model_serializer(mode="wrap")
    def _omit_unmocked_result(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Dump a declared-only tool without `result`, so a dump loads back the same."""
        data = handler(self)
        if not self.is_mocked and isinstance(data, dict):
            data.pop("result", None)
        return data

    @property
    def is_mocked(self) -> bool:
        """True when the spec gave a `result` key, even `result: null`."""
        return "result" in self.model_fields_set


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


class ToolCallStep(StepBase):
    """The agent called a tool (in order with the other `assert_tool_call` steps)."""

    kind: ClassVar[str] = "assert_tool_call"
    assert_tool_call: str = Field(
        description=(
            "`NAME [where PATH MATCHER [VALUE] [and ...]]`; matchers: equals (is), contains, "
            "matches, exists, is absent (is missing)."
        ),
        json_schema_extra={"pattern": _TOOL_ASSERTION_PATTERN},
    )

    @field_validator("assert_tool_call", mode="after")
    @classmethod
    def _check(cls, value: str) -> str:
        return _check_tool_assertion(value)

    @property
    def assertion(self) -> ToolCallAssertion:
        return parse_tool_assertion(self.assert_tool_call)


class NoToolCallStep(StepBase):
    """No call in the whole trajectory matches this tool and its conditions."""

    kind: ClassVar[str] = "assert_no_tool_call"
    assert_no_tool_call: str = Field(
        description="`NAME [where PATH MATCHER [VALUE] [and ...]]`, as for assert_tool_call.",
        json_schema_extra={"pattern": _TOOL_ASSERTION_PATTERN},
    )

    @field_validator("assert_no_tool_call", mode="after")
    @classmethod
    def _check(cls, value: str) -> str:
        return _check_tool_assertion(value)

    @property
    def assertion(self) -> ToolCallAssertion:
        return parse_tool_assertion(self.assert_no_tool_call)


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


STEP_TYPES: tuple[type[StepBase], ...] = (PromptStep, ToolCallStep, NoToolCallStep, ReplyStep)
STEP_KINDS: dict[str, type[StepBase]] = {cls.kind: cls for cls in STEP_TYPES}


def _step_tag(value: Any) -> str | None:
    """The step kind: the single key of a mapping, or the kind of a built step."""
    if isinstance(value, StepBase):
        return value.kind
    if isinstance(value, dict) and len(value) == 1:
        (key,) = value
        return key if isinstance(key, str) else None
    return None


Step = Annotated[
    Annotated[PromptStep, Tag("prompt")]
    | Annotated[ToolCallStep, Tag("assert_tool_call")]
    | Annotated[NoToolCallStep, Tag("assert_no_tool_call")]
    | Annotated[ReplyStep, Tag("assert")],
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


class FlowSpec(_Model):
    """One `*.flow.yaml`: the agent to run, the tools to mock, and the steps to check."""

    model_config = ConfigDict(
        title="flowproof flow spec",
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    name: str = Field(min_length=1, description="What the flow checks, shown in reports.")
    app: Literal["agent"] = Field(description="The kind of app under test; only `agent` now.")
    agent: AgentSpec = Field(description="How to start the agent under test.")
    tools: list[ToolSpec] = Field(
        default_factory=list,
        description=(
            "Tools the agent may call. With `result` the tool is mocked; without it, declared "
            "only. When non-empty, assertions may only name tools listed here."
        ),
    )
    strict: bool = Field(
        default=False,
        description="Also forbid tool calls not asserted by an `assert_tool_call` step.",
    )
    timeout: float = Field(
        default=DEFAULT_TIMEOUT, gt=0, description="Seconds the agent may run before it fails."
    )
    skip_unless_env: list[str] = Field(
        default_factory=list,
        description="Skip the flow (reported as skipped) unless all these variables are set.",
    )
    steps: list[Step] = Field(
        description=(
            "One-key mappings, in order: `prompt`, `assert_tool_call`, `assert_no_tool_call`, "
            "`assert`. At least one `prompt`."
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
        seen: dict[str, int] = {}
        for index, tool in enumerate(self.tools):
            if tool.name in seen:
                first = seen[tool.name]
                what = "mocked" if tool.is_mocked and self.tools[first].is_mocked else "listed"
                raise spec_problem(
                    f"tool `{tool.name}` is {what} twice under `tools` (first as entry "
                    f"{first + 1}). Fix: keep one entry for `{tool.name}`",
                    ("tools", index),
                )
            seen[tool.name] = index
        if self.tools:
            for index, step in enumerate(self.steps):
                if isinstance(step, ToolCallStep | NoToolCallStep):
                    name = step.assertion.tool
                    if name not in seen:
                        raise spec_problem(
                            f"`{step.kind}` names tool `{name}`, which is not declared under "
                            f"`tools` (declared: {', '.join(seen)}). Fix: add `- name: {name}` "
                            "under `tools`, or correct the tool name",
                            ("steps", index, step.kind),
                        )
        context = info.context if isinstance(info.context, dict) else {}
        source = context.get("source_path")
        self._source_path = Path(source) if source is not None else None
        lines = context.get("step_lines") or []
        for step, line in zip(self.steps, lines, strict=False):
            step._line = line
        return self

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
        """Tool name -> result, for mocked tools only (a `null` result is a mock)."""
        return {tool.name: tool.result for tool in self.tools if tool.is_mocked}

    @property
    def declared_tools(self) -> list[str]:
        return [tool.name for tool in self.tools]
