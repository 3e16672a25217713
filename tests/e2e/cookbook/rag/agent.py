"""A LlamaIndex RAG agent: a VectorStoreIndex over the station reports in corpus/, searched by
a FunctionAgent's tool, with OpenAI embeddings and chat.

Building the index embeds every report (`POST /v1/embeddings`); each tool call embeds its
query and hands the nearest reports to the model. llama-index-llms-openai and
llama-index-embeddings-openai read OPENAI_API_BASE (not OPENAI_BASE_URL) and OPENAI_API_KEY.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.embeddings.openai import OpenAIEmbedding
from llama_index.llms.openai import OpenAI

CORPUS = Path(__file__).resolve().parent / "corpus"


async def main() -> int:
    task = sys.argv[1] if len(sys.argv) > 1 else os.environ["FLOWPROOF_PROMPT"]
    # Sorted, so the index embeds the reports in the same order on every run, and named by
    # file name only (SimpleDirectoryReader's metadata embeds the absolute path, which
    # differs between checkouts, so a replay elsewhere would diverge).
    reports = [
        Document(text=path.read_text(), metadata={"file_name": path.name})
        for path in sorted(CORPUS.glob("*.txt"))
    ]
    index = VectorStoreIndex.from_documents(
        reports, embed_model=OpenAIEmbedding(model="text-embedding-3-small")
    )
    retriever = index.as_retriever(similarity_top_k=2)

    def get_weather(city: str) -> str:
        """Current weather for a city, from the station reports."""
        found = retriever.retrieve(f"weather report for {city}")
        return "\n".join(result.node.get_content() for result in found)

    agent = FunctionAgent(
        tools=[get_weather],
        llm=OpenAI(model="gpt-4o-mini"),
        system_prompt="You are a weather assistant. Answer from the station reports.",
    )
    response = await agent.run(task)
    print(response)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
