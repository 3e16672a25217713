"""The record key stays out of everything flowproof leaves behind, and out of the agent.

Each end-to-end case records with a realistic key (`sk-proj-` and 48 random URL-safe
characters, new per test) against the fake model on 127.0.0.1, then searches for the key,
raw and in its encodings (base64 and base64url at the three byte alignments, URL-encoded,
hex), in every file under the test's project folder (spec, trace, candidate, run records,
what the agent wrote), in every file of the system temp folder created or changed during
the test, and in stdout and stderr. The agent dumps its own environment (`os.environ` and
`/proc/self/environ`) and argv into its folder, so "the agent never had the key" is a scan
too. The upstream is checked to have received the key, so a clean scan is not vacuous, and
`test_the_scan_finds_every_encoding` shows the scan failing when the key is there.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shlex
import stat
import string
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from flowproof_cli.cassette import Upstream
from flowproof_cli.cassette.upstream import (
    PROVIDER_KEY_VARIABLES,
    SIGNING_VARIABLES,
    upstream_from_environment,
)
from flowproof_cli.errors import ConfigError
from flowproof_cli.evidence.secrets import record_key_secrets, redact
from flowproof_cli.runner.environment import (
    PLACEHOLDER_KEY,
    agent_environment,
    injected_variables,
    refuse_record_key,
)
from tests.conftest import REPO, CliResult, run_cli
from tests.fakes.fake_upstream import FakeUpstream, Reply, Script

AGENT = '''\
"""Shows what it was given: its environment and argv into files, then one raw model call."""
import json, os, sys, urllib.error, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def keep(name, data):
    with open(os.path.join(HERE, name), "ab") as out:
        out.write(data)


keep("agent-environ.jsonl", json.dumps(dict(os.environ)).encode() + b"\\n")
with open("/proc/self/environ", "rb") as environ:
    keep("agent-proc-environ.bin", environ.read())
keep("agent-argv.jsonl", json.dumps(sys.argv).encode() + b"\\n")
dialect = os.environ.get("AGENT_DIALECT", "chat")
prompt = os.environ["FLOWPROOF_PROMPT"] + os.environ.get("AGENT_VARIANT", "")
user = [{"role": "user", "content": prompt}]
if dialect == "chat":
    url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
    headers = {"authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "")}
    body = {"model": "gpt-4o-mini", "messages": user}
elif dialect == "anthropic":
    url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
    headers = {"x-api-key": os.environ.get("ANTHROPIC_API_KEY", "")}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": user}
else:
    url = os.environ["GOOGLE_GEMINI_BASE_URL"] + "/v1beta/models/gemini-2.5-flash:generateContent"
    headers = {"x-goog-api-key": os.environ.get("GEMINI_API_KEY", "")}
    body = {"contents": [{"role": "user", "parts": [{"text": prompt}]}]}
headers["content-type"] = "application/json"
request = urllib.request.Request(url, json.dumps(body).encode(), headers)
try:
    with urllib.request.urlopen(request, timeout=60) as answer:
        status, raw = answer.status, answer.read()
except urllib.error.HTTPError as error:
    status, raw = error.code, error.read()
keep("agent-answers.log", b"%d " % status + raw + b"\\n")
print(status, raw.decode("utf-8", "replace"))
print(status, raw.decode("utf-8", "replace"), file=sys.stderr)
'''

#: What the fake model is asked for and answers with, in every dialect.
PROMPT = "Say hello"
STEPS = [{"prompt": PROMPT}, {"assert": "reply contains Hello"}]
#: The header each dialect's record key travels in, upstream.
AUTH_HEADER = {"chat": "authorization", "anthropic": "x-api-key", "gemini": "x-goog-api-key"}
#: The variable each dialect's agent reads its (placeholder) key from.
AGENT_KEY_VARIABLE = {"chat": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY",
                      "gemini": "GEMINI_API_KEY"}  # fmt: skip
_CHUNK = 8 << 20


def realistic_key() -> str:
    """An OpenAI project key's shape: `sk-proj-` and 48 URL-safe characters."""
    return "sk-proj-" + secrets.token_urlsafe(36)


# -- the scan ---------------------------------------------------------------------------------


