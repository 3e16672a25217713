"""Every verdict the Ollama and Cohere dialects take part in can fail, each with a twin that
passes, so a red case is red for its one change: a changed input of each chat dialect and
endpoint is a divergence naming it (unchanged, it is served, streamed or not), and an
endpoint's answer never stands for the reply (a chat turn beside it does)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from flowproof_cli.cassette import CassetteSession, Mode, Turn
from flowproof_cli.cassette.session import served_trajectory
from flowproof_cli.dialects import DIALECTS, Dialect, Rendered
from flowproof_cli.dialects.base import ENDPOINT
from flowproof_cli.match.rules import MatchRules

OURS = [dialect for dialect in DIALECTS if dialect.provider in ("ollama", "cohere")]
IDS = [dialect.name for dialect in OURS]


def recorded_turn(dialect: Dialect) -> Turn:
    request = dialect.canonical_request(dict(dialect.example_request))
    return Turn(dialect.name, request, 200, dialect.canned_response(request, "Hello."))


def changed(dialect: Dialect, request: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The request with its first input changed, and the divergence that must name it."""
    changed = copy.deepcopy(request)
    key = dialect.conversation_key
    value = changed[key]
    if key == "messages":
        value[0]["content"] = "Say goodbye."
        return changed, "message 0 (user) content changed"
    changed[key] = [*value[:-1], "Say goodbye."] if isinstance(value, list) else "Say goodbye."
    if dialect.kind == ENDPOINT:  # an endpoint's input, named with the endpoint
        return changed, f"the {dialect.name} `{key}` content changed"
    return changed, f"message 0 ({key}) content changed"


def replay(turns: list[Turn], path: str, body: dict[str, Any]) -> Rendered:
    session = CassetteSession(Mode.REPLAY, recorded=turns)
    answer = session.on_request(path, json.dumps(body).encode())
    assert isinstance(answer, Rendered)
    return answer


def path_of(dialect: Dialect) -> str:
    return f"/{dialect.route_suffixes[0]}"


@pytest.mark.parametrize("dialect", OURS, ids=IDS)
def test_a_changed_input_diverges_naming_it(dialect: Dialect) -> None:
    turn = recorded_turn(dialect)
    body, message = changed(dialect, turn.request)
    answer = replay([turn], path_of(dialect), body)
    assert answer.status == 409
    assert message in answer.body.decode()


@pytest.mark.parametrize("dialect", OURS, ids=IDS)
def test_twin_the_same_input_is_served_streamed_or_not(dialect: Dialect) -> None:
    turn = recorded_turn(dialect)
    for stream in (False, True):
        answer = replay([turn], path_of(dialect), {**turn.request, "stream": stream})
        assert answer.status == 200, answer.body
        wanted = stream and dialect.streams
        assert (answer.content_type == dialect.stream_media_type) is wanted


ENDPOINTS = [dialect for dialect in OURS if dialect.kind == "endpoint"]
CHATS = {dialect.provider: dialect for dialect in OURS if dialect.kind == "chat"}


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=[d.name for d in ENDPOINTS])
def test_an_endpoints_answer_is_never_the_reply(endpoint: Dialect) -> None:
    trajectory = served_trajectory([recorded_turn(endpoint)], [0], MatchRules())
    assert trajectory.reply is None and trajectory.tool_calls == []
    assert [call.protocol for call in trajectory.endpoint_calls] == [endpoint.name]


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=[d.name for d in ENDPOINTS])
def test_twin_the_chat_beside_it_is_the_reply(endpoint: Dialect) -> None:
    pair = [recorded_turn(endpoint), recorded_turn(CHATS[endpoint.provider])]
    for turns in (pair, pair[::-1]):  # the endpoint before the chat, or after it
        trajectory = served_trajectory(turns, [0, 1], MatchRules())
        assert trajectory.reply == "Hello."
