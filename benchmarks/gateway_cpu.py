"""Gateway CPU time per request: the gateway process's CPU seconds over a run of requests, decisions off and on.

Wall-time overhead on a shared machine mostly measures the other jobs; the CPU the gateway process itself burns
per request does not depend on them much (cache and frequency effects aside), so it is the figure to optimise
against. The same stub upstream and routes as gateway_overhead.py; for each way and concurrency the script reads
the process's utime + stime (all threads, /proc/PID/task/*/stat) before and after `--requests` requests, and
splits it into the event-loop thread (the gateway's own path: parsing, policies, proxying, logging) and the other
threads (the decision model's inference: the batcher's worker and onnxruntime's pool). The stub upstream's own CPU
per request is reported too, as the floor any HTTP hop costs with this client.

    .venv/bin/python benchmarks/gateway_cpu.py [--requests 2000] [--rounds 3] [--profile DIR] [--out JSON]

`--profile DIR` runs the gateway under cProfile and writes DIR/gateway.prof (view with `python -m pstats`).
Printed (and written to `--out`); gateway_overhead.py runs the same measurement and stores it with its wall-time
results. To measure an older commit, put its sources first on the path; the gateway process inherits it:
    git archive COMMIT src | tar -x -C /tmp/old && PYTHONPATH=/tmp/old/src .venv/bin/python benchmarks/gateway_cpu.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from gateway_overhead import body, free_port, gateway_config, load, prompts, uptime, wait_port

ROOT = Path(__file__).resolve().parents[1]
TICKS_PER_S = os.sysconf("SC_CLK_TCK")
# cProfile around the CLI's main. uvicorn re-raises the SIGTERM it caught once it has shut down; the handler set
# here turns that into SystemExit, so the profile is dumped.
PROFILED = """
import cProfile, signal, sys
from jevserve.cli import main
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
profiler = cProfile.Profile()
profiler.enable()
try:
    main(sys.argv[1:])
finally:
    profiler.disable()
    profiler.dump_stats({out!r})
"""
WAYS = (("direct", "stub"), ("off", "plain"), ("on", "decide"))


def thread_cpu_s(pid: int) -> tuple[float, float]:
    """(main thread, other threads) CPU seconds of process `pid`, user + system."""
    main = other = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile (its time is lost; it is tiny)
        seconds = (int(fields[11]) + int(fields[12])) / TICKS_PER_S  # utime, stime (fields 14, 15 of stat)
        if int(task.name) == pid:
            main += seconds
        else:
            other += seconds
    return main, other


def cpu_per_request(pid: int, port: int, model: str, n: int, concurrency: int, offset: int) -> dict:
    """Send `n` distinct requests and return the process's CPU ms per request (event loop, other, total)."""
    bodies = [body(model, t) for t in prompts(n, offset)]
    main0, other0 = thread_cpu_s(pid)
    asyncio.run(load(port, "/v1/chat/completions", bodies, concurrency))
    main1, other1 = thread_cpu_s(pid)
    loop_ms, other_ms = (main1 - main0) * 1000 / n, (other1 - other0) * 1000 / n
    return {"event_loop_ms": loop_ms, "other_threads_ms": other_ms, "total_ms": loop_ms + other_ms}


def measure_cpu(stub_pid: int, stub_port: int, gw_pid: int, gw_port: int, requests: int, rounds: int) -> dict:
    """CPU ms per request, median over rounds, for direct (the stub's own CPU), decisions off and on."""
    results: dict = {}
    offset = 50_000_000
    for concurrency in (1, 32):
        per_way: dict[str, list[dict]] = {name: [] for name, _ in WAYS}
        for _ in range(rounds):
            for name, model in WAYS:
                pid, port = (stub_pid, stub_port) if name == "direct" else (gw_pid, gw_port)
                per_way[name].append(cpu_per_request(pid, port, model, requests, concurrency, offset))
                offset += requests
        results[f"concurrency_{concurrency}"] = {
            "num_requests": requests,
            "rounds": per_way,
            "median": {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in per_way.items()},
        }
        print(f"cpu concurrency {concurrency}: {json.dumps(_rounded(results[f'concurrency_{concurrency}']['median']))}")
    return results


def _rounded(summary: dict) -> dict:
    return {name: {k: round(v, 3) for k, v in s.items()} for name, s in summary.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per way, concurrency and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each figure is the median over rounds")
    parser.add_argument("--delay-ms", type=float, default=20.0, help="stub upstream's fixed reply time")
    parser.add_argument("--profile", type=Path, help="run the gateway under cProfile; write DIR/gateway.prof")
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    args = parser.parse_args()
    stub_port, gw_port = free_port(), free_port()
    load_before = uptime()
    with tempfile.TemporaryDirectory() as tmp:
        config_path = Path(tmp) / "gw.yaml"
        config_path.write_text(json.dumps(gateway_config(stub_port)))
        stub = subprocess.Popen(
            [sys.executable, str(ROOT / "benchmarks" / "_stub_upstream.py"), str(stub_port), str(args.delay_ms)],
            stdout=subprocess.DEVNULL,
        )
        gateway_args = ["gateway", "--config", str(config_path), "--port", str(gw_port)]
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            launch = ["-c", PROFILED.format(out=str(args.profile / "gateway.prof")), *gateway_args]
        else:
            launch = ["-m", "jevserve.cli", *gateway_args]
        gateway = subprocess.Popen([sys.executable, *launch], stdout=subprocess.DEVNULL)
        try:
            wait_port(stub_port, stub)
            wait_port(gw_port, gateway)
            asyncio.run(load(gw_port, "/v1/chat/completions", [body("decide", t) for t in prompts(50, -100)], 4))
            results = measure_cpu(stub.pid, stub_port, gateway.pid, gw_port, args.requests, args.rounds)
        finally:
            gateway.terminate()  # SIGTERM: uvicorn shuts down cleanly, so cProfile writes its file
            stub.terminate()
            gateway.wait(60)
            stub.wait(30)
    results["uptime_before"], results["uptime_after"] = load_before, uptime()
    results["command"] = "python benchmarks/gateway_cpu.py " + " ".join(sys.argv[1:])
    print(json.dumps({"uptime_before": load_before, "uptime_after": results["uptime_after"]}))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
