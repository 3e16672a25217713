"""Every verdict flowproof can give, each as a case that must FAIL, with the fixture to write.

A case is a small change to one of the base flows (`BASES`), each recorded once against the
scripted fake upstream (`tests/fakes/fake_upstream.py`): a step that does not hold, an agent knob that
changes one thing it sends (`fixtures/agent.py`), or an edit of the recorded trace. It
states the exit code and a fragment of the message the flow must fail with, and the forms
of the code it falsifies (`forms`, checked by test_completeness.py against the code's own
lists). Most cases also carry a `twin`: the same case with the one change undone, which must
PASS, so a red case cannot be red for an unrelated reason (a broken fixture fails both).

Cases run through the real CLI in groups (`group`): `replay` is one directory run with
`--json` for all of them; the others need a run of their own (a network namespace, controls
and audits, one command per error class).
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

FIXTURES = Path(__file__).resolve().parent / "fixtures"
AGENT = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'agent.py'))}"
MCP_SERVER = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'mcp_server.py'))}"

FLOW_NAME = "falsifiability base"
PROMPT = "What's the weather in Nairobi? Use both tools."
#: The arguments of the recorded tool calls (turn 1, then turn 2) and the final reply.
WEATHER_ARGS = {
    "city": "Nairobi",
    "days": 3,
    "units": {"temp": "celsius", "wind": "kmh"},
    "tags": ["rain", "wind"],
    "alerts": True,
    "note": None,
    "ratio": 0.5,
}
SECOND_ARGS = {"city": "Quito", "days": 1}
REPLY = "The weather in Nairobi is sunny, 24 C."
TOOLS: list[dict[str, Any]] = [
    {"name": "get_time", "result": {"now": "2026-01-01T09:00:00Z"}},
    {"name": "get_weather", "results": [{"forecast": "sunny"}, {"forecast": "rain"}]},
    {"name": "delete_city"},
]
MCP: list[dict[str, Any]] = [{"name": "notes", "command": MCP_SERVER}]
#: The second message of the conversation base.
SECOND_MESSAGE = "And tomorrow?"
#: The recordings every case starts from: the model only, the model plus MCP, and the model
#: plus MCP in a two-turn conversation (the MCP session in turn 1).
BASES: dict[str, dict[str, Any]] = {
    "model": {"env": {}, "spec": {}},
    "mcp": {"env": {"FP_MCP": "notes"}, "spec": {"mcp": MCP}},
    "mcp-conversation": {
        "env": {"FP_MCP": "notes", "FP_CONVERSATION": "1"},
        "spec": {"mcp": MCP},
        "agent": {"conversation": {"until": "^> $"}},
        "steps": [{"user": PROMPT}, {"user": SECOND_MESSAGE}],
    },
}

#: The secret of the leak cases: every encoding of it differs from the others (a `/`, `+`,
#: space, quote, non-ASCII and bytes whose base64 holds `+` and `/` in every alignment).
SECRET_VARIABLE = "FP_SECRET"
SECRET = 'sk-proj/Ab+c d=9_"\u00e9~?~>'
#: The variables every replay group run has (the agent inherits them, harmlessly).
RUN_ENV = {
    SECRET_VARIABLE: SECRET,
    "FP_SECRET_SHORT": "abc",
    "FP_CITY_WRONG": "Paris",
    "FP_CITY_RIGHT": "Nairobi",
}

Steps = tuple[Any, ...]
TraceEdit = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Case:
    """One verdict that must fail: the fixture, the expectation, the forms it falsifies."""

    kind: str  # assertion, divergence, driver, match, secret, mcp, control, error
    name: str  # the case's folder
    forms: tuple[str, ...]  # what of the code it falsifies (test_completeness.py)
    message: str  # a fragment of the failure (or error) the flow must report
    code: int = 1  # the flow's exit code: 1 failed, 2 flowproof could not run it
    base: str = "model"
    steps: Steps = ()  # after the prompt
    env: Mapping[str, str] = field(default_factory=dict)  # agent.env, over the base's
    agent: Mapping[str, Any] = field(default_factory=dict)  # agent keys, over the base's
    spec: Mapping[str, Any] = field(default_factory=dict)  # top-level keys, over the base's
    trace: TraceEdit | None = None  # an edit of the recorded trace
    files: Mapping[str, tuple[str, int]] = field(default_factory=dict)  # name: (text, mode)
    look: str = "message"  # where the fragment is: message, stdout, control
    verdict: str | None = None  # control cases: the control row's verdict
    twin: Mapping[str, Any] | None = None  # field changes that make the case pass
    group: str = "replay"

    @property
    def folder(self) -> str:
        """The case's folder in its group's run (unique across the table)."""
        return f"{self.kind}-{self.name}"

    def twin_case(self) -> Case | None:
        """The passing version, named `<name>.twin`; None for a case without one."""
        if self.twin is None:
            return None
        return replace(self, name=f"{self.name}.twin", twin=None, **self.twin)


# -- trace edits -------------------------------------------------------------------------------


def _set_reply(text: str) -> TraceEdit:
    def edit(trace: dict[str, Any]) -> None:
        trace["turns"][-1]["response"]["body"]["choices"][0]["message"]["content"] = text

    return edit


def _set_reply_parts(*texts: str) -> TraceEdit:
    """The final reply as adjacent text parts (a client joins them into one text)."""

    def edit(trace: dict[str, Any]) -> None:
        parts = [{"type": "text", "text": text} for text in texts]
        trace["turns"][-1]["response"]["body"]["choices"][0]["message"]["content"] = parts

    return edit


def _set_system(text: str) -> TraceEdit:
    """Every recorded request's system prompt (what a volatile prompt recorded as)."""

    def edit(trace: dict[str, Any]) -> None:
        for turn in trace["turns"]:
            turn["request"]["messages"][0]["content"] = text

    return edit


def _keep_turns(count: int) -> TraceEdit:
    def edit(trace: dict[str, Any]) -> None:
        del trace["turns"][count:]

    return edit


def _call_look_alike(trace: dict[str, Any]) -> None:
    """The model's last turn calls `delete_city` spelled with a Cyrillic `c` (U+0441)."""
    message = trace["turns"][-1]["response"]["body"]["choices"][0]["message"]
    call = {"name": "delete_\u0441ity", "arguments": "{}"}
    message["tool_calls"] = [{"id": "call_look_alike", "type": "function", "function": call}]


def _repeat_mcp_call(trace: dict[str, Any]) -> None:
    """The lane records the `tools/call` twice (the agent makes it once)."""
    calls = trace["mcp"]["notes"]["calls"]
    calls.append(json.loads(json.dumps(calls[-1])))


def _second_turn_asked(text: str) -> TraceEdit:
    """The conversation base's turn 2 recorded as asked with `text`."""

    def edit(trace: dict[str, Any]) -> None:
        for turn in trace["turns"]:
            if turn.get("conversation_turn") == 2:
                turn["request"]["messages"][1]["content"] = text

    return edit


def _mcp_city(city: str) -> TraceEdit:
    def edit(trace: dict[str, Any]) -> None:
        trace["mcp"]["notes"]["calls"][-1]["params"]["arguments"]["city"] = city

    return edit


# -- assertion forms and matchers ---------------------------------------------------------------


def _assertion(
    name: str, forms: tuple[str, ...], failing: Steps, message: str, passing: Steps, **extra: Any
) -> Case:
    return Case("assertion", name, forms, message, steps=failing, twin={"steps": passing}, **extra)


def _service(url: str, **agent: Any) -> dict[str, Any]:
    """A `url` agent (the service runs in the test process); `<<free>>`: a port of its own."""
    return {"command": None, "env": None, "url": url, "proxy_port": "<<free>>", **agent}


def _call(text: str) -> dict[str, Any]:
    return {"assert_tool_call": text}


def _no_call(value: Any) -> dict[str, Any]:
    return {"assert_no_tool_call": value}


#: A pattern that tries every way of splitting a text between its two equal branches: about
#: 2^n steps on any n characters it cannot match (none of the base flow's holds a `!`).
CATASTROPHIC = "(.|.)*!"

TOOL_CALL = "step:assert_tool_call"
NO_TOOL_CALL = "step:assert_no_tool_call"
REPLY_STEP = "step:assert"

