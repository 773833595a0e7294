"""Head-of-line blocking: 1-question requests while 3,000-question requests arrive every second.

`jevserve serve embedded --max-batch 64` in a subprocess. First, on the idle server: the time of one
`--max-batch` chunk (a request of 64 questions, each with new instructions, so each needs a forward pass) and the
latency of a lone 1-question request. Then for `--duration-s`: a 3,000-question request (new instructions per
question) is sent every second, and a 1-question request (a new state each) every `--small-every-s`; the small
requests' latencies are compared with the chunk time (target: p99 ≤ 2 × one chunk). Large requests the server
refuses (429: one is already queued) are counted, not retried.

Writes benchmarks/results/head_of_line.json and a section of docs/server.md.
Run: nice -n 10 .venv/bin/python benchmarks/decide/head_of_line.py [--duration-s 60]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import machine, pct_ms, replace_section, serve, uptime, write_result

MAX_BATCH = 64
BIG = 3000
CHOICE = {"Billing": "payments and invoices", "Technical": None, "Sales": "pricing"}
_fresh = itertools.count()


def body(num_questions: int, state: str | None = None) -> dict:
    """`num_questions` choice questions whose instructions are new to the server (each costs a forward)."""
    n = next(_fresh)
    questions = {
        f"q{i}": {"type": "choice", "instructions": f"Which team, case {n}-{i}?", "criteria": CHOICE}
        for i in range(num_questions)
    }
    return {"state": state or f"ticket {n}: I was charged twice for invoice {n}", "questions": questions}


async def timed(client: httpx.AsyncClient, payload: dict) -> tuple[int, float]:
    started = time.perf_counter()
    r = await client.post("/v1/systemone", json=payload)
    return r.status_code, time.perf_counter() - started


async def scenario(port: int, duration_s: float, small_every_s: float) -> dict:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
        for _ in range(3):
            await timed(client, body(1))  # warm up
        chunk = [(await timed(client, body(MAX_BATCH)))[1] for _ in range(5)]
        alone = [(await timed(client, body(1)))[1] for _ in range(20)]
        big_tasks, small = [], []
        started = time.perf_counter()

        async def send_big() -> None:
            while time.perf_counter() - started < duration_s:
                big_tasks.append(asyncio.ensure_future(timed(client, body(BIG))))
                await asyncio.sleep(1.0)

        async def send_small() -> None:
            await asyncio.sleep(1.5)  # the first large request is running
            while time.perf_counter() - started < duration_s:
                small.append(await timed(client, body(1)))
                await asyncio.sleep(small_every_s)

        await asyncio.gather(send_big(), send_small())
        for task in big_tasks:
            task.cancel()
        outcomes = [t.result() for t in big_tasks if t.done() and not t.cancelled()]
    return {
        "chunk_s": chunk,
        "alone_s": alone,
        "small": small,
        "big_sent": len(big_tasks),
        "big_status": {str(s): sum(1 for code, _ in outcomes if code == s) for s in {c for c, _ in outcomes}},
        "big_unfinished": len(big_tasks) - len(outcomes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration-s", type=float, default=60.0)
    parser.add_argument("--small-every-s", type=float, default=0.25)
    args = parser.parse_args()
    result = {"machine": machine(), "command": " ".join(["python benchmarks/decide/head_of_line.py", *sys.argv[1:]])}
    # BIG is over the default cap (1,024 questions, half the default queue): the queue is raised to twice BIG (a
    # request may hold half of it) and the cap to BIG
    limits = ("--max-questions", str(BIG), "--max-queue", str(2 * BIG))
    with serve("embedded", "--max-batch", str(MAX_BATCH), "--max-body-bytes", str(16 * 1024 * 1024), *limits) as served:
        raw = asyncio.run(scenario(served.port, args.duration_s, args.small_every_s))
    result["uptime_after"] = uptime()
    chunk_ms = float(np.median(raw["chunk_s"]) * 1000)
    small_ok = [s for code, s in raw["small"] if code == 200]
    result.update(
        {
            "max_batch": MAX_BATCH,
            "chunk_ms_median": chunk_ms,
            "chunk_ms_all": [s * 1000 for s in raw["chunk_s"]],
            "small_alone": pct_ms(raw["alone_s"]),
            "small_under_load": pct_ms(small_ok),
            "small_status": {str(c): sum(1 for code, _ in raw["small"] if code == c) for c, _ in raw["small"]},
            "big_sent": raw["big_sent"],
            "big_status": raw["big_status"],
            "big_unfinished_at_end": raw["big_unfinished"],
        }
    )
    loaded, alone = result["small_under_load"], result["small_alone"]
    big = f"{raw['big_sent']} / {raw['big_status']} ({raw['big_unfinished']} still running at the end)"
    ratio = loaded["p99_ms"] / chunk_ms
    result["p99_over_chunk"] = ratio
    write_result("head_of_line", result)
    replace_section(
        "head_of_line",
        f"""## Head-of-line: small requests behind 3,000-question requests

`jevserve serve embedded --max-batch {MAX_BATCH}`; a {BIG}-question request (new instructions per question, so
every question costs a forward) sent every second for {args.duration_s:g} s, and a 1-question request (new state)
every {args.small_every_s:g} s. Measured {result["machine"]["when"]}; `uptime` before:
`{result["machine"]["uptime_before"]}`; after: `{result["uptime_after"]}` (shared machine).
Command: `{result["command"]}` (results: `benchmarks/results/head_of_line.json`).

| measure | value |
|---|---|
| one `--max-batch` chunk (64 new questions, alone, median of 5) | {chunk_ms:.0f} ms |
| 1-question request alone, p50 / p99 | {alone["p50_ms"]:.1f} / {alone["p99_ms"]:.1f} ms |
| 1-question requests under the load, p50 / p99 / max (n = {loaded["n"]}) | \
{loaded["p50_ms"]:.1f} / {loaded["p99_ms"]:.1f} / {loaded["max_ms"]:.1f} ms |
| p99 under load / one chunk (target ≤ 2) | {ratio:.2f} ({"met" if ratio <= 2 else "not met"}) |
| large requests sent / answered by status | {big} |

A large request is admitted only when no other large one is queued (the work ahead of it would exceed
`--max-queue`), so most get 429 with Retry-After; before this change a 1-question request waited for the whole
3,000-question batch (27.7 s on a loaded machine).
""",
    )
    print({k: result[k] for k in ("chunk_ms_median", "small_alone", "small_under_load", "big_status")})


if __name__ == "__main__":
    main()
