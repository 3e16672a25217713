"""flowproof from Python: run a flow and assert on what the agent did.

    import flowproof

    run = flowproof.run_flow("flows/weather.flow.yaml")
    assert run.passed, run.failures
    assert run.tool_calls[0].name == "get_weather"
    assert run.tool_calls[0].arguments == {"city": "Nairobi"}

Importing this package is cheap: the runner (and mitmproxy) load on the first `run_flow`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flowproof._api import FlowRun, McpCall, missing_traces, run_flow

__all__ = ["FlowRun", "McpCall", "missing_traces", "run_flow"]


def __getattr__(name: str) -> Any:
    """The public names, imported on first use."""
    if name in __all__:
        from flowproof import _api  # noqa: PLC0415

        return getattr(_api, name)
    raise AttributeError(f"module 'flowproof' has no attribute {name!r}")
