"""`${VAR}` substitution, done at execution time rather than at load time.

Specs keep `${VAR}` unresolved so that loading, linting and `flowproof schema` never depend on
the caller's environment, and a trace records what the spec said, not a secret it expanded to.

Only the `${NAME}` form is substituted (NAME = letters, digits, `_`, not starting with a digit).
`$NAME`, `$$` and anything else pass through untouched. `${flowproof.NAME}` is a handle that
flowproof itself provides (e.g. `${flowproof.proxy_url}`), never an environment variable.
`${FLOWPROOF_PROMPT}` is refused: flowproof sets that variable for the agent, it never reads
it, and a spec that wants the task writes `${flowproof.prompt}` (likewise
`${FLOWPROOF_PROMPT_FILE}` and `${flowproof.prompt_file}`). In a conversation,
`${flowproof.message}` and `${flowproof.message_json}` (a turn's text, raw or as a JSON
string literal) are filled in `agent.conversation.send` only.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping

from flowproof_cli.errors import ConfigError

HANDLE_PREFIX = "flowproof."
PROMPT_HANDLE = "prompt"  # `${flowproof.prompt}`: the joined task
PROMPT_VARIABLE = "FLOWPROOF_PROMPT"  # what the agent reads; a spec cannot
PROMPT_FILE_HANDLE = "prompt_file"  # `${flowproof.prompt_file}`: the file holding the task
PROMPT_FILE_VARIABLE = "FLOWPROOF_PROMPT_FILE"  # the same file, for the agent
MESSAGE_HANDLE = "message"  # `${flowproof.message}`: a conversation turn's text
MESSAGE_JSON_HANDLE = "message_json"  # `${flowproof.message_json}`: it as a JSON string literal
#: The handles of a conversation turn, filled only in `agent.conversation.send`.
MESSAGE_HANDLES: tuple[str, ...] = (MESSAGE_HANDLE, MESSAGE_JSON_HANDLE)
_SET_FOR_THE_AGENT = {
    PROMPT_VARIABLE: "the task",
    PROMPT_FILE_VARIABLE: "the path of the file holding the task",
}

# A handle may name an MCP server after a second dot: `${flowproof.mcp_url.files-v2}`.
_REFERENCE = re.compile(
    r"\$\{(flowproof\.[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9][A-Za-z0-9_.-]*)?"
    r"|[A-Za-z_][A-Za-z0-9_]*)\}"
)


_MARK = "\x00"
_HELD = re.compile(f"{_MARK}([0-9]+){_MARK}")


def find_handles(text: str) -> list[str]:
    """Handle names referenced by `text` (`proxy_url` for `${flowproof.proxy_url}`), in order."""
    names: list[str] = []
    for match in _REFERENCE.finditer(text):
        name = match.group(1)
        if name.startswith(HANDLE_PREFIX) and name[len(HANDLE_PREFIX) :] not in names:
            names.append(name[len(HANDLE_PREFIX) :])
    return names


def closest_handle(name: str, known: Collection[str]) -> str | None:
    """The known handle `name` is most likely a misspelling of, if any is close enough."""
    matches = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return matches[0] if matches else None


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
        place = f" (used in {where})" if where else ""
        if name in _SET_FOR_THE_AGENT:
            handle = PROMPT_HANDLE if name == PROMPT_VARIABLE else PROMPT_FILE_HANDLE
            raise ConfigError(
                f"${{{name}}}{place} is the variable flowproof sets for the agent, not one a "
                f"spec can read. Fix: write ${{flowproof.{handle}}} instead: "
                f"{_SET_FOR_THE_AGENT[name]}, as one argument in agent.command or as a value "
                "in agent.env"
            )
        if name in environ:
            return environ[name]
        raise ConfigError(
            f"environment variable {name} is not set{place}. Fix: export {name}=... before "
            f"running flowproof, or remove ${{{name}}} from the spec"
        )

    return _REFERENCE.sub(substitute, text)


def resolve_handles(text: str, handles: Mapping[str, str]) -> str:
    """Substitute only the `${flowproof.NAME}` handles in `handles`; leave the rest as written."""

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name.startswith(HANDLE_PREFIX) and name[len(HANDLE_PREFIX) :] in handles:
            return handles[name[len(HANDLE_PREFIX) :]]
        return match.group(0)

    return _REFERENCE.sub(substitute, text)


def hold_handles(text: str) -> tuple[str, list[str]]:
    """`text` with every handle reference replaced by an opaque token, and the references.

    The token (NUL, index, NUL) contains no space, quote or `$`, so a later word split keeps
    it whole inside its word and `${VAR}` substitution never touches it; a NUL cannot come
    from the environment, and an argument holding one could not be passed to exec anyway.
    """
    held: list[str] = []

    def hold(match: re.Match[str]) -> str:
        if not match.group(1).startswith(HANDLE_PREFIX):
            return match.group(0)
        held.append(match.group(0))
        return f"{_MARK}{len(held) - 1}{_MARK}"

    return _REFERENCE.sub(hold, text), held


def release_handles(text: str, held: list[str], handles: Mapping[str, str]) -> str:
    """Put back the references `hold_handles` took out, each resolved from `handles`."""

    def release(match: re.Match[str]) -> str:
        index = int(match.group(1))
        return resolve_handles(held[index], handles) if index < len(held) else match.group(0)

    return _HELD.sub(release, text)
