"""The outline of a conversation of OpenAI-shaped messages, shared by the dialects that
speak it under another route (Ollama's `/api/chat`, Cohere's `/v2/chat`): `messages` with
`role`, `content` and `tool_calls[].function`, and `tools[].function` declarations.

Only reading for divergence reports and the trajectory's thread key; each dialect keeps
how it writes arguments (`call_arguments`: a string as sent, an object as JSON).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flowproof_cli.dialects.base import JSON, MessageOutline, text_of


def dicts(value: Any) -> list[JSON]:
    """The objects of a list (anything else: none)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def function_of(entry: Any) -> JSON:
    """The `function` object of a tool call or a tool declaration (empty when none)."""
    function = entry.get("function") if isinstance(entry, dict) else None
    return function if isinstance(function, dict) else {}


class FunctionMessages:
    """Mixin for a `Dialect` whose conversation is OpenAI-shaped `messages`."""

    @staticmethod
    def call_arguments(function: JSON) -> str:
        """A call's arguments as the trajectory and the outline hold them."""
        raise NotImplementedError

    @staticmethod
    def _system_prompt(request: JSON) -> str:
        """The system messages' text: what the trajectory groups a thread by."""
        return "\n".join(
            text_of(m.get("content"))
            for m in dicts(request.get("messages"))
            if m.get("role") == "system"
        )

    def _tools_in(self, request: JSON) -> Iterator[tuple[str, Any]]:
        for tool in dicts(request.get("tools")):
            yield str(function_of(tool).get("name", tool.get("type", "?"))), tool

    def _messages_in(self, request: JSON) -> Iterator[MessageOutline]:
        for message in dicts(request.get("messages")):
            calls = tuple(
                (str(function_of(call).get("name")), self.call_arguments(function_of(call)))
                for call in dicts(message.get("tool_calls"))
            )
            yield MessageOutline(
                role=str(message.get("role")),
                content=message.get("content"),
                tool_calls=calls,
                raw=message,
            )
