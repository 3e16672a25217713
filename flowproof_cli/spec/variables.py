"""`${VAR}` substitution, done at execution time rather than at load time.

Specs keep `${VAR}` unresolved so that loading, linting and `flowproof schema` never depend on
the caller's environment, and a trace records what the spec said, not a secret it expanded to.

Only the `${NAME}` form is substituted (NAME = letters, digits, `_`, not starting with a digit).
`$NAME`, `$$` and anything else pass through untouched. `${flowproof.NAME}` is a handle that
flowproof itself provides (e.g. `${flowproof.proxy_url}`), never an environment variable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from flowproof_cli.errors import ConfigError

HANDLE_PREFIX = "flowproof."

# A handle may name an MCP server after a second dot: `${flowproof.mcp_url.files-v2}`.
_REFERENCE = re.compile(
    r"\$\{(flowproof\.[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9][A-Za-z0-9_.-]*)?"
    r"|[A-Za-z_][A-Za-z0-9_]*)\}"
)


def find_variables(text: str) -> list[str]:
    """Environment variable names referenced by `text`, in order, without handles."""
    names: list[str] = []
    for match in _REFERENCE.finditer(text):
        name = match.group(1)
        if not name.startswith(HANDLE_PREFIX) and name not in names:
            names.append(name)
    return names


def resolve_variables(
    text: str,
    environ: Mapping[str, str],
    handles: Mapping[str, str] | None = None,
    *,
    where: str | None = None,
) -> str:
    """Substitute `${NAME}` from `environ` and `${flowproof.NAME}` from `handles`.

    An unset variable raises ConfigError naming it and `where` it was used; an unknown
    handle is left as written, so a later stage that knows it can still fill it in.
    """

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name.startswith(HANDLE_PREFIX):
            handle = name[len(HANDLE_PREFIX) :]
            if handles is not None and handle in handles:
                return handles[handle]
            return match.group(0)
        if name in environ:
            return environ[name]
        place = f" (used in {where})" if where else ""
        raise ConfigError(
            f"environment variable {name} is not set{place}. Fix: export {name}=... before "
            f"running flowproof, or remove ${{{name}}} from the spec"
        )

    return _REFERENCE.sub(substitute, text)