def key_forms(key: str) -> dict[str, bytes]:
    """The key as bytes in every encoding searched for, by name.

    A base64 blob holding the key among other bytes encodes it differently for each offset
    of the key within a 3-byte group: per offset, only the characters made of the key's
    bits alone are searched (the ones at its edges also carry a neighbour's)."""
    data = key.encode()
    forms = {"raw": data, "URL-encoded": quote(key, safe="").encode(), "hex": data.hex().encode()}
    for offset in range(3):
        blob = base64.b64encode(bytes(offset) + data + bytes(3))
        first, last = -(-8 * offset // 6), 8 * (offset + len(data)) // 6
        forms[f"base64 at offset {offset}"] = blob[first:last]
        forms[f"base64url at offset {offset}"] = blob[first:last].translate(
            bytes.maketrans(b"+/", b"-_")
        )
    return forms


def _chunks(path: Path, overlap: int) -> Iterator[bytes]:
    with path.open("rb") as stream:
        tail = b""
        while block := stream.read(_CHUNK):
            yield tail + block
            tail = block[-overlap:]


def leaks_in_file(path: Path, forms: dict[str, bytes]) -> list[str]:
    """`path (encoding)` for every form found in the file; never the form itself."""
    overlap = max(len(form) for form in forms.values())
    found: set[str] = set()
    try:
        for chunk in _chunks(path, overlap):
            found.update(name for name, form in forms.items() if form in chunk)
    except OSError:  # gone or unreadable meanwhile: another process's file
        return []
    return [f"{path} ({name})" for name in sorted(found)]


def leaks_in_text(where: str, text: str, forms: dict[str, bytes]) -> list[str]:
    data = text.encode("utf-8", "surrogateescape")
    return [f"{where} ({name})" for name, form in forms.items() if form in data]


def fresh_files(
    root: Path, since_ns: int = 0, skip: tuple[str, ...] = (), prune: Path | None = None
) -> list[Path]:
    """The regular files below `root` created or changed since `since_ns`, not descending
    into top-level folders whose names start with one of `skip`, nor into `prune` (this
    checkout, when it lies in the temp folder: a clean clone there holds gigabytes of test
    environments, which a walk cannot get through in a test's time; the flows run in their
    own project copies)."""
    found = []
    pruned = str(prune) if prune is not None else None
    for folder, dirs, names in os.walk(root):
        if skip and folder == str(root):
            dirs[:] = [name for name in dirs if not name.startswith(skip)]
        if pruned is not None:
            dirs[:] = [name for name in dirs if os.path.join(folder, name) != pruned]
        for name in names:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            fresh = max(info.st_mtime_ns, info.st_ctime_ns) >= since_ns
            if fresh and stat.S_ISREG(info.st_mode):
                found.append(Path(path))
    return found


class TempWatch:
    """The files of the system temp folder created or changed while a test ran: every
    regular file below it whose mtime or ctime is past the watch's start, however deep and
    whether or not its folder changed (a file rewritten in place changes only itself). A
    walk of stat calls only; the files it returns are the ones read for the key."""

    def __init__(self) -> None:
        self.system = Path(tempfile.gettempdir())
        self.since_ns = time.time_ns() - 1_000_000_000  # coarse clocks: a second of slack

    def changed(self) -> list[Path]:
        # pytest's own folders hold every test's tmp_path (project copies, node_modules) and
        # are written to all the time by the other workers: walking them took minutes under
        # load. Each test reads its own project folder for the key separately (`leaks`).
        return fresh_files(self.system, self.since_ns, skip=("pytest-of-",), prune=REPO)


@dataclass
class Project:
    """A throwaway project folder with the dumping agent and one flow."""

    root: Path
    key: str = field(repr=False)  # a failing assertion must not print it either
    temp: TempWatch

    @property
    def spec(self) -> Path:
        return self.root / "secret.flow.yaml"

    @property
    def trace(self) -> Path:
        return self.root / "secret.trace.yaml"

    def write_flow(self, **agent: Any) -> Path:
        command = f"{shlex.quote(sys.executable)} agent.py"
        spec = {
            "name": "secret flow",
            "app": "agent",
            "agent": {"command": command, **agent},
            "steps": STEPS,
        }
        self.spec.write_text(yaml.safe_dump(spec, sort_keys=False))
        return self.spec

    def record(self, fake: FakeUpstream, *args: str, **env: str) -> CliResult:
        variables = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", **env}
        return run_cli("record", self.spec, *args, env=variables, cwd=self.root)

    def replay(self, *args: str, **env: str) -> CliResult:
        return run_cli("run", self.spec, *args, env=env, cwd=self.root)

    def agent_environ(self) -> dict[str, str]:
        """The environment of the agent's latest run."""
        lines = (self.root / "agent-environ.jsonl").read_text().splitlines()
        return dict(json.loads(lines[-1]))

    def answers(self) -> list[str]:
        return (self.root / "agent-answers.log").read_text().splitlines()

    def leaks(self, *results: CliResult) -> list[str]:
        """Every place the key is, in any encoding: files here and in the temp folder, and
        each command's output."""
        forms = key_forms(self.key)
        files = {path for path in self.root.rglob("*") if path.is_file()}
        files.update(self.temp.changed())
        found = [leak for path in sorted(files) for leak in leaks_in_file(path, forms)]
        for number, result in enumerate(results, start=1):
            found += leaks_in_text(f"command {number} stdout", result.stdout, forms)
            found += leaks_in_text(f"command {number} stderr", result.stderr, forms)
        return found


@pytest.fixture
def project(tmp_path: Path) -> Project:
    root = tmp_path / "project"
    root.mkdir()
    (root / "agent.py").write_text(AGENT)
    made = Project(root, realistic_key(), TempWatch())
    made.write_flow()
    return made


def keys_received(fake: FakeUpstream, dialect: str) -> list[str]:
    header = AUTH_HEADER[dialect]
    return [request.headers.get(header, "") for request in fake.requests]


# -- the scan itself fails when it should ------------------------------------------------------


@pytest.mark.parametrize("offset", [0, 1, 2])
def test_the_scan_finds_every_encoding(tmp_path: Path, offset: int) -> None:
    """Each encoding of the key, inside other bytes at each alignment, is found by name."""
    key = realistic_key()
    around = b"x" * offset
    payloads = {
        "raw": key.encode(),
        "base64": base64.b64encode(around + key.encode()),
        "base64url": base64.urlsafe_b64encode(around + b"\xff\xfe" + key.encode()),
        "url": quote(f"{'x' * offset}{key}/+", safe="").encode(),
        "hex": (around + key.encode()).hex().encode(),
    }
    forms = key_forms(key)
    for label, payload in payloads.items():
        path = tmp_path / f"{label}.bin"
        path.write_bytes(b"prefix " + payload + b" suffix")
        assert leaks_in_file(path, forms), (label, offset)
    clean = tmp_path / "clean.bin"
    clean.write_bytes(realistic_key().encode())
    assert leaks_in_file(clean, forms) == []


def test_the_scan_names_the_encoding_not_the_key(tmp_path: Path) -> None:
    key = realistic_key()
    path = tmp_path / "leak.txt"
    path.write_bytes(base64.b64encode(key.encode()))
    found = leaks_in_file(path, key_forms(key))
    assert f"{path} (base64 at offset 0)" in found
    assert not any(key in place for place in found)


def test_the_temp_watch_sees_a_new_file() -> None:
    watch = TempWatch()
    with tempfile.NamedTemporaryFile(prefix="flowproof-scan-probe-") as probe:
        probe.write(b"x")
        probe.flush()
        assert Path(probe.name) in watch.changed()


def test_the_temp_watch_sees_new_folders_and_new_entries_of_changed_ones() -> None:
    watch = TempWatch()
    with tempfile.TemporaryDirectory(prefix="flowproof-scan-probe-") as folder:
        deep = Path(folder) / "nested" / "made.bin"
        deep.parent.mkdir()
        deep.write_bytes(b"x")
        assert deep in watch.changed()
        later = TempWatch()
        time.sleep(0.01)
        again = Path(folder) / "nested" / "made-later.bin"
        (Path(folder) / "other").mkdir()
        (Path(folder) / "other" / "inner.bin").write_bytes(b"x")
        again.write_bytes(b"x")
        assert Path(folder) / "other" / "inner.bin" in later.changed()


def test_the_temp_watch_sees_a_file_rewritten_in_place_in_an_old_folder() -> None:
    """No entry is made or removed, so no folder's mtime moves: only the file's own does."""
    with tempfile.TemporaryDirectory(prefix="flowproof-scan-probe-") as folder:
        old = Path(folder) / "nested" / "deeper" / "old.bin"
        old.parent.mkdir(parents=True)
        old.write_bytes(b"before")
        watch = TempWatch()
        watch.since_ns = time.time_ns()  # no slack here: the set-up above is not "changed"
        assert old not in watch.changed()
        time.sleep(0.05)  # past the file system's coarse clock
        with open(old, "r+b") as rewritten:  # same inode, same folder entries
            rewritten.write(b"after!")
        assert old in watch.changed()


# -- record, replay, re-record: the key nowhere -------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("dialect", "variable"),
    [
        ("chat", "FLOWPROOF_AGENT_KEY"),
        ("chat", "OPENAI_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("gemini", "FLOWPROOF_AGENT_KEY"),
    ],
)
def test_record_leaves_the_key_nowhere(project: Project, dialect: str, variable: str) -> None:
    project.write_flow(env={"AGENT_DIALECT": dialect})
    with FakeUpstream() as fake:
        result = project.record(fake, "--json", **{variable: project.key})
        received = keys_received(fake, dialect)
    assert result.code == 0, result.output
    assert json.loads(result.stdout)["flows"][0]["trace_written"] is True
    assert received and all(project.key in value for value in received)  # it was used
    environ = project.agent_environ()
    assert environ[AGENT_KEY_VARIABLE[dialect]] == PLACEHOLDER_KEY
    assert project.leaks(result) == []


@pytest.mark.slow
def test_a_replay_divergence_and_its_409_hold_no_key(project: Project) -> None:
    """The key is still exported at replay (a developer's shell); the agent's request
    changes, so the proxy answers 409 and the flow fails with the divergence."""
    with FakeUpstream() as fake:
        recorded = project.record(fake, FLOWPROOF_AGENT_KEY=project.key)
    assert recorded.code == 0, recorded.output
    project.write_flow(env={"AGENT_VARIANT": " and goodbye"})
    replayed = project.replay(FLOWPROOF_AGENT_KEY=project.key, OPENAI_API_KEY=project.key)
    assert replayed.code == 1, replayed.output
    assert "divergence at turn 1" in replayed.stdout
    assert project.answers()[-1].startswith("409 ")
    as_json = project.replay("--json", FLOWPROOF_AGENT_KEY=project.key)
    assert as_json.code == 1, as_json.output
    folder = run_cli("run", project.root, env={"FLOWPROOF_AGENT_KEY": project.key})
    assert folder.code == 1, folder.output
    assert (project.root / ".flowproof" / "suite-junit.xml").exists()  # scanned with the rest
    assert project.agent_environ()["OPENAI_API_KEY"] == PLACEHOLDER_KEY
    assert project.leaks(recorded, replayed, as_json, folder) == []


@pytest.mark.slow
def test_a_rerecord_candidate_and_its_diff_hold_no_key(project: Project) -> None:
    """A re-record whose trajectory changed waits beside the trace as a candidate (no
    terminal) and prints the diff: neither carries the key."""
    with FakeUpstream() as fake:
        first = project.record(fake, FLOWPROOF_AGENT_KEY=project.key)
        project.write_flow(env={"AGENT_VARIANT": " twice"})
        second = project.record(fake, FLOWPROOF_AGENT_KEY=project.key)
    assert first.code == 0, first.output
    assert second.code == 1, second.output
    assert list(project.root.glob("*.candidate*")), second.output
    assert project.leaks(first, second) == []


# -- an upstream that echoes the key -----------------------------------------------------------


def _echo(key: str, encoding: str) -> str:
    if encoding == "base64":
        return base64.b64encode(f"Bearer {key}".encode()).decode()
    if encoding == "url":
        return quote(f"key={key}&", safe="")
    return key


def echoing(key: str, encoding: str, status: int) -> Script:
    """The fake model, answering with the key it was sent (a debug gateway, a 401 body)."""
    echoed = _echo(key, encoding)

    def script(dialect: str, body: dict[str, Any]) -> Reply:
        if status != 200:
            message = f"Incorrect API key provided: {echoed}"
            return Reply(status=status, error_body={"error": {"message": message}})
        return Reply(text=f"Hello! You sent {echoed}")

    return script


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["raw", "base64", "url"])
def test_an_upstream_echoing_the_key_leaves_it_nowhere(project: Project, encoding: str) -> None:
    """The agent is given the answer with the key taken out, so neither it, nor the trace,
    nor the run record, nor the output can hold it; the flow still records."""
    with FakeUpstream(script=echoing(project.key, encoding, 200)) as fake:
        result = project.record(fake, FLOWPROOF_AGENT_KEY=project.key)
    assert result.code == 0, result.output
    assert "[redacted]" in project.trace.read_text()
    assert "[redacted]" in project.answers()[-1]
    assert project.leaks(result) == []


