"""A burst of typesafe-sdk calls: what the official client sees when more arrive than a server answers in its timeout.

`jevserve serve` (embedded model) gets CLIENTS `AsyncTypeSafeClient`s with the SDK's own settings (10 s timeout
per HTTP operation, retries on 408/429/5xx and timeouts, `Retry-After` honoured, three tries) each making CALLS
calls at once: one choice question about a state new to the server. The same burst is sent to a server with its
defaults, which queue whatever fits `--max-queue` (2,048 questions), and to one that refuses (429) a request whose
answer the queue says would come later than 5 s (`--answer-within-s 5`, half the SDK's timeout). Per setting:
calls that returned, calls that raised (by exception), call times, and the HTTP requests the server saw by status
(a 499 is a client that hung up: an SDK timeout, sent again).

Writes benchmarks/results/sdk_burst.json and a section of docs/server.md.
Run: .venv/bin/python benchmarks/decide/sdk_burst.py [--clients 10] [--calls 100] [--busy]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import numpy as np
from typesafe_sdk import AsyncTypeSafeClient, Choice

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import busy_process, machine, publish, serve

SETTINGS = {"defaults": (), "--answer-within-s 5": ("--answer-within-s", "5")}
QUESTION = Choice(instructions="Which team should handle this ticket?",
                  criteria={"Billing": "charges, refunds, invoices", "Technical": "bugs, crashes, errors"})


async def one_call(client: AsyncTypeSafeClient, state: str) -> tuple[str, float]:
    started = time.perf_counter()
    try:
        await client.system_one(state=state, questions={"team": QUESTION}, model="jev-latest")
        outcome = "answered"
    except Exception as exc:  # what a caller sees, whatever it raises, is the measurement
        outcome = type(exc).__name__
    return outcome, time.perf_counter() - started


def statuses(metrics: str) -> dict[str, int]:
    """The server's counted requests to /v1/systemone by status, from its Prometheus text."""
    found = re.findall(r'jevserve_requests_total\{route="/v1/systemone",status="(\d+)"\} ([0-9.e+]+)', metrics)
    return {status: int(float(count)) for status, count in found}


async def burst(url: str, clients: int, calls: int, tag: str) -> dict:
    async with httpx.AsyncClient() as http:
        before = statuses((await http.get(url + "/metrics")).text)
    sdk = [AsyncTypeSafeClient(api_key="unused", base_url=url) for _ in range(clients)]
    try:
        started = time.perf_counter()
        outcomes = await asyncio.gather(*(
            one_call(client, f"{tag} ticket {c}-{i}: I was charged twice for March and the app crashes on login")
            for c, client in enumerate(sdk) for i in range(calls)))
        wall = time.perf_counter() - started
    finally:
        for client in sdk:
            await client.aclose()
    answered = [seconds for outcome, seconds in outcomes if outcome == "answered"]
    async with httpx.AsyncClient() as http:
        after = statuses((await http.get(url + "/metrics")).text)
    seen = {status: n - before.get(status, 0) for status, n in after.items() if n > before.get(status, 0)}
    return {
        "calls": len(outcomes),
        "outcomes": dict(Counter(outcome for outcome, _ in outcomes).most_common()),
        "answered_s": {"p50": float(np.percentile(answered, 50)), "p99": float(np.percentile(answered, 99)),
                       "max": max(answered)} if answered else None,
        "wall_s": wall,
        "http_statuses": seen,
    }


def markdown(result: dict) -> str:
    lines = [
        f"### A burst of SDK calls{', beside a busy core' if result['busy'] else ''} (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}, load before {result['machine']['loadavg_before']:.2f}"
        f"{', beside a process spinning a core' if result['busy'] else ''}. "
        f"{result['clients']} `AsyncTypeSafeClient`s (typesafe-sdk defaults: 10 s timeout, retries honouring "
        f"Retry-After) make {result['calls']} calls each at once, one choice question about a new state; a fresh "
        "`jevserve serve` per setting. A 499 is a client that hung up (an SDK timeout, sent again).",
        "",
        "| server | answered | raised | answered in (s): p50 / p99 / max | HTTP requests by status | burst (s) |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in result["settings"].items():
        raised = ", ".join(f"{n} {kind}" for kind, n in r["outcomes"].items() if kind != "answered") or "none"
        times = "–" if r["answered_s"] is None else " / ".join(f"{r['answered_s'][k]:.1f}" for k in ("p50", "p99",
                                                                                                     "max"))
        http = ", ".join(f"{n} × {status}" for status, n in sorted(r["http_statuses"].items()))
        lines.append(f"| {name} | {r['outcomes'].get('answered', 0)} of {r['calls']} | {raised} | {times} | {http} | "
                     f"{r['wall_s']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=10, help="SDK clients (default 10)")
    parser.add_argument("--calls", type=int, default=100, help="calls each client makes at once (default 100)")
    parser.add_argument("--busy", action="store_true", help="beside one process spinning a core")
    args = parser.parse_args()
    result = {"machine": machine(), "clients": args.clients, "calls": args.calls, "busy": args.busy, "settings": {}}
    for name, flags in SETTINGS.items():
        with serve("embedded", *flags) as served, busy_process(args.busy):
            url = f"http://127.0.0.1:{served.port}"
            asyncio.run(burst(url, 1, 4, f"warm {name}"))  # the first batches measure the time per unit of work
            result["settings"][name] = asyncio.run(burst(url, args.clients, args.calls, name))
    result["command"] = " ".join(["python benchmarks/decide/sdk_burst.py", *sys.argv[1:]])
    publish("sdk_burst" + ("_busy" if args.busy else ""), result, markdown(result))


if __name__ == "__main__":
    main()
