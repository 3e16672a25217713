"""`mcp:` in *.flow.yaml: the shape, and the named errors with their lines."""

from __future__ import annotations

import pytest

from flowproof_cli.errors import SpecError
from flowproof_cli.spec import spec_json_schema
from flowproof_cli.spec.loader import parse_spec

BASE = """name: x
app: agent
agent:
  {agent}
{tools}mcp:
{mcp}
steps:
  - prompt: hi
  - assert_tool_call: {asserted}
"""


def spec(mcp: str, *, agent: str = "command: run", tools: str = "", asserted: str = "t"):
    return parse_spec(
        BASE.format(agent=agent, tools=tools, mcp=mcp, asserted=asserted), "x.flow.yaml"
    )


def test_servers_tools_mocks_and_variables() -> None:
    parsed = spec(
        "  - name: files-v2\n    command: npx server ./sandbox\n    tools:\n"
        "      - name: t\n        result: {ok: true}\n      - name: read\n"
        "  - name: remote\n    url: https://tools.example.com/mcp\n    port: 8931\n",
        tools="tools:\n  - name: other\n",
    )
    files, remote = parsed.mcp
    assert (files.transport, files.variable) == ("stdio", "FLOWPROOF_MCP_SERVER_FILES_V2")
    assert files.mocks == {"t": {"ok": True}}
    assert (remote.transport, remote.variable, remote.port) == (
        "http",
        "FLOWPROOF_MCP_URL_REMOTE",
        8931,
    )
    assert parsed.mcp_mocks == {"files-v2": {"t": {"ok": True}}, "remote": {}}
    assert "mcp" in spec_json_schema()["properties"]


@pytest.mark.parametrize(
    ("mcp", "extra", "line", "message"),
    [
        (
            "  - name: f\n    command: srv\n    port: 9000\n",
            {},
            8,
            "`port` on the stdio MCP server `f`",
        ),
        (
            "  - name: r\n    url: http://x/mcp\n",
            {"agent": "url: http://127.0.0.1:5000\n  proxy_port: 4000"},
            8,
            "add a fixed `port:`",
        ),
        ("  - name: f\n    command: a\n  - name: f\n    url: http://x\n", {}, 8, "declared twice"),
        (
            "  - name: f\n    command: a\n    tools:\n      - name: t\n      - name: t\n",
            {},
            10,
            "listed twice",
        ),
        (
            "  - name: f\n    command: a\n    tools:\n      - name: t\n",
            {"tools": "tools:\n  - name: t\n"},
            11,
            "both in the top-level",
        ),
        ("  - name: f\n", {}, 6, "exactly one of `command`"),
        ("  - name: f\n    command: a\n    url: http://x\n", {}, 8, "it has both"),
        (
            "  - name: a-b\n    command: a\n  - name: a_b\n    command: b\n",
            {},
            8,
            "share the variable suffix A_B",
        ),
    ],
)
def test_named_errors(mcp: str, extra: dict, line: int, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec(mcp, **extra)
    assert caught.value.line == line, str(caught.value)
    assert message in str(caught.value)


def test_call_timeout_bounds_each_call_of_either_transport() -> None:
    parsed = spec(
        "  - name: f\n    command: srv\n    call_timeout: 30\n"
        "  - name: r\n    url: http://x/mcp\n    call_timeout: 2.5\n  - name: d\n    command: d\n"
    )
    assert [server.call_timeout for server in parsed.mcp] == [30.0, 2.5, None]
    schema = spec_json_schema()["$defs"]["McpServerSpec"]["properties"]["call_timeout"]
    assert "upstream timeout" in schema["description"]


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "-1", "0", '"30"', "true", "[1]"])
def test_a_call_timeout_that_is_not_seconds_is_named_at_its_line(value: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec(f"  - name: f\n    command: srv\n    call_timeout: {value}\n")
    assert caught.value.line == 8, str(caught.value)
    assert "`mcp.0.call_timeout` must be a finite number of seconds > 0" in str(caught.value)
    assert "Fix: e.g. `call_timeout: 60`" in str(caught.value)
