"""The secret-leak scanner: every encoding it promises, where it says a value was, and that
no message, repr or redacted verdict ever holds the value."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from flowproof_cli.cassette import CassetteSession, Forward, Mode, Turn, Upstream
from flowproof_cli.cassette.secret_forms import base64_cores, without_across_parts
from flowproof_cli.errors import ConfigError
from flowproof_cli.evidence.secrets import (
    MAX_LOCATIONS,
    Scope,
    Secret,
    Unit,
    find_leaks,
    header_units,
    leaks_of,
    mcp_units,
    model_scopes,
    redact,
    redact_result,
    resolve_secrets,
    scan,
)
from flowproof_cli.match.rules import MatchRules, NormalizeRule
from flowproof_cli.mcp.lane import Call, Lane, ServerEvent
from flowproof_cli.runner import judge
from flowproof_cli.spec.loader import load_spec
from flowproof_cli.verdict import Failure, FlowResult
from tests.unit.trace_builders import tool_round

VALUE = "sk-live-4eC39HqLyjWDarjtT1zdp7dc"


def leak_failures(
    secrets: list[Secret], session: CassetteSession, lanes: dict[str, Lane]
) -> list[str]:
    """The leaks the scan finds, as the judge words them and users read them."""
    return [failure.text for failure in judge.leak_failures(find_leaks(secrets, session, lanes))]


# '>>>' and '???' encode to base64 holding '+' and '/', so the URL-safe form differs.
URLSAFE_VALUE = "tok>>>???>>>???x"
TRICKY_VALUE = 'pa"ss\\wörd/42-✓'


def secret(value: str = VALUE, name: str = "STRIPE_KEY") -> Secret:
    return Secret.of(name, value)


def encodings_at(value: str, text: object, name: str = "STRIPE_KEY") -> list[str]:
    """The encodings the scanner reports for `text` as one corpus entry."""
    findings = scan([secret(value, name)], [Unit("here", text)])
    return findings.get(name, {}).get("here", [])


# -- encodings ------------------------------------------------------------------------------


def test_raw_value_in_a_string_a_key_and_a_number() -> None:
    assert encodings_at(VALUE, f"my key is {VALUE}.") == ["raw"]
    findings = scan([secret()], [Unit("nested", {"headers": [{VALUE: 1}]})])
    assert findings == {"STRIPE_KEY": {"nested": ["raw"]}}
    digits = scan([secret("1234567890")], [Unit("n", {"pin": 1234567890})])
    assert digits == {"STRIPE_KEY": {"n": ["raw"]}}


def test_absent_value_and_a_value_split_across_two_leaves_are_not_found() -> None:
    assert encodings_at(VALUE, "nothing to see") == []
    halves = [VALUE[:16], VALUE[16:]]
    assert scan([secret()], [Unit("split", halves)]) == {}
    fields = {"type": VALUE[:16], "id": VALUE[16:]}  # two fields, not two content parts
    assert scan([secret()], [Unit("fields", fields)]) == {}


def test_a_value_split_across_two_content_parts_is_found_in_their_join() -> None:
    """A client joins an answer's text parts into one text: a value cut across two of
    them is whole there, in any encoding, whatever lies between the parts."""
    blocks = [
        {"type": "text", "text": f"key {VALUE[:9]}"},
        {"type": "tool_use", "name": "x", "input": {}},
        {"type": "text", "text": f"{VALUE[9:]} end"},
    ]
    findings = scan([secret()], [Unit("turn 1 response", {"content": blocks})])
    assert findings == {"STRIPE_KEY": {"turn 1 response": ["raw, split across content parts"]}}
    hexed = VALUE.encode().hex()
    parts = {"parts": [{"text": hexed[:20]}, {"text": hexed[20:]}]}
    assert encodings_at(VALUE, parts) == ["hex, split across content parts"]
    whole = {"content": [{"type": "text", "text": VALUE}, {"type": "text", "text": "!"}]}
    assert encodings_at(VALUE, whole) == ["raw"]


def test_a_value_across_content_parts_is_cut_out_of_every_part_it_spans() -> None:
    blocks = [
        {"type": "text", "text": f"you sent {VALUE[:5]}"},
        {"type": "text", "text": VALUE[5:12]},
        {"type": "tool_use", "input": {"n": 1}},
        {"type": "text", "text": f"{VALUE[12:]} and {VALUE} again"},
    ]
    answer = {"content": blocks}
    assert without_across_parts(answer, VALUE, "[redacted]")
    texts = [block.get("text") for block in blocks]
    assert texts == ["you sent [redacted]", "", None, f" and {VALUE} again"]  # one part: raw's
    encoded = base64.b64encode(VALUE.encode()).decode()
    answer = {"parts": [{"text": encoded[:7]}, {"text": encoded[7:]}]}
    assert without_across_parts(answer, VALUE, "[redacted]")
    assert answer["parts"][0] == {"text": "[redacted]"}
    assert scan([secret()], [Unit("after", answer)]) == {}  # no form of it in the join


def test_nothing_across_parts_or_too_short_a_value_changes_nothing() -> None:
    answer = {"content": [{"type": "text", "text": VALUE[:5]}, {"type": "text", "text": "x"}]}
    before = json.loads(json.dumps(answer))
    assert not without_across_parts(answer, VALUE, "[redacted]")
    assert not without_across_parts(answer, VALUE[:5] + "x"[:0], "[redacted]")  # under 8
    assert answer == before


def test_a_split_value_is_located_at_the_message_whose_parts_hold_it() -> None:
    request = chat_request("fine")
    split = [{"type": "text", "text": VALUE[:10]}, {"type": "text", "text": VALUE[10:]}]
    request["messages"].append({"role": "user", "content": split})
    findings = scan([secret()], model_scopes(recorded_session((request, chat_response("ok")))))
    assert findings == {
        "STRIPE_KEY": {"turn 1 request, message 4 (user)": ["raw, split across content parts"]}
    }


@pytest.mark.parametrize("offset", range(6))
@pytest.mark.parametrize("trailing", range(4))
def test_base64_at_every_alignment_with_and_without_padding(offset: int, trailing: int) -> None:
    data = b"\x07" * offset + VALUE.encode() + b"!" * trailing
    padded = base64.b64encode(data).decode()
    expected = [f"base64, alignment {offset % 3}"]
    assert encodings_at(VALUE, f"blob={padded}") == expected
    assert encodings_at(VALUE, padded.rstrip("=")) == expected


def test_each_alignment_has_its_own_core() -> None:
    cores = base64_cores(VALUE.encode())
    assert len(set(cores)) == 3
    assert all(len(core) >= 10 and "=" not in core for core in cores)


@pytest.mark.parametrize("offset", range(3))
def test_url_safe_base64_is_named_as_such(offset: int) -> None:
    data = b"A" * offset + URLSAFE_VALUE.encode() + b"B"
    standard = base64.b64encode(data).decode()
    urlsafe = base64.urlsafe_b64encode(data).decode()
    assert standard != urlsafe  # the value really exercises the two alphabets
    assert encodings_at(URLSAFE_VALUE, standard) == [f"base64, alignment {offset}"]
    assert encodings_at(URLSAFE_VALUE, urlsafe.rstrip("=")) == [f"base64url, alignment {offset}"]


def test_hex_lower_and_upper() -> None:
    assert encodings_at(VALUE, "0x" + VALUE.encode().hex()) == ["hex"]
    assert encodings_at(VALUE, VALUE.encode().hex().upper()) == ["hex"]


@pytest.mark.parametrize(
    "encode", [lambda v: quote(v, safe=""), quote, quote_plus], ids=["quote", "safe", "plus"]
)
def test_url_encoded(encode) -> None:
    value = "a b/c+d&e=f?g"
    encoded = encode(value)
    assert encoded != value
    assert encodings_at(value, f"https://x.test/?k={encoded}") == ["URL-encoded"]


def test_url_encoded_with_lowercase_escapes() -> None:
    value = "a b/c+d&e=f?g"
    lowered = re.sub("%[0-9A-F]{2}", lambda escape: escape.group().lower(), quote(value, safe=""))
    assert lowered != quote(value, safe="")
    assert encodings_at(value, lowered) == ["URL-encoded"]


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_json_escaped_with_quote_backslash_and_unicode(ensure_ascii: bool) -> None:
    # Tool arguments are a JSON document inside a string: the value sits there escaped.
    arguments = json.dumps({"password": TRICKY_VALUE}, ensure_ascii=ensure_ascii)
    assert encodings_at(TRICKY_VALUE, arguments) == ["JSON-escaped"]
    assert encodings_at(TRICKY_VALUE, {"password": TRICKY_VALUE}) == ["raw"]


def test_json_escaped_slash() -> None:
    arguments = json.dumps({"k": TRICKY_VALUE}).replace("/", "\\/")
    assert encodings_at(TRICKY_VALUE, arguments) == ["JSON-escaped"]


def test_two_encodings_in_one_place_are_both_named() -> None:
    text = f"{VALUE} and {VALUE.encode().hex()}"
    assert encodings_at(VALUE, text) == ["raw", "hex"]


# -- locations ------------------------------------------------------------------------------


def chat_request(tool_output: str, system: str = "You are helpful.") -> dict:
    return {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": "hi"},
            *tool_round("c1", "read_config", "{}", tool_output),
        ],
        "tools": [{"type": "function", "function": {"name": "read_config", "parameters": {}}}],
    }


def chat_response(text: str) -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}


def recorded_session(*turns: tuple[dict, dict]) -> CassetteSession:
    session = CassetteSession(Mode.RECORD)
    session.recorded.extend(Turn("openai-chat", req, 200, resp) for req, resp in turns)
    return session


def test_model_turn_locations_name_turn_message_and_role() -> None:
    session = recorded_session(
        (chat_request("nothing"), chat_response("ok")),
        (chat_request(base64.b64encode(b"x" + VALUE.encode()).decode()), chat_response(VALUE)),
    )
    findings = scan([secret()], model_scopes(session))
    assert findings == {
        "STRIPE_KEY": {
            "turn 2 request, message 3 (tool)": ["base64, alignment 1"],
            "turn 2 response": ["raw"],
        }
    }


def test_model_request_parts_model_tools_and_fields() -> None:
    request = chat_request("fine", system=f"key {VALUE}")
    request["user"] = VALUE
    request["tools"][0]["function"]["description"] = VALUE
    findings = scan([secret()], model_scopes(recorded_session((request, chat_response("ok")))))
    assert list(findings["STRIPE_KEY"]) == [
        "turn 1 request, tools offered (read_config)",
        "turn 1 request, message 0 (system)",
        "turn 1 request, field user",
    ]


def test_the_request_as_sent_is_scanned_when_a_match_rule_changed_it() -> None:
    """A normalize rule may have replaced the very span holding the secret in the stored
    request; the scan reads what the agent sent."""
    session = recorded_session((chat_request("token <tok>"), chat_response("ok")))
    session.sent[0] = chat_request(f"token {VALUE}")
    assert leak_failures([secret()], session, {}) == [
        "secret ${STRIPE_KEY} leaked: turn 1 request, message 3 (tool) (raw)"
    ]


def test_replay_scans_only_served_turns() -> None:
    turns = [
        Turn("openai-chat", chat_request(VALUE), 200, chat_response("ok")),
        Turn("openai-chat", chat_request("clean"), 200, chat_response("ok")),
    ]
    session = CassetteSession(Mode.REPLAY, recorded=turns)
    session.served.append(1)
    assert leak_failures([secret()], session, {}) == []
    session.served.append(0)
    assert leak_failures([secret()], session, {}) == [
        "secret ${STRIPE_KEY} leaked: turn 1 request, message 3 (tool) (raw)"
    ]


def files_lane() -> Lane:
    return Lane(
        calls=[
            Call("initialize", {"protocolVersion": "2025-06-18"}, result={}, answered=True),
            Call(
                "tools/call",
                {"name": "write_file", "arguments": {"text": VALUE}},
                result={"content": [{"type": "text", "text": "ok"}]},
                answered=True,
            ),
            Call(
                "tools/call",
                {"name": "read_file", "arguments": {"path": "a.txt"}},
                result={
                    "content": [{"type": "text", "text": base64.b64encode(VALUE.encode()).decode()}]
                },
                answered=True,
            ),
            Call("tools/call", {"name": "boom", "arguments": {}}, error={"message": VALUE}),
        ],
        server=[
            ServerEvent(1, notification={"method": "notifications/message", "params": VALUE}),
            ServerEvent(
                2,
                request={"method": "sampling/createMessage", "params": {}},
                answer={"result": {"text": VALUE.encode().hex()}},
            ),
        ],
    )


def test_mcp_lane_locations_calls_results_errors_and_server_messages() -> None:
    findings = scan([secret()], mcp_units({"files": files_lane()}))
    assert findings == {
        "STRIPE_KEY": {
            "MCP server files, call 2 (tools/call write_file) arguments": ["raw"],
            "MCP server files, call 3 (tools/call read_file) result": ["base64, alignment 0"],
            "MCP server files, call 4 (tools/call boom) error": ["raw"],
            "MCP server files, server message 1 (notifications/message)": ["raw"],
            "MCP server files, server message 2 (sampling/createMessage) answer": ["hex"],
        }
    }


def test_a_tool_mocked_at_replay_is_scanned_as_served() -> None:
    """The agent was given the spec's mock, not the recorded result."""
    lane = Lane(
        calls=[
            Call(
                "tools/call",
                {"name": "read_file", "arguments": {"path": "a.txt"}},
                result={"content": [{"type": "text", "text": VALUE}]},
                answered=True,
            )
        ]
    )
    assert scan([secret()], mcp_units({"files": lane})) != {}
    assert scan([secret()], mcp_units({"files": lane}, {"files": {"read_file": "mocked"}})) == {}


