"""What a fault kind is handed: the call it hits, and its recorded answer when it has one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flowproof_cli.dialects import Dialect, Rendered


@dataclass(frozen=True)
class FaultedCall:
    dialect: Dialect
    live: dict[str, Any]  # the request as the agent sent it (mocks applied)
    #: The model's answer to it (the recording's, or at record the upstream's): None for
    #: the kinds that answer without one (a status, a reset).
    response: Any = None
    #: Renders an answer as the agent asked for it (JSON, or the stream it asked for).
    render: Callable[[Any], Rendered] | None = None

    @property
    def streamed(self) -> bool:
        return self.dialect.wants_stream(self.live)

    def rendered(self, response: Any) -> Rendered:
        assert self.render is not None, "an altering fault is handed the render"
        return self.render(response)
