"""The secret-leak scan behind `assert_no_secret_leak`: a declared value appears nowhere in
what crossed flowproof's boundaries, raw or in a common encoding.

The corpus is the run's trajectory: every served model turn, its request as the agent sent
it (before match rules, which may have normalized the very span holding the secret) and its
response as the agent was given it, the headers of every model request (record forwards all
but the auth headers upstream), and every MCP lane (calls with their params and answers,
server notifications and requests with the agent's answers). Encodings matter because an
agent that base64s a key into a tool argument has still leaked it; so does the join of a
value's content parts, where a value cut across two text blocks is whole.

A finding names the variable, the place and the encoding, never the value: a `Secret` keeps
its search strings out of its repr, and `redact_result` replaces any of them that reached a
verdict's text (the agent's output, a reply quoted in a failure, a divergence) before the
verdict is printed or stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowproof_cli.cassette.secret_forms import MIN_LENGTH, Needle, joined_parts, needles
from flowproof_cli.errors import ConfigError
from flowproof_cli.spec.steps import NoSecretLeakStep

if TYPE_CHECKING:
    from flowproof_cli.cassette.session import CassetteSession
    from flowproof_cli.mcp.lane import Call, Lane
    from flowproof_cli.spec import FlowSpec
    from flowproof_cli.verdict import FlowResult

#: Locations listed per variable; the rest are counted.
MAX_LOCATIONS = 5
#: Joins a value's leaves for one substring test. An environment value cannot hold a NUL,
#: and no encoding of one produces it, so a match never spans two leaves.
_LEAF_SEPARATOR = "\x00"


# -- what to search for -------------------------------------------------------------------


@dataclass(frozen=True)
class Secret:
    """A declared variable with its search strings; only `name` is ever shown or stored."""

    name: str
    needles: tuple[Needle, ...] = field(repr=False)
    line: int | None = None  # the first step naming it

    @classmethod
    def of(cls, name: str, value: str, line: int | None = None) -> Secret:
        return cls(name, needles(value), line)


def _step_line(spec: FlowSpec, name: str) -> int | None:
    for step in spec.steps:
        if isinstance(step, NoSecretLeakStep) and name in step.variables:
            return step.line
    return None


def record_key_secrets(environ: Mapping[str, str], declared: Sequence[str] = ()) -> list[Secret]:
    """The record keys set in flowproof's environment (FLOWPROOF_AGENT_KEY, ...), as secrets
    every flow scans for and redacts, declared or not: a key in a request body, a message
    or a trace is a leak whether or not a step names it."""
    from flowproof_cli.cassette.upstream import record_keys  # noqa: PLC0415 (the session)
    from flowproof_cli.providers import secret_values  # noqa: PLC0415

    signing = {k: v for k, v in secret_values(environ).items() if len(v) >= MIN_LENGTH}
    keys = {**record_keys(environ), **signing}
    return [Secret.of(name, value) for name, value in keys.items() if name not in declared]


def resolve_secrets(
    spec: FlowSpec, environ: Mapping[str, str], spec_path: Path | None = None
) -> list[Secret]:
    """The flow's declared secrets, resolved before the agent starts, then the record keys
    (`record_key_secrets`). An unset or too short declared value is a ConfigError (exit 2)
    naming the variable, never its value."""
    secrets = []
    for name in spec.secret_variables:
        line = _step_line(spec, name)
        where = f"{spec_path}:{line}: " if spec_path and line else ""
        value = environ.get(name)
        if value is None:
            raise ConfigError(
                f"{where}assert_no_secret_leak: environment variable {name} is not set, so "
                f"there is nothing to scan for. Fix: export {name}=... (or set it in the "
                "suite's env) before running flowproof"
            )
        if len(value) < MIN_LENGTH:
            raise ConfigError(
                f"{where}assert_no_secret_leak: ${{{name}}} is too short to scan for (fewer "
                f"than {MIN_LENGTH} characters would match by chance). Fix: scan for the "
                f"full secret, or remove ${{{name}}} from the step"
            )
        secrets.append(Secret.of(name, value, line))
    return secrets + record_key_secrets(environ, spec.secret_variables)


# -- where to search ------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """One named part of the corpus."""

    where: str
    value: Any


@dataclass(frozen=True)
class Scope:
    """A corpus entry, searched whole first; `parts` (when it has them) then say where."""

    where: str
    value: Any
    parts: Callable[[], list[Unit]] | None = None


def _leaves(value: Any) -> Iterator[str]:
    """Every text in a JSON value: strings, mapping keys, and scalars as their JSON text."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item)
    elif value is not None and not isinstance(value, bool):
        yield json.dumps(value)


