"""The decision server with and without one competing busy process: c=1 latency and c=32 throughput.

`jevserve serve embedded` in a subprocess, 1-question requests (a 3-option choice) about new ~140-token states over
keep-alive connections (`_httpload.py`), at concurrency 1 and 32. Each round measures the server "quiet" (the
machine as it is) and then "busy": while this script runs one extra process that spins a core
(`python -c "while True: pass"`). Four thread settings are compared: 2 intra-op threads with spinning off, one
intra-op thread (`JEVSERVE_INTRA_OP_THREADS=1`), workers that spin between a forward pass's operators and sleep when
it returns (`JEVSERVE_SPINNING=run`) and onnxruntime's own default of workers that spin between passes too
(`JEVSERVE_SPINNING=1`). Targets: busy c=1 p50
within 2 × quiet, busy c=32 throughput at least 0.6 × quiet.

Writes benchmarks/results/competing_load.json and a section of docs/server.md.
Run: nice -n 10 .venv/bin/python benchmarks/decide/competing_load.py [--requests 150] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _states import fresh_bodies, measure

from _httpload import run_load
from _serverbench import busy_process, machine, replace_section, serve, uptime, write_result

SETTINGS = {
    "2 threads, spinning off": {},
    "1 thread": {"JEVSERVE_INTRA_OP_THREADS": "1"},
    "2 threads, spinning within a pass": {"JEVSERVE_SPINNING": "run"},
    "2 threads, spinning on": {"JEVSERVE_SPINNING": "1"},
}
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=150, help="requests at c=1 per measurement (c=32: twice)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    result = {"machine": machine(), "command": " ".join(["python benchmarks/decide/competing_load.py", *sys.argv[1:]])}
    rounds: dict[str, dict[str, list[dict]]] = {name: {"quiet": [], "busy": []} for name in SETTINGS}
    for r in range(args.rounds):
        for name, env in SETTINGS.items():
            with serve("embedded", env=env) as served:
                port = served.port
                asyncio.run(run_load("127.0.0.1", port, fresh_bodies(20), 1))  # warm up
                for load in ("quiet", "busy"):
                    with busy_process(load == "busy"):
                        rounds[name][load].append(measure(port, args.requests))
            print(f"round {r + 1}, {name} done; {uptime()}", file=sys.stderr)
    result["uptime_after"] = uptime()
    summary = {}
    for name, loads in rounds.items():
        row = {}
        for load, runs in loads.items():
            row[load] = {
                "c1_p50_ms": float(np.median([m["c1"]["p50_ms"] for m in runs])),
                "c1_p99_ms": float(np.median([m["c1"]["p99_ms"] for m in runs])),
                "c32_decisions_per_s": float(np.median([m["c32_decisions_per_s"] for m in runs])),
            }
        row["c1_p50_busy_over_quiet"] = row["busy"]["c1_p50_ms"] / row["quiet"]["c1_p50_ms"]
        row["c32_busy_over_quiet"] = row["busy"]["c32_decisions_per_s"] / row["quiet"]["c32_decisions_per_s"]
        summary[name] = row
    result["rounds"] = rounds
    result["summary"] = summary
    write_result("competing_load", result)
    lines = []
    for name, row in summary.items():
        q, b = row["quiet"], row["busy"]
        lines.append(
            f"| {name} | {q['c1_p50_ms']:.1f} | {b['c1_p50_ms']:.1f} | {row['c1_p50_busy_over_quiet']:.2f} "
            f"({'met' if row['c1_p50_busy_over_quiet'] <= 2 else 'not met'}) | {q['c32_decisions_per_s']:.0f} | "
            f"{b['c32_decisions_per_s']:.0f} | {row['c32_busy_over_quiet']:.2f} "
            f"({'met' if row['c32_busy_over_quiet'] >= 0.6 else 'not met'}) |"
        )
    replace_section(
        "competing_load",
        f"""## The server beside a competing busy process

`jevserve serve embedded`; 1-question requests about new ~140-token states; c=1 ({args.requests} requests) and
c=32 ({args.requests * 2}). "busy": this script runs one extra process spinning a core while it measures. Medians
over {args.rounds} rounds, a fresh server per round and setting. Measured {result["machine"]["when"]}; `uptime`
before: `{result["machine"]["uptime_before"]}`; after: `{result["uptime_after"]}` — the machine is shared with
other jobs, so "quiet" already competes with them. Command: `{result["command"]}`
(results: `benchmarks/results/competing_load.json`).

| threads setting | quiet c=1 p50 ms | busy c=1 p50 ms | busy / quiet (target ≤ 2) | quiet c=32 decisions/s | \
busy c=32 decisions/s | busy / quiet (target ≥ 0.6) |
|---|---|---|---|---|---|---|
{chr(10).join(lines)}
""",
    )
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
