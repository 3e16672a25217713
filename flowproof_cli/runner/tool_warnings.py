"""Honest warnings: say when a spec looks like it does something it does not.

A `tools:` mock rewrites what the *model is told* a tool returned, and `assert_no_tool_call`
only judges the trajectory afterwards: in both cases the agent still runs the tool for real
(the real email is sent, the real row deleted) unless something intercepts the call itself.
Only a boundary that answers the tool (an MCP server declared under `mcp:` with a `result:`)
stops it, so every mocked or forbidden tool outside `intercepted_tools` gets a warning, at
record and at replay alike. What the warning advises depends on where the tool comes from:
one the agent offers the model in its own requests that no MCP server of the spec provides
is the agent's own, which cannot be declared under `mcp:`; for a coding CLI's built-in
(`Bash`, `run_shell_command`) the warning names the CLI's own flag that turns it off
(runner/built_in_tools.py). Any other may come from an MCP server: declare it.

A tool name written with a character that only looks like a plain one (a Cyrillic letter, a
zero-width space) is never called by that name: a mock of it never applies and an
`assert_no_tool_call` of it never fails, so it is said on every run.

Likewise a `${flowproof.*}` handle that flowproof does not fill where it is written (most
often a misspelling such as `${flowproof.promt}`) reaches the agent as written: the flow
runs, but the agent gets the literal text, so the warning names the handle meant.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence, Set

from flowproof_cli.cassette.turn import Turn
from flowproof_cli.dialects import dialect_named
from flowproof_cli.mcp.lane import Lane
from flowproof_cli.mcp.mocks import lane_schemas
from flowproof_cli.quoting import odd_note, skeleton, unmasked
from flowproof_cli.runner.built_in_tools import built_in_of
from flowproof_cli.runner.environment import proxy_handles
from flowproof_cli.spec import FlowSpec, NoToolCallStep, ToolCallStep
from flowproof_cli.spec.variables import (
    PROMPT_FILE_HANDLE,
    PROMPT_HANDLE,
    closest_handle,
    find_handles,
)

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


def offered_tools(turns: Iterable[Turn]) -> dict[str, set[str]]:
    """Protocol -> the tool names the agent offered the model in these requests."""
    offered: dict[str, set[str]] = {}
    for turn in turns:
        tools = dialect_named(turn.protocol).outline(turn.request).tools
        offered.setdefault(turn.protocol, set()).update(tools)
    return offered


def _from_mcp(name: str, listed: Set[str]) -> bool:
    """A tool of an MCP server of the spec, as listed or as an agent prefixes it
    (`mcp__notes__write_note`)."""
    return name in listed or any(name.endswith(f"__{tool}") for tool in listed)


def _advice(name: str, offered: Mapping[str, Set[str]], listed: Set[str]) -> str:
    """What stops the real call of `name`, given where it comes from."""
    cli = None if _from_mcp(name, listed) else built_in_of(name, offered)
    if cli is not None:
        return (
            f"{name} is a built-in tool of {cli.cli} (the tools the agent's model requests "
            f"offer show it is {cli.cli}, and no MCP server of the spec provides {name}), so "
            f"it cannot be declared under `mcp:`. To stop the real call, {cli.how_to_stop(name)}"
        )
    if any(name in names for names in offered.values()) and not _from_mcp(name, listed):
        return (
            f"{name} is one of the agent's own tools (offered in its model requests, and no "
            "MCP server of the spec provides it). To stop the real call, turn it off in the "
            "agent (a coding CLI's own permission flags or settings), or have the agent take "
            "it from an MCP server declared under `mcp:` with a `result:`, which flowproof "
            "answers instead of the real tool"
        )
    return (
        f"To stop the real call, declare {name} under `mcp:` with a `result:` so "
        "flowproof answers it instead of the real tool"
    )


def _warning(name: str, roles: list[str], advice: str) -> str:
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
    return f"{PREFIX}{what}. {advice}"


def unintercepted_tool_warnings(
    spec: FlowSpec,
    intercepted_tools: Set[str] = frozenset(),
    *,
    turns: Sequence[Turn] = (),
    lanes: Mapping[str, Lane] | None = None,
) -> list[str]:
    """One warning per mocked or forbidden tool that no flowproof boundary intercepts.

    A tool given a `result:` under an `mcp:` server is answered by flowproof itself, at
    record and at replay, so it never needs a warning. Nor does a look-alike name: no call
    has it, so nothing runs for real under it, and advice to declare it would propose the
    look-alike; `look_alike_warnings` names it by code point, with the plain name meant.
    `turns` (the model requests) and `lanes` (the MCP servers' recorded `tools/list`) tell
    the agent's own tools from the ones an MCP server could provide.
    """
    answered = {tool.name for server in spec.mcp for tool in server.tools if tool.is_mocked}
    warned = {
        name: roles
        for name, roles in _roles(spec).items()
        if name not in intercepted_tools and name not in answered and _plain_meant(name) is None
    }
    if not warned:
        return []
    offered = offered_tools(turns)
    listed = {tool.name for server in spec.mcp for tool in server.tools}
    for lane in (lanes or {}).values():
        listed.update(lane_schemas(lane))
    return [_warning(name, roles, _advice(name, offered, listed)) for name, roles in warned.items()]


def _handle_list(names: list[str]) -> str:
    return ", ".join(f"${{flowproof.{name}}}" for name in names)


def _handle_uses(spec: FlowSpec) -> Iterator[tuple[str, str, list[str]]]:
    """(where, text, handles filled there) for every agent value that may hold a handle."""
    agent = spec.agent
    if agent.command is not None:
        yield "agent.command", agent.command, _all_handles(spec)
    for key, value in agent.env.items():
        yield f"agent.env.{key}", value, _all_handles(spec)
    for key, value in agent.headers.items():
        yield f"agent.headers.{key}", value, list(proxy_handles(0))


def _all_handles(spec: FlowSpec) -> list[str]:
    """The handles `agent.command` and `agent.env` may use, with this spec's MCP servers."""
    mcp = [
        f"mcp_server.{server.name}" if server.transport == "stdio" else f"mcp_url.{server.name}"
        for server in spec.mcp
    ]
    return [PROMPT_HANDLE, PROMPT_FILE_HANDLE, *proxy_handles(0), *mcp]


def _handle_warning(spec: FlowSpec, where: str, name: str, known: list[str]) -> str:
    written = f"`${{flowproof.{name}}}`"
    if name in _all_handles(spec):  # a real handle, only not in agent.headers
        return (
            f"{PREFIX}{where} uses {written}, which is filled in agent.command and agent.env "
            f"only (headers may use {_handle_list(known)}); it is sent as written"
        )
    meant = closest_handle(name, known)
    if meant is not None:
        return (
            f"{PREFIX}{where} uses {written}, which flowproof does not provide; did you mean "
            f"`${{flowproof.{meant}}}`? It is passed on as written"
        )
    kind, _, server = name.partition(".")
    undeclared = (
        f"; no MCP server `{server}` is declared under `mcp:`"
        if kind in ("mcp_url", "mcp_server") and server
        else ""
    )
    return (
        f"{PREFIX}{where} uses {written}, which flowproof does not provide (it provides "
        f"{_handle_list(known)} there{undeclared}); it is passed on as written"
    )


def handle_warnings(spec: FlowSpec) -> list[str]:
    """One warning per `${flowproof.*}` reference flowproof leaves unfilled where it stands."""
    return [
        _handle_warning(spec, where, name, known)
        for where, text, known in _handle_uses(spec)
        for name in find_handles(text)
        if name not in known
    ]


def _tool_names(spec: FlowSpec) -> Iterator[tuple[str, str]]:
    """(name, where it is written) for every tool name of the spec."""
    for tool in spec.tools:
        yield tool.name, "`tools`"
    for server in spec.mcp:
        for tool in server.tools:
            yield tool.name, f"the MCP server `{server.name}`"
    for step in spec.steps:
        if isinstance(step, ToolCallStep | NoToolCallStep):
            line = f" (line {step.line})" if step.line else ""
            yield step.assertion.tool, f"`{step.kind}`{line}"


def _plain_meant(name: str) -> str | None:
    """The plain name a look-alike one reads as (`get_we\\u0430ther` -> `get_weather`), or
    None for a plain name, or one in another script altogether."""
    plain = skeleton(name)
    if plain == name or not plain.isascii() or not plain.isprintable():
        return None
    return plain


def look_alike_warnings(spec: FlowSpec) -> list[str]:
    """One warning per tool name written with characters that only look like plain ones (a
    Cyrillic letter among Latin ones, a zero-width space): no call of the plain name ever
    matches it, so such a mock never applies and such an `assert_no_tool_call` never fails.
    A name in another script altogether is left alone."""
    warnings: list[str] = []
    for name, where in _tool_names(spec):
        plain = _plain_meant(name)
        if plain is None:
            continue
        warnings.append(
            f"{PREFIX}tool `{unmasked(name)}`{odd_note(name, plain)} in {where} is not "
            f"`{plain}`: a call of `{plain}` never matches it. Fix: write it as `{plain}`"
        )
    return warnings