# -- the failure message ----------------------------------------------------------------------


def test_failure_line_lists_capped_locations_and_never_the_value() -> None:
    requests = [(chat_request(VALUE), chat_response("ok")) for _ in range(MAX_LOCATIONS + 3)]
    leaked = Secret.of("STRIPE_KEY", VALUE, line=7)
    (line,) = leak_failures(
        [leaked, secret(name="OTHER_KEY", value="unrelated-value")], recorded_session(*requests), {}
    )
    assert line.startswith(
        "secret ${STRIPE_KEY} leaked: turn 1 request, message 3 (tool) (raw); "
        "turn 2 request, message 3 (tool) (raw); "
    )
    assert line.endswith("; and 3 more location(s) (step at line 7)")
    assert line.count("; turn ") == MAX_LOCATIONS - 1
    assert VALUE not in line
    assert all(core not in line for core in base64_cores(VALUE.encode()))


def test_one_line_per_variable_with_both_kinds_of_location() -> None:
    session = recorded_session((chat_request(VALUE), chat_response("ok")))
    other = Secret.of("DB_PASSWORD", "correct-horse-battery")
    lane = Lane(
        calls=[Call("tools/call", {"name": "q", "arguments": {"p": "correct-horse-battery"}})]
    )
    assert leak_failures([secret(), other], session, {"db": lane}) == [
        "secret ${STRIPE_KEY} leaked: turn 1 request, message 3 (tool) (raw)",
        "secret ${DB_PASSWORD} leaked: MCP server db, call 1 (tools/call q) arguments (raw)",
    ]


