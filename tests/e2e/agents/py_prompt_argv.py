"""Real agent that takes its task as its one command-line argument, as coding CLIs do.

It prints the arguments it got as JSON, then exits 5 unless exactly one arrived: a task
split on its spaces or stripped of its quotes must fail the flow. With TASK_VARIABLE set, the
task comes from that environment variable instead and no argument may arrive; with
TASK_FILE_VARIABLE set, from the file that variable names. The model is the `openai` SDK
pointed at OPENAI_BASE_URL; the task is its one user message.
"""

from __future__ import annotations

import json
import os
import sys

from openai import OpenAI


def main() -> int:
    arguments = sys.argv[1:]
    print(json.dumps(arguments))
    variable = os.environ.get("TASK_VARIABLE")
    file_variable = os.environ.get("TASK_FILE_VARIABLE")
    if file_variable:
        with open(os.environ[file_variable], encoding="utf-8") as stream:
            task, expected = stream.read(), 0
    elif variable:
        task, expected = os.environ.get(variable, ""), 0
    else:
        task, expected = (arguments[0] if arguments else ""), 1
    if len(arguments) != expected:
        print(f"agent: expected {expected} argument(s), got {arguments!r}", file=sys.stderr)
        return 5
    client = OpenAI(max_retries=0)
    response = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": task}]
    )
    print(response.choices[0].message.content)
    return 0


if __name__ == "__main__":
    sys.exit(main())
