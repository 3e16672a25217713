"""The `steps:` key of a flow: one class per step kind, and the `Step` union that picks
the class from the step's single key.

Adding a step kind: subclass ``StepBase`` with one field named like the YAML key and a
``kind`` ClassVar, then add it to ``Step`` and ``STEP_TYPES`` below. A bare-string step
(e.g. ``- assert_no_egress``) needs ``_step_tag`` to return the string as its tag and a
``mode="before"`` validator on its class turning the string into a mapping.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    AfterValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    Tag,
    WithJsonSchema,
    field_validator,
    model_serializer,
    model_validator,
)

from flowproof_cli.errors import SpecError
from flowproof_cli.spec.base import _Model
from flowproof_cli.spec.conversation import SimulatedUser, simulated_user
from flowproof_cli.spec.grammar import (
    Assertion,
    ExitCodeAssertion,
    RunAssertion,
    ToolCallAssertion,
    parse_assertion,
    parse_tool_assertion,
)
from flowproof_cli.spec.problems import SPEC_ERROR_TYPE, check_keys, spec_problem
from flowproof_cli.spec.tools import _check_json

_TOOL_ASSERTION_PATTERN = r"^\s*\S+(\s+where\s+\S[\s\S]*)?\s*$"
_REPLY_PATTERN = (
    r"^\s*(reply\s+(contains|is)\s+\S[\s\S]*|output\s+(contains|matches)\s+\S[\s\S]*"
    r"|exit\s+code\s+(equals|is)\s+-?[0-9]+\s*"
    r"|model\s+calls\s+(equals|is|at\s+least|at\s+most)\s+[0-9]+\s*)$"
)


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


def _not_text_fix(value: Any) -> str:
    """Why a `user:` value that YAML did not read as text is refused, with the quoting fix."""
    if value is None:
        return (
            "`user:` has no text (YAML read it as null). Fix: write the message after "
            "`user:`, e.g. `user: My order 4711 has not arrived.`"
        )
    if isinstance(value, bool):
        written = "no" if value is False else "yes"
        return (
            f"`user:` must be text; YAML read `{written}` as the boolean {str(value).lower()}. "
            f'Fix: quote it: user: "{written}"'
        )
    if isinstance(value, int | float):
        return (
            f'`user:` must be text; YAML read `{value}` as a number. Fix: quote it: user: "{value}"'
        )
    return (
        f"`user:` must be text (the message) or a mapping (a simulated user), got a "
        f"{type(value).__name__}. Fix: write `user: TEXT`, or `user: {{simulate: ..., "
        "until: ...}}`"
    )


class UserStep(StepBase):
    """Opens a conversation turn: the message sent to the agent (or a simulated user that
    writes the messages). The assertion steps after it, up to the next `user:`, judge that
    turn."""

    kind: ClassVar[str] = "user"
    user: Annotated[str, Field(min_length=1)] | SimulatedUser = Field(
        description=(
            "The turn's message, as text; or a simulated user, `{simulate, until, max_turns?, "
            "sees?, model?}`, whose turns the steps after it judge together."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _text_or_simulated(cls, value: Any) -> Any:
        if not isinstance(value, dict) or cls.kind not in value:
            return value
        user = value[cls.kind]
        if isinstance(user, dict):
            return {cls.kind: simulated_user(user)}
        if not isinstance(user, str):
            raise spec_problem(_not_text_fix(user), (cls.kind,))
        if not user.strip():
            raise spec_problem(
                "`user:` is empty text, and a turn needs a message. Fix: write the message "
                "the user sends, e.g. `user: My order 4711 has not arrived.`",
                (cls.kind,),
            )
        return value

    @property
    def message(self) -> str | None:
        """The turn's text; None for a simulated user (its messages come at run time)."""
        return self.user if isinstance(self.user, str) else None

    @property
    def simulated(self) -> SimulatedUser | None:
        return self.user if isinstance(self.user, SimulatedUser) else None

    @property
    def text(self) -> str:
        if isinstance(self.user, SimulatedUser):
            return f"simulated user: {self.user.simulate}"
        return self.user


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
        check_keys(value, _MATCH_KEYS, "the tool assertion", "use one of the allowed keys")
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
    """An `assert:` step: the agent's final reply contains a text; or a fact of the whole
    run: its own output, its exit code, how many model requests it made."""

    kind: ClassVar[str] = "assert"
    assert_: str = Field(
        alias="assert",
        description=(
            "`reply contains TEXT` (alias `reply is TEXT`, also a substring check); "
            "`output contains TEXT` or `output matches REGEX` (the agent's own stdout and "
            "stderr, whole); `exit code equals N` (alias `is`: with it, a non-zero exit is "
            "this step's to judge); `model calls equals N` (alias `is`), `model calls at "
            "least N`, `model calls at most N` (every model request, retries included)."
        ),
        json_schema_extra={"pattern": _REPLY_PATTERN},
    )

    @field_validator("assert_", mode="after")
    @classmethod
    def _check(cls, value: str) -> str:
        try:
            parse_assertion(value)
        except SpecError as exc:
            raise spec_problem(exc.detail) from None
        return value

    @property
    def assertion(self) -> Assertion:
        return parse_assertion(self.assert_)

    @property
    def judges_run(self) -> bool:
        """It judges a fact of the whole run (`output`, `exit code`, `model calls`)."""
        return isinstance(self.assertion, RunAssertion)

    @property
    def judges_exit_code(self) -> bool:
        return isinstance(self.assertion, ExitCodeAssertion)


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
    UserStep,
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
    | Annotated[UserStep, Tag("user")]
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