def joined_texts(value: Any) -> str:
    """Every `text` of a JSON value, joined with nothing between: what a client shows of an
    answer cut into content parts."""
    if isinstance(value, dict):
        own = value.get("text") if isinstance(value.get("text"), str) else ""
        return own + "".join(joined_texts(v) for k, v in value.items() if k != "text")
    if isinstance(value, list):
        return "".join(joined_texts(item) for item in value)
    return ""


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ["anthropic", "gemini"])
def test_a_key_echoed_across_two_content_parts_leaves_it_nowhere(
    project: Project, dialect: str
) -> None:
    """An echo cut in two adjacent text parts: each part holds only a piece, so the whole
    key was stored in the trace as two adjacent pieces. It is taken out of their join as
    the whole key is out of one part: the agent and the trace hold `[redacted]` instead."""
    cut = len(project.key) // 2
    parts = (f"Hello! You sent {project.key[:cut]}", f"{project.key[cut:]}, fine.")
    project.write_flow(env={"AGENT_DIALECT": dialect})
    with FakeUpstream(script=lambda _dialect, _body: Reply(text_parts=parts)) as fake:
        result = project.record(fake, FLOWPROOF_AGENT_KEY=project.key)
    assert result.code == 0, result.output
    stored = yaml.safe_load(project.trace.read_text())
    bodies = [turn["response"]["body"] for turn in stored["turns"]]
    assert [joined_texts(body) for body in bodies] == ["Hello! You sent [redacted], fine."]
    answer = json.loads(project.answers()[-1].split(" ", 1)[1])
    assert project.key not in joined_texts(answer)
    assert "[redacted]" in joined_texts(answer)
    assert project.leaks(result) == []