def test_failure_lines_for_no_findings_are_empty() -> None:
    assert leaks_of([secret()], {}) == []
    assert scan([], [Scope("x", VALUE)]) == {}


def test_secret_repr_holds_only_the_name() -> None:
    shown = repr(secret())
    assert "STRIPE_KEY" in shown
    assert VALUE not in shown
    assert all(core not in shown for core in base64_cores(VALUE.encode()))


# -- resolving the variables ------------------------------------------------------------------

SPEC = """\
name: leak check
app: agent
agent:
  command: python agent.py
steps:
  - prompt: hi
  - assert_no_secret_leak: ${STRIPE_KEY}
  - assert_no_secret_leak:
      - ${DB_PASSWORD}
      - ${STRIPE_KEY}
"""


def spec_and_path(tmp_path: Path):
    path = tmp_path / "leak.flow.yaml"
    path.write_text(SPEC)
    return load_spec(path), path


def test_resolve_secrets_names_each_variable_once(tmp_path: Path) -> None:
    spec, path = spec_and_path(tmp_path)
    secrets = resolve_secrets(spec, {"STRIPE_KEY": VALUE, "DB_PASSWORD": "hunter2-hunter2"}, path)
    assert [(s.name, s.line) for s in secrets] == [("STRIPE_KEY", 7), ("DB_PASSWORD", 8)]


