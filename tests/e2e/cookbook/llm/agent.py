"""Simon Willison's `llm` as a library: one prompt, one Python function as a tool.

`llm`'s OpenAI models build `openai.OpenAI()`, which reads OPENAI_BASE_URL; the key comes
from OPENAI_API_KEY (or `llm keys set openai`). `chain()` runs tool calls until a text answer.
"""

from __future__ import annotations

import os
import sys

import llm


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny, 24 C in {city}"


def main() -> int:
    task = " ".join(sys.argv[1:]) or os.environ["FLOWPROOF_PROMPT"]
    model = llm.get_model("gpt-4o-mini")
    chain = model.chain(task, tools=[get_weather], system="You are a weather assistant.")
    print(chain.text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