@pytest.mark.slow
def test_a_declared_secret_across_two_content_parts_fails_the_record(project: Project) -> None:
    """The scan reads the join of adjacent content parts as well as each part: a declared
    secret cut in two is found whole there, and the record writes no trace."""
    token = realistic_key()
    cut = len(token) // 3
    spec = yaml.safe_load(project.write_flow(env={"AGENT_DIALECT": "anthropic"}).read_text())
    spec["steps"] = [*STEPS, {"assert_no_secret_leak": "${APP_TOKEN}"}]
    project.spec.write_text(yaml.safe_dump(spec, sort_keys=False))
    parts = (f"Hello! Yours is {token[:cut]}", token[cut:])
    with FakeUpstream(script=lambda _dialect, _body: Reply(text_parts=parts)) as fake:
        result = project.record(fake, APP_TOKEN=token)
    assert result.code == 1, result.output
    assert (
        "FAIL: secret flow - secret ${APP_TOKEN} leaked: turn 1 response (raw, split across "
        "content parts) (step at line "
    ) in result.stdout
    assert not project.trace.exists()
    assert token not in result.output


@pytest.mark.slow
def test_a_401_echoing_the_key_stays_a_401_without_it(project: Project) -> None:
    with FakeUpstream(script=echoing(project.key, "raw", 401)) as fake:
        result = project.record(fake, FLOWPROOF_AGENT_KEY=project.key)
    assert result.code == 1, result.output
    assert project.answers()[-1].startswith("401 ")
    assert "Incorrect API key provided: [redacted]" in project.answers()[-1]
    assert not project.trace.exists()
    assert project.leaks(result) == []


