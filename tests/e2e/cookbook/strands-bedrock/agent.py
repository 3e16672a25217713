"""A Strands agent with one tool, on Strands' default model provider: Amazon Bedrock.

`BedrockModel` builds a boto3 `bedrock-runtime` client, which reads
AWS_ENDPOINT_URL_BEDROCK_RUNTIME, the region and the credentials from the environment, and
streams every turn with ConverseStream.
"""

from __future__ import annotations

import os
import sys

from strands import Agent, tool
from strands.models.bedrock import BedrockModel


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city to look up.
    """
    return f"sunny, 24 C in {city}"


def main() -> int:
    task = sys.argv[1] if len(sys.argv) > 1 else os.environ["FLOWPROOF_PROMPT"]
    agent = Agent(
        model=BedrockModel(model_id="us.anthropic.claude-3-5-haiku-20241022-v1:0"),
        tools=[get_weather],
        system_prompt="You are a weather assistant. Use the tools.",
        callback_handler=None,  # the default handler prints the streamed text as it comes
    )
    print(agent(task))
    return 0


if __name__ == "__main__":
    sys.exit(main())
