"""The `*.flow.yaml` spec: models, prose assertion grammar, loader, `${VAR}`, JSON Schema."""

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
    ToolCallStep,
    ToolSpec,
)
from flowproof_cli.spec.schema import spec_json_schema
from flowproof_cli.spec.variables import find_variables, resolve_variables

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