def _text(value: Any) -> str:
    return _LEAF_SEPARATOR.join(_leaves(value))


def _request_parts(label: str, protocol: str, request: Any) -> list[Unit]:
    """The request by the parts a divergence report names: model, tools, messages (counted
    from 0, as there), other fields."""
    from flowproof_cli.dialects import dialect_named  # noqa: PLC0415 (the dialects are heavy)

    try:
        outline = dialect_named(protocol).outline(request)
    except (KeyError, TypeError, ValueError, AttributeError):
        return []  # an unreadable shape: the whole request is the location
    units = [Unit(f"{label}, model", outline.model)]
    units += [
        Unit(f"{label}, tools offered ({name})", tool) for name, tool in outline.tools.items()
    ]
    for position, message in enumerate(outline.messages):
        content = message.raw if message.raw is not None else message.content
        units.append(Unit(f"{label}, message {position} ({message.role})", content))
    units += [Unit(f"{label}, field {key}", value) for key, value in outline.parameters.items()]
    return units


def model_scopes(session: CassetteSession) -> Iterator[Scope]:
    """Each served turn in recorded order: the request as sent, the response as given."""
    for position in session.used_turns():
        turn = session.recorded[position]
        request = session.sent.get(position, turn.request)
        label = f"turn {position + 1} request"
        yield Scope(label, request, partial(_request_parts, label, turn.protocol, request))
        yield Scope(f"turn {position + 1} response", session.rules.live_response(turn.response))


def _call_units(prefix: str, number: int, call: Call, mocked: Mapping[str, Any]) -> list[Unit]:
    where = f"{prefix}, call {number} ({call.label()})"
    units = []
    params = call.params or {}
    if call.method == "tools/call" and "arguments" in params:
        units.append(Unit(f"{where} arguments", params["arguments"]))
        params = {key: value for key, value in params.items() if key != "arguments"}
    if params:
        units.append(Unit(f"{where} params", params))
    if call.tool is not None and call.tool in mocked:  # replay serves the spec's mock
        units.append(Unit(f"{where} result (mocked)", mocked[call.tool]))
    elif call.error is not None:
        units.append(Unit(f"{where} error", call.error))
    elif call.answered:
        suffix = " (mocked)" if call.mocked else ""
        units.append(Unit(f"{where} result{suffix}", call.result))
    return units


def header_units(session: CassetteSession) -> Iterator[Unit]:
    """Each model request's headers as the agent sent them: record forwards every one but
    the auth headers to the upstream. A value is read as latin-1 and as UTF-8."""
    for number, headers in enumerate(session.headers, start=1):
        for raw_name, raw_value in headers:
            name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
            as_utf8 = raw_value.decode("utf-8", "replace")
            yield Unit(f"model request {number}, header {name.lower()}", [value, as_utf8])


def mcp_units(
    lanes: Mapping[str, Lane], mocks: Mapping[str, Mapping[str, Any]] | None = None
) -> Iterator[Unit]:
    """Every lane: calls (params, answers), then what the server started (and the agent's
    answers). `mocks` (replay): tools answered from the spec now, whatever was recorded."""
    for server, lane in lanes.items():
        prefix = f"MCP server {server}"
        mocked = (mocks or {}).get(server, {})
        for number, call in enumerate(lane.calls, start=1):
            yield from _call_units(prefix, number, call, mocked)
        for number, event in enumerate(lane.server, start=1):
            where = f"{prefix}, server message {number} ({event.method})"
            yield Unit(where, event.message)
            if event.answer is not None:
                yield Unit(f"{where} answer", event.answer)


# -- the scan ---------------------------------------------------------------------------------


#: variable name -> location -> encodings found there, in order of discovery.
Findings = dict[str, dict[str, list[str]]]


def _note(findings: Findings, name: str, where: str, encoding: str) -> None:
    encodings = findings.setdefault(name, {}).setdefault(where, [])
    if encoding not in encodings:
        encodings.append(encoding)


#: How a finding in the join of adjacent content parts only is labelled, after its encoding.
SPLIT = "split across content parts"