# -- a spec or an environment that would hand the key to the agent ------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("agent", "named"),
    [
        ({"env": {"MY_KEY": "${FLOWPROOF_AGENT_KEY}"}}, "agent.env.MY_KEY"),
        ({"command": f"{shlex.quote(sys.executable)} agent.py ${{FLOWPROOF_AGENT_KEY}}"},
         "agent.command"),
    ],
)  # fmt: skip
def test_a_spec_handing_the_key_to_the_agent_is_refused(
    project: Project, agent: dict[str, Any], named: str
) -> None:
    project.write_flow(**agent)
    with FakeUpstream() as fake:
        result = project.record(fake, FLOWPROOF_AGENT_KEY=project.key, OPENAI_API_KEY=project.key)
        assert fake.requests == []
    assert result.code == 2, result.output
    assert f"{named} would hand the agent flowproof's record key" in result.stderr
    assert "Fix: " in result.stderr
    assert not (project.root / "agent-environ.jsonl").exists()  # the agent never started
    assert project.leaks(result) == []


@pytest.mark.slow
def test_an_assertion_naming_the_key_never_prints_it(project: Project) -> None:
    """`reply contains ${FLOWPROOF_AGENT_KEY}` fails (the reply does not hold it), and the
    failure quotes the expected text: with the key taken out."""
    spec = yaml.safe_load(project.spec.read_text())
    spec["steps"][1] = {"assert": "reply contains ${FLOWPROOF_AGENT_KEY}"}
    project.spec.write_text(yaml.safe_dump(spec, sort_keys=False))
    with FakeUpstream() as fake:
        result = project.record(fake, FLOWPROOF_AGENT_KEY=project.key)
    assert result.code == 1, result.output
    assert 'the reply does not contain "[redacted ${FLOWPROOF_AGENT_KEY}]"' in result.stdout
    assert project.leaks(result) == []


