"""The `suite.yaml` model and loader: what every flow below a folder shares.

A suite holds the setup that would otherwise be copied into each spec: environment
variables (`env`, `env_from`) and per-flow hooks (`before_each`, `after_each`). It is loaded
with the spec loader's own machinery, so its errors read exactly like a spec's:
`FILE:LINE: what is wrong. Fix: ...`, unknown keys with "did you mean".
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from flowproof_cli.errors import SpecError
from flowproof_cli.spec.fields import nul_problem, optional_text
from flowproof_cli.spec.loader import (
    _check_duplicates,
    _check_keys,
    _kind,
    _line,
    _to_spec_error,
    compose_yaml,
    pattern_lines,
    read_text,
)
from flowproof_cli.spec.match import MatchSpec
from flowproof_cli.spec.problems import spec_problem

SUITE_FILE = "suite.yaml"
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SuiteSpec(BaseModel):
    """One `suite.yaml`. Every key is optional; an empty file is an empty suite."""

    model_config = ConfigDict(
        extra="forbid", strict=True, title="flowproof suite", populate_by_name=True
    )

    env: dict[str, str] = Field(
        default_factory=dict,
        description="Variables added to every flow's environment; values may use `${VAR}`.",
    )
    env_from: str | None = optional_text(
        "Shell command printing `KEY=VALUE` lines, added to the environment."
    )
    before_each: str | None = optional_text("Shell command run before each flow.")
    after_each: str | None = optional_text("Shell command run after each flow, even a failed one.")
    match: MatchSpec | None = Field(
        default=None,
        description="Match rules for every flow below this folder; a flow's `match:` adds.",
    )

    @field_validator("env")
    @classmethod
    def _variable_names(cls, env: dict[str, str]) -> dict[str, str]:
        for name, value in env.items():
            if not _VARIABLE_NAME.fullmatch(name):
                raise spec_problem(
                    f"`{name}` is not a variable name. Fix: use letters, digits and `_`, "
                    "not starting with a digit",
                    (name,),
                )
            problem = nul_problem(value, f"`env.{name}`")
            if problem is not None:
                raise spec_problem(problem, (name,))
        return env

    @field_validator("env_from", "before_each", "after_each")
    @classmethod
    def _shell_can_take(cls, command: str | None, info: ValidationInfo) -> str | None:
        problem = nul_problem(command or "", f"`{info.field_name}`", "no shell command can hold")
        if problem is not None:
            raise spec_problem(problem)
        return command


def load_suite(path: Path | str) -> SuiteSpec:
    """Read and validate one `suite.yaml`; every problem is a SpecError with file and line."""
    return parse_suite(read_text(path, "the suite file"), str(path))


def parse_suite(text: str, path: str) -> SuiteSpec:
    root, data = compose_yaml(text, path)
    if root is None:
        return SuiteSpec()
    if not isinstance(data, dict):
        raise SpecError(
            f"the top level is a {_kind(root)}, not a mapping. Fix: write `key: value` lines "
            "(`env`, `env_from`, `before_each`, `after_each`, `match`)",
            path=path,
            line=_line(root),
        )
    _check_duplicates(root, path, set())
    _check_keys(root, SuiteSpec, (), path)
    try:
        return SuiteSpec.model_validate(data, context={"source_path": path, **pattern_lines(root)})
    except ValidationError as exc:
        raise _to_spec_error(exc, root, path) from None
