"""Declared match rules end to end: record in one checkout, HOME and day; replay elsewhere.

The agent is examples/match-demo/session_agent.py, whose every request carries the working
directory, HOME, today's date and a fresh session id inside a JSON string: the shape of a
coding CLI's requests. The fake upstream mints random ids, so a passing replay proves the
answers came from the trace.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from flowproof_cli.match.presets import load_preset
from flowproof_cli.verdict import Failure
from tests.conftest import REPO, clean_environ, run_cli
from tests.e2e.sockets_and_pids import free_port
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

DEMO = REPO / "examples" / "match-demo"
FAKETIME = shutil.which("faketime")


def _copy_demo(root: Path) -> Path:
    """A fresh checkout of the demo at `root`, without its committed trace."""
    folder = root / "checkout"
    shutil.copytree(DEMO, folder, ignore=shutil.ignore_patterns("*.trace.yaml", "__pycache__"))
    (root / "home").mkdir()
    return folder / "session.flow.yaml"


def _env(root: Path, **extra: str) -> dict[str, str]:
    return {
        "HOME": str(root / "home"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        **extra,
    }


def _on_day(day: str | None) -> list[str]:
    return [FAKETIME, f"{day} 12:00:00"] if day and FAKETIME else []


def _flowproof(*args: str | Path, env: dict[str, str], cwd: Path, day: str | None = None):
    if not day:
        return run_cli(*args, env=env, cwd=cwd)
    command = [*_on_day(day), sys.executable, "-m", "flowproof_cli", *map(str, args)]
    done = subprocess.run(
        command, env=clean_environ(env), cwd=cwd, capture_output=True, text=True, timeout=120
    )

    class Result:
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
        output = done.stdout + done.stderr

    return Result()


def _record(spec: Path, root: Path, fake: FakeUpstream, day: str | None = None):
    env = _env(root, FLOWPROOF_AGENT_UPSTREAM=f"{fake.base_url}/v1", FLOWPROOF_AGENT_KEY="k")
    return _flowproof("record", spec.name, env=env, cwd=spec.parent, day=day)


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    spec = _copy_demo(tmp_path / "laptop")
    with FakeUpstream() as fake:
        result = _record(spec, tmp_path / "laptop", fake, day="2026-11-30")
    assert result.code == 0, result.output
    return spec


def _replay_elsewhere(recorded: Path, tmp_path: Path, *args: str, day: str = "2027-01-09"):
    """Copy the recorded checkout to another path and HOME, replay there on another day."""
    other = tmp_path / "ci"
    (other / "home").mkdir(parents=True)
    shutil.copytree(recorded.parent, other / "checkout")
    spec = other / "checkout" / recorded.name
    return spec, _flowproof("run", spec.name, *args, env=_env(other), cwd=spec.parent, day=day)


def test_replays_from_another_path_home_and_day(recorded: Path, tmp_path: Path) -> None:
    trace = recorded.with_name("session.trace.yaml").read_text()
    assert str(recorded.parent) not in trace and "{cwd}" in trace and "{home}" in trace
    assert "Today's date is <date>." in trace
    assert "session_id" not in trace  # the addon's work, stored as matched
    spec, result = _replay_elsewhere(recorded, tmp_path)
    assert result.code == 0, result.output
    assert "PASS" in result.stdout
    assert "match rules relaxed 6 field(s) on 2 request(s):" in result.stdout
    assert (
        "addon StripSession (spec: strip_session.py): 2 field(s) on 2 request(s)" in result.stdout
    )
    assert f"relocate ({{cwd}}={spec.parent}" in result.stdout


def _without_call_ids(request: dict) -> str:
    text = json.dumps(request, sort_keys=True)
    return re.sub(r"call_[A-Za-z0-9]+", "call_X", text)


@pytest.mark.skipif(FAKETIME is None, reason="Debian's faketime is not installed")
def test_rerecording_on_another_day_and_machine_leaves_the_trace_unchanged(
    recorded: Path, tmp_path: Path
) -> None:
    before = recorded.with_name("session.trace.yaml").read_text()
    spec = _copy_demo(tmp_path / "desktop")
    with FakeUpstream() as fake:
        result = _record(spec, tmp_path / "desktop", fake, day="2027-05-05")
    assert result.code == 0, result.output
    after = spec.with_name("session.trace.yaml").read_text()
    # The agent's side is unchanged; only what the (fake) model minted may differ: its call
    # ids, echoed back in the second request.
    requests_before = [_without_call_ids(t["request"]) for t in yaml.safe_load(before)["turns"]]
    requests_after = [_without_call_ids(t["request"]) for t in yaml.safe_load(after)["turns"]]
    assert requests_before == requests_after
    assert before != after  # the fake's ids did change, so the comparison above means something
    assert yaml.safe_load(before)["match"] == yaml.safe_load(after)["match"]


def test_an_edited_task_still_diverges(recorded: Path, tmp_path: Path) -> None:
    spec_text = recorded.read_text().replace("in Nairobi?", "in Nairobi tomorrow?")
    recorded.write_text(spec_text)
    _, result = _replay_elsewhere(recorded, tmp_path)
    assert result.code == 1, result.output
    assert "divergence at turn 1: message 1 (user) content changed" in result.stdout
    assert "Nairobi tomorrow?" in result.stdout


def test_an_edit_outside_the_normalized_span_diverges(recorded: Path, tmp_path: Path) -> None:
    agent = recorded.with_name("session_agent.py")
    agent.write_text(agent.read_text().replace("one short sentence", "one short line"))
    _, result = _replay_elsewhere(recorded, tmp_path)
    assert result.code == 1, result.output
    assert "message 0 (system) content changed" in result.stdout


def test_without_the_rules_the_same_replay_diverges(recorded: Path, tmp_path: Path) -> None:
    spec = yaml.safe_load(recorded.read_text())
    del spec["match"]
    recorded.write_text(yaml.safe_dump(spec, sort_keys=False))
    _, result = _replay_elsewhere(recorded, tmp_path)
    assert result.code == 1, result.output
    assert "divergence at turn 1" in result.stdout
    assert "note: the match rules in force differ from the ones snapshotted" in result.stdout


def test_json_reports_every_rule_and_the_unused_ones(recorded: Path, tmp_path: Path) -> None:
    _, result = _replay_elsewhere(recorded, tmp_path, "--json")
    assert result.code == 0, result.output
    flow = json.loads(result.stdout)["flows"][0]
    by_rule = {entry["rule"].split(" (")[0].split(" /")[0]: entry for entry in flow["match_rules"]}
    assert by_rule["addon StripSession"] == {
        "rule": "addon StripSession",
        "origin": "spec: strip_session.py",
        "fields": 2,
        "turns": 2,
        "unused": False,
    }
    unused = [entry for entry in flow["match_rules"] if entry["unused"]]
    # every date form but the sentence's: JavaScript's and Python's, and ISO dates
    assert [entry["origin"] for entry in unused] == ["preset dates"] * 5


# -- suites -----------------------------------------------------------------------------------


def test_a_suites_match_block_applies_below_it(recorded: Path, tmp_path: Path) -> None:
    spec = yaml.safe_load(recorded.read_text())
    spec["match"] = {"addons": ["matchers/strip_session.py"]}  # the flow adds to the suite
    recorded.write_text(yaml.safe_dump(spec, sort_keys=False))
    suite = {"match": {"presets": ["dates"], "relocate": True}}
    recorded.with_name("suite.yaml").write_text(yaml.safe_dump(suite))
    _, result = _replay_elsewhere(recorded, tmp_path)
    assert result.code == 0, result.output
    assert "(suite): 2 field(s) on 2 request(s)" in result.stdout


def test_a_bad_suite_rule_is_an_error_with_its_line(recorded: Path) -> None:
    recorded.with_name("suite.yaml").write_text("env: {}\nmatch:\n  presets: [claude]\n")
    result = run_cli("run", recorded.parent, env=_env(recorded.parent.parent), cwd=recorded.parent)
    assert result.code == 2, result.output
    assert "suite.yaml:3: unknown match preset `claude`" in result.output


# -- matcher addon failures -------------------------------------------------------------------


def _with_addon(
    spec_path: Path, source: str | None, name: str = "matcher.py", *, marker: bool = True
) -> None:
    """Declare one matcher script; with `marker`, the agent command first leaves a file
    named `started`, so a test can prove the agent never started."""
    if source is not None:
        spec_path.with_name(name).write_text(source)
    spec = yaml.safe_load(spec_path.read_text())
    spec["match"] = {"addons": [name]}
    if marker:
        spec["agent"]["command"] = (
            'sh -c \'touch started; exec "$0" "$@"\' ' + spec["agent"]["command"]
        )
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))


def test_missing_addon_script_is_exit_2_before_the_agent_starts(tmp_path: Path) -> None:
    spec = _copy_demo(tmp_path)
    _with_addon(spec, None, "gone.py")
    with FakeUpstream() as fake:
        result = _record(spec, tmp_path, fake)
    assert result.code == 2, result.output
    assert f"{spec.with_name('gone.py')}: the matcher addon script (spec) does not exist" in (
        result.stderr
    )
    assert not spec.with_name("started").exists()


def test_addon_with_a_syntax_error_names_its_line(tmp_path: Path) -> None:
    spec = _copy_demo(tmp_path)
    _with_addon(spec, "class A:\n    def flowproof_normalize(self, r, p)\n        return r\n")
    with FakeUpstream() as fake:
        result = _record(spec, tmp_path, fake)
    assert result.code == 2, result.output
    assert (
        f"{spec.with_name('matcher.py')}:2: the matcher addon script (spec) does not import: SyntaxError"
        in result.stderr
    )
    assert "Traceback" not in result.output
    assert not spec.with_name("started").exists()


def test_addon_whose_import_raises_names_the_line(tmp_path: Path) -> None:
    spec = _copy_demo(tmp_path)
    _with_addon(spec, "import json\nraise RuntimeError('needs config')\n")
    result = run_cli("record", spec.name, env=_env(tmp_path), cwd=spec.parent)
    assert result.code == 2, result.output
    assert (
        "matcher.py:2: the matcher addon script (spec) does not import: RuntimeError: needs config"
        in result.stderr
    )


def test_addon_without_the_hook_is_refused(tmp_path: Path) -> None:
    spec = _copy_demo(tmp_path)
    _with_addon(spec, "class Nothing:\n    pass\n\naddons = [Nothing()]\n")
    result = run_cli("record", spec.name, env=_env(tmp_path), cwd=spec.parent)
    assert result.code == 2, result.output
    assert "no addon in its `addons = [...]` list defines flowproof_normalize" in result.stderr


def test_raising_addon_fails_the_flow_and_writes_no_trace(tmp_path: Path) -> None:
    spec = _copy_demo(tmp_path)
    source = (
        "class Boom:\n"
        "    def flowproof_normalize(self, request, protocol):\n"
        "        raise KeyError('client_info')\n\n"
        "addons = [Boom()]\n"
    )
    _with_addon(spec, source, marker=False)
    with FakeUpstream() as fake:
        result = _record(spec, tmp_path, fake)
    assert result.code == 1, result.output
    assert "the matcher addon Boom raised KeyError: 'client_info'" in result.stdout
    assert "Traceback" not in result.output
    assert not spec.with_name("session.trace.yaml").exists()


# -- the same script in stock mitmproxy -------------------------------------------------------


def test_the_same_addon_works_in_stock_mitmdump(tmp_path: Path) -> None:
    """Recorded by `flowproof record` with only the addon; replayed by plain mitmdump with
    `-s addons/model.py -s strip_session.py`: a fresh session id still matches."""
    spec = _copy_demo(tmp_path)
    data = yaml.safe_load(spec.read_text())
    data["match"] = {"addons": ["matchers/strip_session.py"]}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    with FakeUpstream() as fake:
        assert _record(spec, tmp_path, fake).code == 0
    trace = spec.with_name("session.trace.yaml")
    port = free_port()
    mitmdump = Path(sys.executable).with_name("mitmdump")
    proxy = subprocess.Popen(
        [
            str(mitmdump),
            "-q",
            "-s",
            str(REPO / "addons" / "model.py"),
            "-s",
            str(spec.parent / "matchers" / "strip_session.py"),
            "--mode",
            f"reverse:http://127.0.0.1:9@127.0.0.1:{port}",
            "--set",
            "connection_strategy=lazy",
            "--set",
            f"flowproof_trace={trace}",
        ],
        env=clean_environ({"HOME": str(tmp_path / "home")}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        agent_env = clean_environ(
            {
                "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
                "OPENAI_API_KEY": "x",
                "HOME": str(tmp_path / "home"),
            }
        )
        done = subprocess.run(
            [sys.executable, "session_agent.py", "What's the weather in Nairobi?"],
            cwd=spec.parent,
            env=agent_env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "sunny" in done.stdout  # answered from the trace despite a new session id
    finally:
        proxy.terminate()
        output = proxy.communicate(timeout=10)[0]
    assert "Traceback" not in output, output


# -- a preset and the agent's version ---------------------------------------------------------

_VERSIONED_AGENT = """\
import json, os, urllib.request
body = {"model": "claude-opus-5-5", "max_tokens": 64, "messages": [{"role": "user", "content": os.environ["ASK"]}]}
request = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"].rstrip("/") + "/v1/messages",
    data=json.dumps(body).encode(),
    headers={"content-type": "application/json", "x-api-key": "k", "user-agent": os.environ["UA"]},
)
print(json.loads(urllib.request.urlopen(request).read())["content"][0]["text"])
"""


def _versioned_flow(folder: Path, user_agent: str, ask: str = "Say hi.") -> Path:
    """A flow under the claude-code preset whose agent sends one request that none of the
    preset's rules touch, with the given User-Agent."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.py").write_text(_VERSIONED_AGENT)
    spec = folder / "hi.flow.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "A Claude Code look-alike says hi",
                "app": "agent",
                "agent": {"command": "python agent.py", "env": {"UA": user_agent, "ASK": ask}},
                "match": {"presets": ["claude-code"]},
                "steps": [{"prompt": "hi"}],
            },
            sort_keys=False,
        )
    )
    return spec


