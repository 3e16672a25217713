"""The `*.flow.yaml` data model (pydantic v2, unknown keys forbidden everywhere): the flow
itself, its top-level keys and the rules across them. Each key with a model of its own lives
in its module: `agent:` in agent.py, `tools:` and `mcp:` in tools.py, `steps:` in steps.py,
`match:` in match.py; a conversation's keys and turns in conversation.py.

Validation is split in two so every error can carry a YAML line: pydantic checks shapes and
the prose grammar in the models, raising errors whose `loc` the loader maps to a line; checks
that span fields (no prompt, a tool declared twice, an undeclared assert target) raise a
`PydanticCustomError` of type ``flowproof_spec`` whose context carries ``at``, the `loc` of
the offending node, for the same mapping.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from flowproof_cli.faults.plan import Fault
from flowproof_cli.process import ARG_LIMIT, BIG_DATA_FIX, encoded_size, fits_one_string
from flowproof_cli.spec.agent import AgentSpec
from flowproof_cli.spec.base import _Model
from flowproof_cli.spec.faults import FaultSpec, check_faults
from flowproof_cli.spec.fields import (
    listed,
    not_a_variable_name,
    nul_problem,
    optional,
    optional_text,
)
from flowproof_cli.spec.match import MatchSpec
from flowproof_cli.spec.problems import spec_problem
from flowproof_cli.spec.steps import (
    NoEgressStep,
    NoSecretLeakStep,
    NoToolCallStep,
    PromptStep,
    ReplyStep,
    Step,
    ToolCallStep,
    UserStep,
)
from flowproof_cli.spec.tools import (
    McpServerSpec,
    ToolSpec,
    _refuse_repeated_tools,
    mcp_variable_suffix,
    undeclared_tool,
)
from flowproof_cli.spec.turns import ConversationTurnSpec, check_conversation, group_turns
from flowproof_cli.spec.variables import PROMPT_FILE_HANDLE, PROMPT_HANDLE, find_handles

DEFAULT_TIMEOUT = 300.0


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
    faults: list[FaultSpec] = listed(
        "Faults injected on purpose, each at one named call of the recording (`at: model "
        "call N`, `turn K model call N`, `mcp NAME call N`) with one kind: `answer` (an "
        "HTTP status, with `retry_after`), `stream`, `delay`, `malformed`, `connection: "
        "reset` for a model call; `error`, `tool_error`, `crash`, `hang` for an MCP call; "
        "`times` faulted attempts before the recording serves. Applied identically at "
        "record and replay, and kept in the trace."
    )
    steps: list[Step] = Field(
        description=(
            "One-key mappings, in order: `prompt`, `user`, `assert_tool_call`, "
            "`assert_no_tool_call`, `assert`, `assert_no_secret_leak`; or the bare step "
            "`assert_no_egress`. At least one `prompt` (a one-turn flow) or `user` (a "
            "conversation: each `user` opens a turn), never both."
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
        if not any(isinstance(step, PromptStep | UserStep) for step in self.steps):
            raise spec_problem(
                "no `prompt` step, so there is no task for the agent. Fix: add a step "
                "`- prompt: <what the agent should do>` (or, for a conversation, one "
                "`- user: <message>` step per turn)",
                ("steps",),
            )
        check_conversation(self.agent, self.steps)
        self._check_task_handles()
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
        for fault, line in zip(self.faults, context.get("fault_lines") or [], strict=False):
            fault._line = line
        _check_run_subjects(self)
        check_faults(
            self.faults,
            mcp_servers=[server.name for server in self.mcp],
            user_turns=_most_turns(self),
        )
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

    def _check_task_handles(self) -> None:
        """A conversation has no task given up front: `${flowproof.prompt}` (and its file)
        would be empty, so a spec that writes them is told where the messages go instead."""
        if not self.is_conversation:
            return
        agent = self.agent
        places: list[tuple[str, tuple[str, ...], str]]
        places = [("agent.command", ("command",), agent.command or "")]
        places += [(f"agent.env.{k}", ("env", k), v) for k, v in agent.env.items()]
        for where, at, text in places:
            for name in find_handles(text):
                if name in (PROMPT_HANDLE, PROMPT_FILE_HANDLE):
                    raise spec_problem(
                        f"`{where}` uses `${{flowproof.{name}}}`, the task given up front, and "
                        "this flow is a conversation (`user:` steps), which has none: each "
                        "message is sent as its own turn. Fix: remove it; the agent reads the "
                        "messages from its stdin, as `agent.conversation.send` writes them",
                        ("agent", *at),
                    )

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
    def fault_plan(self) -> tuple[Fault, ...]:
        """The `faults:` entries as the plain faults every layer applies, in spec order,
        each with its spec line."""
        return tuple(fault.fault for fault in self.faults)

    @property
    def judges_exit_code(self) -> bool:
        """An `assert: exit code ...` step judges the agent's exit: a non-zero exit is then
        that step's to judge, not a failure of the run by itself."""
        return any(isinstance(step, ReplyStep) and step.judges_exit_code for step in self.steps)

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
        """Every `prompt` step joined with newlines, wherever it appears in `steps` ("" in a
        conversation, whose messages are its `user:` steps, one per turn)."""
        return "\n".join(step.prompt for step in self.steps if isinstance(step, PromptStep))

    @property
    def is_conversation(self) -> bool:
        """The flow has `user:` steps: its agent is talked to turn by turn."""
        return any(isinstance(step, UserStep) for step in self.steps)

    @property
    def conversation(self) -> tuple[ConversationTurnSpec, ...]:
        """One turn per `user:` step, with the assertion steps that judge it (empty when
        the flow is not a conversation)."""
        return group_turns(self.steps)[1]

    @property
    def conversation_steps(self) -> tuple[Step, ...]:
        """The steps before the first `user:`: they judge the whole conversation (empty
        when the flow is not a conversation)."""
        return group_turns(self.steps)[0]

    @property
    def mocks(self) -> dict[str, Any]:
        """Tool name -> result, for mocked tools only (a `null` result is a mock); a
        `results:` list as a ResultSequence."""
        return {tool.name: tool.mock for tool in self.tools if tool.is_mocked}

    @property
    def declared_tools(self) -> list[str]:
        return [tool.name for tool in self.tools]


