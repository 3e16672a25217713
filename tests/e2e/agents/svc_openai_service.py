"""A real long-lived agent service for the `agent.url` tests: Starlette + the `openai` SDK.

    python svc_openai_service.py PORT

`POST /run {"prompt": ...}` runs a tool loop with `AsyncOpenAI` (which reads OPENAI_BASE_URL
and OPENAI_API_KEY from the environment the service was started with) and answers
`{"reply": ...}`. flowproof does not start it: the test does, pointed at the proxy port.

Knobs (environment): AGENT_SYSTEM (the system prompt), SERVICE_TOKEN (require
`Authorization: Bearer <token>`, else 401), SERVICE_STATUS (the status of a successful
answer, default 200), SERVICE_SWALLOW_ERRORS (a model error answers 200 instead of 500),
SERVICE_HANG (never answer).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import sys

import uvicorn
from openai import AsyncOpenAI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

env = os.environ.get
TOOLS = [
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
            "description": "The current time.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]


def run_tool(name: str, arguments: str) -> str:
    if name == "get_weather":
        return json.dumps({"city": json.loads(arguments).get("city"), "forecast": "sunny"})
    return json.dumps({"now": datetime.datetime.now(datetime.UTC).isoformat()})


async def tool_loop(prompt: str) -> str:
    client = AsyncOpenAI(max_retries=0)
    messages: list[dict] = [
        {"role": "system", "content": env("AGENT_SYSTEM", "You are a weather assistant.")},
        {"role": "user", "content": prompt},
    ]
    for _ in range(8):
        response = await client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, tools=TOOLS
        )
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": run_tool(call.function.name, call.function.arguments),
                }
            )
    raise RuntimeError("no final answer after 8 model calls")


async def run(request: Request) -> JSONResponse:
    token = env("SERVICE_TOKEN")
    if token and request.headers.get("authorization") != f"Bearer {token}":
        return JSONResponse({"error": "unauthorized"}, status_code=401)
    if env("SERVICE_HANG"):
        await asyncio.sleep(3600)
    prompt = (await request.json())["prompt"]
    try:
        reply = await tool_loop(prompt)
    except Exception as exc:
        if env("SERVICE_SWALLOW_ERRORS"):
            return JSONResponse({"reply": "sorry, something went wrong"})
        return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=500)
    return JSONResponse({"reply": reply}, status_code=int(env("SERVICE_STATUS", "200")))


app = Starlette(routes=[Route("/run", run, methods=["POST"])])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