def _hits(secrets: Sequence[Secret], value: Any) -> list[tuple[Secret, Needle, str]]:
    """Each (secret, form, label) found in a value: in one of its texts, or else (labelled
    SPLIT) in the join of its content parts, where a value cut in two is whole."""
    text, joined = _text(value), joined_parts(value)
    found = []
    for secret in secrets:
        for needle in secret.needles:
            if needle.text in text:
                found.append((secret, needle, needle.encoding))
            elif joined is not None and needle.text in joined:
                found.append((secret, needle, f"{needle.encoding}, {SPLIT}"))
    return found


def scan(secrets: Sequence[Secret], scopes: Iterable[Scope | Unit]) -> Findings:
    """Where each secret occurs, in corpus order. A scope found to hold a secret is located
    by its parts; a hit no part explains is reported at the scope itself."""
    findings: Findings = {}
    for scope in scopes:
        hits = _hits(secrets, scope.value)
        if not hits:
            continue
        located: set[tuple[str, str]] = set()
        parts = scope.parts() if isinstance(scope, Scope) and scope.parts else []
        hit = {secret for secret, _, _ in hits}
        for unit in parts:
            for secret, needle, label in _hits([s for s in secrets if s in hit], unit.value):
                _note(findings, secret.name, unit.where, label)
                located.add((secret.name, needle.text))
        for secret, needle, label in hits:
            if (secret.name, needle.text) not in located:
                _note(findings, secret.name, scope.where, label)
    return findings


@dataclass(frozen=True)
class Leak:
    """One leaked variable, as data: its name, where it was found (at most MAX_LOCATIONS
    places, each with its encodings), how many places more, and the line of the first
    `assert_no_secret_leak` step naming it. The judge makes it a failure."""

    name: str
    places: tuple[str, ...]
    more: int = 0
    line: int | None = None

    @property
    def message(self) -> str:
        """Its name and where, never what."""
        line = f"secret ${{{self.name}}} leaked: {'; '.join(self.places)}"
        if self.more:
            line += f"; and {self.more} more location(s)"
        return line


def leaks_of(secrets: Sequence[Secret], findings: Findings) -> list[Leak]:
    """One leak per leaked variable, in the order the variables were declared."""
    leaks = []
    for secret in secrets:
        places = findings.get(secret.name)
        if not places:
            continue
        shown = tuple(
            f"{where} ({' and '.join(encodings)})"
            for where, encodings in list(places.items())[:MAX_LOCATIONS]
        )
        more = max(0, len(places) - MAX_LOCATIONS)
        leaks.append(Leak(secret.name, shown, more, secret.line))
    return leaks


def find_leaks(
    secrets: Sequence[Secret],
    session: CassetteSession,
    lanes: Mapping[str, Lane],
    mcp_mocks: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Leak]:
    """What `assert_no_secret_leak` scans: the model turns, the model requests' headers,
    then the MCP lanes. Runs before record writes its trace, so a leak writes none."""
    if not secrets:
        return []
    corpus: list[Scope | Unit] = [
        *model_scopes(session),
        *header_units(session),
        *mcp_units(lanes, mcp_mocks),
    ]
    return leaks_of(secrets, scan(secrets, corpus))


# -- keeping values out of the verdict ------------------------------------------------------


def redact(text: str, secrets: Sequence[Secret]) -> str:
    """`text` with every form of every secret replaced by a marker naming the variable."""
    forms = sorted(
        ((needle.text, secret.name) for secret in secrets for needle in secret.needles),
        key=lambda form: -len(form[0]),
    )
    for needle, name in forms:
        if needle in text:
            text = text.replace(needle, f"[redacted ${{{name}}}]")
    return text


def redact_json(value: Any, secrets: Sequence[Secret]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {redact(str(k), secrets): redact_json(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(item, secrets) for item in value]
    return value


def redact_result(result: FlowResult, secrets: Sequence[Secret]) -> None:
    """Every text of a verdict that is printed or stored, with the secrets taken out: the
    agent's own output or a reply quoted in a failure must not carry a value either."""
    if not secrets:
        return
    result.failures = [
        replace(failure, message=redact(failure.message, secrets)) for failure in result.failures
    ]
    result.notes = [redact(text, secrets) for text in result.notes]
    result.egress_report = [redact(text, secrets) for text in result.egress_report]
    result.stdout_tail = redact(result.stdout_tail, secrets)
    result.stderr_tail = redact(result.stderr_tail, secrets)
    if result.divergence is not None:
        result.divergence = redact_json(result.divergence, secrets)