def _most_turns(spec: FlowSpec) -> int | None:
    """The most conversation turns the `user:` steps can open (a simulated user up to
    its `max_turns`); None when the flow is not a conversation."""
    if not spec.is_conversation:
        return None
    return sum(
        turn.simulated.max_turns if turn.simulated is not None else 1 for turn in spec.conversation
    )


def _check_run_subjects(spec: FlowSpec) -> None:
    """`output`, `exit code` and `model calls` judge the whole run: a url agent has no
    output or exit code of its own, and in a conversation they come before any turn."""
    in_turn = {id(step) for turn in spec.conversation for step in turn.steps}
    for index, step in enumerate(spec.steps):
        if not isinstance(step, ReplyStep) or not step.judges_run:
            continue
        subject = " ".join(step.assert_.split()[:2]).removesuffix(" contains")
        subject = subject.removesuffix(" matches")
        if spec.agent.url is not None and subject in ("output", "exit code"):
            raise spec_problem(
                f"`assert: {step.assert_.strip()}` judges the agent's {subject}, and this "
                "agent is a running service (`agent.url`) that flowproof does not start, "
                f"so it has no {subject} here. Fix: judge its answer with `reply "
                "contains TEXT`, or drive the agent with `command`",
                ("steps", index, "assert"),
            )
        if id(step) in in_turn:
            raise spec_problem(
                f"`assert: {step.assert_.strip()}` judges the whole run, and it is written "
                "under a `user:` turn. Fix: move it before the first `user:` step, with "
                "the steps that judge the whole conversation",
                ("steps", index, "assert"),
            )
