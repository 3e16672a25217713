"""Conversations: `agent.conversation` (how a command agent is talked to over stdin and
stdout) and a simulated user (a `user:` step written as a mapping); the steps grouped per
turn are `turns.py`, above `agent.py` and `steps.py`, which use these models.

A flow is a conversation when it has `user:` steps. Each `user:` step opens a turn; the
assertion steps after it, up to the next `user:`, judge that turn, and steps before the
first `user:` judge the whole conversation. The end of a turn is always a signal from the
agent (the `until` line of a command agent, the HTTP response of a url agent), never a
timing guess, so a command agent must declare `until`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from flowproof_cli.match.patterns import BadPattern, compile_pattern
from flowproof_cli.spec.base import _Model
from flowproof_cli.spec.problems import SPEC_ERROR_TYPE, check_keys, spec_problem
from flowproof_cli.spec.variables import (
    MESSAGE_HANDLE,
    MESSAGE_HANDLES,
    closest_handle,
    find_handles,
)

USER_KIND = "user"  # the step kind that opens a turn (steps.UserStep.kind)
PROMPT_KIND = "prompt"
DEFAULT_SEND = "${flowproof." + MESSAGE_HANDLE + "}\n"
MAX_SIMULATED_TURNS = 50
UNTIL_EXAMPLE = "until: '^> $'"


def _handle_list(names: tuple[str, ...]) -> str:
    return " or ".join(f"${{flowproof.{name}}}" for name in names)


class ConversationSpec(_Model):
    """How a `command` agent is talked to, turn by turn: each message is written to its
    stdin, and a line of its stdout matching `until` ends the turn."""

    send: str = Field(
        default=DEFAULT_SEND,
        min_length=1,
        description=(
            "What is written to the agent's stdin for each `user:` turn: "
            "`${flowproof.message}` is the turn's text, `${flowproof.message_json}` the same "
            "text as a JSON string literal (for line protocols such as stream-json)."
        ),
    )
    until: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "A Python regular expression: a line the agent prints (or its unterminated last "
            "line, a prompt such as `> `) that matches it ends the turn. Required for a "
            "command agent's conversation."
        ),
    )
    wait_first: bool = Field(
        default=False,
        description=(
            "The agent prints an `until` line once at start (a prompt): wait for it before "
            "sending the first message."
        ),
    )

    @field_validator("until", mode="after")
    @classmethod
    def _until_compiles(cls, until: str | None) -> str | None:
        if until is None:
            return None
        try:
            compile_pattern(until)
        except BadPattern as exc:
            raise spec_problem(
                f"`agent.conversation.until` is not a valid regular expression: {exc}. Fix: "
                "correct it (in YAML, single quotes keep backslashes as written: '^> $')"
            ) from None
        return until

    @field_validator("send", mode="after")
    @classmethod
    def _send_carries_the_message(cls, send: str) -> str:
        handles = find_handles(send)
        for name in handles:
            if name not in MESSAGE_HANDLES:
                meant = closest_handle(name, MESSAGE_HANDLES)
                hint = f" Did you mean `${{flowproof.{meant}}}`?" if meant else ""
                raise spec_problem(
                    f"`agent.conversation.send` uses `${{flowproof.{name}}}`, which is not "
                    f"filled there: it takes {_handle_list(MESSAGE_HANDLES)}.{hint} Fix: "
                    "write the turn's text with one of those"
                )
        if not any(name in MESSAGE_HANDLES for name in handles):
            raise spec_problem(
                "`agent.conversation.send` does not contain the turn's message, so every turn "
                f"would send the same text. Fix: put {_handle_list(MESSAGE_HANDLES)} in it, "
                'e.g. `send: "${flowproof.message}\\n"` (the default)'
            )
        return send


_SIMULATED_KEYS = ("simulate", "until", "max_turns", "sees", "model")
#: The providers a simulated user's `model:` may name, and the dialect it is asked in.
SIMULATOR_DIALECTS = {"openai": "openai-chat", "anthropic": "anthropic", "gemini": "gemini"}
MODEL_EXAMPLE = "model: openai/gpt-4o-mini"


class SimulatedUser(_Model):
    """A user flowproof plays: at record the record upstream model writes each message
    from the persona and goal; at replay the recorded messages are sent again."""

    simulate: str = Field(
        min_length=1, description="The persona and goal of the simulated user, in words."
    )
    until: str = Field(
        min_length=1,
        description="The goal, in words: the simulated user says DONE when it holds.",
    )
    max_turns: int = Field(
        default=5,
        ge=1,
        le=MAX_SIMULATED_TURNS,
        description=(
            "The agent's turns it may take (the final DONE is not one); reaching it without "
            "`until` holding fails the flow."
        ),
    )
    sees: Literal["output", "reply"] = Field(
        default="output",
        description=(
            "What it reads of each turn: `output`, what the agent printed (stdout after the "
            "message, without the `until` line; a url agent's response body), or `reply`, "
            "the model's last assistant message (for agents whose stdout is a protocol)."
        ),
    )

    model: str | None = Field(
        default=None,
        description=(
            "`<provider>/<model>` (openai, anthropic or gemini) the simulated user is played "
            "by at record. Without it, the provider and model of the agent's most recent "
            "model call; needed when the simulated user speaks before the agent made one."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        check_keys(value, _SIMULATED_KEYS, "a simulated `user:`", "use the keys")
        for key, what in (("simulate", "the persona and goal"), ("until", "when it is done")):
            if key not in value:
                raise spec_problem(
                    f"a simulated `user:` needs `{key}` ({what}). Fix: write e.g. `user: "
                    "{simulate: You are a customer whose order 4711 is late, until: the agent "
                    "confirms the cancellation}`; for a fixed message write `user: TEXT`"
                )
        return value

    @field_validator("simulate", "until", mode="before")
    @classmethod
    def _text(cls, value: Any, info: Any) -> Any:
        if not isinstance(value, str) or not value.strip():
            raise spec_problem(
                f"`{info.field_name}` of a simulated `user:` must be non-empty text, got "
                f"{value!r}. Fix: write it in words, quoted if YAML would read it otherwise"
            )
        return value

    @field_validator("max_turns", mode="before")
    @classmethod
    def _turns(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            value = None
        if value is None or not 1 <= value <= MAX_SIMULATED_TURNS:
            raise spec_problem(
                "`max_turns` of a simulated `user:` must be a whole number of agent turns "
                f"from 1 to {MAX_SIMULATED_TURNS}. Fix: write e.g. `max_turns: 5`"
            )
        return value

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, value: Any) -> Any:
        provider, _, model = value.partition("/") if isinstance(value, str) else ("", "", "")
        if provider not in SIMULATOR_DIALECTS or not model.strip():
            raise spec_problem(
                f"`model` of a simulated `user:` is {value!r}: it is `<provider>/<model>`, the "
                f"provider one of {', '.join(SIMULATOR_DIALECTS)}. Fix: write e.g. "
                f"`{MODEL_EXAMPLE}`"
            )
        return value

    @field_validator("sees", mode="before")
    @classmethod
    def _sees(cls, value: Any) -> Any:
        if value not in ("output", "reply"):
            raise spec_problem(
                f"`sees` of a simulated `user:` is {value!r}. Fix: write `sees: output` (what "
                "the agent printed) or `sees: reply` (the model's last assistant message)"
            )
        return value


def simulated_user(value: dict[Any, Any]) -> SimulatedUser:
    """`value` built into a SimulatedUser; a problem is raised again as a spec problem at
    its key (relative to the `user` value), so the loader names its line."""
    try:
        return SimulatedUser.model_validate(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        at = tuple(error["loc"])
        if error["type"] == SPEC_ERROR_TYPE:
            ctx = error.get("ctx") or {}
            raise spec_problem(str(ctx.get("detail")), (*at, *ctx.get("at", ()))) from None
        raise spec_problem(
            f"a simulated `user:`: {error['msg']}. Fix: write `simulate`, `until` and, "
            "optionally, `max_turns`, `sees` and `model`",
            at,
        ) from None