ASSERTIONS: tuple[Case, ...] = (
    _assertion(
        "never-called",
        (TOOL_CALL,),
        (_call("delete_city"),),
        "delete_city was never called; tools called, in order: get_weather, get_time, get_weather",
        (_call("get_time"),),
    ),
    _assertion(
        "look-alike-called",
        (TOOL_CALL, "name:look-alike"),
        (_call("delete_city"),),
        "delete_city was never called; the agent called delete_\\u0441ity (U+0441 CYRILLIC "
        "SMALL LETTER ES at char 7, which looks like `c`), which only looks like it",
        (_call("get_time"),),
        env={"FP_STOP_AFTER": "3"},
        trace=_call_look_alike,
    ),
    _assertion(
        "look-alike-named",
        (TOOL_CALL, "name:look-alike", "error:SpecError"),
        (_call("get_we\u0430ther"),),
        "`assert_tool_call` names tool `get_we\\u0430ther` (U+0430 CYRILLIC SMALL LETTER A at "
        "char 6, which looks like `a`), which is not declared under `tools`: it only looks "
        "like the declared `get_weather`. Fix: write the name as `get_weather`",
        (_call("get_weather"),),
        code=2,
    ),
    _assertion(
        "equals",
        (TOOL_CALL, "matcher:equals", "spelling:equals"),
        (_call("get_weather where city equals Paris"),),
        'get_weather was called 2 time(s) but no call matched: call 1 city = "Nairobi"; '
        'call 2 city = "Quito"',
        (_call("get_weather where city equals Nairobi"),),
    ),
    _assertion(
        "is",
        (TOOL_CALL, "matcher:equals", "spelling:is"),
        (_call("get_weather where city is Paris"),),
        'no call matched: call 1 city = "Nairobi"',
        (_call("get_weather where city is Quito"),),
    ),
    _assertion(
        "equals-number",
        ("matcher:equals",),
        (_call("get_weather where days equals 4"),),
        "no call matched: call 1 days = 3; call 2 days = 1",
        (_call("get_weather where days equals 3.0"),),
    ),
    _assertion(
        "equals-true",
        ("matcher:equals",),
        (_call("get_weather where alerts equals false"),),
        "call 1 alerts = true; call 2 alerts is absent",
        (_call("get_weather where alerts equals true"),),
    ),
    _assertion(
        "equals-null",
        ("matcher:equals",),
        (_call("get_weather where note equals none"),),
        "call 1 note = null",
        (_call("get_weather where note equals null"),),
    ),
    _assertion(
        "equals-object",
        ("matcher:equals",),
        (_call('get_weather where units equals {"temp":"kelvin","wind":"kmh"}'),),
        'call 1 units = {"temp":"celsius","wind":"kmh"}',
        (_call('get_weather where units equals {"wind":"kmh","temp":"celsius"}'),),
    ),
    _assertion(
        "contains-text",
        ("matcher:contains", "spelling:contains"),
        (_call("get_weather where city contains Lim"),),
        'call 1 city = "Nairobi"; call 2 city = "Quito"',
        (_call("get_weather where city contains airo"),),
    ),
    _assertion(
        "contains-list",
        ("matcher:contains",),
        (_call("get_weather where tags contains snow"),),
        'call 1 tags = ["rain","wind"]; call 2 tags is absent',
        (_call("get_weather where tags contains wind"),),
    ),
    _assertion(
        "contains-key",
        ("matcher:contains",),
        (_call("get_weather where units contains pressure"),),
        'call 1 units = {"temp":"celsius","wind":"kmh"}',
        (_call("get_weather where units contains temp"),),
    ),
    _assertion(
        "matches",
        ("matcher:matches", "spelling:matches"),
        (_call("get_weather where city matches ^Par"),),
        'call 1 city = "Nairobi"; call 2 city = "Quito"',
        (_call("get_weather where city matches ^Na.r"),),
    ),
    _assertion(
        "matches-past-its-budget",
        ("matcher:matches", "error:PatternBudgetExceeded"),
        (_call(f"get_weather where units matches {CATASTROPHIC}"),),
        f"the `matches` pattern `{CATASTROPHIC}` (declared at <<*>>) ran past its budget of 1 s "
        "of CPU time on the `units` argument of a tool call and was stopped",
        (_call("get_weather where units matches (.)*kmh"),),
    ),
    _assertion(
        "exists",
        ("matcher:exists", "spelling:exists"),
        (_call("get_weather where pressure exists"),),
        "call 1 pressure is absent; call 2 pressure is absent",
        (_call("get_weather where units.wind exists"),),
    ),
    _assertion(
        "is-absent",
        ("matcher:is absent", "spelling:is absent"),
        (_call("get_weather where city is absent"),),
        'call 1 city = "Nairobi"; call 2 city = "Quito"',
        (_call("get_weather where pressure is absent"),),
    ),
    _assertion(
        "is-missing",
        ("matcher:is absent", "spelling:is missing"),
        (_call("get_weather where days is missing"),),
        "call 1 days = 3; call 2 days = 1",
        (_call("get_weather where pressure is missing"),),
    ),
    _assertion(
        "nested-path",
        ("path:nested",),
        (_call("get_weather where units.temp equals kelvin"),),
        'call 1 units.temp = "celsius"; call 2 units.temp is absent',
        (_call("get_weather where units.temp equals celsius"),),
    ),
    _assertion(
        "list-index",
        ("path:index",),
        (_call("get_weather where tags.0 equals wind"),),
        'call 1 tags.0 = "rain"',
        (_call("get_weather where tags.1 equals wind"),),
    ),
    _assertion(
        "and",
        ("clause:and",),
        (_call("get_weather where city equals Nairobi and days equals 5"),),
        "call 1 days = 3",
        (_call("get_weather where city equals Nairobi and days equals 3"),),
    ),
    _assertion(
        "variable",
        ("value:variable",),
        (_call("get_weather where city equals ${FP_CITY_WRONG}"),),
        'call 1 city = "Nairobi"',
        (_call("get_weather where city equals ${FP_CITY_RIGHT}"),),
    ),
    _assertion(
        "order",
        ("order:subsequence",),
        (_call("get_time"), _call("get_weather where city equals Nairobi")),
        "get_weather was called, but only before the call matched by the previous assertion "
        "(step 2",
        (_call("get_weather where city equals Nairobi"), _call("get_time")),
    ),
    _assertion(
        "args",
        (TOOL_CALL, "key:name", "key:args"),
        ({"assert_tool_call": {"name": "get_weather", "args": {"city": "Paris"}}},),
        'no call matched; the closest is call 1 (turn 1): city = "Nairobi" (expected "Paris")',
        ({"assert_tool_call": {"name": "get_weather", "args": {"city": "Quito"}}},),
    ),
    _assertion(
        "args-nested",
        ("key:args", "path:nested"),
        ({"assert_tool_call": {"name": "get_weather", "args": {"units": {"temp": "kelvin"}}}},),
        'units.temp = "celsius" (expected "kelvin")',
        ({"assert_tool_call": {"name": "get_weather", "args": {"units": {"temp": "celsius"}}}},),
    ),
    _assertion(
        "args-list",
        ("key:args",),
        ({"assert_tool_call": {"name": "get_weather", "args": {"tags": ["rain"]}}},),
        'tags = ["rain","wind"] (expected ["rain"])',
        ({"assert_tool_call": {"name": "get_weather", "args": {"tags": ["rain", "wind"]}}},),
    ),
    _assertion(
        "args-exact",
        ("key:args_exact",),
        ({"assert_tool_call": {"name": "get_weather", "args_exact": {"city": "Nairobi"}}},),
        'the closest is call 2 (turn 2): city = "Quito" (expected "Nairobi"), days = 1 is not '
        "expected (args_exact)",
        ({"assert_tool_call": {"name": "get_weather", "args_exact": WEATHER_ARGS}},),
    ),
    _assertion(
        "times",
        ("key:call", "key:times"),
        ({"assert_tool_call": {"call": "get_weather", "times": 1}},),
        "expected 1 matching call(s), saw 2: at position(s) 1 (turn 1), 3 (turn 2) of 3 "
        "tool call(s)",
        ({"assert_tool_call": {"call": "get_weather", "times": 2}},),
    ),
    _assertion(
        "times-args",
        ("key:times", "key:args"),
        (
            {
                "assert_tool_call": {
                    "name": "get_weather",
                    "args": {"city": "Nairobi"},
                    "times": 2,
                }
            },
        ),
        "expected 2 matching call(s), saw 1: at position(s) 1 (turn 1) of 3 tool call(s)",
        (
            {
                "assert_tool_call": {
                    "name": "get_weather",
                    "args": {"city": "Nairobi"},
                    "times": 1,
                }
            },
        ),
    ),
    _assertion(
        "call-prose-mapping",
        ("key:call",),
        ({"assert_tool_call": {"call": "get_weather where city equals Lima"}},),
        'no call matched: call 1 city = "Nairobi"',
        ({"assert_tool_call": {"call": "get_weather where city equals Quito"}},),
    ),
    _assertion(
        "no-call",
        (NO_TOOL_CALL,),
        (_no_call("get_time"),),
        "get_time was called at position 2 of 3 (turn 1) with arguments {}",
        (_no_call("delete_city"),),
    ),
    _assertion(
        "no-call-where",
        (NO_TOOL_CALL, "matcher:equals"),
        (_no_call("get_weather where city equals Quito"),),
        'get_weather was called at position 3 of 3 (turn 2) with arguments {"city": "Quito"',
        (_no_call("get_weather where city equals Lima"),),
    ),
    _assertion(
        "no-call-args",
        (NO_TOOL_CALL, "key:name", "key:args"),
        (_no_call({"name": "get_weather", "args": {"days": 1}}),),
        "get_weather was called at position 3 of 3 (turn 2)",
        (_no_call({"name": "get_weather", "args": {"days": 7}}),),
    ),
    _assertion(
        "no-call-args-exact",
        (NO_TOOL_CALL, "key:args_exact"),
        (_no_call({"name": "get_time", "args_exact": {}}),),
        "get_time was called at position 2 of 3 (turn 1)",
        (_no_call({"name": "get_time", "args_exact": {"tz": "UTC"}}),),
    ),
    _assertion(
        "no-call-two-matches",
        (NO_TOOL_CALL,),
        (_no_call("get_weather"),),
        "get_weather was called at position 1 of 3 (turn 1) with arguments "
        '{"city": "Nairobi", "days": 3',
        (_no_call("get_weather where city equals Lima"),),
    ),
    _assertion(
        "reply-contains",
        (REPLY_STEP, "reply:contains"),
        ({"assert": "reply contains rainy"},),
        f'the reply does not contain "rainy"; the reply was: "{REPLY}"',
        ({"assert": "reply contains sunny"},),
    ),
    _assertion(
        "reply-is",
        (REPLY_STEP, "reply:is"),
        ({"assert": "reply is rainy"},),
        'the reply does not contain "rainy"',
        ({"assert": "reply is sunny, 24 C."},),
    ),
    _assertion(
        "reply-variable",
        (REPLY_STEP, "value:variable"),
        ({"assert": "reply contains ${FP_CITY_WRONG}"},),
        'the reply does not contain "Paris"',
        ({"assert": "reply contains ${FP_CITY_RIGHT}"},),
    ),
    _assertion(
        "reply-after-tool-call",
        (REPLY_STEP,),
        ({"assert": "reply contains sunny"},),
        "there is no reply: the last model turn (turn 1) is a tool call (get_weather, "
        "get_time) with no text, and no model turn followed it",
        (_call("get_time"),),
        env={"FP_STOP_AFTER": "1"},
        trace=_keep_turns(1),
    ),
    _assertion(
        "reply-empty",
        (REPLY_STEP,),
        ({"assert": "reply contains sunny"},),
        'the reply is empty, so it does not contain "sunny"',
        (_call("get_time"),),
        trace=_set_reply(""),
    ),
    _assertion(
        "strict",
        ("flag:strict",),
        (_call("get_weather where city equals Nairobi"), _call("get_time")),
        "strict: unexpected tool call get_weather at position 3 of 3 (turn 2) is not matched "
        "by any assert_tool_call step",
        (
            _call("get_weather where city equals Nairobi"),
            _call("get_time"),
            _call("get_weather where city equals Quito"),
        ),
        spec={"strict": True},
    ),
    _assertion(
        "output-contains",
        (REPLY_STEP, "subject:output contains"),
        ({"assert": "output contains rainy"},),
        f'the agent\'s output does not contain "rainy"; its output ends with:\n{REPLY}',
        ({"assert": "output contains sunny, 24 C."},),
    ),
    _assertion(
        "output-matches",
        (REPLY_STEP, "subject:output matches"),
        ({"assert": "output matches ^rain"},),
        "the agent's output does not match ^rain; its output ends with:",
        ({"assert": "output matches Nairobi is \\w+, \\d+ C"},),
    ),
    _assertion(
        "output-stderr",
        (REPLY_STEP, "subject:output contains"),
        ({"assert": "output contains could not load"},),
        'does not contain "could not load"; its output ends with:\n'
        f"{REPLY}\nagent: could not save the answer",
        ({"assert": "output contains could not save"},),
        env={"FP_EXIT_AFTER": "0"},
    ),
    _assertion(
        "exit-code-equals",
        (REPLY_STEP, "subject:exit code equals"),
        ({"assert": "exit code equals 0"},),
        "assert exit code equals 0: the agent exited with code 4, expected 0; its output ends "
        "with:",
        ({"assert": "exit code equals 4"},),
        env={"FP_EXIT_AFTER": "4"},
    ),
    _assertion(
        "exit-code-is",
        (REPLY_STEP, "subject:exit code is"),
        ({"assert": "exit code is 3"},),
        "the agent exited with code 0, expected 3",
        ({"assert": "exit code is 0"},),
    ),
    _assertion(
        "model-calls-equals",
        (REPLY_STEP, "subject:model calls equals"),
        ({"assert": "model calls equals 2"},),
        "the agent made 3 model call(s), expected exactly 2 (every model request counts",
        ({"assert": "model calls equals 3"},),
    ),
    _assertion(
        "model-calls-is",
        (REPLY_STEP, "subject:model calls is"),
        ({"assert": "model calls is 4"},),
        "the agent made 3 model call(s), expected exactly 4",
        ({"assert": "model calls is 3"},),
    ),
    _assertion(
        "model-calls-at-least",
        (REPLY_STEP, "subject:model calls at least"),
        ({"assert": "model calls at least 4"},),
        "the agent made 3 model call(s), expected at least 4",
        ({"assert": "model calls at least 3"},),
    ),
    _assertion(
        "model-calls-at-most",
        (REPLY_STEP, "subject:model calls at most"),
        ({"assert": "model calls at most 2"},),
        "the agent made 3 model call(s), expected at most 2",
        ({"assert": "model calls at most 3"},),
    ),
    Case(
        "assertion",
        "no-egress-attempted",
        ("step:assert_no_egress",),
        "assert_no_egress: the agent attempted 1 undeclared destination(s): tcp 192.0.2.1:443",
        steps=("assert_no_egress",),
        env={"FP_CONNECT": "192.0.2.1:443"},
        twin={"env": {}},
        group="netns",
    ),
    Case(
        "assertion",
        "no-egress-uncertified",
        ("step:assert_no_egress", "capability:url agent"),
        "assert_no_egress: cannot certify: a url agent is a running service that flowproof "
        "did not start",
        steps=("assert_no_egress",),
        agent=_service("http://127.0.0.1:<<ok>>/run"),
    ),
)


