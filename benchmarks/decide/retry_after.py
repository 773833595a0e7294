"""A burst of clients refused at once: how often each must try before it is served, when all honour the 429's hint.

`jevserve serve --max-queue 16` gets 64 clients sending 8 questions each at the same moment (an outside tester's
scenario: a `--max-queue` far below what the clients send at once). Each client sends, and on a 429 waits what
`retry-after-ms` says (`Retry-After` where it is absent) and sends again, at most 21 times. Per round: the clients
served, the tries per client (mean, max), the hints seen, and when the last client was served. The first round of a
fresh server reads every state for the first time; the later rounds repeat the same states, which the server has
then cached, so they are faster. `--busy` runs the rounds beside one process spinning a core.

`--src DIR` starts the server from another source tree (e.g. `git archive` of another commit unpacked there), so the
same rounds can be compared across two versions of the batcher; its rows carry `--label`.

Writes benchmarks/results/retry_after[_LABEL].json and a section of docs/server.md.
Run: .venv/bin/python benchmarks/decide/retry_after.py [--rounds 3] [--busy] [--src DIR --label NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import add_source_tree_arguments, busy_process, machine, publish, serve, source_tree_env

CLIENTS, QUESTIONS, MAX_QUEUE, MAX_TRIES = 64, 8, 16, 21


def body(client: int) -> dict:
    return {
        "model": "jev-latest",
        "state": f"ticket number {client}: my invoice is wrong " * 20,
        "questions": {f"q{i}": {"type": "noul", "instructions": f"is it about topic {i}?"} for i in range(QUESTIONS)},
    }


async def one_client(http: httpx.AsyncClient, url: str, client: int, started: float) -> dict:
    hints: list[float] = []
    for tries in range(1, MAX_TRIES + 1):
        response = await http.post(url + "/v1/systemone", json=body(client))
        if response.status_code != 429:
            done = time.perf_counter() - started
            return {"status": response.status_code, "tries": tries, "hints": hints, "done_s": done}
        ms = response.headers.get("retry-after-ms")
        hint = float(ms) / 1000 if ms else float(response.headers["retry-after"])
        hints.append(hint)
        await asyncio.sleep(hint)
    return {"status": 429, "tries": MAX_TRIES, "hints": hints, "done_s": time.perf_counter() - started}


async def burst(url: str) -> dict:
    # idle connections are dropped before the server's keep-alive ends, so no request reuses one it is closing
    limits = httpx.Limits(max_connections=2 * CLIENTS, keepalive_expiry=2)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        started = time.perf_counter()
        clients = await asyncio.gather(*(one_client(http, url, k, started) for k in range(CLIENTS)))
    served = [c for c in clients if c["status"] == 200]
    tries = np.array([c["tries"] for c in clients])
    hints = [h for c in clients for h in c["hints"]]
    return {
        "served": len(served),
        "statuses": sorted({c["status"] for c in clients}),
        "tries_mean": float(tries.mean()),
        "tries_max": int(tries.max()),
        "hints_s": [min(hints), max(hints)] if hints else None,
        "last_served_s": max((c["done_s"] for c in served), default=None),
    }


def markdown(result: dict) -> str:
    label = f" ({result['label']})" if result.get("label") else ""
    lines = [
        f"### A burst of refused clients{label} (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}, load before {result['machine']['loadavg_before']:.2f}"
        f"{', beside a process spinning a core' if result['busy'] else ''}. `jevserve serve --max-queue {MAX_QUEUE}`; "
        f"{CLIENTS} clients send {QUESTIONS} questions each at once and honour the hint, at most {MAX_TRIES} tries. "
        "Round 1 reads every state for the first time; later rounds repeat them.",
        "",
        "| round | served | tries, mean | tries, max | hints (s) | last served (s) |",
        "|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(result["rounds"], 1):
        hints = "–" if r["hints_s"] is None else f"{r['hints_s'][0]:.2f}–{r['hints_s'][1]:.2f}"
        last = "–" if r["last_served_s"] is None else f"{r['last_served_s']:.1f}"
        lines.append(
            f"| {i} | {r['served']} of {CLIENTS} | {r['tries_mean']:.2f} | {r['tries_max']} | {hints} | {last} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="bursts sent to one fresh server (default 3)")
    parser.add_argument("--busy", action="store_true", help="beside one process spinning a core")
    add_source_tree_arguments(parser)
    args = parser.parse_args()
    env = source_tree_env(parser, args)
    result = {"machine": machine(), "busy": args.busy, "label": args.label, "rounds": []}
    with serve("embedded", "--max-queue", str(MAX_QUEUE), env=env) as served, busy_process(args.busy):
        for _ in range(args.rounds):
            result["rounds"].append(asyncio.run(burst(f"http://127.0.0.1:{served.port}")))
    result["command"] = (
        "python benchmarks/decide/retry_after.py"
        + (f" --rounds {args.rounds}" if args.rounds != 3 else "")
        + (" --busy" if args.busy else "")
        + (f" --src DIR --label {args.label}" if args.src else "")
    )
    name = "retry_after" + ("_busy" if args.busy else "") + (f"_{args.label}" if args.label else "")
    publish(name, result, markdown(result))


if __name__ == "__main__":
    main()
