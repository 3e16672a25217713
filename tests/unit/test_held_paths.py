"""Every temporary path flowproof makes is held by the keeper BEFORE it exists.

A SIGKILL between creating a folder and holding it left the folder behind: the kill probe
caught `flowproof-mcp-*` in the temp folder once (the run's first hold starts the keeper, a
fork and exec, so that window is milliseconds wide). Each site is checked at the moment of
its hold: the path must not exist yet, must exist once made, and must be gone (and released)
after its owner's clean-up.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flowproof_cli.cassette import Mode
from flowproof_cli.inspect.web_view import WebView
from flowproof_cli.process import KEEPER, PATH, write_atomic
from flowproof_cli.runner.mcp_servers import McpServers
from flowproof_cli.runner.proxy_engine import ProxyEngine

Holds = list[tuple[str, str, bool]]  # (op, path, existed at that moment)


@pytest.fixture
def holds(monkeypatch: pytest.MonkeyPatch) -> Iterator[Holds]:
    seen: Holds = []

    def recorder(op: str) -> Callable[[str, int | str], None]:
        def record(kind: str, value: int | str) -> None:
            if kind == PATH:
                seen.append((op, str(value), os.path.exists(str(value))))

        return record

    monkeypatch.setattr(KEEPER, "hold", recorder("hold"))
    monkeypatch.setattr(KEEPER, "release", recorder("release"))
    yield seen


def _made_then_removed(holds: Holds, prefix: str) -> str:
    held = [(path, existed) for op, path, existed in holds if op == "hold"]
    assert len(held) == 1, holds
    path, existed = held[0]
    assert Path(path).name.startswith(prefix)
    assert not existed, f"{path} existed before the keeper held it"
    return path


def test_the_proxy_engine_folder_is_held_before_it_exists(holds: Holds) -> None:
    proxy = ProxyEngine([], port=None)
    path = _made_then_removed(holds, "flowproof-mitm-")
    assert os.path.isdir(path)
    asyncio.run(proxy.stop())
    assert not os.path.exists(path) and ("release", path, False) in holds


def test_the_inspect_view_folder_is_held_before_it_exists(holds: Holds) -> None:
    view = WebView()
    path = _made_then_removed(holds, "flowproof-inspect-")
    assert os.path.isdir(path)
    view.close()
    assert not os.path.exists(path) and ("release", path, False) in holds


def test_the_mcp_stand_ins_folder_is_held_before_it_exists(holds: Holds, tmp_path: Path) -> None:
    servers = McpServers([], mode=Mode.REPLAY, environ={}, cwd=tmp_path)
    folder = servers._temp_folder()
    path = _made_then_removed(holds, "flowproof-mcp-")
    assert str(folder) == path and folder.is_dir()
    assert servers._temp_folder() == folder  # one folder per run, held once
    servers.close()
    assert not folder.exists() and ("release", path, False) in holds


def test_a_traces_temporary_file_is_held_before_it_exists(holds: Holds, tmp_path: Path) -> None:
    target = tmp_path / "t.trace.yaml"
    write_atomic(target, "flowproof_trace: 1\n")
    path = _made_then_removed(holds, ".t.trace.yaml.")
    assert not os.path.exists(path) and target.read_text() == "flowproof_trace: 1\n"
    assert ("release", path, False) in holds