# -- divergence kinds ----------------------------------------------------------------------------


def _diverge(name: str, forms: tuple[str, ...], env: Mapping[str, str], message: str) -> Case:
    return Case("divergence", name, forms, message, env=env)


DIVERGENCES: tuple[Case, ...] = (
    Case(
        "divergence",
        "in-a-conversation-turn",
        ("divergence:conversation turn",),
        f'divergence in conversation turn 2 ("{SECOND_MESSAGE}"), model call 1: message 1 '
        "(user) content changed",
        base="mcp-conversation",
        trace=_second_turn_asked("And the day after?"),
        twin={"trace": None},
    ),
    _diverge(
        "protocol",
        ("check:_protocol",),
        {"FP_PROTOCOL": "anthropic"},
        "divergence at turn 1: protocol changed: recorded openai-chat, replayed anthropic",
    ),
    _diverge(
        "model",
        ("check:_model", "kind:chat"),
        {"FP_MODEL": "gpt-4o"},
        "divergence at turn 1: model changed: recorded gpt-4o-mini, replayed gpt-4o",
    ),
    Case(
        "divergence",
        "agent-version",
        ("divergence:agent changed version",),
        # Recorded by Python's urllib; replayed by the same agent under another User-Agent,
        # sending another model: the version change leads, the field diff follows.
        "divergence at turn 1: the agent changed version: recorded Python-urllib/<<*>>, "
        "replayed fp-agent/2.0; re-record (flowproof record <<*>>case.flow.yaml)\n"
        "  model changed: recorded gpt-4o-mini, replayed gpt-4o",
        env={"FP_HEADER": "user-agent=fp-agent/2.0", "FP_MODEL": "gpt-4o"},
        # Another version that sends the same request replays.
        twin={"env": {"FP_HEADER": "user-agent=fp-agent/2.0"}},
    ),
    _diverge(
        "tool-added",
        ("check:_tools", "tools:added"),
        {"FP_EXTRA_TOOL": "delete_city"},
        "divergence at turn 1: tools offered changed: added delete_city",
    ),
    _diverge(
        "tool-removed",
        ("check:_tools", "tools:removed"),
        {"FP_DROP_TOOL": "get_time"},
        "divergence at turn 1: tools offered changed: removed get_time",
    ),
    _diverge(
        "tool-declaration",
        ("check:_tools", "tools:declaration"),
        {"FP_CITY_TYPE": "integer"},
        "divergence at turn 1: tools offered changed: the declaration of get_weather changed\n"
        "  get_weather.function.parameters.properties.city.type: recorded string, replayed "
        "integer",
    ),
    _diverge(
        "tool-look-alike",
        ("check:_tools", "tools:look-alike", "name:look-alike"),
        {"FP_EXTRA_TOOL": "get_we\u0430ther", "FP_DROP_TOOL": "get_weather"},
        "divergence at turn 1: tools offered changed: added get_we\\u0430ther; removed "
        "get_weather\n  get_we\\u0430ther (U+0430 CYRILLIC SMALL LETTER A at char 6, which "
        "looks like `a`) only looks like get_weather",
    ),
    _diverge(
        "tool-order",
        ("check:_tools", "tools:order"),
        {"FP_TOOL_ORDER": "reverse"},
        "divergence at turn 1: tools offered changed: order of tools moved",
    ),
    _diverge(
        "shape",
        ("check:_shape",),
        {"FP_EXTRA_MESSAGE": "And in Paris?"},
        "divergence at turn 1: conversation shape changed\n"
        "  recorded: ['system', 'user']\n  replayed: ['system', 'user', 'user']",
    ),
    _diverge(
        "message-content",
        ("check:_messages", "message:content"),
        {"FP_SYSTEM": "You are a rain assistant."},
        "divergence at turn 1: message 0 (system) content changed",
    ),
    _diverge(
        "argument-drift",
        ("check:_messages", "message:drift"),
        {"FP_DRIFT": "Paris"},
        "divergence at turn 2: tool-call arguments drifted in message 2 (assistant): "
        "get_weather.city: recorded Nairobi, replayed Paris",
    ),
    _diverge(
        "message-field",
        ("check:_messages", "message:field"),
        {"FP_USER_NAME": "ann"},
        "divergence at turn 1: message 1 (user) changed: ",
    ),
    Case(
        "divergence",
        "mock-changed",
        ("check:_messages", "message:content"),
        "divergence at turn 2: message 4 (tool) content changed",
        spec={"tools": [{**TOOLS[0], "result": {"now": "2030-01-01T00:00:00Z"}}, *TOOLS[1:]]},
    ),
    _diverge(
        "parameters",
        ("check:_parameters",),
        {"FP_PARAM": "temperature=0.7"},
        "divergence at turn 1: request parameters changed: temperature",
    ),
    _diverge(
        "request",
        ("check:request changed",),
        {"FP_DUPLICATE_TOOL": "1"},
        "divergence at turn 1: request changed",
    ),
    _diverge(
        "too-big-to-explain",
        ("session:too many values",),
        {"FP_BULK": "100001"},
        "divergence at turn 1: request changed (it holds over 100000 JSON values, too many to "
        "explain field by field)",
    ),
    _diverge(
        "not-json",
        ("session:not a JSON object",),
        {"FP_RAW_BODY": "this is not JSON"},
        "flowproof: the request to /v1/chat/completions is not a JSON object",
    ),
    _diverge(
        "unreadable-request",
        ("session:unreadable request",),
        {"FP_PARAM": "messages=1e30"},
        "flowproof: the agent's request to /v1/chat/completions is not a valid openai-chat "
        "request: its `messages` is the number 1e+30, which the openai-chat dialect cannot read",
    ),
    _diverge(
        "extra-call",
        ("session:extra call",),
        {"FP_EXTRA_CALL": "1"},
        "divergence at extra call: the agent made a model call beyond the 3 recorded (every "
        "recorded turn was already used)",
    ),
    Case(
        "divergence",
        "after-divergence",
        ("session:replay stopped",),
        "flowproof: replay stopped after a divergence: turn 1: model changed",
        env={"FP_MODEL": "gpt-4o", "FP_SWALLOW": "again"},
        look="stdout",
    ),
    _diverge(
        "unused-turns",
        ("judge:never requested",),
        {"FP_STOP_AFTER": "2"},
        "the agent made 2 model call(s), the recording has 3 (turn(s) never requested: 3)",
    ),
    Case(
        "divergence",
        "results-exhausted",
        ("session:results exhausted",),
        "flowproof: tool `get_weather` was called 2 times but its `results` lists 1",
        spec={"tools": [TOOLS[0], {"name": "get_weather", "results": [{"forecast": "sunny"}]}]},
    ),
)


