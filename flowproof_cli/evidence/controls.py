"""Controls: the row a control-bearing flow leaves in the run record, and unique ids.

A row says what the flow ASSERTED (`lanes`) apart from what this run ENFORCED
(`containment`), so a pass where containment was not available is never mistaken for a
certified one. `verdict` is one of:

* `pass`: the flow passed;
* `capability-error`: `assert_no_egress` could not certify this run (not Linux, a `url`
  agent, containment refused). A capability claim that cannot be checked is neither a pass
  nor a plain failure of the agent;
* `fail`: anything else, including a flow that did not run (skipped, an error): a control
  that was not demonstrated is not evidenced.

Blocked destinations go into `evidence.blocked` only when this run was contained: they
come from this run's supervisor, never from a trace recorded on another machine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from flowproof_cli.errors import SpecError
from flowproof_cli.spec import yaml_limits
from flowproof_cli.verdict import FlowResult

if TYPE_CHECKING:
    from flowproof_cli.spec.models import FlowSpec

CONTROL_ID = re.compile(r"[a-z0-9._-]+")
VERDICTS = ("pass", "fail", "capability-error")
_TIER_PREFIX = "egress containment: "
_NULL_TAG = "tag:yaml.org,2002:null"


def lanes(spec: FlowSpec) -> list[str]:
    """What the flow asserts at the agent boundary, in a fixed order."""
    asserted = []
    if spec.asserts_no_egress:
        asserted.append("egress")
    if spec.secret_variables:
        asserted.append("secret_leak")
    return asserted


def verdict(result: FlowResult) -> tuple[str, str | None]:
    """The control's verdict and, unless it passed, the one line that explains it."""
    if result.capability_error is not None:
        return "capability-error", f"assert_no_egress: cannot certify: {result.capability_error}"
    if result.status == "passed":
        return "pass", None
    if result.status == "skipped":
        return "fail", f"not run: skipped ({result.skipped})"
    if result.status == "error":
        return "fail", f"error: {_first_line(result.error)}"
    return "fail", _first_line(result.failures[0].text if result.failures else None)


def containment_tier(result: FlowResult) -> str | None:
    """The tier this run was held to (`enforced (linux seccomp)`, `not contained (...)`);
    None when no agent ran."""
    if result.containment is None:
        return None
    return result.containment.removeprefix(_TIER_PREFIX)


def control_row(spec: FlowSpec, result: FlowResult) -> dict[str, Any] | None:
    """The row of the flow's control, or None for a flow without `control:`."""
    control = spec.control
    if control is None:
        return None
    row = _row(control.id, control.title, result, lanes(spec))
    if control.description is not None:
        row["description"] = control.description
    return row


def unloaded_row(declared: DeclaredControl, result: FlowResult) -> dict[str, Any]:
    """The row of a control whose spec never loaded (a bad spec, a crashed worker): it
    failed, and it must not vanish from the record just because its flow could not run."""
    return _row(declared.id, declared.title, result, [])


def _row(
    control_id: str, title: str | None, result: FlowResult, asserted: list[str]
) -> dict[str, Any]:
    outcome, reason = verdict(result)
    evidence: dict[str, Any] = {"trace": str(result.trace_path)}
    if result.egress_blocked is not None:
        evidence["blocked"] = list(result.egress_blocked)
    return {
        "id": control_id,
        "title": title,
        "verdict": outcome,
        "reason": reason,
        "lanes": asserted,
        "containment": containment_tier(result),
        "evidence": evidence,
    }


def _first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else "(no message)"


# -- ids as written, read before any flow runs ---------------------------------------------


@dataclass(frozen=True)
class DeclaredControl:
    """A spec's `control:` as written: read with YAML alone, so that a directory run can
    check ids before any flow runs, and name a control whose spec does not load."""

    id: str
    title: str | None
    path: Path
    line: int


def declared_control(path: Path) -> DeclaredControl | None:
    """The spec's `control.id` (and title) with the id's line; None when the file has no
    readable one (its own load reports why, as that flow's error)."""
    try:  # within the spec limits: a deep, huge or FIFO spec is its own load's error
        root = yaml_limits.compose_spec(path)
    except (OSError, yaml.YAMLError, yaml_limits.YamlRefused):
        return None
    control = _child(root, "control")
    id_node = _child(control, "id")
    if not isinstance(id_node, yaml.ScalarNode) or not CONTROL_ID.fullmatch(str(id_node.value)):
        return None
    title_node = _child(control, "title")
    title = None
    if isinstance(title_node, yaml.ScalarNode) and title_node.tag != _NULL_TAG:
        title = str(title_node.value)
    return DeclaredControl(str(id_node.value), title, path, int(id_node.start_mark.line) + 1)


def check_unique_ids(spec_paths: Iterable[Path]) -> dict[Path, DeclaredControl]:
    """Every spec's declared control; a SpecError (exit 2) at the second use of an id,
    naming the first. Runs before any flow does."""
    found: dict[Path, DeclaredControl] = {}
    by_id: dict[str, DeclaredControl] = {}
    for path in spec_paths:
        declared = declared_control(path)
        if declared is None:
            continue
        first = by_id.get(declared.id)
        if first is not None:
            raise SpecError(
                f"control id `{declared.id}` is already declared by {first.path}:{first.line}; "
                "a control id is unique within a directory run. Fix: give one of the two "
                "controls another id",
                path=str(path),
                line=declared.line,
            )
        by_id[declared.id] = declared
        found[path] = declared
    return found


def _child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for key_node, value_node in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
            return value_node
    return None
