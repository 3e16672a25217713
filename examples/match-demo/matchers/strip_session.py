"""A matcher addon: drop the per-run session id hidden inside a JSON string.

A regex could blank the id, but this shows the contract for what rules cannot express: the
agent sends `metadata.client_info` as a JSON *string*, so the addon parses it, removes the
volatile key and writes it back. The rest of the request is still compared strictly.

Works under `flowproof run` (listed in the spec's `match.addons`) and in stock mitmproxy:

    mitmdump -s addons/model.py -s examples/match-demo/matchers/strip_session.py ...
"""

from __future__ import annotations

import json
from typing import Any


class StripSession:
    def flowproof_normalize(self, request: dict[str, Any], protocol: str) -> dict[str, Any]:
        """Called with a deep copy of each canonical request; returns the request to match."""
        metadata = request.get("metadata")
        if protocol != "openai-chat" or not isinstance(metadata, dict):
            return request
        raw = metadata.get("client_info")
        if isinstance(raw, str):
            info = json.loads(raw)
            info.pop("session_id", None)
            metadata["client_info"] = json.dumps(info, sort_keys=True)
        return request


addons = [StripSession()]