# -- driver failures -----------------------------------------------------------------------------


def _driver(name: str, forms: tuple[str, ...], message: str, **extra: Any) -> Case:
    return Case("driver", name, forms, message, **extra)


DRIVERS: tuple[Case, ...] = (
    _driver(
        "exit-before-calls",
        ("driver:the agent exited with code", "when:before making any model call"),
        "the agent exited with code 3 before making any model call; its stderr ends with:\n"
        "agent: cannot load my configuration",
        env={"FP_EXIT_BEFORE": "3"},
    ),
    _driver(
        "exit-after-calls",
        ("driver:the agent exited with code", "when:after its model calls"),
        "the agent exited with code 4 after its model calls; its stderr ends with:\n"
        "agent: could not save the answer",
        env={"FP_EXIT_AFTER": "4"},
    ),
    _driver(
        "timeout",
        ("driver:the agent did not finish within",),
        "the agent did not finish within 1 s and was killed; it made 0 model call(s) of 3 recorded",
        env={"FP_HANG": "1"},
        spec={"timeout": 1},
    ),
    _driver(
        "too-many-connections",
        ("driver:the agent held {} connections open",),
        "the agent held <<*>> connections open to flowproof's proxy on 127.0.0.1:<<*>> at "
        "once, the limit of one listener",
        env={"FP_IDLE_CONNECTIONS": "600"},
        twin={"env": {"FP_IDLE_CONNECTIONS": "20"}},
    ),
    _driver(
        "no-model-call",
        ("driver:no model request reached flowproof's proxy: the agent exited 0",),
        "no model request reached flowproof's proxy: the agent exited 0 without calling a "
        "model through it (its client ignored the injected base URL); the recording has 3",
        env={"FP_NO_MODEL": "1"},
    ),
    _driver(
        "not-found",
        ("driver:cannot start the agent: {} was not found", "error:AgentStartError"),
        "cannot start the agent: 'fp-no-such-agent' was not found",
        code=2,
        agent={"command": "fp-no-such-agent --flag"},
    ),
    _driver(
        "not-executable",
        ("driver:cannot start the agent: {} is not executable",),
        "cannot start the agent: '<<dir>>/agent.sh' is not executable",
        code=2,
        agent={"command": "<<dir>>/agent.sh"},
        files={"agent.sh": ("#!/bin/sh\nexit 0\n", 0o644)},
    ),
    _driver(
        "bad-format",
        ("driver:cannot start the agent {}: {}",),
        "cannot start the agent '<<dir>>/agent.bin': Exec format error",
        code=2,
        agent={"command": "<<dir>>/agent.bin"},
        files={"agent.bin": ("\x7fnot a program\n", 0o755)},
    ),
    _driver(
        "service-unreachable",
        ("driver:could not reach the agent service at", "reason:connection refused"),
        "could not reach the agent service at http://127.0.0.1:<<closed>>/run: connection "
        "refused (is the service running and listening there?)",
        agent=_service("http://127.0.0.1:<<closed>>/run"),
    ),
    _driver(
        "service-hangs-up",
        ("reason:the service closed the connection without answering",),
        "could not reach the agent service at http://127.0.0.1:<<closing>>/run: the service "
        "closed the connection without answering",
        agent=_service("http://127.0.0.1:<<closing>>/run"),
    ),
    _driver(
        "service-wrong-scheme",
        ("reason:{}: {}",),
        "could not reach the agent service at https://127.0.0.1:<<ok>>/run: SSLError",
        agent=_service("https://127.0.0.1:<<ok>>/run"),
    ),
    _driver(
        "service-unknown-host",
        ("reason:the host name does not resolve",),
        "could not reach the agent service at http://fp-no-such-host.invalid/run: the host "
        "name does not resolve (<<*>>)",
        agent=_service("http://fp-no-such-host.invalid/run"),
        group="netns",
    ),
    _driver(
        "service-silent",
        ("driver:the service at {} did not answer within",),
        "the service at http://127.0.0.1:<<silent>>/run did not answer within 1 s; it made 0 "
        "model call(s) of 3 recorded",
        agent=_service("http://127.0.0.1:<<silent>>/run"),
        spec={"timeout": 1},
    ),
    _driver(
        "service-no-model-call",
        ("driver:no model request reached flowproof's proxy on 127.0.0.1:", "answer:ok"),
        "no model request reached flowproof's proxy on 127.0.0.1:<<*>>: the service at "
        "http://127.0.0.1:<<ok>>/run answered HTTP 200 without calling a model through it (its "
        "model client points elsewhere); the recording has 3",
        agent=_service("http://127.0.0.1:<<ok>>/run"),
    ),
    _driver(
        "service-failed",
        ("driver:no model request reached flowproof's proxy on 127.0.0.1:", "answer:error"),
        "answered HTTP 500 without calling a model through it (it failed before its first "
        "model call, or its model client points elsewhere); it answered: boom",
        agent=_service("http://127.0.0.1:<<failing>>/run"),
    ),
    _driver(
        "service-not-http",
        ("driver:`agent.url` {} is not an http(s) URL", "error:SpecError"),
        "`agent.url` 'ftp://127.0.0.1/run' is not an http(s) URL: its scheme is `ftp`, not "
        "http or https. Fix: write e.g. http://127.0.0.1:8000/run",
        code=2,
        agent=_service("ftp://127.0.0.1/run"),
    ),
    _driver(
        "proxy-port-taken",
        ("driver:proxy_port {} is already in use", "error:PortInUseError"),
        "proxy_port <<busy>> is already in use on 127.0.0.1 (another flowproof run, or some "
        "other program, listens there)",
        code=2,
        agent=_service("http://127.0.0.1:<<ok>>/run", proxy_port="<<busy>>"),
    ),
)