@pytest.mark.slow
def test_the_key_under_another_name_reaches_the_agent_as_the_placeholder(
    project: Project,
) -> None:
    """A variable flowproof does not know, holding the key (or a header built from it), is
    inherited by the agent with the placeholder in the key's place."""
    with FakeUpstream() as fake:
        result = project.record(
            fake,
            FLOWPROOF_AGENT_KEY=project.key,
            MY_PROVIDER_KEY=project.key,
            MY_AUTH_HEADER=f"Bearer {project.key}",
        )
    assert result.code == 0, result.output
    environ = project.agent_environ()
    assert environ["MY_PROVIDER_KEY"] == PLACEHOLDER_KEY
    assert environ["MY_AUTH_HEADER"] == f"Bearer {PLACEHOLDER_KEY}"
    assert project.leaks(result) == []


@pytest.mark.slow
def test_doctor_hands_the_agent_no_key(project: Project) -> None:
    command = f"{shlex.quote(sys.executable)} agent.py"
    result = run_cli(
        "doctor",
        "--agent",
        command,
        env={"FLOWPROOF_AGENT_KEY": project.key, "MY_PROVIDER_KEY": project.key},
        cwd=project.root,
    )
    assert result.code == 0, result.output
    environ = project.agent_environ()
    assert (environ["OPENAI_API_KEY"], environ["MY_PROVIDER_KEY"]) == (PLACEHOLDER_KEY,) * 2
    assert project.leaks(result) == []


# -- configuration mistakes that would print the key --------------------------------------------


@pytest.mark.slow
def test_a_key_given_as_the_upstream_is_named_not_printed(project: Project) -> None:
    """The variables swapped by mistake: the error names the variable, not its value."""
    result = run_cli(
        "record",
        project.spec,
        env={"FLOWPROOF_AGENT_UPSTREAM": project.key},
        cwd=project.root,
    )
    assert result.code == 2, result.output
    assert "FLOWPROOF_AGENT_UPSTREAM is not an http(s) URL" in result.stderr
    assert project.leaks(result) == []


@pytest.mark.slow
def test_a_key_with_a_line_break_is_refused(project: Project) -> None:
    """A key is one token: its line break would be sent raw, a header of its own."""
    with FakeUpstream() as fake:
        result = project.record(fake, FLOWPROOF_AGENT_KEY=project.key + "\r\nX-Injected: 1")
        assert fake.requests == []
    assert result.code == 2, result.output
    assert "FLOWPROOF_AGENT_KEY holds a space, a line break or a control character" in (
        result.stderr
    )
    assert project.leaks(result) == []


# -- the fixes, one unit each ---------------------------------------------------------------------


