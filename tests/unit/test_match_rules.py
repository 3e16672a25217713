"""The match engine: globs, each rule kind, relocation, presets, reports, the session."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from flowproof_cli.cassette import CassetteSession, Forward, Mode, Turn, Upstream
from flowproof_cli.dialects import dialect_named
from flowproof_cli.match.build import Declared, build_rules, snapshot_rules
from flowproof_cli.match.paths import GlobError, PathGlob, map_strings
from flowproof_cli.match.presets import NormalizeEntry, load_preset, preset_names
from flowproof_cli.match.relocate import Relocation
from flowproof_cli.match.rules import (
    AddonRule,
    IgnoreRule,
    MatcherAddonError,
    MatchRules,
    NormalizeRule,
    summarize,
)
from tests.unit.trace_builders import chat_completion, tool_round

CHAT = "openai-chat"


def chat_request(system: str, user: str = "hi", **extra: object) -> dict[str, object]:
    return {
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        **extra,
    }


# -- globs ------------------------------------------------------------------------------------


def test_glob_drops_a_field_under_every_list_item() -> None:
    value = {"input": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}], "id": "keep"}
    dropped, count = PathGlob.parse("input.*.id").drop(value)
    assert dropped == {"input": [{"text": "x"}, {"text": "y"}], "id": "keep"}
    assert count == 2
    assert value["input"][0]["id"] == "a"  # the input is never modified


def test_glob_that_names_nothing_drops_nothing() -> None:
    value = {"metadata": {"user": "u"}}
    dropped, count = PathGlob.parse("metadata.user_id").drop(value)
    assert (dropped, count) == (value, 0)


def test_glob_index_segment_matches_only_that_index() -> None:
    dropped, count = PathGlob.parse("items.1").drop({"items": ["a", "b", "c"]})
    assert dropped == {"items": ["a", "c"]} and count == 1


@pytest.mark.parametrize("text", ["", "  ", "a..b", ".a", "a."])
def test_bad_globs_are_refused(text: str) -> None:
    with pytest.raises(GlobError):
        PathGlob.parse(text)


def test_map_strings_under_a_glob_touches_only_that_subtree() -> None:
    value = {"system": [{"text": "2026"}], "messages": [{"content": "2026"}]}
    changed, count = map_strings(value, lambda s: s.replace("2026", "Y"), PathGlob.parse("system"))
    assert changed == {"system": [{"text": "Y"}], "messages": [{"content": "2026"}]}
    assert count == 1


# -- rule kinds -------------------------------------------------------------------------------


def test_normalize_rewrites_only_the_span() -> None:
    rule = NormalizeRule(re.compile(r"\d{4}-\d{2}-\d{2}"), "<date>")
    request = chat_request("Today is 2026-12-01. Be brief.")
    changed, count = rule.apply(CHAT, request)
    assert changed["messages"][0]["content"] == "Today is <date>. Be brief."
    assert count == 1


def test_normalize_keeps_every_other_character_strict() -> None:
    """A date normalized inside a prompt: an edit elsewhere in that prompt still differs."""
    rules = MatchRules([NormalizeRule(re.compile(r"\d{4}-\d{2}-\d{2}"), "<date>")])
    recorded = rules.matched(CHAT, chat_request("Today is 2026-12-01. Be brief."))
    same_day_later = rules.matched(CHAT, chat_request("Today is 2027-01-09. Be brief."))
    edited = rules.matched(CHAT, chat_request("Today is 2027-01-09. Be terse."))
    assert recorded == same_day_later
    assert recorded != edited


def test_ignore_never_excuses_the_prompt() -> None:
    rules = MatchRules([IgnoreRule(PathGlob.parse("metadata.user_id"))])
    one = rules.matched(CHAT, chat_request("s", "task A", metadata={"user_id": "1"}))
    two = rules.matched(CHAT, chat_request("s", "task B", metadata={"user_id": "2"}))
    assert one["metadata"] == two["metadata"] == {}
    assert one != two


class Strip:
    def flowproof_normalize(self, request: dict, protocol: str) -> dict:
        request.pop("user", None)
        return request


class Explodes:
    def flowproof_normalize(self, request: dict, protocol: str) -> dict:
        raise ValueError("no session here")


class ReturnsNone:
    def flowproof_normalize(self, request: dict, protocol: str) -> dict:
        return None  # type: ignore[return-value]


def test_addon_rule_gets_a_copy_and_the_protocol() -> None:
    seen: list[str] = []

    class Spy:
        def flowproof_normalize(self, request: dict, protocol: str) -> dict:
            seen.append(protocol)
            request["mutated"] = True
            return request

    original = chat_request("s", user="u")
    rule = AddonRule("Spy", Spy().flowproof_normalize)
    changed, count = rule.apply(CHAT, original)
    assert seen == [CHAT]
    assert "mutated" not in original and changed["mutated"] is True
    assert count == 1


def test_addon_rule_that_raises_names_the_addon_and_the_message() -> None:
    rule = AddonRule("Explodes", Explodes().flowproof_normalize)
    with pytest.raises(MatcherAddonError, match="Explodes raised ValueError: no session here"):
        rule.apply(CHAT, chat_request("s"))


def test_addon_rule_returning_no_mapping_is_an_error() -> None:
    rule = AddonRule("ReturnsNone", ReturnsNone().flowproof_normalize)
    with pytest.raises(MatcherAddonError, match="returned NoneType, not the request mapping"):
        rule.apply(CHAT, chat_request("s"))


# -- relocation -------------------------------------------------------------------------------


def test_relocation_replaces_whole_paths_longest_first() -> None:
    relocation = Relocation("/home/ann/src/app", "/home/ann")
    text = "cwd /home/ann/src/app/x.py home /home/ann/.config not /home/anna"
    moved, count = relocation.to_placeholders({"t": text})
    assert moved == {"t": "cwd {cwd}/x.py home {home}/.config not /home/anna"}
    assert count == 1
    assert relocation.to_live(moved) == {"t": text}


def test_relocation_puts_the_new_paths_back() -> None:
    recorded = Relocation("/a/app", "/a").to_placeholders({"path": "/a/app/notes.txt"})[0]
    assert Relocation("/b/copy", "/b").to_live(recorded) == {"path": "/b/copy/notes.txt"}


@pytest.mark.parametrize("root", ["/", "", "/tmp"])
def test_root_like_paths_are_never_relocated(root: str) -> None:
    relocation = Relocation(root, root)
    assert relocation.to_placeholders({"t": "/tmp/x and /"})[0] == {"t": "/tmp/x and /"}


# -- presets ----------------------------------------------------------------------------------


def test_every_preset_loads_and_dates_is_there() -> None:
    names = preset_names()
    assert "dates" in names
    for name in names:
        preset = load_preset(name)
        assert preset.description, name


def test_dates_preset_normalizes_both_forms() -> None:
    rules, _ = build_rules([Declared("spec", presets=("dates",))], cwd=Path("/"), home=None)
    a = rules.matched(CHAT, chat_request("Today's date is 2026-12-01.\nLog 2026-12-01T10:00:00Z"))
    b = rules.matched(CHAT, chat_request("Today's date is 2027-02-03.\nLog 2027-02-03T23:59:59Z"))
    assert a == b
    assert a["messages"][0]["content"] == "Today's date is <date>.\nLog <date>"


def test_dates_preset_needs_a_date_after_the_phrase() -> None:
    """A tool description that only mentions "the current date" is not a date to relax."""
    rules, _ = build_rules([Declared("spec", presets=("dates",))], cwd=Path("/"), home=None)
    text = "Get the current date and time (UTC, ISO 8601)."
    assert rules.matched(CHAT, chat_request(text))["messages"][0]["content"] == text
    spoken = rules.matched(CHAT, chat_request("Today's date is Tuesday, December 1, 2026 (UTC)"))
    assert spoken["messages"][0]["content"] == "Today's date is <date> (UTC)"


#: The coding CLIs' presets: the product token of their User-Agent.
AGENT_PRESETS = {"claude-code": "claude-cli", "codex": "codex_exec", "gemini-cli": "GeminiCLI"}


@pytest.mark.parametrize(("name", "agent"), sorted(AGENT_PRESETS.items()))
def test_an_agents_preset_names_the_agent_and_the_versions_it_was_tested_with(
    name: str, agent: str
) -> None:
    preset = load_preset(name)
    assert preset.agent == agent
    assert preset.versions_tested and all(v[0].isdigit() for v in preset.versions_tested)
    assert preset.header() == (
        f"# preset {name}: agent {agent}; versions tested: {', '.join(preset.versions_tested)}"
    )


def test_a_generic_preset_names_no_agent() -> None:
    dates = load_preset("dates")
    assert (dates.agent, dates.versions_tested, dates.header()) == (None, (), None)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"agent": "claude cli"}, "`agent` is 'claude cli', not a product token. Fix:"),
        ({"agent": ["claude-cli"]}, "`agent` is ['claude-cli'], not a product token"),
        ({"versions_tested": ["1.0.0"]}, "`versions_tested` names releases, but of no agent"),
        ({"agent": "a", "versions_tested": "1.0.0"}, "must be a list of versions"),
        ({"agent": "a", "versions_tested": []}, "must be a list of versions"),
        ({"agent": "a", "versions_tested": [2.1]}, "holds 2.1, not a version. Fix: write each"),
        ({"agent": "a", "versions_tested": ["1.0 beta"]}, "holds '1.0 beta', not a version"),
        ({"agents": "a"}, "has unknown keys: agents"),
    ],
)
def test_a_preset_with_a_bad_agent_or_version_list_is_refused(
    data: dict[str, object], message: str
) -> None:
    from flowproof_cli.errors import ConfigError
    from flowproof_cli.match.presets import _preset_from

    with pytest.raises(ConfigError, match=re.escape(message)):
        _preset_from("x", {"description": "x", **data}, "")


def test_a_presets_agent_and_versions_are_read() -> None:
    from flowproof_cli.match.presets import _preset_from

    data = {"description": "x", "agent": "qwen-code", "versions_tested": ["0.24.0", "0.9.1"]}
    preset = _preset_from("x", data, "")
    assert (preset.agent, preset.versions_tested) == ("qwen-code", ("0.24.0", "0.9.1"))


def test_unknown_preset_is_a_config_error() -> None:
    from flowproof_cli.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown match preset `nope`"):
        load_preset("nope")


# -- building, order, reports -----------------------------------------------------------------


def test_suite_rules_come_first_and_the_spec_adds() -> None:
    suite = Declared("suite", ignore=("metadata",))
    spec = Declared("spec", normalize=(NormalizeEntry("x+", "X"),))
    rules, scripts = build_rules([suite, spec], cwd=Path("/"), home=None)
    assert [rule.origin for rule in rules.rules] == ["suite", "spec"]
    assert scripts == []


def test_spec_can_turn_off_a_presets_relocation(tmp_path: Path) -> None:
    preset = "claude-code"
    assert load_preset(preset).relocate
    on, _ = build_rules([Declared("spec", presets=(preset,))], cwd=tmp_path, home="/home/x")
    off, _ = build_rules(
        [Declared("spec", presets=(preset,), relocate=False)], cwd=tmp_path, home="/home/x"
    )
    assert on.relocation is not None and off.relocation is None


def test_report_counts_fields_and_requests_and_names_unused_rules() -> None:
    rules = MatchRules(
        [
            IgnoreRule(PathGlob.parse("metadata.user_id")),
            IgnoreRule(PathGlob.parse("input.*.id")),
        ]
    )
    for n in range(3):
        rules.matched(CHAT, chat_request("s", metadata={"user_id": str(n)}))
    rules.matched(CHAT, chat_request("s", metadata={"user_id": "r"}), count=False)
    used, unused = summarize(rules)
    assert "match rules relaxed 3 field(s) on 3 request(s):" in used
    assert "ignore metadata.user_id (spec): 3 field(s) on 3 request(s)" in used
    assert "ignore input.*.id (spec)" in unused
    assert [entry["unused"] for entry in (u.to_json() for u in rules.report())] == [False, True]


def test_no_rules_no_notes_and_no_snapshot() -> None:
    rules = MatchRules()
    assert summarize(rules) == [] and rules.snapshot() == []
    request = chat_request("s")
    assert rules.matched(CHAT, request) is request


def test_snapshot_lists_rules_with_their_origin() -> None:
    rules, _ = build_rules(
        [Declared("spec", ignore=("metadata",), relocate=True)], cwd=Path("/srv/app"), home=None
    )
    assert rules.snapshot() == [
        {"relocate": True, "from": "spec"},
        {"ignore": "metadata", "from": "spec"},
    ]


# -- the session: identical on both sides -----------------------------------------------------


def _response(text: str = "ok") -> dict[str, object]:
    return chat_completion(text)


def test_a_rule_added_after_recording_works_on_the_existing_trace() -> None:
    """The recorded request still has the old user_id: the rule applies to it at replay."""
    recorded = Turn(CHAT, chat_request("s", metadata={"user_id": "laptop"}), 200, _response())
    rules = MatchRules([IgnoreRule(PathGlob.parse("metadata.user_id"))])
    session = CassetteSession(Mode.REPLAY, recorded=[recorded], rules=rules)
    body = json.dumps(chat_request("s", metadata={"user_id": "ci"})).encode()
    rendered = session.on_request("/v1/chat/completions", body)
    assert getattr(rendered, "status", None) == 200
    assert session.divergence is None


def test_without_the_rule_the_same_request_diverges() -> None:
    recorded = Turn(CHAT, chat_request("s", metadata={"user_id": "laptop"}), 200, _response())
    session = CassetteSession(Mode.REPLAY, recorded=[recorded])
    body = json.dumps(chat_request("s", metadata={"user_id": "ci"})).encode()
    rendered = session.on_request("/v1/chat/completions", body)
    assert getattr(rendered, "status", None) == 409
    assert session.divergence is not None
    assert "metadata" in session.divergence.message


def test_relocated_response_reaches_the_agent_with_live_paths() -> None:
    stored = _response("read {cwd}/notes.txt")
    recorded = Turn(CHAT, chat_request("work in {cwd}"), 200, stored)
    rules = MatchRules(relocation=Relocation("/ci/checkout", "/ci/home"))
    session = CassetteSession(Mode.REPLAY, recorded=[recorded], rules=rules)
    body = json.dumps(chat_request("work in /ci/checkout")).encode()
    rendered = session.on_request("/v1/chat/completions", body)
    answer = json.loads(getattr(rendered, "body", b"{}"))
    assert answer["choices"][0]["message"]["content"] == "read /ci/checkout/notes.txt"
    assert session.trajectory().turns[0].text == "read /ci/checkout/notes.txt"


def test_a_raising_addon_fails_the_request_with_its_name() -> None:
    rules = MatchRules([AddonRule("Explodes", Explodes().flowproof_normalize)])
    session = CassetteSession(Mode.RECORD, rules=rules)
    rendered = session.on_request("/v1/chat/completions", json.dumps(chat_request("s")).encode())
    assert getattr(rendered, "status", None) == 500
    assert session.errors == [
        "flowproof: the matcher addon Explodes raised ValueError: no session here in "
        "flowproof_normalize"
    ]


def test_dialect_name_is_the_protocol_the_addon_sees() -> None:
    assert dialect_named(CHAT).name == CHAT


# -- text mocks -------------------------------------------------------------------------------


def _tool_result_request(content: str) -> dict[str, object]:
    return {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "user", "content": "send it"},
            *tool_round("call_1", "send_email", "{}", content),
        ],
    }


@pytest.mark.parametrize(
    ("mock", "told"),
    [
        ("sent\nid 7", "sent\nid 7"),  # text reaches the model as that text
        ({"ok": True, "id": 7}, '{"id":7,"ok":true}'),  # anything else as canonical JSON
        (7, "7"),
    ],
)
def test_the_model_is_told_a_text_mock_as_text(mock: object, told: str) -> None:
    session = CassetteSession(
        Mode.RECORD, mocks={"send_email": mock}, upstream=Upstream("http://127.0.0.1:9/v1")
    )
    request = json.dumps(_tool_result_request("real output")).encode()
    forwarded = session.on_request("/v1/chat/completions", request)
    assert isinstance(forwarded, Forward)
    sent = json.loads(forwarded.body)["messages"][2]["content"]
    assert sent == told
    assert forwarded.pending.canonical["messages"][2]["content"] == told  # stored the same


# -- the CLI ----------------------------------------------------------------------------------


def test_match_show_prints_a_preset_as_written() -> None:
    from tests.conftest import run_cli

    result = run_cli("match", "show", "dates")
    assert result.code == 0, result.output
    assert result.stdout == load_preset("dates").text.rstrip("\n") + "\n"
    assert "Today's date is" in result.stdout


def test_match_show_of_an_agents_preset_says_first_which_versions_it_was_tested_with() -> None:
    from tests.conftest import run_cli

    result = run_cli("match", "show", "claude-code")
    assert result.code == 0, result.output
    preset = load_preset("claude-code")
    first, rest = result.stdout.split("\n", 1)
    versions = ", ".join(preset.versions_tested)
    assert first == f"# preset claude-code: agent claude-cli; versions tested: {versions}"
    assert rest == preset.text.rstrip("\n") + "\n"  # then the file, as written


def test_match_list_names_every_preset() -> None:
    from tests.conftest import run_cli

    result = run_cli("match", "list")
    assert result.code == 0, result.output
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == preset_names()


def test_match_show_of_an_unknown_preset_is_exit_2_naming_the_real_ones() -> None:
    from tests.conftest import run_cli

    result = run_cli("match", "show", "claude")
    assert result.code == 2
    assert "error: unknown match preset `claude`. Fix: use one of" in result.stderr
    assert "dates" in result.stderr
    assert "Traceback" not in result.output


def test_a_path_ending_a_sentence_is_relocated_but_a_longer_name_is_not() -> None:
    relocation = Relocation("/home/ann/app", "/home/ann")
    moved, _ = relocation.to_placeholders({"t": "Work in /home/ann/app. Not /home/ann/app.old"})
    assert moved == {"t": "Work in {cwd}. Not {home}/app.old"}  # under HOME, not the checkout


def _growing_rule() -> MatchRules:
    """A rule whose output it would rewrite again (it does not map its output to itself)."""
    return MatchRules(
        [NormalizeRule(re.compile(r"<shell>[^<]*</shell>"), "<shell><shell></shell>")]
    )


def test_a_trace_recorded_under_the_same_rules_is_matched_as_stored() -> None:
    live = chat_request("<shell>bash</shell>")
    stored = _growing_rule().matched(CHAT, live)
    turn = Turn(CHAT, stored, 200, _response())
    session = CassetteSession(
        Mode.REPLAY, recorded=[turn], rules=_growing_rule(), recorded_as_matched=True
    )
    rendered = session.on_request("/v1/chat/completions", json.dumps(live).encode())
    assert getattr(rendered, "status", None) == 200


def test_rules_added_after_recording_rewrite_the_stored_requests_too() -> None:
    """Without the snapshot's word, the rules run on the stored side as well: a rule that
    does not map its output to itself then diverges (docs/matching.md says to avoid it)."""
    live = chat_request("<shell>bash</shell>")
    stored = _growing_rule().matched(CHAT, live)
    turn = Turn(CHAT, stored, 200, _response())
    session = CassetteSession(Mode.REPLAY, recorded=[turn], rules=_growing_rule())
    rendered = session.on_request("/v1/chat/completions", json.dumps(live).encode())
    assert getattr(rendered, "status", None) == 409


# -- a trace's snapshot rebuilt (stock mitmdump replaying a trace with declared rules) ---------


def test_snapshot_rules_rebuild_what_the_trace_recorded() -> None:
    rules, _ = build_rules(
        [Declared("spec", presets=("dates",), ignore=("metadata",))], cwd=Path("/"), home=None
    )
    rebuilt = snapshot_rules(rules.snapshot(), "x.trace.yaml")
    assert [rule.snapshot() for rule in rebuilt.rules] == rules.snapshot()
    assert (rebuilt.relocate, rebuilt.addons) == (False, [])
    again = MatchRules(rebuilt.rules)
    live = chat_request("Log 2026-12-01T10:00:00Z")
    assert again.matched(CHAT, live) == rules.matched(CHAT, live)


def test_snapshot_rules_keep_relocation_and_addon_names() -> None:
    entries = [{"relocate": True, "from": "spec"}, {"addon": "StripSession", "from": "spec"}]
    rebuilt = snapshot_rules(entries, "x.trace.yaml")
    assert (rebuilt.rules, rebuilt.relocate, rebuilt.addons) == ([], True, ["StripSession"])


@pytest.mark.parametrize(
    "entry",
    [{"normalize": {"pattern": "(", "replace": ""}}, {"ignore": ""}, {"what": 1}, {"normalize": 3}],
)
def test_a_snapshot_rule_that_cannot_be_rebuilt_names_the_trace(entry: dict[str, object]) -> None:
    from flowproof_cli.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^x\.trace\.yaml: match rule .* cannot be rebuilt"):
        snapshot_rules([entry], "x.trace.yaml")


def test_stock_replay_refuses_a_trace_whose_addon_is_not_loaded(tmp_path: Path) -> None:
    from flowproof_addons.model import _replay_rules
    from flowproof_cli.errors import ConfigError
    from flowproof_cli.trace import Trace

    trace = Trace(flow="x", turns=[], match=[{"addon": "StripSession", "from": "spec"}])
    with pytest.raises(ConfigError, match=r"matcher addon\(s\) StripSession\. Fix: load"):
        _replay_rules(trace, tmp_path / "x.trace.yaml", [])
