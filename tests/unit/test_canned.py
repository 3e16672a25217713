"""`flowproof doctor`'s canned replies honour JSON mode: JSON text, a schema's instance."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from mitmproxy.test import tflow

from flowproof_addons.canned import CANNED_TEXT, CannedReplies, canned_reply
from flowproof_cli.dialects import route
from flowproof_cli.dialects.json_mode import JsonMode, json_answer, json_mode

# Gemini CLI's model router asks for this (its classifier's schema, as sent).
ROUTER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string", "description": "Why."},
        "model_choice": {"type": "string", "enum": ["flash", "pro"]},
    },
    "required": ["reasoning", "model_choice"],
}
CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
GEMINI = "/v1beta/models/gemini-2.5-flash:generateContent"
ANTHROPIC = "/v1/messages"


def answer_text(path: str, body: dict[str, Any]) -> str:
    """The text of the canned (non-streamed) answer to `body` sent to `path`."""
    dialect = route(path)
    assert dialect is not None
    rendered = canned_reply(dialect, path, json.dumps(body).encode())
    assert rendered.status == 200
    reply = json.loads(rendered.body)
    if path == CHAT:
        return str(reply["choices"][0]["message"]["content"])
    if path == RESPONSES:
        return str(reply["output"][0]["content"][0]["text"])
    if path == ANTHROPIC:
        return str(reply["content"][0]["text"])
    return str(reply["candidates"][0]["content"]["parts"][0]["text"])


def chat(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra}


def responses(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "input": "hi", **extra}


def gemini(config: dict[str, Any]) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": config}


# --- each API's JSON mode gets JSON --------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (CHAT, chat(response_format={"type": "json_object"})),
        (RESPONSES, responses(text={"format": {"type": "json_object"}})),
        (GEMINI, gemini({"responseMimeType": "application/json"})),
        (GEMINI, {"contents": [], "generation_config": {"response_mime_type": "application/json"}}),
    ],
)
def test_json_mode_without_a_schema_gets_a_json_object(path: str, body: dict[str, Any]) -> None:
    assert json.loads(answer_text(path, body)) == {"reply": CANNED_TEXT}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (
            CHAT,
            chat(
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "route", "strict": True, "schema": ROUTER_SCHEMA},
                }
            ),
        ),
        (
            RESPONSES,
            responses(
                text={"format": {"type": "json_schema", "name": "r", "schema": ROUTER_SCHEMA}}
            ),
        ),
        (
            GEMINI,
            gemini({"responseMimeType": "application/json", "responseJsonSchema": ROUTER_SCHEMA}),
        ),
    ],
)
def test_a_schema_gets_an_instance_of_it(path: str, body: dict[str, Any]) -> None:
    value = json.loads(answer_text(path, body))
    jsonschema.validate(value, ROUTER_SCHEMA)
    assert value == {"reasoning": CANNED_TEXT, "model_choice": "flash"}


def test_gemini_openapi_response_schema_is_read_with_its_upper_case_types() -> None:
    schema = {
        "type": "OBJECT",
        "properties": {"n": {"type": "INTEGER"}, "tags": {"type": "ARRAY", "minItems": 1}},
        "required": ["n", "tags"],
    }
    value = json.loads(answer_text(GEMINI, gemini({"responseSchema": schema})))
    assert value == {"n": 0, "tags": [CANNED_TEXT]}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (CHAT, chat()),
        (CHAT, chat(response_format={"type": "text"})),
        (RESPONSES, responses(text={"format": {"type": "text"}})),
        (GEMINI, gemini({"responseMimeType": "text/plain", "temperature": 0})),
        (
            ANTHROPIC,
            {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
        ),
    ],
)
def test_plain_requests_keep_the_plain_canned_text(path: str, body: dict[str, Any]) -> None:
    text = answer_text(path, body)
    assert text == CANNED_TEXT
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # the red path the doctor used to take for every JSON-mode request


def test_a_streamed_json_mode_answer_is_json_once_joined() -> None:
    dialect = route(CHAT)
    assert dialect is not None
    body = chat(stream=True, response_format={"type": "json_object"})
    rendered = canned_reply(dialect, CHAT, json.dumps(body).encode())
    assert rendered.content_type.startswith("text/event-stream")
    chunks = [
        json.loads(line[len("data: ") :])
        for line in rendered.body.decode().splitlines()
        if line.startswith("data: {")
    ]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert json.loads(text) == {"reply": CANNED_TEXT}


# --- the schema instance ---------------------------------------------------------------------

SCHEMAS: list[dict[str, Any]] = [
    ROUTER_SCHEMA,
    {  # pydantic's shape: $defs, $ref, Optional as anyOf with null, a nested list
        "$defs": {
            "City": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "pop": {"type": "integer"}},
                "required": ["name", "pop"],
                "additionalProperties": False,
            }
        },
        "type": "object",
        "properties": {
            "cities": {"type": "array", "items": {"$ref": "#/$defs/City"}, "minItems": 2},
            "best": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/City"}]},
            "note": {"type": ["string", "null"], "maxLength": 5},
        },
        "required": ["cities", "best", "note"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "count": {"type": "integer", "minimum": 3},
            "ok": {"type": "boolean"},
            "kind": {"const": "weather"},
            "code": {"type": "string", "minLength": 40},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        },
        "required": ["when", "score", "count", "ok", "kind", "code", "pair"],
    },
    {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
        ]
    },
    {  # recursive: a tree whose children are trees
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
                "required": ["label"],
            }
        },
        "$ref": "#/$defs/Node",
    },
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_the_instance_satisfies_its_schema(schema: dict[str, Any]) -> None:
    jsonschema.validate(json_answer(JsonMode(schema), CANNED_TEXT), schema)


def test_the_plain_text_does_not_satisfy_these_schemas() -> None:
    # The instance is what makes these pass: the canned sentence alone satisfies none.
    for schema in SCHEMAS:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(CANNED_TEXT, schema)


def test_json_mode_is_read_only_from_the_fields_each_api_defines() -> None:
    assert json_mode("anthropic", {"response_format": {"type": "json_object"}}) is None
    assert json_mode("openai-chat", {"text": {"format": {"type": "json_object"}}}) is None
    assert json_mode("openai-responses", {"response_format": {"type": "json_object"}}) is None
    assert json_mode("gemini", {"generationConfig": "not a mapping"}) is None
    schema_less = {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}
    assert json_mode("openai-chat", schema_less) == JsonMode()


def test_the_doctor_sends_a_websocket_client_to_http() -> None:
    """Codex CLI dials the Responses API over a WebSocket by default: the doctor answers its
    upgrade 426, which sends it to HTTP, and counts only the HTTP request that follows."""
    flow = tflow.tflow()
    flow.request.method, flow.request.path = "GET", "/v1/responses"
    flow.request.headers.update({"upgrade": "websocket", "sec-websocket-version": "13"})
    replies = CannedReplies()
    replies.request(flow)
    assert flow.response is not None and flow.response.status_code == 426
    assert "answers over HTTP" in json.loads(flow.response.content)["error"]["message"]
    assert not replies.model_requests


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "key"),
    [
        ("POST", "/v1/embeddings", None, {"model": "m", "input": ["a", "b"]}, "data"),
        ("POST", "/v1/moderations", None, {"input": "a"}, "results"),
        ("GET", "/v1/models", None, {}, "data"),
        ("GET", "/v1/models", {"x-api-key": "k"}, {}, "has_more"),
        ("POST", "/v1/messages/count_tokens", None, {"model": "m", "messages": []}, "input_tokens"),
        ("POST", "/v1beta/models/e:batchEmbedContents", None, {"requests": [{}, {}]}, "embeddings"),
        ("POST", "/v1beta/models/g:countTokens", None, {"contents": []}, "totalTokens"),
    ],
)
def test_doctor_answers_each_endpoint_in_its_own_shape(
    method: str, path: str, headers: dict[str, str] | None, body: dict[str, Any], key: str
) -> None:
    dialect = route(path, headers, method)
    assert dialect is not None and dialect.kind == "endpoint"
    raw = b"" if method == "GET" else json.dumps(body).encode()
    rendered = canned_reply(dialect, path, raw)
    assert rendered.status == 200 and rendered.content_type == "application/json"
    answer = json.loads(rendered.body)
    assert key in answer
    if key in ("data", "embeddings") and method == "POST":  # one vector per input
        assert len(answer[key]) == 2
