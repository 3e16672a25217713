"""What the agent did, as seen at the model boundary: its tool calls and its reply.

A trajectory is derived from the served turns (recorded or replayed) in recorded order, so
record and replay of the same run yield the same trajectory whatever order concurrent calls
arrived in. Assertions read only this; they never see HTTP or a dialect.

Calls around the conversation (embeddings, moderation, token counts, model listings) are
`EndpointCall`s, kept apart from the turns: tool assertions and the reply never read them,
so an embedding call can neither hide the reply nor pass for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model asked for."""

    name: str
    raw_arguments: str
    turn: int  # 1-based index of the recorded turn whose response carried the call
    call_id: str | None = None

    @property
    def arguments(self) -> Any:
        """The arguments parsed as JSON; the raw string when they are not JSON."""
        try:
            return json.loads(self.raw_arguments) if self.raw_arguments.strip() else {}
        except ValueError:
            return self.raw_arguments

    @property
    def arguments_are_json(self) -> bool:
        try:
            json.loads(self.raw_arguments) if self.raw_arguments.strip() else None
        except ValueError:
            return False
        return True


@dataclass(frozen=True)
class AssistantTurn:
    """The neutral view of one model response: text, tool calls, and the thread it belongs to."""

    turn: int
    text: str | None
    tool_calls: tuple[ToolCall, ...]
    thread_key: str = ""  # the system prompt of the request; groups side conversations
    request_size: int = 0  # characters of request text, for the main-thread tie-break
    #: The response's own id, and the id of the earlier response its request continues
    #: (the Responses API's `previous_response_id`): a continuation sends only the new
    #: items, no system prompt, and belongs to the thread of the response it names.
    response_id: str | None = None
    continues: str | None = None
    #: The request asked for at most one token (`is_probe`): an availability or quota
    #: check (Claude Code sends a few before its conversation), never the conversation.
    probe: bool = False


def is_probe(max_tokens: Any) -> bool:
    """A request's output limit asks for at most one token: a probe, not a conversation."""
    return isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens <= 1


@dataclass(frozen=True)
class EndpointCall:
    """One answered call of a non-chat endpoint, as listed beside the conversation."""

    turn: int  # 1-based index of its recorded turn
    protocol: str  # the endpoint's dialect name (`openai-embeddings`)
    model: Any
    asked: str  # what was asked, one line (the input, the messages counted)
    answered: str  # what came back, one line (`2 vectors of 1536`, `42 input tokens`)


@dataclass
class Trajectory:
    """Tool calls in order, and the final reply of the main conversation (None = no reply);
    the endpoint calls beside them, in recorded order."""

    turns: list[AssistantTurn] = field(default_factory=list)
    endpoint_calls: list[EndpointCall] = field(default_factory=list)

    def add(self, answer: AssistantTurn | EndpointCall) -> None:
        """A served turn's answer, where it belongs."""
        if isinstance(answer, EndpointCall):
            self.endpoint_calls.append(answer)
        else:
            self.turns.append(answer)

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [call for turn in self.turns for call in turn.tool_calls]

    @property
    def main_thread(self) -> list[AssistantTurn]:
        """Turns of the conversation the flow is about.

        Turns are grouped by system prompt, a continuation with the response it continues;
        the group with the most turns wins, ties go to the group carrying the most request
        text. Both rules are order-independent, so a concurrent side call (a session title)
        cannot steal the reply. Probes (`max_tokens` of 1 or less) are left out while any
        other turn exists: three of Claude Code's one-token quota checks share one thread
        key and would outnumber a short conversation, and `reply` would be a probe's token.
        """
        groups: dict[str, list[AssistantTurn]] = {}
        threads: dict[str, str] = {}  # response id -> the thread key of its chain
        conversation = [turn for turn in self.turns if not turn.probe] or self.turns
        for turn in sorted(conversation, key=lambda t: t.turn):
            key = threads.get(turn.continues or "", turn.thread_key)
            if turn.response_id:
                threads[turn.response_id] = key
            groups.setdefault(key, []).append(turn)
        if not groups:
            return []
        best = max(
            groups.values(),
            key=lambda group: (len(group), sum(t.request_size for t in group), -group[0].turn),
        )
        return sorted(best, key=lambda t: t.turn)

    @property
    def reply(self) -> str | None:
        """The final assistant message's text; None when it ends in a tool call or has none."""
        thread = self.main_thread
        if not thread:
            return None
        last = thread[-1]
        if last.tool_calls:
            return None
        return last.text
