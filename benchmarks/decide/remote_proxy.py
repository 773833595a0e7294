"""The `remote:` backend: concurrency through a slow upstream, and the delay a hung upstream causes.

A fake System One upstream (uvicorn, 127.0.0.1, in this process) answers after `--upstream-delay-s` (0.3 s), or
never for a state starting with `hung`. `jevserve serve remote:URL` runs in a subprocess with its defaults
(`--remote-timeout-s 8`, `--remote-max-in-flight 32`).

- concurrency: 16 requests with distinct states sent at once; total time and the upstream's peak in-flight count
  (target: ≤ 1 s total; before, the proxy sent one upstream request at a time: 16 × 0.3 s);
- hung upstream: a request whose upstream never answers, and an unrelated request sent 0.2 s later; how long each
  takes (target: the unrelated one is not delayed; the hung one gets 504 after one timeout, not three).

Writes benchmarks/results/remote_proxy.json and a section of docs/server.md.
Run: .venv/bin/python benchmarks/decide/remote_proxy.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import free_port, machine, replace_section, serve, uptime, write_result

QUESTION = {"type": "noul", "instructions": "Is the customer asking for money back?"}


class Upstream:
    """A System One endpoint that answers after a delay (or never, for a `hung` state) and counts concurrency."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.in_flight = self.peak = 0
        self.app = Starlette(routes=[Route("/v1/systemone", self.answer, methods=["POST"])])

    async def answer(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(3600 if body["state"].startswith("hung") else self.delay_s)
        finally:
            self.in_flight -= 1
        answers = {qid: {"type": "noul", "noul": 0.7} for qid in body["questions"]}
        usage = {"input_tokens": 9, "output_tokens": 0}
        return JSONResponse({"model": body["model"], "answers": answers, "usage": usage})


def start_upstream(upstream: Upstream) -> tuple[uvicorn.Server, int]:
    port = free_port()
    config = uvicorn.Config(upstream.app, port=port, log_level="critical", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    return server, port


async def concurrency_round(client: httpx.AsyncClient, round_index: int) -> tuple[float, list[int]]:
    started = time.perf_counter()
    replies = await asyncio.gather(
        *(
            client.post("/v1/systemone", json={"state": f"ticket {round_index}-{i}", "questions": {"q": QUESTION}})
            for i in range(16)
        )
    )
    return time.perf_counter() - started, [r.status_code for r in replies]


async def hung_round(client: httpx.AsyncClient, round_index: int) -> dict:
    started = time.perf_counter()
    hung = asyncio.ensure_future(
        client.post("/v1/systemone", json={"state": f"hung {round_index}", "questions": {"q": QUESTION}})
    )
    await asyncio.sleep(0.2)
    other_started = time.perf_counter()
    other = await client.post("/v1/systemone", json={"state": f"other {round_index}", "questions": {"q": QUESTION}})
    other_s = time.perf_counter() - other_started
    hung_reply = await hung
    return {
        "hung_status": hung_reply.status_code,
        "hung_s": time.perf_counter() - started,
        "other_status": other.status_code,
        "other_s": other_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--upstream-delay-s", type=float, default=0.3)
    args = parser.parse_args()
    result = {"machine": machine(), "command": " ".join(["python benchmarks/decide/remote_proxy.py", *sys.argv[1:]])}
    upstream = Upstream(args.upstream_delay_s)
    server, upstream_port = start_upstream(upstream)

    async def run(port: int) -> tuple[list, list, int]:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            await concurrency_round(client, -1)  # warm the connection pools
            upstream.peak = 0
            conc = [await concurrency_round(client, r) for r in range(args.rounds)]
            peak = upstream.peak
            hung = [await hung_round(client, r) for r in range(2)]
        return conc, hung, peak

    try:
        with serve(f"remote:http://127.0.0.1:{upstream_port}") as served:
            conc, hung, peak = asyncio.run(run(served.port))
    finally:
        server.should_exit = True
    result["uptime_after"] = uptime()
    totals = [t for t, _ in conc]
    result.update(
        {
            "upstream_delay_s": args.upstream_delay_s,
            "concurrent_total_s": totals,
            "concurrent_total_s_median": float(np.median(totals)),
            "concurrent_statuses": sorted({s for _, codes in conc for s in codes}),
            "upstream_peak_in_flight": peak,
            "hung": hung,
        }
    )
    write_result("remote_proxy", result)
    med = result["concurrent_total_s_median"]
    hung_rows = "\n".join(
        f"| hung upstream, round {i + 1} | {h['hung_status']} after {h['hung_s']:.2f} s | "
        f"{h['other_status']} after {h['other_s'] * 1000:.0f} ms |"
        for i, h in enumerate(hung)
    )
    replace_section(
        "remote_proxy",
        f"""## The remote backend: a slow and a hung upstream

`jevserve serve remote:URL` (defaults: one 8 s deadline per request, 32 upstream requests in flight) in front of a
fake upstream that answers after {args.upstream_delay_s:g} s, or never. Measured {result["machine"]["when"]};
`uptime` before: `{result["machine"]["uptime_before"]}`; after: `{result["uptime_after"]}`.
Command: `{result["command"]}` (results: `benchmarks/results/remote_proxy.json`).

16 concurrent requests with distinct states: median total {med:.2f} s over {args.rounds} rounds (all:
{", ".join(f"{t:.2f}" for t in totals)} s; target ≤ 1 s: {"met" if med <= 1 else "not met"}); the upstream saw
up to {peak} requests at once.

| scenario | the request to the hung upstream | an unrelated request sent 0.2 s later |
|---|---|---|
{hung_rows}
""",
    )
    print({k: result[k] for k in ("concurrent_total_s_median", "upstream_peak_in_flight", "hung")})


if __name__ == "__main__":
    main()
