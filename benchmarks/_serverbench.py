"""Shared pieces of the server benchmarks: machine load, a competing busy process, a server subprocess."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from jevserve.gateway.config import GatewayConfig

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "server.md"  # the decision server's measurements
TRAINING_DOC = ROOT / "docs" / "training.md"  # the embedded models' studies


def uptime() -> str:
    """`uptime` as printed: the load the other users of this shared machine put on it."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def machine() -> dict:
    """What the numbers were measured on, and the load at the time."""
    return {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "uptime_before": uptime(),
        "loadavg_before": os.getloadavg()[0],
    }


@contextmanager
def busy_process(enabled: bool = True) -> Iterator[int | None]:
    """One competing process spinning a core (pure Python `while True`), killed on exit; yields its pid."""
    if not enabled:
        yield None
        return
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # let the scheduler see it
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def add_source_tree_arguments(parser) -> None:
    """`--src DIR --label NAME`: run the server from another source tree, its rows named apart."""
    parser.add_argument("--src", type=Path, help="start the server from this source tree (its PYTHONPATH)")
    parser.add_argument("--label", default="", help="names the rows of a --src run (results file and section)")


def source_tree_env(parser, args) -> dict | None:
    """The server's environment for `--src` (None: this tree); refuses `--src` without `--label`."""
    if args.src and not args.label:
        parser.error("--src needs --label, so its rows are not taken for this tree's")
    if not args.src:
        return None
    return {"PYTHONPATH": str(args.src.resolve()) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Served:
    """A server subprocess: its port and process id."""

    port: int
    pid: int


@contextmanager
def serve(model: str, *args: str, env: dict | None = None, start_timeout_s: float = 300) -> Iterator[Served]:
    """`jevserve serve MODEL ARGS` in a subprocess on a free port; yields it once it accepts connections."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jevserve.cli", "serve", model, "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        text=True,
    )
    try:
        deadline = time.time() + start_timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise SystemExit(f"server did not start: {proc.stderr.read()}") from None
                time.sleep(0.2)
        yield Served(port, proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def pct_ms(seconds: list[float]) -> dict[str, float]:
    """p50, p99 and max in milliseconds, and the count."""
    arr = np.asarray(seconds, dtype=float) * 1000
    if arr.size == 0:
        return {"p50_ms": float("nan"), "p99_ms": float("nan"), "max_ms": float("nan"), "n": 0}
    return {
        "p50_ms": float(np.percentile(arr, 50)),
        "p99_ms": float(np.percentile(arr, 99)),
        "max_ms": float(arr.max()),
        "n": int(arr.size),
    }


def write_result(name: str, result: dict) -> Path:
    """benchmarks/results/NAME.json."""
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path


def replace_section(name: str, markdown: str, path: Path = DOC) -> None:
    """Put `markdown` between this benchmark's markers in `path` (appended the first time)."""
    begin, end = f"<!-- section:{name} -->", f"<!-- /section:{name} -->"
    block = f"{begin}\n{markdown.strip()}\n{end}"
    text = path.read_text() if path.exists() else ""
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


def publish(name: str, result: dict, markdown: str, path: Path = DOC) -> Path:
    """Write benchmarks/results/NAME.json, put `markdown` in section NAME of `path`, print it: a benchmark's last
    step."""
    written = write_result(name, result)
    replace_section(name, markdown, path=path)
    print(markdown)
    print(f"wrote {written}")
    return written


def rss_mib(pid: int) -> float:
    """Resident set size of a process, from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def with_guard(config: GatewayConfig, **fields) -> GatewayConfig:
    """`config` with these fields set on every route's guard."""
    routes = [
        route.model_copy(update={"guard": route.guard.model_copy(update=fields)}) if route.guard is not None else route
        for route in config.routes
    ]
    return config.model_copy(update={"routes": routes})


def guard_whole_up_to(config: GatewayConfig, chars: int) -> GatewayConfig:
    """`config` with every route's guard judging texts up to `chars` long whole only (0: as configured)."""
    return with_guard(config, whole_up_to_chars=chars) if chars else config
