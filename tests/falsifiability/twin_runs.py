"""The scaffold of the `*_can_fail` modules whose cases are one flow with one change: the
base recorded once against the scripted fake, then every case, and the twin (the base as
recorded), written to a folder of its own and replayed offline. Each case is a flow document
and an edit of the recorded trace; what a case must say stays in its module."""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest
import yaml

from tests.conftest import computed_once, run_cli
from tests.fakes.fake_upstream import FakeUpstream, Script

#: Every case's twin is the base flow and its trace as recorded: run once, it must pass.
TWIN = "base.twin"

TraceEdit = Callable[[dict[str, Any]], None]
#: A case as written: its flow document and the edit of the recorded trace (None: as recorded).
Written = tuple[dict[str, Any], TraceEdit | None]


class Expected(Protocol):
    """What a case must end with: its exit code and a fragment of its output."""

    @property
    def code(self) -> int: ...

    @property
    def message(self) -> str: ...


@dataclass(frozen=True)
class FaultCase:
    """A case of the fault modules: the spec's faults (None: the base flow's), the agent's
    extra environment and the edit of the recorded trace, with what the replay must say."""

    code: int
    message: str
    faults: list[dict[str, Any]] | None = None
    agent_env: dict[str, str] = field(default_factory=dict)
    trace: TraceEdit | None = None


def record_base(folder: Path, document: dict[str, Any], script: Script | None = None) -> dict:
    """Record `document` as base.flow.yaml against the fake; the trace it wrote."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "base.flow.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    with FakeUpstream(script=script) as fake:
        env = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "OPENAI_API_KEY": "sk-x"}
        result = run_cli("record", folder / "base.flow.yaml", env=env, cwd=folder)
    assert result.code == 0, result.output
    trace: dict[str, Any] = yaml.safe_load((folder / "base.trace.yaml").read_text())
    return trace


def replay_cases(
    root: Path,
    base: dict[str, Any],
    cases: Mapping[str, Written],
    *run_flags: str,
    script: Script | None = None,
    waiting: Collection[str] = (),
) -> dict[str, list[Any]]:
    """Record `base`, then run every case and the twin: {name: [exit code, output]}.

    The cases named in `waiting` spend their run waiting out the flow's `timeout`, which
    must leave a slow machine room to start the agent; they run in threads beside the rest,
    so a generous bound costs the suite no extra time."""
    trace = record_base(root / "base", base, script)
    everything = {**cases, TWIN: (base, None)}
    for name, (document, edit) in everything.items():
        folder = root / "cases" / name
        folder.mkdir(parents=True)
        (folder / "case.flow.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
        edited = copy.deepcopy(trace)
        if edit is not None:
            edit(edited)
        (folder / "case.trace.yaml").write_text(yaml.safe_dump(edited, sort_keys=False))

    def replayed(name: str) -> list[Any]:
        folder = root / "cases" / name
        result = run_cli("run", *run_flags, folder / "case.flow.yaml", cwd=folder)
        return [result.code, result.output]

    with ThreadPoolExecutor(max_workers=max(1, len(waiting))) as pool:
        waited = {name: pool.submit(replayed, name) for name in waiting}
        found = {name: replayed(name) for name in everything if name not in waited}
        found.update({name: future.result() for name, future in waited.items()})
    return found


def verdicts_fixture(
    key: str, compute: Callable[[Path], dict[str, list[Any]]]
) -> Callable[[pytest.TempPathFactory], dict[str, list[Any]]]:
    """A module fixture `verdicts`: `compute` run on a fresh folder once per session
    (`computed_once`), {case name: [exit code, output]}."""

    @pytest.fixture(scope="module")
    def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
        root = tmp_path_factory.mktemp(key)
        found: dict[str, list[Any]] = computed_once(tmp_path_factory, key, lambda: compute(root))
        return found

    return verdicts


def assert_fails_as_said(verdict: list[Any], code: int, message: str) -> None:
    """One case's [exit code, output]: its code, and its message in the output (escaped
    quotes read as quotes: a message quoting a YAML string may print them escaped)."""
    found_code, output = verdict
    assert found_code == code, output
    assert message in output.replace('\\"', '"'), output


def assert_twin_passes(verdicts: dict[str, list[Any]]) -> None:
    code, output = verdicts[TWIN]
    assert code == 0, output


def verdict_tests(
    cases: Mapping[str, Expected],
) -> tuple[Callable[..., None], Callable[..., None]]:
    """The two tests every module of cases has, on its `verdicts` fixture: each case fails
    with its code and message, and the twin passes. Bind them to module names `test_...`."""

    @pytest.mark.parametrize("name", sorted(cases))
    def test_the_case_fails_with_its_message(name: str, verdicts: dict[str, list[Any]]) -> None:
        assert_fails_as_said(verdicts[name], cases[name].code, cases[name].message)

    def test_the_twin_of_every_case_passes(verdicts: dict[str, list[Any]]) -> None:
        assert_twin_passes(verdicts)

    return test_the_case_fails_with_its_message, test_the_twin_of_every_case_passes
