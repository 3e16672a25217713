"""Fixtures the end-to-end modules share (their helpers are in flows.py and mcp_flows.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.e2e.flows import write_flow
from tests.fakes.fake_upstream import FakeUpstream


@pytest.fixture(scope="module")
def recorded_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default weather flow recorded once for the module: its trace, which `traced_flow`
    copies beside every flow that replays it."""
    folder = tmp_path_factory.mktemp("recording")
    spec = write_flow(folder)
    with FakeUpstream() as fake:
        result = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
    assert result.code == 0, result.output
    return folder / "weather.trace.yaml"
