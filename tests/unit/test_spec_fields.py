"""The field shapes and checks shared by the spec, suite and `match:` models."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowproof_cli.errors import SpecError
from flowproof_cli.spec import load_spec
from flowproof_cli.spec.fields import first_repeat


def test_first_repeat_names_the_second_entry_and_the_first() -> None:
    assert first_repeat(["a", "b", "a", "b"]) == (2, 0)
    assert first_repeat(["a", "b", "c"]) is None
    assert first_repeat([]) is None


def test_a_tool_twice_under_an_mcp_server_is_refused_at_the_second_entry(tmp_path: Path) -> None:
    spec = tmp_path / "x.flow.yaml"
    spec.write_text(
        "name: x\napp: agent\nagent: {command: a}\n"
        "mcp:\n  - name: fs\n    command: srv\n    tools:\n"
        "      - name: read\n      - name: read\n"
        "steps:\n  - prompt: hi\n"
    )
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    message = str(caught.value)
    assert message.startswith(f"{spec}:9:")
    assert "tool `read` is listed twice under the MCP server `fs` (first as entry 1)" in message
    assert "Fix: keep one entry for `read`" in message


def test_an_empty_optional_text_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "x.flow.yaml"
    spec.write_text(
        "name: x\napp: agent\nagent: {command: a}\n"
        "mcp:\n  - name: fs\n    command: ''\n"
        "steps:\n  - prompt: hi\n"
    )
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    assert str(caught.value).startswith(f"{spec}:6:")
