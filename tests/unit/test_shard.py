"""`--shard K/N`: the split itself (deterministic, disjoint, balanced, independent of where
the checkout lies), and `flowproof run DIR --shard` with its usage errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flowproof_cli.runner.discovery import Shard, discover_specs, parse_shard
from tests.conftest import run_cli
from tests.e2e.flows import write_flow


def gated_flows(folder: Path, names: tuple[str, ...]) -> list[Path]:
    """Flows that skip before any agent starts (their variable is never set)."""
    return [
        write_flow(folder, name=name, skip_unless_env=["FLOWPROOF_TEST_UNSET"]) for name in names
    ]


def test_shards_are_disjoint_balanced_and_cover_every_flow(tmp_path: Path) -> None:
    paths = [tmp_path / f"{name}.flow.yaml" for name in "gfedcba"]
    shards = [Shard(k, 3).select(paths, tmp_path) for k in (1, 2, 3)]
    assert sorted(path for shard in shards for path in shard) == sorted(paths)
    assert [len(shard) for shard in shards] == [3, 2, 2]
    assert [path.name for path in shards[0]] == ["g.flow.yaml", "d.flow.yaml", "a.flow.yaml"]


def test_the_split_depends_on_paths_relative_to_the_root(tmp_path: Path) -> None:
    names = ["x/a.flow.yaml", "x/b.flow.yaml", "y/c.flow.yaml"]
    here = [tmp_path / "one" / name for name in names]
    there = [tmp_path / "two" / "deeper" / name for name in names]
    for k in (1, 2):
        mine = [p.relative_to(tmp_path / "one") for p in Shard(k, 2).select(here, tmp_path / "one")]
        theirs = [
            p.relative_to(tmp_path / "two" / "deeper")
            for p in Shard(k, 2).select(list(reversed(there)), tmp_path / "two" / "deeper")
        ]
        assert sorted(mine) == sorted(theirs)


def test_parse_shard_reads_k_of_n() -> None:
    assert parse_shard("2/4") == Shard(2, 4)
    assert parse_shard(" 1/1 ") == Shard(1, 1)
    assert str(parse_shard("3/7")) == "3/7"


@pytest.mark.parametrize("text", ["0/4", "5/4", "1/0", "2", "a/b", "-1/4", "1/2/3", "", "1.5/3"])
def test_parse_shard_refuses_anything_else_naming_the_form(text: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_shard(text)
    assert str(raised.value) == (
        f"{text!r}: expected K/N, two whole numbers with 1 <= K <= N (e.g. `--shard 2/4` runs "
        "the second of four shards)"
    )


def test_run_dir_with_shards_runs_each_flow_once(tmp_path: Path) -> None:
    specs = gated_flows(tmp_path, ("a", "b", "c"))
    assert discover_specs(tmp_path) == specs
    ran: list[list[str]] = []
    for k in (1, 2):
        result = run_cli("run", tmp_path, "--shard", f"{k}/2", "--json")
        assert result.code == 0, result.output
        ran.append([Path(flow["spec_path"]).name for flow in json.loads(result.stdout)["flows"]])
        assert f"shard {k}/2: {len(ran[-1])} of 3 flow(s)" in result.stderr
    assert ran == [["a.flow.yaml", "c.flow.yaml"], ["b.flow.yaml"]]
    junit = (tmp_path / ".flowproof" / "suite-junit.xml").read_text()
    assert 'tests="1"' in junit and "b.flow.yaml" in junit  # the last shard's own report


def test_an_empty_shard_passes_and_says_so(tmp_path: Path) -> None:
    gated_flows(tmp_path, ("a", "b"))
    result = run_cli("run", tmp_path, "--shard", "3/3")
    assert result.code == 0, result.output
    assert "shard 3/3: 0 of 2 flow(s)" in result.stderr
    assert "0 passed, 0 failed, 0 skipped" in result.stdout


@pytest.mark.parametrize("value", ["4/3", "0/3", "three"])
def test_a_bad_shard_is_a_usage_error(tmp_path: Path, value: str) -> None:
    gated_flows(tmp_path, ("a",))
    result = run_cli("run", tmp_path, "--shard", value)
    assert result.code == 2
    assert f"Invalid value for '--shard': {value!r}: expected K/N" in result.stderr
    assert "Traceback" not in result.output


def test_shard_with_a_single_spec_is_a_usage_error(tmp_path: Path) -> None:
    (spec,) = gated_flows(tmp_path, ("a",))
    result = run_cli("run", spec, "--shard", "1/2")
    assert result.code == 2
    assert "--shard splits the flows of a directory: give DIR, not a spec" in result.stderr