# -- match rule kinds ----------------------------------------------------------------------------

_SESSION_SYSTEM = "You are a weather assistant. session 111"
_STRIP_SESSION = """import re


class StripSession:
    def flowproof_normalize(self, request, protocol):
        for message in request.get("messages", []):
            if isinstance(message.get("content"), str):
                message["content"] = re.sub(r"session [0-9]+", "session N", message["content"])
        return request


addons = [StripSession()]
"""
_EXPLODE = """class Explode:
    def flowproof_normalize(self, request, protocol):
        raise ValueError("boom")


addons = [Explode()]
"""
_NOTHING = """class Nothing:
    def flowproof_normalize(self, request, protocol):
        return None


addons = [Nothing()]
"""
_EXITS = """class Exits:
    def flowproof_normalize(self, request, protocol):
        raise SystemExit(0)


addons = [Exits()]
"""
#: Sleeps in flowproof_normalize (line 6); its `request` hook then finds the script held.
_SLEEPY = """import time


class Sleepy:
    def flowproof_normalize(self, request, protocol):
        time.sleep(60)
        return request

    def request(self, flow):
        pass


addons = [Sleepy()]
"""
_SLOW_IMPORT = "import time\ntime.sleep(60)\n"
#: The per-call budget of the addon cases that go past it (the nearest suite.yaml's env).
_ADDON_BUDGET = ("env:\n  FLOWPROOF_ADDON_BUDGET: '2'\n", 0o644)
_SLEEPY_SNAPSHOT = [{"addon": "Sleepy", "from": "spec: sleepy.py"}]
_SLEEPY_FILES = {"sleepy.py": (_SLEEPY, 0o644), "suite.yaml": _ADDON_BUDGET}
#: The twin: the same addon, returning at once.
_AWAKE_FILES = {
    "sleepy.py": (_SLEEPY.replace("sleep(60)", "sleep(0)"), 0o644),
    "suite.yaml": _ADDON_BUDGET,
}


def _snapshot(entries: list[dict[str, Any]]) -> TraceEdit:
    """The trace recorded under these rules: its requests are used as stored, and the
    addon is called for the agent's requests only (not first on the recorded ones)."""

    def edit(trace: dict[str, Any]) -> None:
        trace["match"] = entries

    return edit


def _rule(
    name: str,
    forms: tuple[str, ...],
    match: Mapping[str, Any],
    failing: Mapping[str, str],
    message: str,
    passing: Mapping[str, str] | None,
    **extra: Any,
) -> Case:
    twin = None if passing is None else {"env": passing}
    return Case(
        "match", name, forms, message, env=failing, spec={"match": match}, twin=twin, **extra
    )


def _preset(name: str, system: str, failing: Mapping[str, str], relaxed: Mapping[str, str]) -> Case:
    """A preset still fails on a change outside what it relaxes; its twin changes only that."""
    message = (
        "request parameters changed: temperature"
        if "FP_PARAM" in failing
        else "message 0 (system) content changed"
    )
    return _rule(
        f"preset-{name}",
        (f"preset:{name}", "field:presets"),
        {"presets": [name]},
        failing,
        message,
        relaxed,
        trace=_set_system(system),
    )


_DATED = "You are a weather assistant. Today's date is 2026-01-01."
_GEMINI_TMP = "You are a weather assistant. Notes in ~/.gemini/tmp/project-a/notes."
_OPENCODE_ENV = "You are a weather assistant.\n<env>\n  Today's date: Thu Jan 01 2026\n</env>"
_QWEN_DATED = "You are a weather assistant.\nToday's date is Thursday, January 1, 2026.\n"

MATCH_RULES: tuple[Case, ...] = (
    _rule(
        "ignore",
        ("rule:IgnoreRule", "field:ignore"),
        {"ignore": ["temperature"]},
        {"FP_PARAM": "top_p=0.5"},
        "divergence at turn 1: request parameters changed: top_p",
        {"FP_PARAM": "temperature=0.7"},
    ),
    _rule(
        "normalize",
        ("rule:NormalizeRule", "field:normalize"),
        {"normalize": [{"pattern": "session [0-9]+", "replace": "session N"}]},
        {"FP_SYSTEM": "You are a rain assistant. session 222"},
        "divergence at turn 1: message 0 (system) content changed",
        {"FP_SYSTEM": "You are a weather assistant. session 222"},
        trace=_set_system(_SESSION_SYSTEM),
    ),
    Case(
        "match",
        "normalize-elsewhere",
        ("rule:NormalizeRule", "normalize:at"),
        "divergence at turn 1: message 0 (system) content changed",
        env={"FP_SYSTEM": "You are a weather assistant. session 222"},
        spec={
            "match": {"normalize": [{"pattern": "session [0-9]+", "replace": "S", "at": "tools"}]}
        },
        trace=_set_system(_SESSION_SYSTEM),
        twin={
            "spec": {
                "match": {
                    "normalize": [{"pattern": "session [0-9]+", "replace": "S", "at": "messages"}]
                }
            }
        },
    ),
    Case(
        "match",
        "normalize-past-its-budget",
        ("rule:NormalizeRule", "error:PatternBudgetExceeded"),
        f"the normalize pattern `{CATASTROPHIC}` (declared at <<*>>) ran past its budget of 1 s "
        "of CPU time on the recorded request of turn 1 and was stopped",
        spec={"match": {"normalize": [{"pattern": CATASTROPHIC, "replace": "x"}]}},
        twin={"spec": {"match": {"normalize": [{"pattern": "(.)*!", "replace": "x"}]}}},
    ),
    _rule(
        "addon",
        ("rule:AddonRule", "field:addons"),
        {"addons": ["strip_session.py"]},
        {"FP_SYSTEM": "You are a rain assistant. session 222"},
        "divergence at turn 1: message 0 (system) content changed",
        {"FP_SYSTEM": "You are a weather assistant. session 222"},
        trace=_set_system(_SESSION_SYSTEM),
        files={"strip_session.py": (_STRIP_SESSION, 0o644)},
    ),
    _rule(
        "addon-raises",
        ("rule:AddonRule", "error:MatcherAddonError", "addon:raised"),
        {"addons": ["explode.py"]},
        {},
        "the matcher addon Explode raised ValueError: boom in flowproof_normalize (explode.py:3)",
        None,
        code=2,
        files={"explode.py": (_EXPLODE, 0o644)},
    ),
    _rule(
        "addon-exits",
        ("rule:AddonRule", "error:MatcherAddonError", "addon:exit"),
        {"addons": ["exits.py"]},
        {},
        "the matcher addon Exits raised SystemExit: 0 in flowproof_normalize (exits.py:3)",
        None,
        code=2,
        files={"exits.py": (_EXITS, 0o644)},
    ),
    Case(
        "match",
        "addon-over-budget",
        ("rule:AddonRule", "error:MatcherAddonError", "addon:budget"),
        "the matcher addon Sleepy did not return from flowproof_normalize within its budget of "
        "2 s (still at sleepy.py:6)",
        spec={"match": {"addons": ["sleepy.py"]}},
        trace=_snapshot(_SLEEPY_SNAPSHOT),
        files=_SLEEPY_FILES,
        twin={"files": _AWAKE_FILES},
    ),
    Case(
        "match",
        "addon-held",
        ("rule:AddonRule", "error:MatcherAddonError", "addon:held"),
        "the matcher addon Sleepy could not run request: its script is still in "
        "Sleepy.flowproof_normalize, past its budget of 2 s",
        spec={"match": {"addons": ["sleepy.py"]}},
        trace=_snapshot(_SLEEPY_SNAPSHOT),
        files=_SLEEPY_FILES,
        twin={"files": _AWAKE_FILES},
    ),
    _rule(
        "addon-import-over-budget",
        ("field:addons", "addon:import-budget"),
        {"addons": ["slow.py"]},
        {},
        "slow.py:2: the matcher addon script (spec) did not import within its budget of 2 s",
        None,
        code=2,
        files={"slow.py": (_SLOW_IMPORT, 0o644), "suite.yaml": _ADDON_BUDGET},
    ),
    _rule(
        "addon-returns-nothing",
        ("rule:AddonRule", "error:MatcherAddonError", "addon:returned"),
        {"addons": ["nothing.py"]},
        {},
        "the matcher addon Nothing returned NoneType, not the request mapping",
        None,
        code=2,
        files={"nothing.py": (_NOTHING, 0o644)},
    ),
    _rule(
        "addon-missing",
        ("field:addons", "addon:missing"),
        {"addons": ["gone.py"]},
        {},
        "gone.py: the matcher addon script (spec) does not exist",
        None,
        code=2,
    ),
    _rule(
        "addon-broken",
        ("field:addons", "addon:import"),
        {"addons": ["broken.py"]},
        {},
        "broken.py:1: the matcher addon script (spec) does not import: SyntaxError: invalid syntax",
        None,
        code=2,
        files={"broken.py": ("def (:\n", 0o644)},
    ),
    _rule(
        "addon-without-hook",
        ("field:addons", "addon:hook"),
        {"addons": ["plain.py"]},
        {},
        "plain.py: no addon in its `addons = [...]` list defines flowproof_normalize(self, "
        "request, protocol)",
        None,
        code=2,
        files={"plain.py": ("class Plain:\n    pass\n\n\naddons = [Plain()]\n", 0o644)},
    ),
    _rule(
        "relocate",
        ("field:relocate", "rule:relocate"),
        {"relocate": True},
        {"FP_SYSTEM": "You are a rain assistant. Work in <<dir>>."},
        "divergence at turn 1: message 0 (system) content changed",
        {"FP_SYSTEM": "You are a weather assistant. Work in <<dir>>."},
        trace=_set_system("You are a weather assistant. Work in {cwd}."),
    ),
    _rule(
        "relocate-off",
        ("field:relocate",),
        {"relocate": False},
        {"FP_SYSTEM": "You are a weather assistant. Work in <<dir>>."},
        "divergence at turn 1: message 0 (system) content changed",
        None,
        trace=_set_system("You are a weather assistant. Work in {cwd}."),
    ),
    _preset(
        "dates",
        _DATED,
        {"FP_SYSTEM": "You are a rain assistant. Today's date is 2026-02-02."},
        {"FP_SYSTEM": "You are a weather assistant. Today's date is 2026-02-02."},
    ),
    _preset(
        "claude-code",
        _DATED,
        {"FP_SYSTEM": "You are a rain assistant. Today's date is 2026-02-02."},
        {"FP_SYSTEM": "You are a weather assistant. Today's date is 2026-02-02."},
    ),
    _preset(
        "codex",
        "You are a weather assistant.",
        {"FP_PARAM": "temperature=0.7"},
        {"FP_PARAM": 'prompt_cache_key="run-2"'},
    ),
    _preset(
        "gemini-cli",
        _GEMINI_TMP,
        {"FP_SYSTEM": _GEMINI_TMP.replace("weather", "rain").replace("-a/", "-b/")},
        {"FP_SYSTEM": _GEMINI_TMP.replace("-a/", "-b/")},
    ),
    _preset(
        "opencode",
        _OPENCODE_ENV,
        {"FP_SYSTEM": _OPENCODE_ENV.replace("weather", "rain").replace("Thu Jan 01", "Mon Feb 02")},
        {"FP_SYSTEM": _OPENCODE_ENV.replace("Thu Jan 01", "Mon Feb 02")},
    ),
    _preset(
        "qwen-code",
        _QWEN_DATED,
        {
            "FP_SYSTEM": _QWEN_DATED.replace("weather", "rain").replace(
                "Thursday, January 1", "Monday, February 2"
            )
        },
        {"FP_SYSTEM": _QWEN_DATED.replace("Thursday, January 1", "Monday, February 2")},
    ),
)


