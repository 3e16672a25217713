"""The scripted model the cookbook's traces are recorded against, and a way to re-record them.

    .venv/bin/python -m tests.e2e.cookbook.fake_model              # every committed trace
    .venv/bin/python -m tests.e2e.cookbook.fake_model llm crewai   # some frameworks

Each recording runs in a network namespace of its own with only loopback up (the fake
upstream and flowproof both inside it), so a framework that phones home cannot reach
anything even when its switches are wrong. `record SPEC` is the step that runs inside the
namespace: it serves the fake and records SPEC against it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.conftest import clean_environ
from tests.fakes.bedrock_upstream import ACCESS_KEY, REGION, SECRET_KEY, BedrockFake
from tests.fakes.fake_upstream import (
    DIALECT_CHAT,
    Conversation,
    FakeUpstream,
    Reply,
    city_of,
    conversation_of,
    default_script,
)
from tests.fakes.ollama_upstream import FakeOllama
from tests.fakes.vertex_upstream import VertexUpstream

COOKBOOK = Path(__file__).resolve().parent
REPO = COOKBOOK.parents[2]
FRAMEWORKS = (
    "smolagents",
    "litellm",
    "llamaindex",
    "crewai",
    "llm",
    "adk",
    "adk-vertex",
    "autogen",
    "strands",
    "strands-bedrock",
    "mastra",
    "aider",
    "azure",
    "rag",
    "ollama",
)
#: smolagents hands a tool's result back as a user message, not as a tool message.
OBSERVATION = "Observation:"
#: aider's "whole" edit format (gpt-4o-mini's): its system prompt asks for a *file listing*,
#: and one user message holds the files added to the chat, each a name then a fenced block.
AIDER_LISTING = "*file listing*"
AIDER_FILES = "I have *added these files to the chat*"
AIDER_FILE = re.compile(r"^(\S+)\n```\n(.*?)^```$", re.MULTILINE | re.DOTALL)
#: The weather every tool of the cookbook reports, and the value aider is asked to write.
SUNNY = "sunny, 24 C"


def spec_of(framework: str) -> Path:
    return COOKBOOK / framework / "weather.flow.yaml"


def aider_listing(conversation: Conversation) -> Reply:
    """aider's answer in its whole-file format: each file of the chat again, with the
    task's city set to the fake's weather (`"Nairobi": "cloudy, 18 C"` becomes
    `"Nairobi": "sunny, 24 C"`), so the edit aider applies shows in its repository."""
    task = next((text for text in reversed(conversation.user_texts) if AIDER_FILES not in text), "")
    city = city_of(task)
    files = next((text for text in conversation.user_texts if text.startswith(AIDER_FILES)), "")
    listings = []
    for name, content in AIDER_FILE.findall(files):
        edited = re.sub(rf'("{re.escape(city)}": )"[^"]*"', rf'\1"{SUNNY}"', content)
        if edited != content:
            listings.append(f"{name}\n```\n{edited}```\n")
    if not listings:
        return Reply(text=f"No file here mentions {city}.")
    return Reply(text=f"I set the weather in {city} to {SUNNY}.\n\n" + "".join(listings))


def cookbook_script(dialect: str, body: dict[str, Any]) -> Reply:
    """The fake's default tool loop, plus smolagents' ending (a `final_answer` tool call
    once the model has seen an observation: smolagents takes no text answer) and aider's
    edit (a file listing: aider is a coding CLI and calls no tools)."""
    conversation = conversation_of(dialect, body)
    if dialect == DIALECT_CHAT and AIDER_LISTING in conversation.system:
        return aider_listing(conversation)
    if (
        dialect == DIALECT_CHAT
        and "final_answer" in conversation.tools
        and conversation.last_user_text.startswith(OBSERVATION)
    ):
        city = city_of(conversation.user_texts[0])
        answer = json.dumps({"answer": f"The weather in {city} is sunny, 24 C."})
        return Reply(tool_calls=[("final_answer", answer)])
    return default_script(dialect, body)


def netns_argv(argv: Sequence[str]) -> list[str]:
    """`argv` in a new network namespace whose only interface, loopback, is up."""
    return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "netns", *argv]


#: Frameworks whose model is on Vertex AI: recorded against the fake Vertex endpoint (which
#: takes only its bearer token) through FLOWPROOF_UPSTREAM_VERTEX.
VERTEX = frozenset({"adk-vertex"})
#: The record key of every recording (a Vertex one is its OAuth token).
RECORD_KEY = "sk-cookbook"
#: Frameworks recorded against the fake Bedrock runtime, with the credentials it checks.
BEDROCK = ("strands-bedrock",)


def record_bedrock(spec: Path) -> int:
    """Record `spec` against the fake Bedrock runtime, flowproof signing with the fake's
    credentials (the agent gets placeholders)."""
    with BedrockFake() as fake:
        completed = subprocess.run(
            [sys.executable, "-m", "flowproof_cli", "record", str(spec)],
            env={
                **clean_environ(),
                "FLOWPROOF_UPSTREAM_BEDROCK": fake.base_url,
                "FLOWPROOF_AGENT_UPSTREAM": fake.base_url,
                "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_REGION": REGION,
            },
            cwd=REPO,
            check=False,
        )
    return completed.returncode


#: Frameworks recorded against the fake Ollama server: a local Ollama takes no key.
OLLAMA = ("ollama",)


def record_ollama(spec: Path) -> int:
    """Record `spec` against the fake Ollama, its only upstream FLOWPROOF_UPSTREAM_OLLAMA."""
    with FakeOllama() as fake:
        completed = subprocess.run(
            [sys.executable, "-m", "flowproof_cli", "record", str(spec)],
            env={**clean_environ(), "FLOWPROOF_UPSTREAM_OLLAMA": fake.base_url},
            cwd=REPO,
            check=False,
        )
    return completed.returncode


def record_here(spec: Path) -> int:
    """Record `spec` against the scripted fake, in this process's network namespace."""
    if spec.parent.name in BEDROCK:
        return record_bedrock(spec)
    if spec.parent.name in OLLAMA:
        return record_ollama(spec)
    vertex = spec.parent.name in VERTEX
    fake = (
        VertexUpstream(token=RECORD_KEY, script=cookbook_script)
        if vertex
        else FakeUpstream(script=cookbook_script)
    )
    with fake:
        variables = (
            {"FLOWPROOF_UPSTREAM_VERTEX": fake.base_url, "FLOWPROOF_KEY_VERTEX": RECORD_KEY}
            if vertex
            else {
                "FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1",
                "FLOWPROOF_AGENT_KEY": RECORD_KEY,
            }
        )
        completed = subprocess.run(
            [sys.executable, "-m", "flowproof_cli", "record", str(spec)],
            env={**clean_environ(), **variables},
            cwd=REPO,
            check=False,
        )
    return completed.returncode


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["record"] and len(argv) == 2:
        return record_here(Path(argv[1]))
    unknown = sorted(set(argv) - set(FRAMEWORKS))
    if unknown:
        print(f"unknown framework(s): {', '.join(unknown)}; known: {', '.join(FRAMEWORKS)}")
        return 2
    failed = 0
    for framework in argv or FRAMEWORKS:
        command = [sys.executable, "-m", "tests.e2e.cookbook.fake_model", "record"]
        code = subprocess.run(
            netns_argv([*command, str(spec_of(framework))]), cwd=REPO, check=False
        ).returncode
        failed += code != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