def test_unset_variable_is_an_error_naming_it(tmp_path: Path) -> None:
    spec, path = spec_and_path(tmp_path)
    with pytest.raises(ConfigError) as raised:
        resolve_secrets(spec, {"STRIPE_KEY": VALUE}, path)
    assert str(raised.value).startswith(
        f"{path}:8: assert_no_secret_leak: environment variable DB_PASSWORD is not set"
    )


@pytest.mark.parametrize("short", ["", "abc", "1234567"])
def test_too_short_value_is_refused_without_showing_it(tmp_path: Path, short: str) -> None:
    spec, path = spec_and_path(tmp_path)
    with pytest.raises(ConfigError) as raised:
        resolve_secrets(spec, {"STRIPE_KEY": short, "DB_PASSWORD": "hunter2-hunter2"}, path)
    message = str(raised.value)
    assert message.startswith(
        f"{path}:7: assert_no_secret_leak: ${{STRIPE_KEY}} is too short to scan for"
    )
    if short:
        assert short not in message.replace("STRIPE_KEY", "")


def test_eight_characters_is_long_enough(tmp_path: Path) -> None:
    spec, path = spec_and_path(tmp_path)
    secrets = resolve_secrets(spec, {"STRIPE_KEY": "12345678", "DB_PASSWORD": "abcdefgh"}, path)
    assert len(secrets) == 2


