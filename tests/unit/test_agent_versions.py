"""The agent's version: read from its User-Agent, stored per turn, leading a divergence when
it changed, and pointed out when a preset's rules all missed a version it was not tested on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli.cassette import CassetteSession, Forward, Mode, Turn, Upstream
from flowproof_cli.cassette.divergence import Divergence, led_by_version
from flowproof_cli.dialects import Rendered
from flowproof_cli.errors import TraceError
from flowproof_cli.match.agents import agent_of, is_agent, preset_version_notes
from flowproof_cli.match.build import Declared, build_rules
from flowproof_cli.match.presets import load_preset
from flowproof_cli.match.rules import MatchRules
from flowproof_cli.trace import Trace, loads
from flowproof_cli.trace.storage import dumps

CLAUDE_197 = "claude-cli/2.1.197 (external, sdk-cli)"
CLAUDE_332 = "claude-cli/2.1.332 (external, sdk-cli)"
CODEX = "codex_exec/0.171.0 (Debian 12.0.0; x86_64) unknown (codex_exec; 0.171.0)"
MESSAGES = "/v1/messages"

# -- reading the agent from its User-Agent ------------------------------------------------------


@pytest.mark.parametrize(
    ("user_agent", "agent"),
    [
        (CLAUDE_332, "claude-cli/2.1.332"),
        (CODEX, "codex_exec/0.171.0"),
        ("GeminiCLI-tui/0.61.0/gemini-2.5-flash (linux; x64; terminal)", "GeminiCLI-tui/0.61.0"),
        ("GeminiCLI/0.41.2/gemini-2.5-flash (linux; x64; terminal)", "GeminiCLI/0.41.2"),
        ("python-httpx/0.28.1", "python-httpx/0.28.1"),
        ("Python-urllib/3.12", "Python-urllib/3.12"),
        ("(a (nested) comment) tool/1.0", "tool/1.0"),
        # an SDK's "OpenAI/Python 1.52.0" names no version in its token: nothing
        ("OpenAI/Python 1.52.0", None),
        ("curl", None),
        ("", None),
        (None, None),
        ("x/1.0\x00\n", "x/1.0"),
        ("a" * 5000 + "/1.0", None),
    ],
)
def test_the_agent_is_the_first_versioned_product_of_its_user_agent(
    user_agent: str | None, agent: str | None
) -> None:
    assert agent_of(user_agent) == agent


def test_the_product_a_preset_names_wins_over_the_first() -> None:
    user_agent = "OpenAI/JS 6.49.0 node/26.3.0 qwen-code/0.24.0 (linux)"
    assert agent_of(user_agent) == "node/26.3.0"
    assert agent_of(user_agent, ("claude-cli", "qwen-code")) == "qwen-code/0.24.0"
    assert agent_of("python-httpx/0.28.1", ("claude-cli",)) == "python-httpx/0.28.1"


@pytest.mark.parametrize(
    ("product", "token", "same"),
    [
        ("claude-cli", "claude-cli", True),
        ("GeminiCLI-tui", "GeminiCLI", True),
        ("codex_exec", "codex", True),
        ("GeminiCLIx", "GeminiCLI", False),
        ("claude", "claude-cli", False),
    ],
)
def test_a_preset_token_names_its_product_and_longer_ones_that_continue_it(
    product: str, token: str, same: bool
) -> None:
    assert is_agent(product, token) is same


# -- the agent per turn, in the session and the trace -------------------------------------------


def _anthropic(prompt: str, model: str = "claude-opus-5-5") -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": prompt}],
    }


def _answer(text: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-5-5",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def test_record_keeps_the_agent_of_each_turn_and_the_run_keeps_each_agent_once() -> None:
    session = CassetteSession(Mode.RECORD, upstream=Upstream("http://127.0.0.1:9"))
    for user_agent in (CLAUDE_332, CLAUDE_332, None):
        forward = session.on_request(
            MESSAGES, json.dumps(_anthropic("hi")).encode(), user_agent=user_agent
        )
        assert isinstance(forward, Forward)
        session.on_upstream_response(forward.pending, 200, json.dumps(_answer("ok")).encode())
    assert [turn.agent for turn in session.recorded] == [
        "claude-cli/2.1.332",
        "claude-cli/2.1.332",
        None,
    ]
    assert session.agents.seen == ["claude-cli/2.1.332"]


def test_the_trace_stores_the_agent_per_turn_and_reads_a_trace_without_it() -> None:
    with_agent = Turn("anthropic", _anthropic("hi"), 200, _answer("ok"), "claude-cli/2.1.332")
    text = dumps(Trace("f", [with_agent]))
    assert "- protocol: anthropic\n  agent: claude-cli/2.1.332\n  request:\n" in text
    assert loads(text).turns == [with_agent]
    without = Turn("anthropic", _anthropic("hi"), 200, _answer("ok"))
    old = dumps(Trace("f", [without]))
    assert "agent" not in old  # a turn of an unknown agent is written as before
    assert loads(old).turns == [without]


def test_a_trace_whose_agent_is_not_text_is_refused_at_its_turn() -> None:
    text = dumps(Trace("f", [Turn("anthropic", _anthropic("hi"), 200, _answer("ok"), "a/1")]))
    with pytest.raises(TraceError, match=r"x.trace.yaml:7: turn 1 is malformed: its `agent` is 5"):
        loads(text.replace("agent: a/1", "agent: 5"), "x.trace.yaml")


# -- a divergence leads with the agent's version change -----------------------------------------


def _replay(recorded_agent: str | None) -> CassetteSession:
    turn = Turn("anthropic", _anthropic("hi"), 200, _answer("ok"), recorded_agent)
    return CassetteSession(
        Mode.REPLAY, recorded=[turn], record_command="flowproof record specs/x.flow.yaml"
    )


def _send(session: CassetteSession, body: dict[str, Any], user_agent: str | None) -> Rendered:
    rendered = session.on_request(MESSAGES, json.dumps(body).encode(), user_agent=user_agent)
    assert isinstance(rendered, Rendered)
    return rendered


def test_a_divergence_of_another_agent_version_says_so_first() -> None:
    session = _replay("claude-cli/2.1.197")
    rendered = _send(session, _anthropic("hi", model="claude-opus-4-8"), CLAUDE_332)
    assert rendered.status == 409
    divergence = session.divergence
    assert divergence is not None
    assert divergence.message == (
        "turn 1: the agent changed version: recorded claude-cli/2.1.197, replayed "
        "claude-cli/2.1.332; re-record (flowproof record specs/x.flow.yaml)\n"
        "  model changed: recorded claude-opus-5-5, replayed claude-opus-4-8"
    )
    assert divergence.to_json()["agent_changed"] == {
        "recorded": "claude-cli/2.1.197",
        "replayed": "claude-cli/2.1.332",
    }
    assert divergence.to_json()["changes"][0]["path"] == "model"  # the field diff follows
    body = json.loads(rendered.body)
    assert body["error"]["message"].startswith("flowproof: turn 1: the agent changed version")


@pytest.mark.parametrize(
    ("recorded", "user_agent"),
    [("claude-cli/2.1.332", CLAUDE_332), (None, CLAUDE_332), ("claude-cli/2.1.197", None)],
    ids=["same version", "recorded without one", "replayed without one"],
)
def test_a_divergence_without_a_known_version_change_is_worded_as_before(
    recorded: str | None, user_agent: str | None
) -> None:
    session = _replay(recorded)
    _send(session, _anthropic("hi", model="claude-opus-4-8"), user_agent)
    assert session.divergence is not None
    assert session.divergence.message == (
        "turn 1: model changed: recorded claude-opus-5-5, replayed claude-opus-4-8"
    )
    assert "agent_changed" not in session.divergence.to_json()


def test_another_version_that_sends_the_same_request_replays() -> None:
    session = _replay("claude-cli/2.1.197")
    assert _send(session, _anthropic("hi"), CLAUDE_332).status == 200
    assert session.divergence is None


def test_an_extra_call_is_not_led_by_a_version() -> None:
    extra = Divergence(0, "extra call: the agent made a model call beyond the 1 recorded")
    assert led_by_version(extra, "a/1", "a/2", "flowproof record x") is extra


# -- a preset whose rules all missed an untested version ----------------------------------------


def _claude_rules(*, used: int = 0) -> MatchRules:
    rules, _ = build_rules([Declared("spec", presets=("claude-code",))], cwd=Path("/"), home=None)
    for usage in rules.usage[:used]:
        usage.fields = usage.turns = 1
    return rules


def test_a_preset_that_matched_nothing_on_an_untested_version_says_it_may_not_know_it() -> None:
    tested = ", ".join(load_preset("claude-code").versions_tested)
    notes = preset_version_notes(_claude_rules(), ["claude-cli/2.1.400", "python-httpx/0.28.1"])
    assert notes == [
        "preset `claude-code` matched nothing in this run's requests: it may not know "
        f"claude-cli/2.1.400 (tested: {tested}). Fix: compare this request with the preset's "
        "rules (`flowproof match show claude-code`) and declare what this version moved under "
        "the flow's own `match:` (docs/matching.md)"
    ]


@pytest.mark.parametrize(
    ("used", "agents"),
    [
        (1, ["claude-cli/2.1.400"]),  # one rule still matched: the version's layout is known
        (0, ["claude-cli/2.1.332"]),  # a version it was tested with
        (0, ["codex_exec/0.171.0"]),  # not its agent's request
        (0, []),  # no agent named
    ],
)
def test_no_version_note_when_a_rule_matched_or_the_version_was_tested(
    used: int, agents: list[str]
) -> None:
    assert preset_version_notes(_claude_rules(used=used), agents) == []


def test_a_generic_preset_never_says_it() -> None:
    rules, _ = build_rules([Declared("spec", presets=("dates",))], cwd=Path("/"), home=None)
    assert preset_version_notes(rules, ["claude-cli/2.1.400"]) == []
