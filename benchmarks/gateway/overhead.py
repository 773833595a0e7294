"""Gateway overhead: time added over a direct call to a stub upstream, decisions off and on; RSS over a soak.

Three ways to the same stub upstream (a separate process answering every chat completion after a fixed delay):
    direct          the stub itself
    decisions off   through `jevserve gateway`, route `plain` (no decision policy: a plain proxy)
    decisions on    through the gateway, route `decide`: guard + harm + clarify + queue priority, four questions in
                    one call to the embedded decision model in process (all-MiniLM-L6-v2 int8 + trained readout);
                    guard and harm only flag and clarify's threshold is 1.0, so every request reaches the upstream
                    and all three ways do the same upstream work
Every measured request carries a different prompt (no embedding cache hits). Added time = gateway percentile
minus direct percentile at the same concurrency; the gateway's own `x-jevserve-decision-ms` and
`x-jevserve-overhead-ms` headers are summarised too. Then a soak at concurrency 8 with decisions on, sampling the
gateway process's RSS every 5 s; it cycles over `--soak-distinct` prompts so that the embedder's LRU cache stops
growing and any further RSS growth is the gateway's own. Before the soak, the gateway's CPU time per request
(gateway_cpu.py: process CPU seconds / requests, event-loop thread and other threads apart), which other load on
the machine moves far less than wall time.

    .venv/bin/python benchmarks/gateway/overhead.py [--requests 300] [--soak-s 120] [--delay-ms 20]

Writes benchmarks/results/gateway_overhead.json; docs/gateway.md quotes it. Records `uptime` before and after:
the machine is shared with other jobs, so timings are noisy; each figure is the median over `--rounds` rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _gateway import body, free_port, gateway_config, load, measure_cpu, prompts, uptime, wait_port

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "benchmarks" / "results" / "gateway_overhead.json"
def pct(values, q) -> float:
    values = [v for v in values if v == v]
    return float(np.percentile(values, q)) if values else float("nan")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(args, stub_port: int, gw_port: int) -> dict:
    results: dict = {}
    offset = 0
    for concurrency in (1, 32):
        n = args.requests if concurrency == 1 else args.requests * 2
        rounds: dict[str, list[dict]] = {"direct": [], "off": [], "on": []}
        for _ in range(args.rounds):
            for name, port, model in (
                ("direct", stub_port, "stub"),
                ("off", gw_port, "plain"),
                ("on", gw_port, "decide"),
            ):
                bodies = [body(model, t) for t in prompts(n, offset)]
                offset += n
                records = asyncio.run(load(port, "/v1/chat/completions", bodies, concurrency))
                rounds[name].append(
                    {
                        "p50_ms": pct([r["ms"] for r in records], 50),
                        "p99_ms": pct([r["ms"] for r in records], 99),
                        "decision_p50_ms": pct([r["decision_ms"] for r in records], 50),
                        "decision_p99_ms": pct([r["decision_ms"] for r in records], 99),
                        "overhead_p50_ms": pct([r["overhead_ms"] for r in records], 50),
                        "overhead_p99_ms": pct([r["overhead_ms"] for r in records], 99),
                    }
                )
        summary = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in rounds.items()}
        for name in ("off", "on"):
            summary[name]["added_p50_ms"] = summary[name]["p50_ms"] - summary["direct"]["p50_ms"]
            summary[name]["added_p99_ms"] = summary[name]["p99_ms"] - summary["direct"]["p99_ms"]
        results[f"concurrency_{concurrency}"] = {"num_requests": n, "rounds": rounds, "median": summary}
        print(
            f"concurrency {concurrency}: "
            + json.dumps({k: {m: round(v, 2) for m, v in s.items()} for k, s in summary.items()}),
            flush=True,
        )
    return results


def soak(args, gw_port: int, pid: int) -> dict:
    samples = []
    started = time.monotonic()
    offset = 10_000_000
    num_requests = 0
    # (prompts(64, k) for k cycling below soak_distinct covers soak_distinct + 63 distinct texts)
    while time.monotonic() - started < args.soak_s:
        # prompts cycle over --soak-distinct texts, so the embedder's LRU cache stops growing and any further
        # growth of RSS is the gateway's own
        bodies = [body("decide", t) for t in prompts(64, offset + num_requests % args.soak_distinct)]
        asyncio.run(load(gw_port, "/v1/chat/completions", bodies, 8))
        num_requests += 64
        if not samples or time.monotonic() - samples[-1]["t_s"] - started >= 5:
            samples.append({"t_s": time.monotonic() - started, "rss_mb": rss_mb(pid), "num_requests": num_requests})
    samples.append({"t_s": time.monotonic() - started, "rss_mb": rss_mb(pid), "num_requests": num_requests})
    return {
        "duration_s": args.soak_s,
        "concurrency": 8,
        "distinct_prompts": args.soak_distinct,
        "num_requests": num_requests,
        "samples": samples,
        "rss_first_mb": samples[0]["rss_mb"],
        "rss_last_mb": samples[-1]["rss_mb"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="requests per way at concurrency 1 (x2 at 32)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each figure is the median over rounds")
    parser.add_argument("--delay-ms", type=float, default=20.0, help="stub upstream's fixed reply time")
    parser.add_argument("--soak-s", type=float, default=120.0, help="soak duration with decisions on (0: skip)")
    parser.add_argument("--soak-distinct", type=int, default=2000, help="distinct prompts the soak cycles over")
    parser.add_argument(
        "--cpu-requests", type=int, default=500, help="requests per way, concurrency and round of the CPU measurement"
    )
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args()
    stub_port, gw_port = free_port(), free_port()
    config = gateway_config(stub_port)
    load_before = uptime()
    with tempfile.TemporaryDirectory() as tmp:
        config_path = Path(tmp) / "gw.yaml"
        config_path.write_text(json.dumps(config))  # JSON is YAML
        stub = subprocess.Popen(
            [sys.executable, str(Path(__file__).parent / "_stub_upstream.py"), str(stub_port), str(args.delay_ms)],
            stdout=subprocess.DEVNULL,
        )
        gateway = subprocess.Popen(
            [sys.executable, "-m", "jevserve.cli", "gateway", "--config", str(config_path), "--port", str(gw_port)],
            stdout=subprocess.DEVNULL,
        )
        try:
            wait_port(stub_port, stub)
            wait_port(gw_port, gateway, ready_path="/healthz")
            asyncio.run(load(gw_port, "/v1/chat/completions", [body("decide", t) for t in prompts(20, -100)], 4))
            results = measure(args, stub_port, gw_port)
            # CPU seconds per request of the gateway process: barely moved by other jobs, unlike wall time
            results["cpu_per_request"] = measure_cpu(
                stub.pid, stub_port, gateway.pid, gw_port, args.cpu_requests, args.rounds
            )
            results["soak"] = soak(args, gw_port, gateway.pid) if args.soak_s > 0 else None
        finally:
            gateway.terminate()
            stub.terminate()
            gateway.wait(30)
            stub.wait(30)
    results["settings"] = {
        "requests": args.requests,
        "rounds": args.rounds,
        "delay_ms": args.delay_ms,
        "soak_s": args.soak_s,
        "soak_distinct": args.soak_distinct,
        "cpu_requests": args.cpu_requests,
        "decisions_on": ["guard", "harm", "clarify", "priority"],
    }
    results["machine"] = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "uptime_before": load_before,
        "uptime_after": uptime(),
    }
    results["command"] = "python benchmarks/gateway/overhead.py " + " ".join(sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
