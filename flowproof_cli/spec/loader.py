"""Load a `*.flow.yaml` into a FlowSpec; every problem becomes a SpecError with file and line.

YAML is composed into nodes first (nodes keep their marks), then constructed into data. Two
passes use the nodes: a key check that names unknown or duplicate keys at their own line (with
"did you mean"), and a mapping from a pydantic error `loc` to the line of that node.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from flowproof_cli.errors import SpecError
from flowproof_cli.quoting import closest_name, odd_note, skeleton, unmasked
from flowproof_cli.spec import yaml_limits as limits
from flowproof_cli.spec.models import FlowSpec
from flowproof_cli.spec.problems import SPEC_ERROR_TYPE
from flowproof_cli.spec.steps import BARE_STEP_KINDS, STEP_KINDS, UserStep

_Loc = tuple[str | int, ...]


class _SpecYamlLoader(limits.GuardedConstructor, limits.NestingLimit, yaml.SafeLoader):
    """SafeLoader that keeps timestamps as text (so mock results stay JSON), refuses unknown
    tags by name and nesting beyond the limit while composing."""


limits.guard(_SpecYamlLoader)


def read_text(path: Path | str, what: str = "the file") -> str:
    """A YAML file's text; a missing, unreadable, oversized or non-UTF-8 one is a SpecError
    naming it (a FIFO or a device is refused before it is opened, so nothing blocks)."""
    try:
        return limits.decode_utf8(limits.read_limited(Path(path), limits.MAX_SPEC_BYTES))
    except FileNotFoundError:
        if os.path.islink(path):
            raise SpecError(
                f"it is a symbolic link to {os.readlink(path)}, which does not exist. Fix: "
                "point the link at the file, or remove it",
                path=str(path),
            ) from None
        raise SpecError("file not found. Fix: check the path", path=str(path)) from None
    except OSError as exc:
        raise SpecError(
            f"cannot read {what}: {exc.strerror}. Fix: check the path and its permissions",
            path=str(path),
        ) from None
    except limits.YamlRefused as exc:
        raise SpecError(
            f"cannot read {what}: {exc.message}. {exc.fix}", path=str(path), line=exc.line
        ) from None


def load_spec(path: Path | str) -> FlowSpec:
    """Read and validate one spec file."""
    return parse_spec(read_text(path), str(path))


def parse_spec(text: str, path: str) -> FlowSpec:
    """Validate spec text; `path` is used in error messages and kept as `source_path`."""
    root, data = _compose(text, path)
    _check_duplicates(root, path, set())
    _check_keys(root, FlowSpec, (), path)
    steps_node = _child(root, "steps")
    step_lines = (
        [_line(item) for item in steps_node.value]
        if isinstance(steps_node, yaml.SequenceNode)
        else []
    )
    faults_node = _child(root, "faults")
    fault_lines = (
        [_line(item) for item in faults_node.value]
        if isinstance(faults_node, yaml.SequenceNode)
        else []
    )
    context = {
        "source_path": path,
        "step_lines": step_lines,
        "fault_lines": fault_lines,
        **pattern_lines(root),
    }
    try:
        return FlowSpec.model_validate(data, context=context)
    except ValidationError as exc:
        raise _to_spec_error(exc, root, path) from None


def compose_yaml(text: str, path: str) -> tuple[yaml.Node | None, Any]:
    """The root node (for lines; None for an empty file) and the data built from it.

    Shared by every YAML file flowproof reads (specs, suites); a YAML syntax error, and YAML
    beyond the limits of `yaml_limits` (size, nesting, aliases, tags), become a SpecError
    with the file and the line, before any cost is paid for them."""
    if len(text) > limits.MAX_SPEC_BYTES:  # text handed over in-process, not read here
        raise SpecError(
            f"the text is over {limits.mb(limits.MAX_SPEC_BYTES)}, the limit. {limits.TOO_BIG_FIX}",
            path=path,
            line=1,
        )
    try:
        return _compose_checked(text)
    except yaml.reader.ReaderError as exc:
        raise _refused(limits.control_character(exc, text), path) from None
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, path) from None
    except limits.YamlRefused as exc:
        raise _refused(exc, path) from None


def _compose_checked(text: str) -> tuple[yaml.Node | None, Any]:
    loader = _SpecYamlLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None
        limits.check_graph(root, max_depth=limits.MAX_SPEC_DEPTH)
        limits.check_surrogates(root)
        return root, loader.construct_document(root)
    finally:
        loader.dispose()


def _refused(exc: limits.YamlRefused, path: str) -> SpecError:
    return SpecError(f"{exc.message}. {exc.fix}", path=path, line=exc.line or 1)


def _compose(text: str, path: str) -> tuple[yaml.MappingNode, Any]:
    """The root node (for lines) and the data built from it (for validation)."""
    root, data = compose_yaml(text, path)
    if root is None:
        raise SpecError(
            "the file is empty. Fix: write a mapping with `name`, `app`, `agent` and `steps`",
            path=path,
            line=1,
        )
    if not isinstance(root, yaml.MappingNode):
        raise SpecError(
            f"the top level is a {_kind(root)}, not a mapping. Fix: write `key: value` lines "
            "(`name`, `app`, `agent`, `steps`, ...)",
            path=path,
            line=_line(root),
        )
    return root, data


def _yaml_error(exc: yaml.YAMLError, path: str) -> SpecError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark is not None else None
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    what = f"{context}, {problem}" if context else str(problem)
    context_mark = getattr(exc, "context_mark", None)
    if context and context_mark is not None and mark is not None and context_mark.line != mark.line:
        what += f" (it starts at line {context_mark.line + 1})"
    return SpecError(
        f"invalid YAML: {what}. Fix: check indentation and quoting on this line (quote values "
        "containing `: ` or starting with `{`, `[`, `*`, `&`, `!`, `%`, `@`)",
        path=path,
        line=line,
    )


# --- unknown and duplicate keys --------------------------------------------------------------


def _check_duplicates(node: yaml.Node, path: str, visited: set[int]) -> None:
    """YAML keeps the last of two equal keys silently; a spec must not."""
    if id(node) in visited:
        return
    visited.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                if key_node.value in seen:
                    raise SpecError(
                        f"duplicate key `{key_node.value}`. Fix: keep only one of them",
                        path=path,
                        line=_line(key_node),
                    )
                seen.add(key_node.value)
            _check_duplicates(value_node, path, visited)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _check_duplicates(item, path, visited)


def _check_keys(node: yaml.Node, model: type[BaseModel], loc: _Loc, path: str) -> None:
    """Reject keys the model does not know, at the key's own line, naming the allowed ones."""
    if not isinstance(node, yaml.MappingNode):
        return  # a wrong type is reported by pydantic, with its loc
    allowed = {(info.alias or name): info for name, info in model.model_fields.items()}
    where = "at the top level" if not loc else f"in `{_dotted(loc)}`"
    for key_node, value_node in node.value:
        key = _key_text(key_node, path)
        info = allowed.get(key)
        if info is None:
            raise SpecError(
                f"unknown key `{unmasked(key)}`{_odd(key, allowed)} {where}."
                f"{_did_you_mean(key, allowed)} Fix: use one of the "
                f"allowed keys: {', '.join(allowed)}",
                path=path,
                line=_line(key_node),
            )
        if key == "steps" and model is FlowSpec:
            _check_steps(value_node, path)
            continue
        annotation = _without_none(info.annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            _check_keys(value_node, annotation, (*loc, key), path)
        elif get_origin(annotation) is list and isinstance(value_node, yaml.SequenceNode):
            (item_type,) = get_args(annotation)
            if isinstance(item_type, type) and issubclass(item_type, BaseModel):
                for index, item in enumerate(value_node.value):
                    _check_keys(item, item_type, (*loc, key, index), path)


def _without_none(annotation: Any) -> Any:
    """`Model | None` -> `Model`, so optional sub-mappings get their keys checked too."""
    members = [arg for arg in get_args(annotation) if arg is not type(None)]
    if get_origin(annotation) in (Union, UnionType) and len(members) == 1:
        return members[0]
    return annotation


def _check_steps(node: yaml.Node, path: str) -> None:
    if not isinstance(node, yaml.SequenceNode):
        return
    kinds = ", ".join(STEP_KINDS)
    for index, item in enumerate(node.value):
        number = index + 1
        if isinstance(item, yaml.ScalarNode) and item.value in BARE_STEP_KINDS:
            continue  # a bare step such as `- assert_no_egress`
        if not isinstance(item, yaml.MappingNode):
            scalar = _kind(item) == "scalar"
            bare = _did_you_mean(str(item.value), BARE_STEP_KINDS) if scalar else ""
            raise SpecError(
                f"step {number} is a {_kind(item)}, not a one-key mapping.{bare} Fix: write "
                f"`- KIND: VALUE` with KIND one of {kinds}",
                path=path,
                line=_line(item),
            )
        keys = [_key_text(key_node, path) for key_node, _ in item.value]
        if len(keys) != 1:
            what = "no key" if not keys else f"{len(keys)} keys ({', '.join(keys)})"
            raise SpecError(
                f"step {number} has {what}; a step has exactly one. Fix: split it into "
                f"separate `- KIND: VALUE` entries, KIND one of {kinds} (is the indentation of "
                "the next line off?)",
                path=path,
                line=_line(item),
            )
        if keys[0] not in STEP_KINDS:
            raise SpecError(
                f"unknown step `{unmasked(keys[0])}`{_odd(keys[0], STEP_KINDS)} in step {number}."
                f"{_did_you_mean(keys[0], STEP_KINDS)} Fix: use one of {kinds}",
                path=path,
                line=_line(item.value[0][0]),
            )
        if keys[0] == UserStep.kind:
            _check_user_text(item.value[0][0], item.value[0][1], path)


_YAML_TAG = "tag:yaml.org,2002:"


def _check_user_text(key_node: yaml.Node, node: yaml.Node, path: str) -> None:
    """A `user:` message YAML reads as something else than text (`no` is false), named as
    written with the quoting fix; the model refuses the same values without the spelling."""
    if not isinstance(node, yaml.ScalarNode) or node.tag not in (
        f"{_YAML_TAG}bool",
        f"{_YAML_TAG}int",
        f"{_YAML_TAG}float",
        f"{_YAML_TAG}null",
    ):
        return
    written = str(node.value)
    if node.tag.endswith("null"):
        problem = (
            f"`user:` has no text (YAML read {f'`{written}`' if written else 'it'} as null). "
            "Fix: write the message after `user:`, e.g. `user: My order 4711 has not arrived.`"
        )
    else:
        read = (
            f"the boolean {str(written.lower() in ('yes', 'true', 'on')).lower()}"
            if node.tag.endswith("bool")
            else "a number"
        )
        problem = (
            f"`user:` must be text; YAML read `{written}` as {read}. Fix: quote it: "
            f'user: "{written}"'
        )
    raise SpecError(problem, path=path, line=_line(key_node))


def _did_you_mean(key: str, allowed: Any) -> str:
    close = closest_name(key, allowed)
    return f" Did you mean `{unmasked(close)}`?" if close is not None else ""


def _odd(key: str, allowed: Any) -> str:
    """After an unknown key: its characters that only look like a known key's, by code point."""
    close = closest_name(key, allowed)
    return odd_note(key, close if close is not None else skeleton(key))


def _key_text(key_node: yaml.Node, path: str) -> str:
    if not isinstance(key_node, yaml.ScalarNode):
        raise SpecError(
            f"a {_kind(key_node)} is used as a key. Fix: keys are plain words like `name`",
            path=path,
            line=_line(key_node),
        )
    return str(key_node.value)


# --- pydantic errors -> file:line: message. Fix: ... --------------------------------------


def _to_spec_error(exc: ValidationError, root: yaml.Node, path: str) -> SpecError:
    error = exc.errors()[0]
    loc: _Loc = tuple(error["loc"])
    if error["type"] == SPEC_ERROR_TYPE:
        ctx = error.get("ctx") or {}
        loc = (*loc, *ctx.get("at", ()))
        message = str(ctx.get("detail", error["msg"]))
    else:
        message = _describe(error, loc)
    more = exc.error_count() - 1
    if more:
        message += f" ({more} more problem(s) after this one)"
    return SpecError(message, path=path, line=_line_of(root, loc))


def _describe(error: ErrorDetails, loc: _Loc) -> str:
    kind = error["type"]
    field = f"`{_dotted(loc)}`" if loc else "the spec"
    value = error.get("input")
    if kind == "missing":
        key = loc[-1] if loc else "?"
        parent = f"`{_dotted(loc[:-1])}`" if len(loc) > 1 else "the top level"
        return f"missing required key `{key}` in {parent}. Fix: add `{key}: ...`"
    if kind == "literal_error":
        expected = (error.get("ctx") or {}).get("expected", "")
        return f"{field} is {value!r} but must be {expected}. Fix: write `{loc[-1]}: {expected}`"
    if kind in ("string_type", "string_too_short"):
        return (
            f"{field} must be non-empty text, got {value!r}. Fix: write text, and quote values "
            "YAML reads as something else (yes, no, on, off, numbers, null)"
        )
    if kind in ("greater_than", "float_type", "float_parsing", "finite_number"):
        key = loc[-1] if loc and isinstance(loc[-1], str) else "timeout"
        example = f"{key}: {60 if key == 'call_timeout' else 300}"
        return (
            f"{field} must be a finite number of seconds > 0, got {value!r}. Fix: e.g. `{example}`"
        )
    if kind == "bool_type":
        return f"{field} must be true or false, got {value!r}. Fix: write `true` or `false`"
    if kind == "list_type":
        return (
            f"{field} must be a list, got {type(value).__name__}. Fix: write indented "
            "`- item` lines under it"
        )
    if kind in ("dict_type", "model_type"):
        return (
            f"{field} must be a mapping, got {type(value).__name__}. Fix: write indented "
            "`key: value` lines under it"
        )
    return f"{field}: {error['msg']}. Fix: see docs/spec.md or `flowproof schema`"


def _line_of(root: yaml.Node, loc: _Loc) -> int:
    """Line of the deepest node `loc` reaches; a key's own line when it ends on a key."""
    node: yaml.Node = root
    line = _line(root)
    previous: str | int | None = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(part):
                    node, line = value_node, _line(key_node)
                    break
            else:
                if part == previous:  # a step's union tag repeats its key
                    continue
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if not 0 <= part < len(node.value):
                return line
            node = node.value[part]
            line = _line(node)
        else:
            return line
        previous = part
    return line


def pattern_lines(root: yaml.Node | None) -> dict[str, list[int]]:
    """Validation context: the line of each `match.normalize` entry's pattern, so a pattern
    that runs past its budget is named at its line."""
    match = _child(root, "match") if isinstance(root, yaml.MappingNode) else None
    entries = _child(match, "normalize") if isinstance(match, yaml.MappingNode) else None
    if not isinstance(entries, yaml.SequenceNode):
        return {}
    lines = []
    for item in entries.value:
        pattern = _child(item, "pattern") if isinstance(item, yaml.MappingNode) else None
        lines.append(_line(pattern if pattern is not None else item))
    return {"normalize_lines": lines}


def _child(node: yaml.MappingNode, key: str) -> yaml.Node | None:
    for key_node, value_node in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
            return value_node
    return None


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.SequenceNode):
        return "list"
    if isinstance(node, yaml.MappingNode):
        return "mapping"
    return "scalar"


def _dotted(loc: _Loc) -> str:
    """`("steps", 2, "prompt", "prompt")` -> `steps.2.prompt` (the union tag repeats the key)."""
    parts: list[str] = []
    for part in loc:
        if not parts or parts[-1] != str(part):
            parts.append(str(part))
    return ".".join(parts)
