"""Real agent that asks for JSON, as routers and structured-output calls do, and parses it.

JSON_MODE picks the API: `chat-object` (Chat `response_format: json_object`), `chat-schema`
(Chat `json_schema`), `responses-schema` (Responses `text.format`) or `gemini-schema`
(google-genai `response_json_schema`). The answer must parse and satisfy SCHEMA, or the agent
exits 3 naming what it got: what a real JSON-mode client does with a plain sentence.
AGENT_PATTERN adds a `pattern` to the schema, which flowproof doctor's instance does not try
to satisfy (the red path of the agent's own check).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import jsonschema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "model_choice": {"type": "string", "enum": ["flash", "pro"]},
    },
    "required": ["reasoning", "model_choice"],
    "additionalProperties": False,
}
if os.environ.get("AGENT_PATTERN"):
    SCHEMA["properties"]["reasoning"]["pattern"] = os.environ["AGENT_PATTERN"]
MESSAGES: list[Any] = [{"role": "user", "content": "Route this request."}]


def openai_text(mode: str) -> str:
    from openai import OpenAI

    client = OpenAI(max_retries=0)
    if mode == "responses-schema":
        answer = client.responses.create(
            model="gpt-4o-mini",
            input="Route this request.",
            text={"format": {"type": "json_schema", "name": "route", "schema": SCHEMA}},
        )
        return answer.output_text
    schema = {"name": "route", "strict": True, "schema": SCHEMA}
    response_format: Any = (
        {"type": "json_object"}
        if mode == "chat-object"
        else {"type": "json_schema", "json_schema": schema}
    )
    chat = client.chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, response_format=response_format
    )
    return chat.choices[0].message.content or ""


def gemini_text() -> str:
    from google import genai
    from google.genai import types

    config = types.GenerateContentConfig(
        response_mime_type="application/json", response_json_schema=SCHEMA
    )
    client = genai.Client()  # held: the SDK closes a client that is garbage-collected
    answer = client.models.generate_content(
        model="gemini-2.5-flash", contents="Route this request.", config=config
    )
    return answer.text or ""


def main() -> int:
    mode = os.environ.get("JSON_MODE", "chat-schema")
    text = gemini_text() if mode == "gemini-schema" else openai_text(mode)
    try:
        value = json.loads(text)
        if mode != "chat-object":
            jsonschema.validate(value, SCHEMA)
    except (ValueError, jsonschema.ValidationError) as exc:
        print(f"agent: the {mode} answer {text!r} is not what I asked for: {exc}", file=sys.stderr)
        return 3
    print(json.dumps(value))
    return 0


if __name__ == "__main__":
    sys.exit(main())
