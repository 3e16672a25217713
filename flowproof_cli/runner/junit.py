"""JUnit XML for a directory run, the format every CI system can display.

`<testsuites>` holds one `<testsuite>` (both carry the tests/failures/errors/skipped counts and
the time); each flow is a `<testcase>` whose classname is its spec path relative to the run's
directory and whose name is the flow's name, with `<failure>`, `<error>` or `<skipped>`.
Nothing but the times depends on when or where it ran, so two runs of the same flows give the
same file modulo `time`.

A conversation stays one testcase: the suite's counts are flows, as the CLI's summary and the
exit code count them, and a turn is not a test a viewer could rerun or quarantine alone. Its
failure's message starts with the turns that failed (`turns: 1 passed, 1 failed
(conversation turn 2 ("..."))`), the one line every viewer shows, and its body ends with
each turn and its verdict. (Per-turn data as testcase `<properties>` was not chosen: the
common JUnit schema does not allow them there and most viewers drop them.)
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from flowproof_cli.evidence.records import FOLDER, flowproof_folder
from flowproof_cli.verdict import FlowResult

JUNIT_PATH = FOLDER / "suite-junit.xml"
# Characters XML 1.0 cannot hold at all (an agent's output may contain ANSI escapes).
_NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _text(value: str | None) -> str:
    return _NOT_XML.sub("\ufffd", value or "")


def junit_xml(results: Sequence[FlowResult], root: Path, *, elapsed_s: float) -> str:
    counts = {
        "tests": str(len(results)),
        "failures": str(sum(result.status == "failed" for result in results)),
        "errors": str(sum(result.status == "error" for result in results)),
        "skipped": str(sum(result.status == "skipped" for result in results)),
        "time": f"{elapsed_s:.3f}",
    }
    suites = ET.Element("testsuites", {"name": "flowproof", **counts})
    suite = ET.SubElement(suites, "testsuite", {"name": str(root), **counts})
    for result in results:
        suite.append(_testcase(result, root))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _testcase(result: FlowResult, root: Path) -> ET.Element:
    case = ET.Element(
        "testcase",
        {
            "classname": _relative(result.spec_path, root),
            "name": _text(result.name),
            "time": f"{result.duration_s:.3f}",
        },
    )
    if result.status == "skipped":
        ET.SubElement(case, "skipped", {"message": _text(result.skipped)})
    elif result.status == "error":
        error = ET.SubElement(case, "error", {"message": _text(result.error)})
        error.text = _text(result.error)
    elif result.status == "failed":
        message, body = _failure(result)
        failure = ET.SubElement(case, "failure", {"message": _text(message)})
        failure.text = _text(body)
    if result.status in ("failed", "error"):
        for tag, output in (("system-out", result.stdout_tail), ("system-err", result.stderr_tail)):
            if output:
                ET.SubElement(case, tag).text = _text(output)
    return case


def _failure(result: FlowResult) -> tuple[str, str]:
    """The failure's message and body. A conversation's message leads with the turns that
    failed (a viewer shows the message first, often alone), its body lists every turn with
    its verdict after the failures."""
    text = "\n".join(result.failure_texts)
    if result.conversation is None:
        return text, text
    from flowproof_cli.evidence.turns import turn_rows, turns_line  # noqa: PLC0415

    turns = turns_line(result)
    message = f"{turns}\n{text}" if turns else text
    return message, "\n".join([text, "", *turn_rows(result)])


def _relative(path: Path, root: Path) -> str:
    try:  # realpath: a spec that is a symbolic link loop still gets its row
        return Path(os.path.realpath(path)).relative_to(os.path.realpath(root)).as_posix()
    except ValueError:
        return path.as_posix()


def write_junit(results: Sequence[FlowResult], root: Path, *, elapsed_s: float) -> Path:
    """Write `<root>/.flowproof/suite-junit.xml` atomically and return its path."""
    path = root / JUNIT_PATH
    flowproof_folder(root)  # with its .gitignore
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(junit_xml(results, root, elapsed_s=elapsed_s), encoding="utf-8")
    temporary.replace(path)
    return path
