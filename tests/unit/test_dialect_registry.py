"""Every registered dialect has every part of the contract (docs/architecture.md).

A dialect (or endpoint) is one module plus its line in `DIALECTS`: nothing in the runner,
the addons or the conversation view knows it by name. So this walks the registry, and a
dialect missing a part fails here, named with the part, not later in some user's run.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from flowproof_cli.dialects import (
    AUTH_HEADERS,
    CHAT,
    DIALECTS,
    ENDPOINT,
    PROVIDERS,
    Dialect,
    dialect_named,
    route,
)
from flowproof_cli.dialects.endpoint import Endpoint
from flowproof_cli.trajectory import AssistantTurn, EndpointCall

TEXT = "Hello from the registry test."
IDS = [dialect.name for dialect in DIALECTS]


def _path(dialect: Dialect) -> str:
    if dialect.example_path is not None:
        return dialect.example_path
    suffix = dialect.route_suffixes[0]
    if suffix.startswith(":"):
        return f"/v1beta/models/{dialect.example_request.get('model', 'm')}{suffix}"
    return f"/v1/{suffix}"


def _headers(dialect: Dialect) -> dict[str, str]:
    """The headers its real client sends (what `claims` may read): its own auth header."""
    return (
        {dialect.auth_headers[0]: "placeholder", "anthropic-version": "2023-06-01"}
        if (dialect.provider == "anthropic")
        else {dialect.auth_headers[0]: "placeholder"}
    )


def test_names_are_unique_and_every_name_is_registered() -> None:
    assert len(set(IDS)) == len(IDS)
    for dialect in DIALECTS:
        assert dialect_named(dialect.name) is dialect


@pytest.mark.parametrize("dialect", DIALECTS, ids=IDS)
def test_declares_its_identity(dialect: Dialect) -> None:
    assert dialect.provider in PROVIDERS, f"{dialect.name}: `provider` must be one of {PROVIDERS}"
    assert dialect.kind in (CHAT, ENDPOINT), f"{dialect.name}: `kind` must be chat or endpoint"
    assert dialect.method in ("GET", "POST"), f"{dialect.name}: `method`"
    assert dialect.route_suffixes, f"{dialect.name}: no `route_suffixes`"
    assert dialect.auth_headers, f"{dialect.name}: no `auth_headers`"
    assert all(name == name.lower() for name in dialect.auth_headers)
    assert set(dialect.auth_headers) <= set(AUTH_HEADERS)


@pytest.mark.parametrize("dialect", DIALECTS, ids=IDS)
def test_routes_its_own_requests(dialect: Dialect) -> None:
    """Its own path, with the headers its client sends, reaches it and no other dialect."""
    assert route(_path(dialect), _headers(dialect), dialect.method) is dialect


@pytest.mark.parametrize("dialect", DIALECTS, ids=IDS)
def test_puts_the_key_in_one_of_its_own_headers(dialect: Dialect) -> None:
    headers = dialect.upstream_auth("sk-registry")
    assert headers, f"{dialect.name}: `upstream_auth` sets no header"
    assert set(headers) <= {*dialect.auth_headers, "authorization"}
    assert any("sk-registry" in value for value in headers.values())


@pytest.mark.parametrize("dialect", DIALECTS, ids=IDS)
def test_forwards_a_url_under_the_base(dialect: Dialect) -> None:
    url = dialect.upstream_url_for_path("https://upstream.example/v1", _path(dialect))
    assert url.startswith("https://upstream.example/")
    body = dialect.upstream_body(dialect.example_request)
    assert (body is None) == (dialect.method == "GET")


def _answer(dialect: Dialect, request: dict[str, Any]) -> dict[str, Any]:
    try:
        return dialect.canned_response(request, TEXT)
    except NotImplementedError:
        pytest.fail(f"{dialect.name}: no `canned_response` (doctor would have no answer)")


@pytest.mark.parametrize("dialect", DIALECTS, ids=IDS)
def test_reads_its_answer_as_its_kind(dialect: Dialect) -> None:
    request = dialect.canonical_request(dialect.normalize(_path(dialect), dialect.example_request))
    assert dialect.unreadable_field(request) is None, f"{dialect.name}: its example_request"
    answer = dialect.read_answer(request, _answer(dialect, request), 1)
    if dialect.kind == ENDPOINT:
        assert isinstance(answer, EndpointCall), dialect.name
        try:
            assert answer.answered and answer.asked
        except NotImplementedError:
            pytest.fail(f"{dialect.name}: no `describe_answer`")
    else:
        assert isinstance(answer, AssistantTurn), dialect.name
        assert answer.text == TEXT, f"{dialect.name}: the canned answer's text is not read"


@pytest.mark.parametrize("dialect", DIALECTS, ids=IDS)
def test_renders_and_reads_back_its_answer(dialect: Dialect) -> None:
    """Plain, and (when it streams) as the synthesized stream, read back by the dialect itself
    into an answer that reads the same."""
    request = dialect.normalize(_path(dialect), dialect.example_request)
    response = _answer(dialect, request)
    plain = dialect.render(request, 200, response, stream=False)
    assert json.loads(plain.body) == response
    back, how = dialect.answer_from_body(plain.body, plain.content_type)
    assert back == response and how == ""
    if not dialect.streams:
        return
    streamed = dialect.render(request, 200, response, stream=True)
    assert streamed.content_type.split(";")[0] == dialect.stream_media_type
    try:
        back, how = dialect.answer_from_body(streamed.body, streamed.content_type)
    except ValueError as exc:
        pytest.fail(f"{dialect.name}: its stream does not read back ({exc})")
    assert how, dialect.name
    assert dialect.read_answer(request, back, 1) == dialect.read_answer(request, response, 1)


@pytest.mark.parametrize("dialect", DIALECTS, ids=IDS)
def test_answers_errors_in_its_own_shape(dialect: Dialect) -> None:
    body = dialect.error_body("flowproof: nope", "flowproof_refused", 404)
    assert "flowproof: nope" in json.dumps(body)


class _Incomplete(Endpoint):
    """A new endpoint whose author forgot its canned answer, its answer's description and
    its provider: the tests above must say so."""

    name = "incomplete-endpoint"
    provider = "nobody"
    route_suffixes = ("incomplete",)


def test_a_dialect_lacking_a_part_fails_here() -> None:
    incomplete = _Incomplete()
    with pytest.raises(AssertionError, match="`provider` must be one of"):
        test_declares_its_identity(incomplete)
    with pytest.raises(pytest.fail.Exception, match="no `canned_response`"):
        test_reads_its_answer_as_its_kind(incomplete)
    with pytest.raises(AssertionError):  # not registered: nothing routes to it
        test_routes_its_own_requests(incomplete)
