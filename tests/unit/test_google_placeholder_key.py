"""The Vertex placeholder key is made once per user and read after that: making it (and
importing `cryptography`) cost every flow's start about 0.05 s."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from flowproof_cli.providers.google_credentials import _keep

KEY = Path("flowproof") / "google-placeholder-key.pem"
# One fresh process: the key's PEM head, and whether `cryptography` was imported to get it.
PROBE = (
    "import sys\n"
    "from flowproof_cli.providers.google_credentials import placeholder_service_account\n"
    "pem = placeholder_service_account()['private_key']\n"
    "print(pem.splitlines()[0], 'cryptography' in sys.modules)\n"
)


def _probe(cache: Path) -> str:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_first_run_makes_and_keeps_the_key_the_next_only_reads_it(tmp_path: Path) -> None:
    assert _probe(tmp_path) == "-----BEGIN PRIVATE KEY----- True"
    kept = tmp_path / KEY
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    first = kept.read_text()
    assert _probe(tmp_path) == "-----BEGIN PRIVATE KEY----- False"
    assert kept.read_text() == first


def test_a_damaged_key_file_is_made_again(tmp_path: Path) -> None:
    (tmp_path / KEY).parent.mkdir(parents=True)
    (tmp_path / KEY).write_text("not a key")
    assert _probe(tmp_path) == "-----BEGIN PRIVATE KEY----- True"
    assert (tmp_path / KEY).read_text().startswith("-----BEGIN PRIVATE KEY-----")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_an_unwritable_cache_still_gives_a_key(tmp_path: Path) -> None:
    tmp_path.chmod(0o500)
    try:
        assert _probe(tmp_path) == "-----BEGIN PRIVATE KEY----- True"
    finally:
        tmp_path.chmod(0o700)


def test_a_cache_path_that_is_a_file_still_gives_a_key(tmp_path: Path) -> None:
    """Root is not stopped by modes: a file where the folder should be stops anyone."""
    (tmp_path / "flowproof").write_text("in the way")
    assert _probe(tmp_path) == "-----BEGIN PRIVATE KEY----- True"


@pytest.mark.parametrize(
    ("call", "error"),
    [("fsync", OSError(5, "Input/output error")), ("replace", KeyboardInterrupt())],
)
def test_a_key_write_that_fails_midway_keeps_the_old_key_and_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str, error: BaseException
) -> None:
    """The key is written as a trace is (`process.write_atomic`): synced before the rename,
    and its temporary file removed on any failure, an interrupt too."""
    kept = tmp_path / KEY
    kept.parent.mkdir(parents=True)
    kept.write_text("-----BEGIN PRIVATE KEY----- old\n")

    def broken(*args: object) -> None:
        raise error

    monkeypatch.setattr(os, call, broken)
    with pytest.raises(type(error)):
        _keep(str(kept), "-----BEGIN PRIVATE KEY----- new\n")
    monkeypatch.undo()
    assert kept.read_text() == "-----BEGIN PRIVATE KEY----- old\n"
    assert os.listdir(kept.parent) == [kept.name]


def test_a_kept_key_is_its_owners_alone(tmp_path: Path) -> None:
    kept = tmp_path / "new" / KEY
    _keep(str(kept), "-----BEGIN PRIVATE KEY----- new\n")
    assert kept.read_text() == "-----BEGIN PRIVATE KEY----- new\n"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    assert os.listdir(kept.parent) == [kept.name]
