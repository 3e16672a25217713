"""No verdict form without a case that proves it can fail.

The forms are read from the code itself: the step models, the matchers and their
spellings, the structured assertion keys, the divergence checks, the match rule kinds and
presets, the secret encodings, the control verdicts and audit changes, the exception tree
and the exit codes. Where the code keeps no list (driver failures, the session's and the
MCP replayer's refusals, the judge's own findings), the message templates are read from
the functions that word them, and each must be matched by the message of some case. A new
form, or a new failure message, fails this test until cases.py has a case for it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

import flowproof_cli
from flowproof_cli.cassette import divergence
from flowproof_cli.dialects import CHAT, ENDPOINT
from flowproof_cli.errors import ExitCode, FlowproofError, Terminated
from flowproof_cli.evidence import audit, controls
from flowproof_cli.evidence.secrets import needles
from flowproof_cli.match import rules
from flowproof_cli.match.presets import preset_names
from flowproof_cli.spec import grammar, steps
from flowproof_cli.spec.match import MatchSpec, NormalizeSpec
from tests.falsifiability import cases
from tests.falsifiability import test_check_can_fail as check_verdicts
from tests.falsifiability import test_conversations_can_fail as conversation_verdicts
from tests.falsifiability import test_faults_can_fail as fault_verdicts
from tests.falsifiability import test_mcp_faults_can_fail as mcp_fault_verdicts
from tests.falsifiability import test_websocket_verdicts as websocket_verdicts

# -- the forms the code enumerates ----------------------------------------------------------------


def _reply_verbs() -> list[str]:
    """`reply contains TEXT | reply is TEXT`: the alternatives of the grammar's pattern."""
    group = re.search(r"\(([a-z|]+)\)", grammar._REPLY.pattern)
    assert group is not None, grammar._REPLY.pattern
    return group.group(1).split("|")


def _rule_classes() -> list[str]:
    """Every rule kind of match/rules.py: the classes that rewrite a request."""
    return [
        name
        for name, value in vars(rules).items()
        if inspect.isclass(value)
        and value.__module__ == rules.__name__
        and callable(getattr(value, "apply", None))
        and callable(getattr(value, "snapshot", None))
        and value is not rules.Rule
    ]


def _error_classes() -> list[str]:
    """Every FlowproofError below flowproof_cli, once all its modules are imported."""
    for module in pkgutil.walk_packages(flowproof_cli.__path__, f"{flowproof_cli.__name__}."):
        if module.name.endswith(("__main__", "minimal_mitmproxy", "_stub")):
            continue  # these act on import (the CLI, the importer shim, the egress stub)
        importlib.import_module(module.name)

    def below(cls: type) -> Iterator[type]:
        for sub in cls.__subclasses__():
            yield sub
            yield from below(sub)

    found = [cls for cls in below(FlowproofError) if cls.__module__.startswith("flowproof_cli")]
    return sorted({cls.__name__ for cls in found} | {Terminated.__name__})


