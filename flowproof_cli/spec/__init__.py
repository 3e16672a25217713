"""The `*.flow.yaml` spec: models, prose assertion grammar, loader, `${VAR}`, JSON Schema.

Names load lazily, so a light user of one submodule (the process runner reads
`spec.variables`) does not pay for the models, the loader and YAML.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flowproof_cli.spec.agent import AgentSpec
    from flowproof_cli.spec.conversation import ConversationSpec, SimulatedUser
    from flowproof_cli.spec.faults import FaultSpec
    from flowproof_cli.spec.grammar import (
        Clause,
        ExitCodeAssertion,
        Matcher,
        ModelCallsAssertion,
        OutputAssertion,
        ReplyAssertion,
        ToolCallAssertion,
        parse_assertion,
        parse_reply_assertion,
        parse_tool_assertion,
    )
    from flowproof_cli.spec.loader import load_spec, parse_spec
    from flowproof_cli.spec.models import FlowSpec
    from flowproof_cli.spec.schema import spec_json_schema
    from flowproof_cli.spec.steps import (
        STEP_KINDS,
        NoToolCallStep,
        PromptStep,
        ReplyStep,
        Step,
        StepBase,
        ToolCallMatch,
        ToolCallStep,
        UserStep,
    )
    from flowproof_cli.spec.tools import ToolSpec
    from flowproof_cli.spec.turns import ConversationTurnSpec
    from flowproof_cli.spec.variables import find_variables, resolve_variables

_HOMES = {
    "AgentSpec": "agent",
    "Clause": "grammar",
    "ExitCodeAssertion": "grammar",
    "FaultSpec": "faults",
    "ModelCallsAssertion": "grammar",
    "OutputAssertion": "grammar",
    "parse_assertion": "grammar",
    "ConversationSpec": "conversation",
    "ConversationTurnSpec": "turns",
    "SimulatedUser": "conversation",
    "Matcher": "grammar",
    "ReplyAssertion": "grammar",
    "ToolCallAssertion": "grammar",
    "parse_reply_assertion": "grammar",
    "parse_tool_assertion": "grammar",
    "load_spec": "loader",
    "parse_spec": "loader",
    "FlowSpec": "models",
    "spec_json_schema": "schema",
    "STEP_KINDS": "steps",
    "NoToolCallStep": "steps",
    "PromptStep": "steps",
    "ReplyStep": "steps",
    "Step": "steps",
    "StepBase": "steps",
    "ToolCallMatch": "steps",
    "ToolCallStep": "steps",
    "UserStep": "steps",
    "ToolSpec": "tools",
    "find_variables": "variables",
    "resolve_variables": "variables",
}

__all__ = [
    "STEP_KINDS",
    "AgentSpec",
    "Clause",
    "ConversationSpec",
    "ConversationTurnSpec",
    "ExitCodeAssertion",
    "FaultSpec",
    "FlowSpec",
    "Matcher",
    "ModelCallsAssertion",
    "NoToolCallStep",
    "OutputAssertion",
    "PromptStep",
    "ReplyAssertion",
    "ReplyStep",
    "SimulatedUser",
    "Step",
    "StepBase",
    "ToolCallAssertion",
    "ToolCallMatch",
    "ToolCallStep",
    "ToolSpec",
    "UserStep",
    "find_variables",
    "load_spec",
    "parse_assertion",
    "parse_reply_assertion",
    "parse_spec",
    "parse_tool_assertion",
    "resolve_variables",
    "spec_json_schema",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