# -- secret-leak encodings -----------------------------------------------------------------------


def encoded(encoding: str, value: str = SECRET) -> str:
    """How an agent would carry `value` in `encoding` (a blob around it, for base64)."""
    data = value.encode()
    if encoding == "raw":
        return value
    if encoding == "JSON-escaped":
        return json.dumps(value)[1:-1]
    if encoding == "URL-encoded":
        return quote(value, safe="")
    if encoding == "hex":
        return data.hex()
    kind, alignment = re.fullmatch(r"(base64|base64url), alignment (\d)", encoding).groups()  # type: ignore[union-attr]
    blob = b"x" * int(alignment) + data + b"!!"
    coder = base64.urlsafe_b64encode if kind == "base64url" else base64.b64encode
    return coder(blob).decode()


SECRET_ENCODINGS = (
    "raw",
    "JSON-escaped",
    "base64, alignment 0",
    "base64, alignment 1",
    "base64, alignment 2",
    "base64url, alignment 0",
    "base64url, alignment 1",
    "base64url, alignment 2",
    "URL-encoded",
    "hex",
)
_LEAK_STEP = {"assert_no_secret_leak": "${" + SECRET_VARIABLE + "}"}
_LEAKED = "secret ${" + SECRET_VARIABLE + "} leaked: "


def leak_name(encoding: str) -> str:
    """`base64, alignment 1` -> `leak-base64-alignment-1`."""
    return "leak-" + re.sub(r"[^a-z0-9]+", "-", encoding.lower()).strip("-")


def _leak(encoding: str) -> Case:
    return Case(
        "secret",
        leak_name(encoding),
        (f"encoding:{encoding}", "step:assert_no_secret_leak", "location:model response"),
        f"{_LEAKED}turn 3 response ({encoding}",
        steps=(_LEAK_STEP,),
        trace=_set_reply(f"{REPLY} ref {encoded(encoding)}"),
        twin={"trace": _set_reply(f"{REPLY} ref {encoded(encoding, 'sk-proj-not-the-key')}")},
    )


SECRETS: tuple[Case, ...] = (
    *(_leak(encoding) for encoding in SECRET_ENCODINGS),
    Case(
        "secret",
        "leak-split-across-parts",
        ("location:model response", "split:content parts"),
        f"{_LEAKED}turn 3 response (raw, split across content parts)",
        steps=(_LEAK_STEP,),
        trace=_set_reply_parts(f"{REPLY} ref {SECRET[:9]}", SECRET[9:]),
        twin={"trace": _set_reply_parts(f"{REPLY} ref sk-proj-n", "ot-the-key")},
    ),
    Case(
        "secret",
        "leak-in-request",
        ("location:model request",),
        f"{_LEAKED}turn 1 request, message 0 (system) (raw)",
        steps=(_LEAK_STEP,),
        env={"FP_SYSTEM": "You are a weather assistant. ${" + SECRET_VARIABLE + "}"},
        trace=_set_system(f"You are a weather assistant. {SECRET}"),
    ),
    Case(
        "secret",
        "leak-in-header",
        ("location:model request header",),
        f"{_LEAKED}model request 1, header x-debug-token (raw)",
        steps=(_LEAK_STEP,),
        env={"FP_HEADER": "x-debug-token=${" + SECRET_VARIABLE + "}"},
        twin={"env": {"FP_HEADER": "x-debug-token=not-the-secret"}},
    ),
    Case(
        "secret",
        "leak-to-mcp",
        ("location:mcp",),
        f"{_LEAKED}MCP server notes, call 3 (tools/call lookup) arguments (base64, alignment 0)",
        base="mcp",
        steps=(_LEAK_STEP,),
        env={"FP_MCP_CITY": encoded("base64, alignment 0")},
        trace=_mcp_city(encoded("base64, alignment 0")),
    ),
    Case(
        "secret",
        "secret-unset",
        ("secret:not set",),
        "assert_no_secret_leak: environment variable FP_SECRET_UNSET is not set, so there is "
        "nothing to scan for",
        code=2,
        steps=({"assert_no_secret_leak": "${FP_SECRET_UNSET}"},),
    ),
    Case(
        "secret",
        "secret-too-short",
        ("secret:too short",),
        "assert_no_secret_leak: ${FP_SECRET_SHORT} is too short to scan for (fewer than 8 "
        "characters would match by chance)",
        code=2,
        steps=({"assert_no_secret_leak": "${FP_SECRET_SHORT}"},),
    ),
)


# -- MCP --------------------------------------------------------------------------------------------


def _mcp(name: str, forms: tuple[str, ...], message: str, **extra: Any) -> Case:
    return Case("mcp", name, forms, message, base="mcp", **extra)


_MOCKED_LOOKUP = {"name": "notes", "command": MCP_SERVER}