def _file_statuses() -> list[str]:
    """What `audit --verify` says of a judged file that is not unchanged (audit.py)."""
    tree = ast.parse(inspect.getsource(audit))
    statuses = {
        node.value
        for assign in ast.walk(tree)
        if isinstance(assign, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "status" for t in assign.targets)
        for node in ast.walk(assign.value)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    assert "unchanged" in statuses, statuses
    return sorted(statuses - {"unchanged"})


def code_forms() -> dict[str, list[str]]:
    """Every form of the code, by the prefix the cases name it with."""
    # `prompt` and `user` give the agent its messages; they are not verdicts of their own
    given = (steps.PromptStep.kind, steps.UserStep.kind)
    step_kinds = [kind for kind in steps.STEP_KINDS if kind not in given]
    spellings = [s for s, _ in (*grammar._VALUELESS_SPELLINGS, *grammar._VALUED_SPELLINGS)]
    optional_normalize = [
        name for name, info in NormalizeSpec.model_fields.items() if not info.is_required()
    ]
    return {
        "step": step_kinds,
        "matcher": [matcher.value for matcher in grammar.Matcher],
        "spelling": spellings,
        "reply": _reply_verbs(),
        "subject": list(grammar.RUN_FORMS),
        "key": list(steps._MATCH_KEYS),
        "check": [check.__name__ for check in divergence.CHECKS] + ["request changed"],
        "kind": [CHAT, ENDPOINT],
        "rule": [*_rule_classes(), "relocate"],
        "field": list(MatchSpec.model_fields),
        "normalize": optional_normalize,
        "preset": preset_names(),
        "encoding": sorted({needle.encoding for needle in needles(cases.SECRET)}),
        "error": _error_classes(),
        "exit": [code.name for code in ExitCode if code is not ExitCode.PASSED],
        "verdict": [verdict for verdict in controls.VERDICTS if verdict != "pass"],
        "change": list(audit.BAD_CHANGES),
        "file": _file_statuses(),
    }


def test_every_form_of_the_code_has_a_failing_case() -> None:
    covered = cases.covered_forms()
    missing = [
        f"{prefix}:{form}"
        for prefix, forms in code_forms().items()
        for form in forms
        if f"{prefix}:{form}" not in covered
    ]
    assert not missing, (
        "forms with no falsifiability case (add one to tests/falsifiability/cases.py): "
        + ", ".join(missing)
    )


def test_every_form_a_case_names_exists() -> None:
    """A case's form of a known prefix names something the code still has (no stale tags)."""
    known = {f"{prefix}:{form}" for prefix, forms in code_forms().items() for form in forms}
    prefixes = {f"{prefix}:" for prefix in code_forms()}
    stale = sorted(
        form
        for form in cases.covered_forms()
        if form.startswith(tuple(prefixes)) and form not in known
    )
    assert not stale, f"cases name forms the code does not have: {stale}"


def test_the_secret_cases_cover_each_encoding_distinctly() -> None:
    """Every encoding of the test secret is its own string, so each case tests only one."""
    labels = {needle.encoding for needle in needles(cases.SECRET)}
    assert labels == set(cases.SECRET_ENCODINGS)
    for encoding in cases.SECRET_ENCODINGS:
        blob = cases.encoded(encoding)
        if encoding != "raw":
            assert cases.SECRET not in blob, encoding
        found = {n.encoding for n in needles(cases.SECRET) if n.text in blob}
        assert encoding in found, (encoding, found)


# -- failure messages where the code keeps no list ---------------------------------------------------

#: The functions that word a verdict's failure (or refusal) without a list of kinds.
MESSAGE_SITES: dict[str, tuple[str, ...]] = {
    "flowproof_cli.cassette.divergence": (
        "_tools",
        "_message_changed",
        "_compare",
        "led_by_version",
    ),
    "flowproof_cli.cassette.session": (
        "CassetteSession._received",
        "CassetteSession._internal",
        "CassetteSession._replay",
        "_explained",
        "CassetteSession._forward",
        "_target",
        "_unreadable",
        "CassetteSession.on_upstream_error",
    ),
    "flowproof_cli.cassette.providers": ("no_upstream_reason",),
    "flowproof_cli.dialects.base": ("ResultsExhausted.__init__",),
    "flowproof_addons.guard": ("RequestGuard.request",),
    "flowproof_cli.runner.judge": (
        "_unsound",
        "no_egress_failures",
        "_no_requests",
        "_how_it_answered",
    ),
    "flowproof_cli.runner.drivers": ("_driven", "_service_failure", "_listen_at_proxy_port"),
    "flowproof_cli.runner.command": ("_cannot_start",),
    "flowproof_cli.runner.conversation": ("Dialogue.problem",),
    "flowproof_cli.runner.turn_judge": ("unserved_turns",),
    "flowproof_cli.runner.fault_verdicts": ("fault_failures", "check_recorded_faults"),
    "flowproof_cli.runner.staleness": (
        "missing_trace",
        "mocks_difference",
        "faults_difference",
        "match_difference",
        "turns_difference",
    ),
    "flowproof_cli.cassette.faulted": ("_retried",),
    "flowproof_cli.cassette.conversation": ("OpenTurn.worded",),
    "flowproof_cli.runner.descriptors": ("ConnectionCap._over", "AcceptWatch.handled"),
    "flowproof_cli.runner.url_driver": ("_connection", "_describe"),
    "flowproof_cli.runner.mcp_servers": ("StdioServer._never_contacted", "McpServers._stale"),
    "flowproof_cli.mcp.stdio": ("sent_too_deep", "could_not_handle_line"),
    "flowproof_cli.mcp.replayer": (
        "Replayer._request",
        "Replayer._faulted_again",
        "Replayer._answer",
        "Replayer._diverge",
        "Replayer.failures",
    ),
    "flowproof_cli.mcp.matching": ("compare_call", "compare_answer"),
    "flowproof_cli.mcp.turns": ("misplaced_call",),
    "flowproof_cli.mcp.mocks": ("MockSchemaError.__init__",),
    "flowproof_cli.match.rules": ("AddonRule.apply",),
    "flowproof_cli.match.patterns": ("PatternBudgetExceeded.__init__",),
    "flowproof_cli.match.addons": ("load_matcher_script", "_import_failure", "_not_imported"),
    "flowproof_cli.match.user_code": ("ScriptCalls.worded",),
    "flowproof_cli.evidence.secrets": ("resolve_secrets", "Leak.message"),
    "flowproof_cli.providers.aws_signing": (
        "missing_credentials_message",
        "signer_from_environment",
        "AwsSigner.region_for",
        "BedrockSigning.headers_for",
    ),
    "flowproof_addons.websocket": (
        "on_upgrade_answered",
        "Frames.from_client",
        "Frames.from_upstream",
        "Frames.ended",
    ),
}

#: Message templates no case can reach through the CLI, each with the reason.
UNREACHABLE: dict[str, str] = {
    "the agent exited {} after {} of the conversation's turns, before flowproof sent the "
    "next one{}": "flowproof sends the next message as soon as a turn ends, so an agent that "
    "exits then is caught during the next turn; this wording is left for an exit while a "
    "simulated user's record call is out, a window no fixture holds open every time",
    "{} closed the WebSocket before the response completed": (
        "needs the socket to close between a frame and its answer, a race no case can time "
        "through the CLI (tests/unit/test_responses_websocket.py words it)"
    ),
    "flowproof: the upstream model sent an {} event on the WebSocket with no request "
    "pending (HTTP {}): {}": (
        "needs an upstream that speaks on the socket before any request; the service never "
        "does (tests/unit/test_responses_websocket.py words it)"
    ),
    "recording Bedrock needs botocore to sign its requests. Fix: pip install "
    "'flowproof[bedrock]' (or botocore) where flowproof runs": (
        "the test environment has botocore installed (the extra the e2e tests use); the "
        "import is guarded in providers/aws_signing.py"
    ),
    "flowproof: {} is not a model endpoint flowproof records": (
        "the guard answers a path no dialect routes before any session sees it (the "
        "endpoint-not-spoken case says its message; tests/unit/test_proxy_guard.py)"
    ),
    "record has no upstream configured": (
        "`flowproof record` refuses to start without an upstream (the config-error command "
        "case); only the stock-mitmproxy addon can reach it"
    ),
    "the agent never contacted flowproof's MCP stand-in for '{}' (the recording has {} "
    "call(s)); its MCP config must point that server at ${}": (
        "dead code: no caller of Replayer.failures passes `variable` (the stdio server words "
        "its own `never spawned` failure, covered)"
    ),
    "agent.url {} is not an http(s) URL. Fix: e.g. http://127.0.0.1:8000/run": (
        "defensive: the spec loader refuses such an `agent.url` at its line first (the "
        "driver-service-not-http case says that message)"
    ),
    "the MCP server '{}': could not handle the agent's line ({})": (
        "defensive: no line the agent can send makes the stand-in raise; a raise forced in "
        "tests/falsifiability/test_mcp_garbage.py is answered and named"
    ),
    "cannot start the agent {}: {}. {}": (
        "flowproof out of file descriptors as the agent starts: no case can bring a run to "
        "exactly that point (tests/unit/test_descriptors.py words it)"
    ),
    "{} and could not accept the agent's connection on 127.0.0.1:{} (it waited in the "
    "listener's queue for a descriptor to be free). {}": (
        "needs a run under a lowered `ulimit -n` whose flows together hold more connections "
        "than it allows: tests/falsifiability/test_descriptors.py runs exactly that"
    ),
    "{}: the matcher addon script ({}) could not be loaded": (
        "defensive: mitmproxy's loader logs the exception of every script that fails to load, "
        "and that message is the one worded (covered)"
    ),
}

_NAMED = {"failure", "message", "divergence", "difference", "line", "reason"}
_CALLED = {
    "_error",
    "_diverge",
    "_refuse",
    "Divergence",
    "append",
    "_headed",
    "__init__",
    "ConfigError",
    "AgentStartError",
    "MatcherAddonError",
    "PortInUseError",
    "TraceError",
    "SpecError",
    "ContainmentError",
}
_KEY_LENGTH = 60


def _template(node: ast.AST) -> str | None:
    """A string expression as text with `{}` for each placeholder; None if it is not one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            part.value if isinstance(part, ast.Constant) else "{}" for part in node.values
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        return None if left is None else left + (right or "{}")
    return None


def _strings(node: ast.AST) -> list[str]:
    """The templates an expression may evaluate to (both arms of an `if`, a list's items)."""
    if isinstance(node, ast.IfExp):
        return _strings(node.body) + _strings(node.orelse)
    if isinstance(node, ast.Tuple) and node.elts:
        return _strings(node.elts[0])  # a divergence check's (summary, details)
    if isinstance(node, ast.List):
        return [text for item in node.elts for text in _strings(item)]
    if isinstance(node, ast.ListComp):
        return _strings(node.elt)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_headed":
        return _strings(node.args[0])
    if isinstance(node, ast.Call) and _name_of(node.func) == "Failure" and node.args:
        return _strings(node.args[0])  # a failure's message (its line is data, not text)
    text = _template(node)
    return [text] if text is not None else []


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _site_templates(function: Any) -> list[str]:
    """The messages a function words: what it returns, assigns to a message-like name,
    or hands to a refusal, error or exception."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    found: list[str] = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Return) and node.value is not None) or (
            isinstance(node, ast.Assign) and any(_name_of(t) in _NAMED for t in node.targets)
        ):
            found += _strings(node.value)
        elif isinstance(node, ast.Call) and _name_of(node.func) in _CALLED:
            found += [text for arg in node.args for text in _strings(arg)]
    # A message is prose: an error kind (`flowproof_divergence`) or a bare `{}` is not one.
    return [text for text in found if " " in text.strip() and text.strip("{} ")]


def message_templates() -> set[str]:
    templates: set[str] = set()
    for module_name, functions in MESSAGE_SITES.items():
        module = importlib.import_module(module_name)
        for dotted in functions:
            target: Any = module
            for part in dotted.split("."):
                target = getattr(target, part)
            if isinstance(target, property):  # a message a fact words about itself
                target = target.fget
            templates.update(_site_templates(target))
    return templates


def _pattern(template: str) -> re.Pattern[str]:
    """The verdict part of a template (before its `. Fix:`, at most 60 characters) as a
    pattern, `{}` matching anything."""
    head = template.strip().split(". Fix", 1)[0][:_KEY_LENGTH]
    head = re.sub(r"\{\}?$", "", head)  # a placeholder cut in half
    return re.compile(".*?".join(re.escape(part) for part in head.split("{}")))


def _case_messages() -> list[str]:
    said = [case.message for case in cases.CASES]
    said += [command.message for command in cases.COMMANDS]
    said += list(websocket_verdicts.MESSAGES.values())
    said += [case.message for case in conversation_verdicts.CASES.values()]
    said += [case.message for case in fault_verdicts.CASES.values()]
    said += [case.message for case in mcp_fault_verdicts.CASES.values()]
    said += [case.message for case in check_verdicts.CASES.values()]
    return [re.sub(r"<<[^<>]*>>", "X", text) for text in said]


def test_every_failure_message_of_the_code_has_a_case() -> None:
    messages = _case_messages()
    uncovered = sorted(
        template
        for template in message_templates()
        if template not in UNREACHABLE
        and not any(_pattern(template).search(text) for text in messages)
    )
    assert not uncovered, (
        "failure messages no falsifiability case says (add a case to "
        "tests/falsifiability/cases.py, or name why it is unreachable in UNREACHABLE): "
        + "; ".join(repr(template) for template in uncovered)
    )


def test_every_unreachable_message_still_exists() -> None:
    """The exemption list only names messages the code still words."""
    gone = sorted(set(UNREACHABLE) - message_templates())
    assert not gone, f"UNREACHABLE names messages the code no longer has: {gone}"


# -- the table itself -------------------------------------------------------------------------------


def test_case_folders_are_unique() -> None:
    folders = [case.folder for case in cases.CASES]
    folders += [twin.folder for case in cases.CASES if (twin := case.twin_case())]
    assert len(folders) == len(set(folders))


def test_the_completeness_check_can_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above is itself falsifiable: a form no case names is reported by name."""
    monkeypatch.setattr(cases, "covered_forms", lambda: set())
    with pytest.raises(AssertionError, match=r"forms with no falsifiability case.*step:assert"):
        test_every_form_of_the_code_has_a_failing_case()
    monkeypatch.setattr(cases, "CASES", ())
    monkeypatch.setattr(cases, "COMMANDS", ())
    with pytest.raises(AssertionError, match="the agent did not finish within"):
        test_every_failure_message_of_the_code_has_a_case()