@pytest.mark.parametrize("tail", ["\r\nX-Injected: 1", "\n", " trailing", "\t", "\x7f"])
def test_a_record_key_must_be_one_token(tail: str) -> None:
    environ = {"FLOWPROOF_AGENT_UPSTREAM": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-" + tail}
    with pytest.raises(ConfigError) as raised:
        upstream_from_environment(environ)
    assert str(raised.value).startswith(
        "OPENAI_API_KEY holds a space, a line break or a control character"
    )
    assert tail not in str(raised.value)


def test_a_bearer_prefixed_key_is_still_one_token() -> None:
    environ = {
        "FLOWPROOF_AGENT_UPSTREAM": "http://127.0.0.1:9/v1",
        "FLOWPROOF_AGENT_KEY": "Bearer k",
    }
    assert upstream_from_environment(environ).key == "Bearer k"


@pytest.mark.parametrize(
    "base", ["sk-proj-abc", "ftp://host/v1", "http://", "http://[::1", "http://h/v1\r\nX: y"]
)
def test_an_upstream_that_is_no_url_is_named_not_shown(base: str) -> None:
    with pytest.raises(ConfigError) as raised:
        upstream_from_environment({"FLOWPROOF_AGENT_UPSTREAM": base})
    assert str(raised.value).startswith("FLOWPROOF_AGENT_UPSTREAM is not an http(s) URL")
    assert base not in str(raised.value)


def test_the_upstream_repr_never_shows_its_key() -> None:
    key = realistic_key()
    assert key not in repr(Upstream("http://127.0.0.1:9/v1", key))


@pytest.mark.parametrize("shown", ["raw", "base64", "url", "json"])
def test_an_echoed_key_is_taken_out_of_an_upstream_answer(shown: str) -> None:
    key = realistic_key() + "/+"  # '/' and '+' make the JSON, URL and base64 forms differ
    echoed = {
        "raw": key,
        "base64": base64.b64encode(b"Bearer " + key.encode()).decode(),
        "url": quote(key, safe=""),
        "json": json.dumps(key)[1:-1].replace("/", "\\/"),
    }[shown]
    answer = f'{{"text": "you sent {echoed}."}}'.encode()  # as the upstream wrote it
    cleaned = Upstream("http://127.0.0.1:9/v1", f"Bearer {key}").without_key(answer)
    assert leaks_in_file_bytes(cleaned, key) == []
    assert b"[redacted]" in cleaned
    assert json.loads(cleaned)["text"].startswith("you sent ")
    assert key not in json.loads(cleaned)["text"]


def test_a_short_key_is_not_taken_out_of_ordinary_text() -> None:
    answer = b'{"text": "k is a letter"}'
    assert Upstream("http://127.0.0.1:9/v1", "k").without_key(answer) == answer


def test_an_inherited_variable_holding_the_key_gets_the_placeholder() -> None:
    key = realistic_key()
    inherited = {"FLOWPROOF_AGENT_KEY": key, "MY_KEY": key, "HEADER": f"Bearer {key}", "X": "1"}
    env = agent_environment(inherited, port=1, prompt="p", spec_env={})
    assert (env["MY_KEY"], env["HEADER"], env["X"]) == (
        PLACEHOLDER_KEY,
        f"Bearer {PLACEHOLDER_KEY}",
        "1",
    )
    assert not any(key in value for value in env.values())


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"argv": ["python", "agent.py", "KEY"]}, "agent.command"),
        ({"env": {"TOKEN": "KEY"}}, "agent.env.TOKEN"),
        ({"headers": {"Authorization": "Bearer KEY"}}, "agent.headers.Authorization"),
    ],
)
def test_a_spec_field_holding_the_key_is_refused(fields: dict[str, Any], named: str) -> None:
    key = realistic_key()
    filled = json.loads(json.dumps(fields).replace("KEY", key))
    with pytest.raises(ConfigError) as raised:
        refuse_record_key({"ANTHROPIC_API_KEY": key}, "x.flow.yaml", **filled)
    message = str(raised.value)
    assert message.startswith(
        f"x.flow.yaml: {named} would hand the agent flowproof's record key (the value of "
        "ANTHROPIC_API_KEY)"
    )
    assert f"Fix: remove it from {'.'.join(named.split('.')[:2])}" in message
    assert key not in message


def test_a_spec_field_without_the_key_passes() -> None:
    refuse_record_key(
        {"FLOWPROOF_AGENT_KEY": realistic_key(), "OPENAI_API_KEY": "short"},
        "x.flow.yaml",
        argv=["python", "agent.py", "short"],
        env={"TOKEN": "not the key"},
    )


def test_every_flow_scans_for_and_redacts_the_record_keys() -> None:
    key = realistic_key()
    secrets = record_key_secrets({"FLOWPROOF_AGENT_KEY": key, "OPENAI_API_KEY": "short"})
    assert [secret.name for secret in secrets] == ["FLOWPROOF_AGENT_KEY"]
    assert redact(f"said {key}", secrets) == "said [redacted ${FLOWPROOF_AGENT_KEY}]"
    assert record_key_secrets({"FLOWPROOF_AGENT_KEY": key}, ["FLOWPROOF_AGENT_KEY"]) == []


@pytest.mark.parametrize("name", [*PROVIDER_KEY_VARIABLES, *SIGNING_VARIABLES])
def test_every_provider_key_is_held_to_the_same_rules(name: str) -> None:
    """FLOWPROOF_KEY_<PROVIDER> and the AWS secrets record signs with: scanned for and
    redacted in every flow, never in the agent's environment (not even under another name),
    refused in a spec field, named by variable and never by value."""
    key = realistic_key()
    secrets = record_key_secrets({name: key})
    assert [secret.name for secret in secrets] == [name]
    assert redact(f"said {key}", secrets) == f"said [redacted ${{{name}}}]"
    env = agent_environment({name: key, "MY_COPY": key}, port=1, prompt="p", spec_env={})
    assert key not in json.dumps(env)
    with pytest.raises(ConfigError) as info:
        refuse_record_key({name: key}, "x.flow.yaml", env={"TOKEN": key})
    assert f"(the value of {name})" in str(info.value)
    assert key not in str(info.value)


def leaks_in_file_bytes(data: bytes, key: str) -> list[str]:
    return [name for name, form in key_forms(key).items() if form in data]


# -- properties: any key, any surroundings ------------------------------------------------------

