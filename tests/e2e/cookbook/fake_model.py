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
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.conftest import clean_environ
from tests.fakes.fake_upstream import (
    DIALECT_CHAT,
    FakeUpstream,
    Reply,
    city_of,
    conversation_of,
    default_script,
)

COOKBOOK = Path(__file__).resolve().parent
REPO = COOKBOOK.parents[2]
FRAMEWORKS = ("smolagents", "litellm", "llamaindex", "crewai", "llm")
#: smolagents hands a tool's result back as a user message, not as a tool message.
OBSERVATION = "Observation:"


def spec_of(framework: str) -> Path:
    return COOKBOOK / framework / "weather.flow.yaml"


def cookbook_script(dialect: str, body: dict[str, Any]) -> Reply:
    """The fake's default tool loop, plus smolagents' ending: a `final_answer` tool call
    once the model has seen an observation (smolagents takes no text answer)."""
    conversation = conversation_of(dialect, body)
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


def record_here(spec: Path) -> int:
    """Record `spec` against the scripted fake, in this process's network namespace."""
    with FakeUpstream(script=cookbook_script) as fake:
        completed = subprocess.run(
            [sys.executable, "-m", "flowproof_cli", "record", str(spec)],
            env={
                **clean_environ(),
                "FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1",
                "FLOWPROOF_AGENT_KEY": "sk-cookbook",
            },
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