# -- redaction --------------------------------------------------------------------------------


def test_redact_takes_out_raw_and_encoded_forms() -> None:
    text = f"reply: {VALUE} / {base64.b64encode(b'..' + VALUE.encode()).decode()}"
    cleaned = redact(text, [secret()])
    assert VALUE not in cleaned
    assert all(core not in cleaned for core in base64_cores(VALUE.encode()))
    assert cleaned.startswith("reply: [redacted ${STRIPE_KEY}] / ")


def test_a_leak_is_data_with_its_step_line_and_the_judge_makes_it_a_failure() -> None:
    session = recorded_session((chat_request(VALUE), chat_response("ok")))
    (leak,) = find_leaks([Secret.of("STRIPE_KEY", VALUE, line=9)], session, {})
    assert (leak.name, leak.places, leak.more, leak.line) == (
        "STRIPE_KEY",
        ("turn 1 request, message 3 (tool) (raw)",),
        0,
        9,
    )
    assert judge.leak_failures([leak]) == [
        Failure("secret ${STRIPE_KEY} leaked: turn 1 request, message 3 (tool) (raw)", line=9)
    ]


def test_redact_result_takes_every_value_out_of_what_it_prints() -> None:
    result = FlowResult("f", Path("f.flow.yaml"), "record", Path("f.trace.yaml"))
    result.failures = [Failure(f"the reply was {VALUE}", line=9)]
    result.stdout_tail = f"final answer: {VALUE}\n"
    result.notes = [f"note {VALUE}"]
    result.divergence = {"changes": [{"recorded": "a", "replayed": VALUE}]}
    redact_result(result, [secret()])
    assert result.failures == [Failure("the reply was [redacted ${STRIPE_KEY}]", line=9)]
    assert VALUE not in json.dumps(result.to_json())
    assert result.stdout_tail == "final answer: [redacted ${STRIPE_KEY}]\n"