KEY_ALPHABET = string.ascii_letters + string.digits + "-_./+=~:@!$%&*"
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
keys = st.text(KEY_ALPHABET, min_size=8, max_size=64)
ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "raw": lambda data: data,
    "base64": base64.b64encode,
    "base64url": base64.urlsafe_b64encode,
    "url": lambda data: quote(data.decode(), safe="").encode(),
    "hex": lambda data: data.hex().encode(),
    "json": lambda data: json.dumps(data.decode())[1:-1].encode(),
}


@PROPERTY
@given(
    key=keys,
    encoding=st.sampled_from(sorted(ENCODERS)),
    before=st.binary(max_size=40),
    after=st.binary(max_size=40),
    shift=st.binary(max_size=2),
)
def test_no_echo_of_any_key_survives_the_upstream_answer(
    key: str, encoding: str, before: bytes, after: bytes, shift: bytes
) -> None:
    """The key, encoded whole or after 0-2 bytes of its own blob, inside any bytes."""
    assume(b"[redacted]" not in before + after)
    assume(key not in "[redacted]")  # a "key" the redaction's own word holds, by chance
    blob = shift + key.encode() if encoding.startswith("base64") else key.encode()
    encoded = ENCODERS[encoding](blob)
    cleaned = Upstream("http://127.0.0.1:9/v1", key).without_key(before + encoded + after)
    assert leaks_in_file_bytes(cleaned, key) == []
    assert b"[redacted]" in cleaned


@PROPERTY
@given(
    key=keys,
    inherited=st.dictionaries(
        st.text(string.ascii_uppercase + "_", min_size=1, max_size=12),
        st.text(KEY_ALPHABET + " ", max_size=30),
        max_size=8,
    ),
    carriers=st.lists(st.tuples(st.text(max_size=5), st.text(max_size=5)), max_size=4),
)
# A CI run's find: part of Bedrock's placeholder access key, which `injected_variables` did
# not list then (each provider's variables were set in three places).
@example(key="FLOWPROO", inherited={}, carriers=[])
@example(key="FLOWPROO", inherited={"AWS_REGION": "eu-west-1"}, carriers=[])
def test_the_agent_environment_never_holds_the_key(
    key: str, inherited: dict[str, str], carriers: list[tuple[str, str]]
) -> None:
    """Whatever else is inherited, and however many variables carry the key inside them."""
    # A "key" that is part of what flowproof itself injects (`127.0.0.1`, the placeholder)
    # would be found there by chance: no leak, and no key a provider issues.
    assume(not any(key in value for value in injected_variables(1, "p").values()))
    environ = {**inherited, "FLOWPROOF_AGENT_KEY": key}
    for number, (head, tail) in enumerate(carriers):
        environ[f"CARRIER_{number}"] = head + key + tail
    env = agent_environment(environ, port=1, prompt="p", spec_env={})
    assert not any(key in value for value in env.values())
    untouched = {n: v for n, v in inherited.items() if key not in v and n in env}
    changed = {n for n in untouched if env[n] != untouched[n]}
    assert changed <= set(injected_variables(1, "p"))  # only what flowproof sets itself


@PROPERTY
@given(
    key=keys,
    values=st.lists(st.text(KEY_ALPHABET + " ", max_size=20), max_size=4),
    at=st.integers(-1, 3),
)
@example(key=".flow.ya", values=[""], at=0)  # part of the message's own text (a CI run's find)
def test_a_spec_field_is_refused_exactly_when_it_holds_the_key(
    key: str, values: list[str], at: int
) -> None:
    """Refused exactly when some field holds the key, and the message never depends on the
    key's value: it is the same with the key swapped for another (a check for the key's text
    in the message would fail by chance on a key like `.flow.ya`, part of the spec's name)."""
    env = {f"V{number}": value for number, value in enumerate(values)}
    if 0 <= at < len(values):
        env[f"V{at}"] = values[at] + key
    holds = any(key in value for value in env.values())
    assume(not any(_OTHER_KEY in value for value in env.values()))
    other_env = {name: value.replace(key, _OTHER_KEY) for name, value in env.items()}
    said = _refusal({"FLOWPROOF_AGENT_KEY": key}, env)
    assert (said is not None) == holds, (said, env)
    assert said == _refusal({"FLOWPROOF_AGENT_KEY": _OTHER_KEY}, other_env)


_OTHER_KEY = "sk-other-key-0123456789"


def _refusal(environ: dict[str, str], env: dict[str, str]) -> str | None:
    try:
        refuse_record_key(environ, "x.flow.yaml", env=env)
    except ConfigError as exc:
        return str(exc)
    return None
