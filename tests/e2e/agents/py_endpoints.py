"""Real agent: a retrieval agent that calls the endpoints around chat with its provider's SDK.

`py_endpoints.py openai`: openai-python lists the models, embeds the question and a document
(the SDK's default base64 encoding), moderates the question, completes it with the legacy
completions API (`ENDPOINT_STREAM=1`: streamed), then asks chat with what it found.
`py_endpoints.py anthropic`: anthropic-python lists the models, counts the tokens of its
message, then sends it. `py_endpoints.py gemini`: google-genai embeds the question (the SDK
sends `:batchEmbedContents`), counts its tokens, then generates. Each SDK reads its base URL
and key variables itself (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL). Every
answer the endpoints give goes into the chat request, so a replay that passes served them
from the trace; the prompt is the question, so changing it changes every endpoint request.
"""

from __future__ import annotations

import os
import sys

QUESTION = os.environ.get("FLOWPROOF_PROMPT", "What is the refund policy?")
DOCUMENT = "Refunds are granted within 30 days of purchase."


def openai_agent() -> str:
    from openai import OpenAI

    client = OpenAI(max_retries=0)
    models = [model.id for model in client.models.list()]
    vectors = client.embeddings.create(model="text-embedding-3-small", input=[QUESTION, DOCUMENT])
    assert len(vectors.data) == 2 and all(len(item.embedding) > 0 for item in vectors.data)
    score = sum(a * b for a, b in zip(vectors.data[0].embedding, vectors.data[1].embedding))
    verdict = client.moderations.create(model="omni-moderation-latest", input=QUESTION)
    if os.environ.get("ENDPOINT_STREAM") == "1":
        stream = client.completions.create(
            model="gpt-3.5-turbo-instruct", prompt=QUESTION, max_tokens=32, stream=True
        )
        completed = "".join(chunk.choices[0].text for chunk in stream if chunk.choices)
    else:
        completion = client.completions.create(
            model="gpt-3.5-turbo-instruct", prompt=QUESTION, max_tokens=32
        )
        completed = completion.choices[0].text
    context = (
        f"models: {len(models)}; similarity {score:.4f}; "
        f"flagged: {verdict.results[0].flagged}; draft:{completed}"
    )
    answer = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": f"Answer from the context. {context}"},
            {"role": "user", "content": QUESTION},
        ],
    )
    return str(answer.choices[0].message.content)


def anthropic_agent() -> str:
    from anthropic import Anthropic

    client = Anthropic(max_retries=0)
    models = [model.id for model in client.models.list(limit=5)]
    messages = [{"role": "user", "content": QUESTION}]
    counted = client.messages.count_tokens(model="claude-sonnet-4-5", messages=messages)
    reply = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"{len(models)} models; the question is {counted.input_tokens} tokens.",
        messages=messages,
    )
    return "".join(block.text for block in reply.content if block.type == "text")


def gemini_agent() -> str:
    from google import genai
    from google.genai import types

    client = genai.Client()
    embedded = client.models.embed_content(
        model="gemini-embedding-001", contents=[QUESTION, DOCUMENT]
    )
    assert embedded.embeddings is not None and len(embedded.embeddings) == 2
    first = embedded.embeddings[0].values or []
    second = embedded.embeddings[1].values or []
    score = sum(a * b for a, b in zip(first, second))
    counted = client.models.count_tokens(model="gemini-2.5-flash", contents=QUESTION)
    reply = client.models.generate_content(
        model="gemini-2.5-flash",
        contents=QUESTION,
        config=types.GenerateContentConfig(
            system_instruction=f"similarity {score:.4f}; {counted.total_tokens} tokens."
        ),
    )
    return str(reply.text)


AGENTS = {"openai": openai_agent, "anthropic": anthropic_agent, "gemini": gemini_agent}

if __name__ == "__main__":
    print(AGENTS[sys.argv[1]]())