def test_without_secrets_nothing_is_found_or_redacted() -> None:
    result = FlowResult("f", Path("f.flow.yaml"), "record", Path("f.trace.yaml"))
    result.stdout_tail = VALUE
    session = recorded_session((chat_request(VALUE), chat_response("ok")))
    assert find_leaks([], session, {}) == []
    redact_result(result, [])
    assert result.stdout_tail == VALUE


# -- the session keeps what the agent sent -----------------------------------------------------


def normalizing_rules() -> MatchRules:
    return MatchRules(rules=[NormalizeRule(re.compile("sk-live-[A-Za-z0-9]+"), "<key>")])


def test_record_keeps_the_request_as_sent_where_a_rule_changed_it() -> None:
    session = CassetteSession(
        Mode.RECORD, upstream=Upstream("http://127.0.0.1:9/v1"), rules=normalizing_rules()
    )
    forward = session.on_request("/v1/chat/completions", json.dumps(chat_request(VALUE)).encode())
    assert isinstance(forward, Forward)
    session.on_upstream_response(forward.pending, 200, json.dumps(chat_response("ok")).encode())
    assert VALUE not in json.dumps(session.recorded[0].request)  # the stored side: normalized
    assert leak_failures([secret()], session, {}) == [
        "secret ${STRIPE_KEY} leaked: turn 1 request, message 3 (tool) (raw)"
    ]


def test_replay_keeps_the_request_as_sent_only_where_it_differs() -> None:
    stored = chat_request("<key>")
    turns = [Turn("openai-chat", stored, 200, chat_response("ok"))]
    session = CassetteSession(Mode.REPLAY, recorded=turns, rules=normalizing_rules())
    session.on_request("/v1/chat/completions", json.dumps(chat_request(VALUE)).encode())
    assert session.served == [0]
    assert leak_failures([secret()], session, {}) == [
        "secret ${STRIPE_KEY} leaked: turn 1 request, message 3 (tool) (raw)"
    ]
    clean = CassetteSession(Mode.REPLAY, recorded=turns, rules=normalizing_rules())
    clean.on_request("/v1/chat/completions", json.dumps(stored).encode())
    assert clean.served == [0]
    assert clean.sent == {}


def test_without_rules_nothing_extra_is_kept() -> None:
    turns = [Turn("openai-chat", chat_request(VALUE), 200, chat_response("ok"))]
    session = CassetteSession(Mode.REPLAY, recorded=turns)
    session.on_request("/v1/chat/completions", json.dumps(chat_request(VALUE)).encode())
    assert session.served == [0]
    assert session.sent == {}


def test_request_headers_are_scanned_as_the_agent_sent_them() -> None:
    """The header fields are kept as mitmproxy's raw bytes and decoded only here: a value
    read as latin-1 and as UTF-8, each request numbered, the name lower-cased."""
    session = recorded_session((chat_request("nothing"), chat_response("ok")))
    session.headers.append(((b"Content-Type", b"application/json"),))
    session.headers.append(((b"X-Debug-Token", f"caf\u00e9 {VALUE}".encode()),))
    units = list(header_units(session))
    assert [unit.where for unit in units] == [
        "model request 1, header content-type",
        "model request 2, header x-debug-token",
    ]
    assert units[1].value == [f"caf\u00c3\u00a9 {VALUE}", f"caf\u00e9 {VALUE}"]
    findings = scan([secret()], units)
    assert findings == {"STRIPE_KEY": {"model request 2, header x-debug-token": ["raw"]}}
    assert scan([secret()], units[:1]) == {}  # a clean header is not a leak
