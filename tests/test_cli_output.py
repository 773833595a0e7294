"""The `jevserve` command line when whoever reads its output goes away (`jevserve … | head -3`)."""

from __future__ import annotations

import signal
import subprocess
import sys


def test_a_closed_pipe_ends_the_command_quietly_with_the_sigpipe_status():
    # the read end is closed before the command writes a line, so its first write fails with EPIPE every time
    process = subprocess.Popen(
        [sys.executable, "-m", "jevserve.cli", "data", "list"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 128 + signal.SIGPIPE
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
