"""Real agent: boto3 `bedrock-runtime`, a hand-written tool loop over one of four operations.

``boto3.client("bedrock-runtime")`` reads AWS_ENDPOINT_URL_BEDROCK_RUNTIME (flowproof's
proxy), the region and the (placeholder) credentials from the environment, and signs every
request with SigV4 itself. BEDROCK_OPERATION picks the call: ``converse`` (default),
``converse_stream``, ``invoke`` (an Anthropic Messages body) or ``invoke_stream``
(InvokeModelWithResponseStream). BEDROCK_EMBED=titan|cohere first embeds the question
through InvokeModel, as a retrieval agent does, and answers from the nearest document.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import sys
from typing import Any

import boto3

MODEL = os.environ.get("AGENT_MODEL", "us.anthropic.claude-3-5-haiku-20241022-v1:0")
SYSTEM = "You are a weather assistant. Use the tools."
TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
    {
        "name": "get_time",
        "description": "The current UTC time.",
        "schema": {"type": "object", "properties": {}},
    },
]
DOCUMENTS = ["Nairobi is the capital of Kenya.", "Lima is the capital of Peru."]


def run_tool(name: str, args: dict[str, Any]) -> dict[str, Any]:
    if name == "get_weather":
        return {"city": args["city"], "forecast": "sunny"}
    if name == "get_time":
        return {"utc": datetime.datetime.now(datetime.UTC).isoformat()}
    raise ValueError(f"unknown tool {name!r}")


# -- Converse ---------------------------------------------------------------------------------


def tool_config() -> dict[str, Any]:
    choice = os.environ.get("BEDROCK_TOOL_CHOICE", "auto")
    return {
        "tools": [
            {
                "toolSpec": {
                    "name": tool["name"],
                    "description": tool["description"],
                    "inputSchema": {"json": tool["schema"]},
                }
            }
            for tool in TOOLS
        ],
        "toolChoice": {choice: {}},
    }


def converse_streamed(client: Any, **request: Any) -> dict[str, Any]:
    """ConverseStream read back into the message Converse would have answered."""
    response = client.converse_stream(**request)
    blocks: dict[int, dict[str, Any]] = {}
    inputs: dict[int, str] = {}
    stop = None
    for event in response["stream"]:
        if "contentBlockStart" in event:
            start = event["contentBlockStart"]
            blocks[start["contentBlockIndex"]] = {"toolUse": dict(start["start"]["toolUse"])}
        elif "contentBlockDelta" in event:
            index = event["contentBlockDelta"]["contentBlockIndex"]
            delta = event["contentBlockDelta"]["delta"]
            if "text" in delta:
                block = blocks.setdefault(index, {"text": ""})
                block["text"] += delta["text"]
            elif "toolUse" in delta:
                inputs[index] = inputs.get(index, "") + delta["toolUse"]["input"]
        elif "messageStop" in event:
            stop = event["messageStop"]["stopReason"]
    for index, raw in inputs.items():
        blocks[index]["toolUse"]["input"] = json.loads(raw or "{}")
    content = [blocks[i] for i in sorted(blocks)]
    return {"output": {"message": {"role": "assistant", "content": content}}, "stopReason": stop}


def converse_loop(client: Any, prompt: str, stream: bool) -> str:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"text": prompt}]}]
    for _ in range(10):
        request = {
            "modelId": MODEL,
            "messages": messages,
            "system": [{"text": SYSTEM}],
            "toolConfig": tool_config(),
            "inferenceConfig": {"maxTokens": 512},
        }
        response = converse_streamed(client, **request) if stream else client.converse(**request)
        message = response["output"]["message"]
        messages.append(message)
        uses = [block["toolUse"] for block in message["content"] if "toolUse" in block]
        if not uses:
            return "".join(block.get("text", "") for block in message["content"])
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": use["toolUseId"],
                            "content": [{"json": run_tool(use["name"], use["input"])}],
                        }
                    }
                    for use in uses
                ],
            }
        )
    raise RuntimeError("no final answer after 10 model calls")


# -- InvokeModel (Anthropic Messages bodies) --------------------------------------------------


def invoke_streamed(client: Any, body: str) -> dict[str, Any]:
    response = client.invoke_model_with_response_stream(modelId=MODEL, body=body)
    blocks: dict[int, dict[str, Any]] = {}
    inputs: dict[int, str] = {}
    for event in response["body"]:
        chunk = json.loads(event["chunk"]["bytes"])
        index = chunk.get("index")
        if chunk["type"] == "content_block_start":
            blocks[index] = dict(chunk["content_block"])
        elif chunk["type"] == "content_block_delta":
            delta = chunk["delta"]
            if delta["type"] == "text_delta":
                blocks[index]["text"] = blocks[index].get("text", "") + delta["text"]
            elif delta["type"] == "input_json_delta":
                inputs[index] = inputs.get(index, "") + delta["partial_json"]
    for index, raw in inputs.items():
        blocks[index]["input"] = json.loads(raw or "{}")
    return {"role": "assistant", "content": [blocks[i] for i in sorted(blocks)]}


def invoke_loop(client: Any, prompt: str, stream: bool) -> str:
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    tools = [
        {"name": t["name"], "description": t["description"], "input_schema": t["schema"]}
        for t in TOOLS
    ]
    for _ in range(10):
        body = json.dumps(
            {
                "anthropic_version": "bedrock-2023-05-31",
                "max_tokens": 512,
                "system": SYSTEM,
                "messages": messages,
                "tools": tools,
            }
        )
        if stream:
            message = invoke_streamed(client, body)
        else:
            message = json.loads(client.invoke_model(modelId=MODEL, body=body)["body"].read())
        messages.append({"role": "assistant", "content": message["content"]})
        uses = [block for block in message["content"] if block["type"] == "tool_use"]
        if not uses:
            return "".join(b.get("text", "") for b in message["content"] if b["type"] == "text")
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": use["id"],
                        "content": json.dumps(run_tool(use["name"], use["input"])),
                    }
                    for use in uses
                ],
            }
        )
    raise RuntimeError("no final answer after 10 model calls")


# -- retrieval --------------------------------------------------------------------------------


def embed(client: Any, kind: str, texts: list[str]) -> list[list[float]]:
    if kind == "titan":
        vectors = []
        for text in texts:
            body = json.dumps({"inputText": text})
            answer = client.invoke_model(modelId="amazon.titan-embed-text-v2:0", body=body)
            vectors.append(json.loads(answer["body"].read())["embedding"])
        return vectors
    body = json.dumps({"texts": texts, "input_type": "search_query"})
    answer = client.invoke_model(modelId="cohere.embed-english-v3", body=body)
    return list(json.loads(answer["body"].read())["embeddings"])


def nearest(question: list[float], documents: list[list[float]]) -> int:
    def cosine(a: list[float], b: list[float]) -> float:
        dot = sum(x * y for x, y in zip(a, b, strict=False))
        return dot / (math.hypot(*a) * math.hypot(*b) or 1.0)

    scores = [cosine(question, document) for document in documents]
    return scores.index(max(scores))


def main() -> int:
    client = boto3.client("bedrock-runtime")
    prompt = os.environ["FLOWPROOF_PROMPT"]
    kind = os.environ.get("BEDROCK_EMBED")
    if kind:
        question, *documents = embed(client, kind, [prompt, *DOCUMENTS])
        prompt = f"{prompt}\nContext: {DOCUMENTS[nearest(question, documents)]}"
    operation = os.environ.get("BEDROCK_OPERATION", "converse")
    if operation.startswith("converse"):
        print(converse_loop(client, prompt, stream=operation.endswith("_stream")))
    else:
        print(invoke_loop(client, prompt, stream=operation.endswith("_stream")))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:
        print(f"agent error: {type(exc).__name__}: {exc}", file=sys.stderr)
        if os.environ.get("AGENT_ERROR_FILE"):  # what the client made of an error answer
            with open(os.environ["AGENT_ERROR_FILE"], "w") as stream:
                stream.write(str(exc))
        sys.exit(1)
