"""Real agent: openai-python's `AzureOpenAI`, a hand-written tool loop.

The client reads AZURE_OPENAI_ENDPOINT, AZURE_OPENAI_API_KEY and OPENAI_API_VERSION itself
(flowproof injects them); the deployment is AZURE_DEPLOYMENT. AGENT_API picks the call:
`chat` (Chat Completions under /openai/deployments/<d>/; the body's `model` is AGENT_MODEL), `chat-stream` (the same,
streamed), `responses` (the Responses API under /openai/responses), `v1-chat` (the newer
/openai/v1 API through the plain `OpenAI` client, with the key in `api-key` as Azure's docs
show), `rag` (the question embedded under the deployment EMBED_DEPLOYMENT first, as a
retrieval agent does, then `chat`), `completions` and `completions-stream` (a draft from the
legacy completions API under the deployment COMPLETIONS_DEPLOYMENT, plain or streamed, put in
the system prompt of `chat`, so a chat that replays proves the draft was served).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from typing import Any

from openai import AzureOpenAI, OpenAI

DEPLOYMENT = os.environ.get("AZURE_DEPLOYMENT", "weather-gpt")
MODEL = os.environ.get("AGENT_MODEL", "weather-gpt")  # the body's `model`, apart from the path
API = os.environ.get("AGENT_API", "chat")
EMBED_DEPLOYMENT = os.environ.get("EMBED_DEPLOYMENT", "embed-small")
COMPLETIONS_DEPLOYMENT = os.environ.get("COMPLETIONS_DEPLOYMENT", "instruct")
SYSTEM = "You are a weather assistant. Use the tools."
PARAMETERS = {
    "get_weather": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
    "get_time": {"type": "object", "properties": {}},
}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": schema}}
    for name, schema in PARAMETERS.items()
]
RESPONSES_TOOLS = [
    {"type": "function", "name": name, "parameters": schema} for name, schema in PARAMETERS.items()
]


def run_tool(name: str, arguments: str) -> str:
    args = json.loads(arguments or "{}")
    if name == "get_weather":
        return json.dumps({"city": args["city"], "forecast": "sunny"})
    if name == "get_time":
        return json.dumps({"utc": datetime.datetime.now(datetime.UTC).isoformat()})
    raise ValueError(f"unknown tool {name!r}")


def client() -> Any:
    if API == "v1-chat":
        endpoint = os.environ["AZURE_OPENAI_ENDPOINT"].rstrip("/")
        key = os.environ["AZURE_OPENAI_API_KEY"]
        return OpenAI(
            base_url=f"{endpoint}/openai/v1/",
            api_key=key,
            default_headers={"api-key": key},
            max_retries=0,
        )
    return AzureOpenAI(azure_deployment=DEPLOYMENT, max_retries=0)


def chat_turn(azure: Any, messages: list[dict]) -> tuple[str | None, list[dict]]:
    if API != "chat-stream":
        message = (
            azure.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)
            .choices[0]
            .message
        )
        calls = [call.model_dump() for call in message.tool_calls or []]
        return message.content, calls
    text, calls = "", []
    stream = azure.chat.completions.create(
        model=MODEL, messages=messages, tools=CHAT_TOOLS, stream=True
    )
    for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for part in choice.delta.tool_calls or []:
                while len(calls) <= part.index:
                    calls.append(
                        {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                    )
                call = calls[part.index]
                call["id"] = part.id or call["id"]
                call["function"]["name"] += part.function.name or ""
                call["function"]["arguments"] += part.function.arguments or ""
    return text or None, calls


def chat(azure: Any, system: str = SYSTEM) -> int:
    messages: list[dict] = [
        {"role": "system", "content": system},
        {"role": "user", "content": os.environ["FLOWPROOF_PROMPT"]},
    ]
    for _ in range(10):
        text, calls = chat_turn(azure, messages)
        if not calls:
            print(text)
            return 0
        messages.append({"role": "assistant", "content": text, "tool_calls": calls})
        for call in calls:
            output = run_tool(call["function"]["name"], call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
    raise RuntimeError("no final answer after 10 model calls")


def responses(azure: Any) -> int:
    items: list = [{"role": "user", "content": os.environ["FLOWPROOF_PROMPT"]}]
    for _ in range(10):
        response = azure.responses.create(
            model=MODEL, instructions=SYSTEM, input=items, tools=RESPONSES_TOOLS
        )
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            print(response.output_text)
            return 0
        items.extend(item.model_dump(exclude_none=True) for item in response.output)
        for call in calls:
            output = run_tool(call.name, call.arguments)
            items.append(
                {"type": "function_call_output", "call_id": call.call_id, "output": output}
            )
    raise RuntimeError("no final answer after 10 model calls")


def rag() -> int:
    embedder = AzureOpenAI(azure_deployment=EMBED_DEPLOYMENT, max_retries=0)
    vector = embedder.embeddings.create(
        model="text-embedding-3-small", input=[os.environ["FLOWPROOF_PROMPT"]]
    )
    print(f"embedded the question: {len(vector.data[0].embedding)} numbers")
    return chat(client())


def completions() -> int:
    """A draft of the answer from legacy completions (`/openai/deployments/<d>/completions`),
    then the chat with the draft in its system prompt."""
    writer = AzureOpenAI(azure_deployment=COMPLETIONS_DEPLOYMENT, max_retries=0)
    prompt = f"Draft an answer: {os.environ['FLOWPROOF_PROMPT']}"
    if API == "completions-stream":
        stream = writer.completions.create(
            model="gpt-35-turbo-instruct", prompt=prompt, max_tokens=32, stream=True
        )
        draft = "".join(chunk.choices[0].text for chunk in stream if chunk.choices)
    else:
        completion = writer.completions.create(
            model="gpt-35-turbo-instruct", prompt=prompt, max_tokens=32
        )
        draft = completion.choices[0].text
    return chat(AzureOpenAI(azure_deployment=DEPLOYMENT, max_retries=0), f"{SYSTEM} Draft:{draft}")


if __name__ == "__main__":
    try:
        if API == "rag":
            sys.exit(rag())
        if API.startswith("completions"):
            sys.exit(completions())
        sys.exit(responses(client()) if API == "responses" else chat(client()))
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
