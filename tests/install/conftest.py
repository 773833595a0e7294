"""What the install tests share: the processes a test starts, stopped after it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen]]:
    """Processes a test starts (append them); terminated, then killed if need be, after it."""
    processes: list[subprocess.Popen] = []
    yield processes
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