MCP_CASES: tuple[Case, ...] = (
    _mcp(
        "method",
        ("mcp:method",),
        "the MCP server 'notes' diverged at call 1: method: recorded initialize, replayed "
        "tools/list",
        env={"FP_MCP_SKIP_INIT": "1"},
    ),
    _mcp(
        "protocol-version",
        ("mcp:protocolVersion",),
        "the MCP server 'notes' diverged at call 1: protocolVersion: recorded 2025-06-18, "
        "replayed 2025-03-26",
        env={"FP_MCP_VERSION": "2025-03-26"},
    ),
    _mcp(
        "params",
        ("mcp:params",),
        "the MCP server 'notes' diverged at call 2: params.cursor: added in replay (page-2)",
        env={"FP_MCP_CURSOR": "page-2"},
    ),
    _mcp(
        "tool",
        ("mcp:tool",),
        "the MCP server 'notes' diverged at call 3: tool: recorded lookup, replayed forecast",
        env={"FP_MCP_TOOL": "forecast"},
    ),
    _mcp(
        "arguments",
        ("mcp:arguments",),
        "the MCP server 'notes' diverged at call 3: arguments.city: recorded Nairobi, replayed "
        "Paris",
        env={"FP_MCP_CITY": "Paris"},
    ),
    Case(
        "mcp",
        "call-in-another-turn",
        ("mcp:conversation turn",),
        f'conversation turn 2 ("{SECOND_MESSAGE}"): MCP server notes, call 1 (initialize) was '
        f'recorded in conversation turn 1 ("{PROMPT}")',
        base="mcp-conversation",
        env={"FP_MCP_TURN": "2"},
        twin={"env": {}},
    ),
    _mcp(
        "extra-call",
        ("mcp:extra call",),
        "the MCP server 'notes' diverged at call 4: an extra call (tools/call lookup); the "
        "recording has 3 call(s)",
        env={"FP_MCP_EXTRA": "1"},
    ),
    _mcp(
        "answer",
        ("mcp:answer",),
        "the MCP server 'notes' diverged at its request 1 (roots/list): result.roots.0.uri: "
        "recorded file:///work, replayed file:///elsewhere",
        env={"FP_MCP_ROOT": "elsewhere"},
    ),
    _mcp(
        "answer-error",
        ("mcp:answer",),
        "the MCP server 'notes' diverged at its request 1 (roots/list): answer: recorded a "
        "result, replayed an error",
        env={"FP_MCP_ROOT_ERROR": "1"},
    ),
    _mcp(
        "request-unanswered",
        ("mcp:never answered",),
        "the MCP server 'notes' diverged at its request 1 (roots/list): the agent never "
        "answered it",
        env={"FP_MCP_IGNORE_REQUESTS": "1"},
    ),
    _mcp(
        "arguments-shape",
        ("mcp:arguments",),
        'the MCP server \'notes\' diverged at call 3: arguments: recorded {"city": "Nairobi"}, '
        'replayed ["Nairobi"]',
        env={"FP_MCP_RAW_ARGS": '["Nairobi"]'},
    ),
    _mcp(
        "after-divergence",
        ("mcp:replay stopped",),
        "flowproof: replay stopped after a divergence: the MCP server 'notes' diverged at "
        "call 3: arguments.city: recorded Nairobi, replayed Paris",
        env={"FP_MCP_CITY": "Paris", "FP_MCP_EXTRA": "1"},
        look="stdout",
    ),
    _mcp(
        "ran-short",
        ("mcp:ran short",),
        "the MCP server 'notes' ran short: the agent made 3 of the 4 recorded call(s) (never "
        "made: call 4 (tools/call lookup))",
        trace=_repeat_mcp_call,
    ),
    _mcp(
        "never-spawned",
        ("mcp:never contacted",),
        "the agent never spawned flowproof's MCP stand-in for 'notes': its MCP config must "
        "launch the command in $FLOWPROOF_MCP_SERVER_NOTES in place of the server's own",
        env={"FP_MCP_NONE": "1"},
    ),
    _mcp(
        "too-deep",
        ("mcp:too deep",),
        "the MCP server 'notes': the agent sent a line of JSON nested too deeply to read",
        env={"FP_MCP_DEEP": "5000"},
        twin={"env": {"FP_MCP_DEEP": ""}},
    ),
    _mcp(
        "stale-lane",
        ("mcp:stale lane",),
        "the trace has a lane for the MCP server 'notes', which the spec no longer declares "
        "under `mcp`; re-record the flow",
        env={"FP_MCP": ""},
        spec={"mcp": []},
    ),
    _mcp(
        "mock-breaks-output-schema",
        ("mcp:output schema",),
        "the MCP server 'notes': the `result:` mock of `lookup` does not satisfy the tool's "
        "outputSchema (outputSchema.required: 'forecast' is a required property)",
        code=2,
        spec={"mcp": [{**_MOCKED_LOOKUP, "tools": [{"name": "lookup", "result": {"temp": 3}}]}]},
    ),
    _mcp(
        "mock-results-exhausted",
        ("mcp:results exhausted",),
        "tool `lookup` was called 2 times but its `results` lists 1",
        env={"FP_MCP_EXTRA": "1"},
        spec={
            "mcp": [
                {
                    **_MOCKED_LOOKUP,
                    "tools": [{"name": "lookup", "results": [{"forecast": "sunny"}]}],
                }
            ]
        },
        trace=_repeat_mcp_call,
    ),
)


# -- controls and capability errors ----------------------------------------------------------------


def _control(name: str, verdict: str, reason: str, forms: tuple[str, ...], **extra: Any) -> Case:
    spec = {"control": {"id": f"ctl.{name}", "title": name}, **extra.pop("spec", {})}
    code = extra.pop("code", 1)
    return Case(
        "control",
        name,
        forms,
        reason,
        code=code,
        look="control",
        verdict=verdict,
        spec=spec,
        group="controls",
        **extra,
    )


CONTROLS: tuple[Case, ...] = (
    _control(
        "failed",
        "fail",
        "assert_tool_call delete_city: delete_city was never called",
        ("verdict:fail", "control:failed"),
        steps=(_call("delete_city"),),
    ),
    _control(
        "skipped",
        "fail",
        "not run: skipped (not set: FP_NEVER_SET (skip_unless_env))",
        ("verdict:fail", "control:skipped"),
        spec={"skip_unless_env": ["FP_NEVER_SET"]},
        code=0,
    ),
    _control(
        "error",
        "fail",
        "error: cannot start the agent: 'fp-no-such-agent' was not found",
        ("verdict:fail", "control:error"),
        agent={"command": "fp-no-such-agent"},
        code=2,
    ),
    _control(
        "unloaded",
        "fail",
        "unknown key",
        ("verdict:fail", "control:unloaded"),
        spec={"stepz": []},
        code=2,
    ),
    _control(
        "uncertified",
        "capability-error",
        "assert_no_egress: cannot certify: a url agent is a running service that flowproof "
        "did not start",
        ("verdict:capability-error",),
        steps=("assert_no_egress",),
        agent=_service("http://127.0.0.1:<<ok>>/run"),
    ),
)


@dataclass(frozen=True)
class AuditCase:
    """A `flowproof audit` verdict that must fail, at a stage of the controls group:
    `first` (after the first run), `since` (`--since` the first run, after a control
    regressed and one was removed) or `verify` (after a judged file changed and one went)."""

    name: str
    forms: tuple[str, ...]
    stage: str
    message: str
    code: int = 1


AUDITS: tuple[AuditCase, ...] = (
    AuditCase(
        "controls-failed",
        ("audit:failed",),
        "first",
        "7 control(s): 2 pass, 4 fail, 1 capability-error\n"
        "FAIL: 5 control(s) failed or could not be certified",
    ),
    AuditCase(
        "regressed",
        ("change:regressed",),
        "since",
        "ctl.passing<<*>>regressed<<*>>pass -> fail<<*>>FAIL: 1 regressed, 1 removed since run ",
    ),
    AuditCase(
        "removed",
        ("change:removed",),
        "since",
        "ctl.removed<<*>>removed<<*>>pass -> (gone)<<*>>FAIL: 1 regressed, 1 removed since run ",
    ),
    AuditCase(
        "changed",
        ("file:changed",),
        "verify",
        "changed    control-failed/case.trace.yaml<<*>>judged file(s) changed since the run",
    ),
    AuditCase(
        "missing",
        ("file:missing",),
        "verify",
        "missing    control-passing/case.trace.yaml<<*>>judged file(s) changed since the run",
    ),
)


# -- error classes and exit codes (one command each) ------------------------------------------------


@dataclass(frozen=True)
class CommandCase:
    """An error that ends a command: its exit code and what stderr (or stdout) says."""

    name: str
    forms: tuple[str, ...]
    message: str
    code: int
    setup: str  # what test_every_verdict_can_fail.py prepares and runs (`_COMMANDS` there)


