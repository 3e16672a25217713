"""flowproof_cli/process.py: output tails and process-group signals (split_command's cases
are in test_command_driver.py, beside the driver that uses it)."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile

from flowproof_cli.process import file_tail, signal_group, tail_lines


def test_tail_lines_keeps_the_last_lines_without_trailing_blank() -> None:
    assert tail_lines("a\nb\nc\n\n", 2) == "b\nc"
    assert tail_lines("") == ""


def test_file_tail_keeps_the_last_characters_of_a_capture_file() -> None:
    with tempfile.TemporaryFile() as capture:
        capture.write(b"x" * 10_000 + "é-end".encode())
        assert file_tail(capture, 5) == "é-end"
        assert len(file_tail(capture)) == 4000


def test_signal_group_ends_a_group_and_ignores_one_already_gone() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    signal_group(child.pid, signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL
    signal_group(child.pid, signal.SIGKILL)  # reaped: no such group, no error
