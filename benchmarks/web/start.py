"""Seconds from starting `jevserve web` to its first page (the board), in a checkout and outside one.

Starts the command as a user would (a new process, a free port, a fresh playground database, a remote endpoint that
is not contacted until someone plays, the user's cache folder) and polls `GET /` until it answers 200. One start
before the timed ones is not counted: the very first start on a machine also builds the encoder's ONNX graph for the
live demo's semantic cache (reported as `first_start_s`), which later starts read from the cache.
"checkout": run from the repository
root, so the committed results and their board snapshot (docs/board/board.json) are read. "installed": run from an
empty folder, so the board packaged with jevserve (jevserve/web/data/board.json) is served. Target: under 5 s.

    python benchmarks/web/start.py [--repeats 3]

Reports the wall time and the process's own CPU time (user + system, from /proc) to the first page: on two shared
cores the wall time grows with whatever else runs, the CPU time does not.

Writes benchmarks/results/web_start.json and prints a markdown table; records the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cpu_seconds(pid: int) -> float:
    # utime + stime of the process (Linux /proc), in seconds: its own work, whatever else shares the CPUs.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def first_page_seconds(cwd: Path, timeout_s: float = 120.0) -> tuple[float, float]:
    """Launch `jevserve web` in `cwd`; (wall seconds, CPU seconds of the process) until `GET /` answers 200."""
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        command = [sys.executable, "-m", "jevserve.cli", "web", "--port", str(port), "--db", f"{tmp}/db.sqlite",
                   "--endpoint", "http://127.0.0.1:9", "--model", "not-asked"]
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            while time.perf_counter() - started < timeout_s:
                if process.poll() is not None:
                    raise RuntimeError(f"jevserve web exited: {process.stderr.read().decode()[-500:]}")
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/", timeout=30).status_code == 200:
                        return time.perf_counter() - started, _cpu_seconds(process.pid)
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
            raise RuntimeError(f"no first page within {timeout_s} s")
        finally:
            process.terminate()
            process.wait(timeout=20)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "web_start.json")
    args = parser.parse_args()
    load_before = os.getloadavg()
    result = {"repeats": args.repeats, "load_before": load_before, "cases": {}}
    result["first_start_s"] = first_page_seconds(ROOT)[0]
    with tempfile.TemporaryDirectory() as empty:
        for case, cwd in (("checkout", ROOT), ("installed", Path(empty))):
            runs = [first_page_seconds(cwd) for _ in range(args.repeats)]
            result["cases"][case] = {"seconds": [w for w, _ in runs], "cpu_seconds": [c for _, c in runs],
                                     "median_s": statistics.median(w for w, _ in runs),
                                     "median_cpu_s": statistics.median(c for _, c in runs)}
    result["load_after"] = os.getloadavg()
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"| where `jevserve web` runs | first page, median of {args.repeats} starts (wall) | its CPU time | each "
          "start (wall) |")
    print("|---|---|---|---|")
    for case, r in result["cases"].items():
        print(f"| {case} | {r['median_s']:.2f} s | {r['median_cpu_s']:.2f} s | "
              f"{', '.join(f'{t:.2f}' for t in r['seconds'])} s |")
    print(f"load average before/after: {load_before[0]:.1f} / {result['load_after'][0]:.1f}; the start before "
          f"these (not counted): {result['first_start_s']:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