def test_a_preset_that_matched_nothing_on_an_untested_version_says_so(tmp_path: Path) -> None:
    untested = _versioned_flow(tmp_path / "new", "claude-cli/2.1.400 (external, cli)")
    tested = _versioned_flow(tmp_path / "known", "claude-cli/2.1.332 (external, cli)")
    with FakeUpstream() as fake:
        new = _record(untested, tmp_path, fake)
        known = _record(tested, tmp_path, fake)
    assert new.code == 0, new.output
    tested = ", ".join(load_preset("claude-code").versions_tested)
    assert (
        "    note: preset `claude-code` matched nothing in this run's requests: it may not know "
        f"claude-cli/2.1.400 (tested: {tested}). Fix: compare this request with the "
        "preset's rules (`flowproof match show claude-code`)"
    ) in new.stdout
    assert "  agent: claude-cli/2.1.400\n" in (untested.parent / "hi.trace.yaml").read_text()
    assert known.code == 0, known.output
    assert "it may not know" not in known.stdout  # a version it was tested with


def test_a_replay_by_another_agent_version_that_diverges_says_so_first(tmp_path: Path) -> None:
    spec = _versioned_flow(tmp_path / "app", "claude-cli/2.1.197 (external, cli)")
    with FakeUpstream() as fake:
        assert _record(spec, tmp_path, fake).code == 0
    newer = _versioned_flow(tmp_path / "app", "claude-cli/2.1.332 (external, cli)", "Say hello.")
    result = run_cli("run", newer.name, "--json", env=_env(tmp_path), cwd=newer.parent)
    assert result.code == 1, result.output
    [flow] = json.loads(result.stdout)["flows"]
    assert [Failure.from_json(failure).text for failure in flow["failures"]] == [
        "divergence at turn 1: the agent changed version: recorded claude-cli/2.1.197, "
        "replayed claude-cli/2.1.332; re-record (flowproof record hi.flow.yaml)\n"
        "  message 0 (user) content changed\n"
        "  recorded: Say hi.\n"
        "  replayed: Say hello."
    ]
    assert flow["divergence"]["agent_changed"] == {
        "recorded": "claude-cli/2.1.197",
        "replayed": "claude-cli/2.1.332",
    }
