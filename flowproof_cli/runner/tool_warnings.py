"""Honest warnings: say when a spec looks like it stops a tool but does not.

A `tools:` mock rewrites what the *model is told* a tool returned, and `assert_no_tool_call`
only judges the trajectory afterwards: in both cases the agent still runs the tool for real
(the real email is sent, the real row deleted) unless something intercepts the call itself.
Only a boundary that answers the tool (an MCP server declared under `mcp:` with a `result:`)
stops it, so every mocked or forbidden tool outside `intercepted_tools` gets a warning, at
record and at replay alike.
"""

from __future__ import annotations

from collections.abc import Set

from flowproof_cli.spec import FlowSpec, NoToolCallStep

PREFIX = "warning: "


def _roles(spec: FlowSpec) -> dict[str, list[str]]:
    """Tool name -> how the spec treats it ("mocked", "forbidden"), in order of appearance."""
    roles: dict[str, list[str]] = {}
    for name in spec.mocks:
        roles.setdefault(name, []).append("mocked")
    for step in spec.steps:
        if isinstance(step, NoToolCallStep):
            forbidden = roles.setdefault(step.assertion.tool, [])
            if "forbidden" not in forbidden:
                forbidden.append("forbidden")
    return roles


def _warning(name: str, roles: list[str]) -> str:
    if roles == ["mocked"]:
        what = (
            f"tool `{name}` is mocked under `tools:`, but nothing intercepts it: the agent "
            f"still runs {name} for real (the mock only changes what the model is told it "
            "returned)"
        )
    elif roles == ["forbidden"]:
        what = (
            f"tool `{name}` is forbidden by `assert_no_tool_call`, but nothing intercepts it: "
            f"if the agent calls {name}, it runs for real before the flow fails"
        )
    else:
        what = (
            f"tool `{name}` is mocked under `tools:` and forbidden by `assert_no_tool_call`, "
            f"but nothing intercepts it: the agent still runs {name} for real (the mock only "
            "changes what the model is told it returned)"
        )
    return (
        f"{PREFIX}{what}. To stop the real call, declare {name} under `mcp:` with a "
        "`result:` so flowproof answers it instead of the real tool"
    )


def unintercepted_tool_warnings(
    spec: FlowSpec, intercepted_tools: Set[str] = frozenset()
) -> list[str]:
    """One warning per mocked or forbidden tool that no flowproof boundary intercepts.

    A tool given a `result:` under an `mcp:` server is answered by flowproof itself, at
    record and at replay, so it never needs a warning.
    """
    answered = {tool.name for server in spec.mcp for tool in server.tools if tool.is_mocked}
    return [
        _warning(name, roles)
        for name, roles in _roles(spec).items()
        if name not in intercepted_tools and name not in answered
    ]
