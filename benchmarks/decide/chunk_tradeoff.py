"""What `--max-chunk-ms` costs: c=1 latency and c=32 throughput of the decision server at several chunk budgets.

A shorter chunk lets a 1-question request overtake a large one sooner (the soak's p99, `soak.py --max-chunk-ms`),
but cuts batches at concurrency 32 to fewer questions, which could cost throughput. Each round starts `jevserve
serve embedded --max-chunk-ms X` for every X in turn (interleaved, so the machine's drift hits all alike) and runs
the workload of `competing_load.py`: 1-question requests about new ~140-token states at concurrency 1 and 32.

Writes benchmarks/results/chunk_tradeoff.json and a section of docs/server.md.
Run: .venv/bin/python benchmarks/decide/chunk_tradeoff.py [--chunks 25,8] [--requests 150] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _states import measure

from _serverbench import machine, replace_section, serve, uptime, write_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", default="25,8", help="comma-separated --max-chunk-ms values (default: 25,8)")
    parser.add_argument("--requests", type=int, default=150, help="requests at c=1 per round (2x at c=32)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the table shows medians (default: 3)")
    args = parser.parse_args()
    chunks = [float(c) for c in args.chunks.split(",")]
    result = {"machine": machine(), "command": " ".join(["python benchmarks/decide/chunk_tradeoff.py", *sys.argv[1:]])}
    runs: dict[str, list[dict]] = {f"{c:g}": [] for c in chunks}
    for round_no in range(args.rounds):
        for chunk in chunks:
            with serve("embedded", "--max-chunk-ms", f"{chunk:g}") as served:
                measure(served.port, 20)  # warm-up: the question's texts embedded, the per-question time measured
                runs[f"{chunk:g}"].append(measure(served.port, args.requests))
            print(f"round {round_no + 1}, --max-chunk-ms {chunk:g}: {runs[f'{chunk:g}'][-1]}", flush=True)
    result["uptime_after"] = uptime()
    summary = {
        key: {
            "c1_p50_ms": statistics.median(r["c1"]["p50_ms"] for r in rows),
            "c1_p99_ms": statistics.median(r["c1"]["p99_ms"] for r in rows),
            "c32_decisions_per_s": statistics.median(r["c32_decisions_per_s"] for r in rows),
        }
        for key, rows in runs.items()
    }
    result.update({"runs": runs, "median": summary})
    write_result("chunk_tradeoff", result)
    base = summary[f"{chunks[0]:g}"]
    lines = [
        f"| {key} | {s['c1_p50_ms']:.1f} | {s['c1_p99_ms']:.1f} | {s['c32_decisions_per_s']:.0f} | "
        f"{s['c32_decisions_per_s'] / base['c32_decisions_per_s']:.2f} |"
        for key, s in summary.items()
    ]
    replace_section(
        "chunk_tradeoff",
        f"""## What a shorter `--max-chunk-ms` costs

`jevserve serve embedded --max-chunk-ms X`, 1-question requests about new ~140-token states (the workload of
`competing_load.py`), {args.requests} at c=1 and {args.requests * 2} at c=32 per round, the settings interleaved over
{args.rounds} rounds (medians shown). Measured {result["machine"]["when"]}; `uptime` before:
`{result["machine"]["uptime_before"]}`; after: `{result["uptime_after"]}`. Command: `{result["command"]}` (results:
`benchmarks/results/chunk_tradeoff.json`).

| --max-chunk-ms | c=1 p50 ms | c=1 p99 ms | c=32 decisions/s | c=32 vs {chunks[0]:g} ms |
|---|---|---|---|---|
""" + "\n".join(lines),
    )
    print(summary)


if __name__ == "__main__":
    main()