COMMANDS: tuple[CommandCase, ...] = (
    CommandCase(
        "spec-error",
        ("error:SpecError", "exit:ERROR"),
        "case.flow.yaml:15: unknown key `stepz` at the top level. Did you mean `steps`?",
        2,
        "bad-spec",
    ),
    CommandCase("trace-missing", ("error:TraceError",), "no trace at ", 2, "no-trace"),
    CommandCase(
        "trace-version",
        ("error:TraceError",),
        "trace format version 99 is not supported by this flowproof",
        2,
        "trace-version",
    ),
    CommandCase(
        "trace-cut-short",
        ("error:TraceError", "trace:cut short"),
        "case.trace.yaml:<<*>>: the trace does not end with `end_of_trace: true`, so it was cut "
        "short",
        2,
        "trace-cut",
    ),
    CommandCase(
        "trace-interim-status",
        ("error:TraceError", "trace:interim status"),
        "turn 1 is malformed: its `response.status` is 100, an interim (1xx) status, not an answer",
        2,
        "trace-interim",
    ),
    CommandCase(
        "config-error",
        ("error:ConfigError",),
        "record needs a real model to forward to: set FLOWPROOF_AGENT_UPSTREAM",
        2,
        "no-upstream",
    ),
    CommandCase(
        "port-in-use",
        ("error:PortInUseError",),
        "is already in use on 127.0.0.1 (another flowproof run, or some other program, listens "
        "there)",
        2,
        "busy-port",
    ),
    CommandCase(
        "spec-exists",
        ("error:SpecExistsError",),
        "case.flow.yaml already exists; init never replaces a spec",
        2,
        "init-over",
    ),
    CommandCase("agent-start", ("error:AgentStartError",), "cannot start the agent", 2, "no-agent"),
    CommandCase(
        "containment",
        ("error:ContainmentError",),
        "egress containment: cannot take the filter's listener from the agent",
        2,
        "containment-fault",
    ),
    CommandCase(
        "capability-host",
        ("verdict:capability-error", "capability:host"),
        '"capability_error": "egress containment supports x86_64 only; this machine is '
        'aarch64"<<*>>"reason": "assert_no_egress: cannot certify: egress containment supports '
        'x86_64 only; this machine is aarch64"<<*>>"verdict": "capability-error"',
        1,
        "capability-host",
    ),
    CommandCase(
        "failed",
        ("exit:FAILED",),
        "FAIL: falsifiability base - assert_tool_call delete_city: delete_city was never "
        "called; tools called, in order: get_weather, get_time, get_weather. Check the tool "
        "name and the prompt (step at line <<*>>)",
        1,
        "failing-flow",
    ),
    CommandCase(
        "record-header-leak",
        ("location:model request header",),
        "FAIL: falsifiability base - secret ${FP_SECRET} leaked: model request 1, header "
        "x-debug-token (raw)",
        1,
        "record-header-leak",
    ),
    CommandCase(
        "duplicate-control-id",
        ("error:SpecError", "control:duplicate id"),
        "control id `ctl.twice` is already declared by <<*>>; a control id is unique within a "
        "directory run",
        2,
        "duplicate-control",
    ),
    CommandCase(
        "diff-differs",
        ("command:diff",),
        "what the agent did differently:\n  reply: The weather in Nairobi is sunny, 24 C. -> The "
        "weather in Nairobi is rainy.",
        1,
        "diff",
    ),
    CommandCase(
        "rerecord-unapproved",
        ("command:re-record",),
        "FAIL: falsifiability base - re-record not approved (no terminal to ask on): kept "
        "<<*>>; the new recording is <<*>>case.trace.candidate.yaml",
        1,
        "rerecord",
    ),
    CommandCase(
        "record-provider-no-upstream",
        ("exit:FAILED",),
        "flowproof: record has no upstream for openai requests: set FLOWPROOF_UPSTREAM_OPENAI "
        "to the openai API's base URL (or FLOWPROOF_AGENT_UPSTREAM for every provider without "
        "its own) and record again",
        1,
        "provider-no-upstream",
    ),
    CommandCase(
        "record-upstream-down",
        ("exit:FAILED",),
        "flowproof: could not reach the upstream model: ",
        1,
        "upstream-down",
    ),
    CommandCase(
        "bedrock-no-credentials",
        ("error:ConfigError", "bedrock:no credentials"),
        "FLOWPROOF_UPSTREAM_BEDROCK is set: record signs each Bedrock request (AWS SigV4) with "
        "flowproof's own AWS credentials and none are set",
        2,
        "bedrock-no-credentials",
    ),
    CommandCase(
        "bedrock-half-credentials",
        ("error:ConfigError", "bedrock:half credentials"),
        "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not: record signs Bedrock "
        "requests with both",
        2,
        "bedrock-half-credentials",
    ),
    CommandCase(
        "bedrock-unsigned-call",
        ("exit:FAILED", "bedrock:unsigned call"),
        "FAIL: falsifiability base - flowproof: the agent called Bedrock (bedrock-converse): "
        "record signs each Bedrock request (AWS SigV4) with flowproof's own AWS credentials and "
        "none are set",
        1,
        "bedrock-unsigned",
    ),
    CommandCase(
        "bedrock-no-region",
        ("exit:FAILED", "bedrock:no region"),
        "FAIL: falsifiability base - flowproof: no AWS region to sign Bedrock requests for",
        1,
        "bedrock-no-region",
    ),
    CommandCase(
        "sigterm",
        ("error:Terminated", "exit:TERMINATED"),
        "flowproof: SIGTERM received: stopping the agent and the proxy",
        143,
        "sigterm",
    ),
    CommandCase("sigint", ("exit:INTERRUPTED",), "interrupted", 130, "sigint"),
)


#: Every flow case of the table, in kind order.
def _embedding_first(text: str) -> TraceEdit:
    """The recording starts with the embedding of `text` (as a retrieval agent's does)."""

    def edit(trace: dict[str, Any]) -> None:
        vector = {"object": "embedding", "index": 0, "embedding": [0.25, -0.5]}
        turn = {
            "protocol": "openai-embeddings",
            "request": {"model": "text-embedding-3-small", "input": [text]},
            "response": {"status": 200, "body": {"object": "list", "data": [vector]}},
        }
        trace["turns"].insert(0, turn)

    return edit


#: Endpoints around chat (dialects/endpoint.py): a changed input diverges naming the
#: endpoint and its field; a path no dialect speaks fails the flow naming it.
ENDPOINTS: tuple[Case, ...] = (
    Case(
        "endpoint",
        "embedding-input",
        ("kind:endpoint",),
        "turn 1: the openai-embeddings `input` content changed",
        env={"FP_ENDPOINT": "embeddings", "FP_ENDPOINT_INPUT": "Quito"},
        trace=_embedding_first("Nairobi"),
        twin={"env": {"FP_ENDPOINT": "embeddings", "FP_ENDPOINT_INPUT": "Nairobi"}},
    ),
    Case(
        "endpoint",
        "not-spoken",
        ("kind:endpoint",),
        "flowproof: POST /v1/audio/speech is not a model endpoint flowproof records (it records .../chat/completions",
        env={"FP_ENDPOINT": "audio/speech"},
        twin={"env": {}},
    ),
)

CASES: tuple[Case, ...] = (
    *ASSERTIONS,
    *DIVERGENCES,
    *ENDPOINTS,
    *DRIVERS,
    *MATCH_RULES,
    *SECRETS,
    *MCP_CASES,
    *CONTROLS,
)


def covered_forms() -> set[str]:
    """Every form some case falsifies (flow, audit and command cases alike)."""
    forms = {form for case in CASES for form in case.forms}
    forms.update(form for audit in AUDITS for form in audit.forms)
    forms.update(form for command in COMMANDS for form in command.forms)
    return forms


# -- writing a case -----------------------------------------------------------------------------

SPEC_FILE = "case.flow.yaml"
TRACE_FILE = "case.trace.yaml"
_PLACEHOLDER = re.compile(r"'<<(\w+)>>'|<<(\w+)>>")


def fill(text: str, values: Mapping[str, str], fresh: Callable[[], str] | None = None) -> str:
    """`<<name>>` replaced from `values` (a quoted `'<<port>>'` becomes a bare number);
    `<<free>>` takes a new value from `fresh` at each occurrence."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name == "free" and fresh is not None:
            return fresh()
        return values[name]

    return _PLACEHOLDER.sub(value, text)


def expected(message: str, values: Mapping[str, str]) -> re.Pattern[str]:
    """A case's message as a pattern: placeholders filled, `<<*>>` matching any text."""
    parts = [re.escape(fill(part, values)) for part in message.split("<<*>>")]
    return re.compile(".*?".join(parts), re.DOTALL)


def spec_of(case: Case) -> dict[str, Any]:
    """The case's flow as data: its base, then the case's changes (a None agent key goes)."""
    base = BASES[case.base]
    agent: dict[str, Any] = {"command": AGENT, "env": {**base["env"], **case.env}}
    agent.update(base.get("agent", {}))
    for key, value in case.agent.items():
        if value is None:
            agent.pop(key, None)
        else:
            agent[key] = value
    spec: dict[str, Any] = {"name": FLOW_NAME, "app": "agent", "agent": agent, "tools": TOOLS}
    spec.update(base["spec"])
    spec.update(case.spec)
    spec["steps"] = [*base.get("steps", [{"prompt": PROMPT}]), *case.steps]
    return spec


def write_case(
    case: Case,
    folder: Path,
    recorded: Mapping[str, Any],
    values: Mapping[str, str],
    fresh: Callable[[], str],
) -> Path:
    """Write the case's spec, its (edited) copy of the recorded trace and its files into
    `folder`; return the spec's path."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml: 5x faster, same YAML

    def dump(data: Any) -> str:
        return yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True)

    folder.mkdir(parents=True)
    here = {**values, "dir": str(folder.resolve())}
    text = dump(spec_of(case))
    spec_path = folder / SPEC_FILE
    spec_path.write_text(fill(text, here, fresh), encoding="utf-8")
    trace = json.loads(json.dumps(recorded))  # a deep copy
    if case.trace is not None:
        case.trace(trace)
    (folder / TRACE_FILE).write_text(dump(trace), encoding="utf-8")
    for name, (content, mode) in case.files.items():
        path = folder / name
        path.write_text(content, encoding="utf-8")
        path.chmod(mode)
    return spec_path
