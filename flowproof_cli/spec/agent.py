"""The `agent:` key of a flow: how to drive the agent under test."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from flowproof_cli.process import (
    ARG_LIMIT,
    BIG_DATA_FIX,
    encoded_size,
    env_name_problem,
    fits_one_string,
)
from flowproof_cli.spec.base import _Model
from flowproof_cli.spec.conversation import ConversationSpec
from flowproof_cli.spec.fields import (
    HEADER_FIX,
    header_problem,
    nul_problem,
    optional_port,
    url_fix,
    url_problem,
)
from flowproof_cli.spec.problems import spec_problem
from flowproof_cli.spec.variables import MESSAGE_HANDLES, find_handles, resolve_variables


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
    conversation: ConversationSpec | None = Field(
        default=None,
        description=(
            "A `command` agent in a conversation (a flow with `user:` steps): `send` (what is "
            "written to stdin per turn), `until` (the regex of the line that ends a turn; "
            "required) and `wait_first`. A `url` agent needs none: each turn is one POST."
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
            if self.conversation is not None:
                raise spec_problem(
                    "`agent.conversation` only applies to a `command` agent: `send`, `until` "
                    "and `wait_first` say how to talk to a process over stdin and stdout, and a "
                    "`url` agent gets each turn as its own POST. Fix: remove "
                    "`agent.conversation`; the `user:` steps alone make the flow a conversation",
                    ("conversation",),
                )
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

    @model_validator(mode="after")
    def _message_handles_only_in_send(self) -> Self:
        """A turn's text exists only while the turn is sent: `agent.command`, `agent.env`
        and `agent.headers` are resolved once, before any turn."""
        places: list[tuple[str, tuple[str, ...], str]]
        places = [("agent.command", ("command",), self.command or "")]
        places += [(f"agent.env.{k}", ("env", k), v) for k, v in self.env.items()]
        places += [(f"agent.headers.{k}", ("headers", k), v) for k, v in self.headers.items()]
        for where, at, text in places:
            for name in find_handles(text):
                if name in MESSAGE_HANDLES:
                    raise spec_problem(
                        f"`{where}` uses `${{flowproof.{name}}}`, a conversation turn's text, "
                        "which is filled only in `agent.conversation.send` (written to the "
                        "agent's stdin for each `user:` turn). Fix: remove it here and put it "
                        "in `agent.conversation.send`",
                        at,
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
