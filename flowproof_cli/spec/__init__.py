"""The `*.flow.yaml` spec: models, prose assertion grammar, loader, `${VAR}`, JSON Schema.

Names load lazily, so a light user of one submodule (the process runner reads
`spec.variables`) does not pay for the models, the loader and YAML.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flowproof_cli.spec.grammar import (
        Clause,
        Matcher,
        ReplyAssertion,
        ToolCallAssertion,
        parse_reply_assertion,
        parse_tool_assertion,
    )
    from flowproof_cli.spec.loader import load_spec, parse_spec
    from flowproof_cli.spec.models import (
        STEP_KINDS,
        AgentSpec,
        FlowSpec,
        NoToolCallStep,
        PromptStep,
        ReplyStep,
        Step,
        StepBase,
        ToolCallMatch,
        ToolCallStep,
        ToolSpec,
    )
    from flowproof_cli.spec.schema import spec_json_schema
    from flowproof_cli.spec.variables import find_variables, resolve_variables

_HOMES = {
    "Clause": "grammar",
    "Matcher": "grammar",
    "ReplyAssertion": "grammar",
    "ToolCallAssertion": "grammar",
    "parse_reply_assertion": "grammar",
    "parse_tool_assertion": "grammar",
    "load_spec": "loader",
    "parse_spec": "loader",
    "STEP_KINDS": "models",
    "AgentSpec": "models",
    "FlowSpec": "models",
    "NoToolCallStep": "models",
    "PromptStep": "models",
    "ReplyStep": "models",
    "Step": "models",
    "StepBase": "models",
    "ToolCallMatch": "models",
    "ToolCallStep": "models",
    "ToolSpec": "models",
    "spec_json_schema": "schema",
    "find_variables": "variables",
    "resolve_variables": "variables",
}

__all__ = [
    "STEP_KINDS",
    "AgentSpec",
    "Clause",
    "FlowSpec",
    "Matcher",
    "NoToolCallStep",
    "PromptStep",
    "ReplyAssertion",
    "ReplyStep",
    "Step",
    "StepBase",
    "ToolCallAssertion",
    "ToolCallMatch",
    "ToolCallStep",
    "ToolSpec",
    "find_variables",
    "load_spec",
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
