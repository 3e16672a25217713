"""The benchmark agent: the openai SDK in a tool loop of BENCH_TURNS model calls.

Reads OPENAI_BASE_URL / OPENAI_API_KEY like any openai-SDK agent and its task from
FLOWPROOF_PROMPT. Its one tool is deterministic, so a replay matches turn for turn. The
model (the stub, or flowproof's trace) asks for `lookup` on every turn but the last.
BENCH_RETRIES=N sends a failed call again at once, up to N times (the chaos group: an agent
that survives each fault, with no back-off sleep of an SDK's in the figures).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import openai
from openai import OpenAI

SYSTEM = "You are a careful research assistant. " * 20
PROMPT = "Look up every step, then report."
TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look up one step of the task.",
            "parameters": {
                "type": "object",
                "properties": {"step": {"type": "integer"}},
                "required": ["step"],
            },
        },
    }
]


def _create(client: OpenAI, messages: list[Any]) -> Any:
    """One model call, sent again at once after an error, up to BENCH_RETRIES times."""
    retries = int(os.environ.get("BENCH_RETRIES", "0"))
    for attempt in range(retries + 1):
        try:
            return client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, tools=TOOLS
            )
        except (openai.APIStatusError, openai.APIConnectionError):
            if attempt == retries:
                raise
    raise AssertionError("unreachable")


def run() -> str:
    """The loop; the final reply."""
    client = OpenAI(max_retries=0)
    prompt = os.environ.get("FLOWPROOF_PROMPT") or PROMPT
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": prompt},
    ]
    for _ in range(int(os.environ.get("BENCH_TURNS", "6"))):
        reply = _create(client, messages).choices[0]
        calls = reply.message.tool_calls or []
        if not calls:
            return reply.message.content or ""
        messages.append(reply.message.model_dump(exclude_none=True))
        for call in calls:
            step = json.loads(call.function.arguments).get("step")  # type: ignore[union-attr]
            result = json.dumps({"step": step, "found": f"fact {step}"})
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return "ran out of turns"


if __name__ == "__main__":
    print(run())
    sys.exit(0)
