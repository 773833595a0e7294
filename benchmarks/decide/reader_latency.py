"""Decision latency of the reading models (jev-minilm-2; jev-minilm-3 with words) next to the trained readout, c=1.

The targets: p50 ≤ 10 ms for one question and ≤ 15 ms for four questions about one ~100-token state, one
request at a time, on this machine. Workload: ShareGPT prompts cut to their first 100 MiniLM tokens (decide_latency's
states), each state new to the server, so only question texts come from the cache. For each model and each round:
`jevserve serve reader` / `serve encoder` in a subprocess, one keep-alive client, N requests with one question and N
with four (the decide_latency questions). Tables show the median over rounds.

Writes benchmarks/results/reader_latency.json and a section of docs/server.md.
Run: .venv/bin/python benchmarks/decide/reader_latency.py [--requests 150] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _states import EXTRA_QUESTIONS, QUESTION, load_states

from _httpload import run_load
from _serverbench import machine, pct_ms, replace_section, serve, write_result

MODELS = {"jev-minilm-1": "encoder", "jev-minilm-2": "reader", "jev-minilm-3": "reader-lexical"}
TARGETS_MS = {"1 question": 10.0, "4 questions": 15.0}


def one_round(spec: str, states: list[str]) -> dict:
    """p50/p99 at c=1 for 1- and 4-question requests, each state seen once."""
    half = len(states) // 2
    four = {"q": QUESTION, **EXTRA_QUESTIONS}
    bodies = {
        "1 question": [json.dumps({"state": s, "questions": {"q": QUESTION}}).encode() for s in states[:half]],
        "4 questions": [json.dumps({"state": s, "questions": four}).encode() for s in states[half:]],
    }
    with serve(spec) as served:
        warm = [json.dumps({"state": f"warm up {i}", "questions": four}).encode() for i in range(20)]
        asyncio.run(run_load("127.0.0.1", served.port, warm, 1))
        out = {}
        for name, batch in bodies.items():
            latencies, _ = asyncio.run(run_load("127.0.0.1", served.port, batch, 1))
            out[name] = pct_ms(latencies)
        return out


def markdown(result: dict) -> str:
    lines = [
        "## Reading model latency",
        "",
        f"`{result['command']}`, {result['machine']['when']}, load before {result['machine']['loadavg_before']:.2f}; "
        f"{result['requests']} requests per row and round, 100-token ShareGPT states, c=1, median of "
        f"{result['rounds']} rounds.",
        "",
        "| model | request | p50 ms | p99 ms | target p50 | met |",
        "|---|---|---|---|---|---|",
    ]
    for model, rows in result["median"].items():
        for request, row in rows.items():
            target = TARGETS_MS[request]
            met = "yes" if row["p50_ms"] <= target else "no"
            lines.append(f"| {model} | {request} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} | ≤ {target:g} | {met} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=150, help="requests per row and round (default 150)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; tables show medians (default 3)")
    args = parser.parse_args()
    states = load_states(args.requests * 2 * args.rounds * len(MODELS))
    result = {
        "machine": machine(),
        "command": "python benchmarks/decide/reader_latency.py"
        + (f" --requests {args.requests}" if args.requests != 150 else "")
        + (f" --rounds {args.rounds}" if args.rounds != 3 else ""),
        "requests": args.requests,
        "rounds": args.rounds,
        "per_round": {model: [] for model in MODELS},
    }
    chunk = args.requests * 2
    offset = 0
    for index in range(args.rounds):  # models alternate within a round, so load drifts hit both alike
        for model, spec in MODELS.items():
            print(f"round {index + 1} of {args.rounds}: {model}", file=sys.stderr)
            result["per_round"][model].append(one_round(spec, states[offset : offset + chunk]))
            offset += chunk
    result["median"] = {
        model: {
            request: {m: float(np.median([r[request][m] for r in rounds])) for m in ("p50_ms", "p99_ms")}
            for request in TARGETS_MS
        }
        for model, rounds in result["per_round"].items()
    }
    path = write_result("reader_latency", result)
    replace_section("reader_latency", markdown(result))
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
