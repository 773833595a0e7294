"""Gateway CPU time per request: the gateway process's CPU seconds over a run of requests, decisions off and on.

Wall-time overhead on a shared machine mostly measures the other jobs; the CPU the gateway process itself burns
per request does not depend on them much (cache and frequency effects aside), so it is the figure to optimise
against. The same stub upstream and routes as gateway_overhead.py; for each way and concurrency the script reads
the process's utime + stime (all threads, /proc/PID/task/*/stat) before and after `--requests` requests, and
splits it into the event-loop thread (the gateway's own path: parsing, policies, proxying, logging) and the other
threads (the decision model's inference: the batcher's worker and onnxruntime's pool). The stub upstream's own CPU
per request is reported too, as the floor any HTTP hop costs with this client.

    .venv/bin/python benchmarks/gateway/cpu.py [--requests 2000] [--rounds 3] [--profile DIR] [--out JSON]

`--profile DIR` runs the gateway under cProfile and writes DIR/gateway.prof (view with `python -m pstats`).
Printed (and written to `--out`); gateway_overhead.py runs the same measurement and stores it with its wall-time
results. To measure an older commit, put its sources first on the path; the gateway process inherits it:
    git archive COMMIT src | tar -x -C /tmp/old && PYTHONPATH=/tmp/old/src .venv/bin/python benchmarks/gateway/cpu.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _gateway import body, free_port, gateway_config, load, measure_cpu, prompts, uptime, wait_port

ROOT = Path(__file__).resolve().parents[2]
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
            [sys.executable, str(Path(__file__).parent / "_stub_upstream.py"), str(stub_port), str(args.delay_ms)],
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
            wait_port(gw_port, gateway, ready_path="/healthz")
            asyncio.run(load(gw_port, "/v1/chat/completions", [body("decide", t) for t in prompts(50, -100)], 4))
            results = measure_cpu(stub.pid, stub_port, gateway.pid, gw_port, args.requests, args.rounds)
        finally:
            gateway.terminate()  # SIGTERM: uvicorn shuts down cleanly, so cProfile writes its file
            stub.terminate()
            gateway.wait(60)
            stub.wait(30)
    results["uptime_before"], results["uptime_after"] = load_before, uptime()
    results["command"] = "python benchmarks/gateway/cpu.py " + " ".join(sys.argv[1:])
    print(json.dumps({"uptime_before": load_before, "uptime_after": results["uptime_after"]}))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
