"""One run of a lab inside a network namespace of its own (`unshare -n`), from the checkout:
what egress/lab.py, egress/conftest.py's CLI labs and falsifiability/network_lab.py share.
Stdlib only, so a lab can import it inside the namespace too."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def run_in_namespace(
    argv: list[str], tag: str, *, timeout: float, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run `argv` under `unshare -n`; the JSON of its last stdout line that starts with
    `tag` and a space. A failed run, or one that printed no such line, raises with the tail
    of its output."""
    completed = subprocess.run(
        ["unshare", "-n", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    prefix = tag + " "
    lines = [line for line in completed.stdout.splitlines() if line.startswith(prefix)]
    if completed.returncode != 0 or not lines:
        raise AssertionError(
            f"{tag} run failed ({completed.returncode}):\n{completed.stdout[-4000:]}\n"
            f"{completed.stderr[-4000:]}"
        )
    return dict(json.loads(lines[-1][len(prefix) :]))
