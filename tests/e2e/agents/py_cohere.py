"""Real agent: the `cohere` SDK's v2 chat (`ClientV2`), hand-written tool loop.

``cohere.ClientV2()`` reads CO_API_URL (the API root, without `/v2`) and CO_API_KEY. With
``--stream`` each turn is `chat_stream` and is rebuilt from its events (`content-delta`,
`tool-plan-delta`, `tool-call-start`, `tool-call-delta`); otherwise `chat`. With
``--embed`` the agent first embeds the question (`/v2/embed`) and reranks two notes
against it (`/v2/rerank`), as a retrieval agent does. With ``--rerank-v1`` it first ranks
the notes (NOTES, and EXTRA_NOTE when set) against the question with the v1 client,
``cohere.Client().rerank`` (`/v1/rerank`), and puts the best note and its score in the
system prompt, so a chat that replays proves the ranking was served from the trace. Tool
results go back as `tool` messages of `document` blocks, by `tool_call_id`.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from typing import Any

import cohere

MODEL = os.environ.get("AGENT_MODEL", "command-a-03-2025")
SYSTEM = "You are a weather assistant. Use the tools."
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The current UTC time.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]
NOTES = ["Nairobi weather notes: the long rains start in March.", "Paris has museums."]


def run_tool(name: str, args: dict[str, Any]) -> dict[str, Any]:
    if name == "get_weather":
        return {"city": args["city"], "forecast": "sunny"}
    if name == "get_time":
        return {"utc": datetime.datetime.now(datetime.UTC).isoformat()}
    raise ValueError(f"unknown tool {name!r}")


def turn(client: cohere.ClientV2, messages: list[Any], stream: bool) -> dict[str, Any]:
    """One model turn as an assistant message (a stream's events joined)."""
    if not stream:
        message = client.chat(model=MODEL, messages=messages, tools=TOOLS).message
        text = "".join(getattr(block, "text", "") or "" for block in message.content or [])
        calls = [call.model_dump(exclude_none=True) for call in message.tool_calls or []]
        return {"text": text, "tool_plan": message.tool_plan or "", "tool_calls": calls}
    text, plan, calls = "", "", []
    for event in client.chat_stream(model=MODEL, messages=messages, tools=TOOLS):
        if event.type == "content-delta":
            text += event.delta.message.content.text or ""
        elif event.type == "tool-plan-delta":
            plan += event.delta.message.tool_plan or ""
        elif event.type == "tool-call-start":
            calls.append(event.delta.message.tool_calls.model_dump(exclude_none=True))
        elif event.type == "tool-call-delta":
            calls[-1]["function"]["arguments"] += (
                event.delta.message.tool_calls.function.arguments or ""
            )
    return {"text": text, "tool_plan": plan, "tool_calls": calls}


def ranked_v1(prompt: str) -> str:
    """The note most relevant to the question, by v1 rerank (`cohere.Client` reads CO_API_URL
    and CO_API_KEY, as ClientV2 does)."""
    notes = [*NOTES, *filter(None, [os.environ.get("EXTRA_NOTE")])]
    ranked = cohere.Client().rerank(model="rerank-english-v3.0", query=prompt, documents=notes)
    best = ranked.results[0]
    assert best.index == 0 and len(ranked.results) == len(notes), ranked.results
    return f"Most relevant note: {notes[best.index]} (score {best.relevance_score})"


def main() -> int:
    stream = "--stream" in sys.argv
    client = cohere.ClientV2()
    prompt = os.environ["FLOWPROOF_PROMPT"]
    if "--embed" in sys.argv:
        embedded = client.embed(
            model="embed-v4.0",
            texts=[prompt],
            input_type="search_query",
            embedding_types=["float"],
        )
        assert embedded.embeddings.float_ and embedded.embeddings.float_[0], "no embedding"
        ranked = client.rerank(model="rerank-v3.5", query=prompt, documents=NOTES, top_n=1)
        assert ranked.results[0].index == 0, ranked.results
    system = f"{SYSTEM} {ranked_v1(prompt)}" if "--rerank-v1" in sys.argv else SYSTEM
    messages: list[Any] = [
        {"role": "system", "content": system},
        {"role": "user", "content": prompt},
    ]
    for _ in range(10):
        answer = turn(client, messages, stream)
        if not answer["tool_calls"]:
            print(answer["text"])
            return 0
        messages.append(
            {
                "role": "assistant",
                "tool_plan": answer["tool_plan"],
                "tool_calls": answer["tool_calls"],
            }
        )
        for call in answer["tool_calls"]:
            function = call["function"]
            result = run_tool(function["name"], json.loads(function["arguments"] or "{}"))
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": [{"type": "document", "document": {"data": json.dumps(result)}}],
                }
            )
    raise RuntimeError("no final answer after 10 model calls")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
