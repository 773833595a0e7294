"""Soak: mixed valid and malformed traffic at a fixed rate, with 3,000-question requests, for a set duration.

`jevserve serve embedded` in a subprocess. Before the load, the latency of a lone 1-question request (the
unloaded p99). Then for `--duration-s` (10 minutes is the target): `--rate` requests per second, open loop, in a
fixed cycle of 20: 12 valid 1-question requests (new state each), 2 invalid JSON (422), 2 schema errors (422),
1 unknown model (404), 1 wrong media type (415), 1 body over the size limit (413) and 1 client that disconnects
mid-upload (the script records these as "499" itself; the server's own count is read from /metrics at the end);
plus a 3,000-question request every `--big-every-s`. The server's RSS is read every 5 s.

Checked: no 5xx; every malformed request gets its 4xx; small requests' p99 within 5 × unloaded p99;
RSS bounded (first, max and last sample, and the growth over the second half).

Writes benchmarks/results/soak.json and a section of docs/server.md.
Run: nice -n 10 .venv/bin/python benchmarks/decide/soak.py --duration-s 600
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import machine, pct_ms, replace_section, rss_mib, serve, uptime, write_result

QUESTION = {"type": "noul", "instructions": "Is the customer asking for money back?"}
CHOICE = {"Billing": "payments and invoices", "Technical": None, "Sales": "pricing"}
CYCLE = ["valid"] * 12 + ["bad_json"] * 2 + ["schema"] * 2 + ["model", "media", "too_big", "disconnect"]
EXPECTED = {"valid": 200, "bad_json": 422, "schema": 422, "model": 404, "media": 415, "too_big": 413}
MAX_BODY = 1024 * 1024
_fresh = itertools.count()


def small_body() -> dict:
    return {"state": f"ticket {next(_fresh)}: I was charged twice and want a refund", "questions": {"q": QUESTION}}


def big_body() -> dict:
    n = next(_fresh)
    return {
        "state": f"ticket {n}",
        "questions": {
            f"q{i}": {"type": "choice", "instructions": f"Which team, case {n}-{i}?", "criteria": CHOICE}
            for i in range(3000)
        },
    }


async def send(client: httpx.AsyncClient, kind: str, port: int) -> tuple[str, int, float]:
    started = time.perf_counter()
    if kind == "disconnect":
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
        writer.write(b"Content-Length: 5000\r\n\r\n" + b'{"state": "I will leave before the end')
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.close()
        return kind, 499, time.perf_counter() - started
    if kind == "valid":
        r = await client.post("/v1/systemone", json=small_body())
    elif kind == "bad_json":
        r = await client.post("/v1/systemone", content=b'{"state": "x", "questions": {', headers=_json)
    elif kind == "schema":
        r = await client.post("/v1/systemone", json={"state": "x", "questions": {"q": {"type": "score"}}})
    elif kind == "model":
        r = await client.post("/v1/systemone", json={**small_body(), "model": "no-such-model"})
    elif kind == "media":
        r = await client.post("/v1/systemone", content=b"state=x", headers={"content-type": "text/plain"})
    elif kind == "too_big":
        r = await client.post("/v1/systemone", content=b" " * (MAX_BODY + 1), headers=_json)
    else:  # big
        r = await client.post("/v1/systemone", json=big_body())
    return kind, r.status_code, time.perf_counter() - started


_json = {"content-type": "application/json"}


async def soak(port: int, pid: int, duration_s: float, rate: float, big_every_s: float) -> dict:
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120, limits=limits) as client:
        for _ in range(5):
            await send(client, "valid", port)
        alone = [(await send(client, "valid", port))[2] for _ in range(50)]
        tasks: list[asyncio.Task] = []
        rss: list[tuple[float, float]] = []
        started = time.perf_counter()

        async def sample_rss() -> None:
            while time.perf_counter() - started < duration_s:
                rss.append((time.perf_counter() - started, rss_mib(pid)))
                await asyncio.sleep(5)

        async def fixed_rate() -> None:
            for i in itertools.count():
                due = started + i / rate
                if due - started >= duration_s:
                    return
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                tasks.append(asyncio.ensure_future(send(client, CYCLE[i % len(CYCLE)], port)))

        async def big() -> None:
            while big_every_s > 0 and time.perf_counter() - started < duration_s:
                tasks.append(asyncio.ensure_future(send(client, "big", port)))
                await asyncio.sleep(min(big_every_s, max(0.0, started + duration_s - time.perf_counter())))

        await asyncio.gather(sample_rss(), fixed_rate(), big())
        rss.append((time.perf_counter() - started, rss_mib(pid)))
        done = await asyncio.gather(*tasks, return_exceptions=True)
        metrics = (await client.get("/metrics")).text
    outcomes = [d for d in done if not isinstance(d, BaseException)]
    errors = [repr(d) for d in done if isinstance(d, BaseException)]
    server_side = {
        "client_disconnects_total": _metric(metrics, "jevserve_client_disconnects_total"),
        "requests_499": _metric(metrics, 'jevserve_requests_total{route="/v1/systemone",status="499"}'),
        "errors_internal": _metric(metrics, 'jevserve_errors_total{error_type="internal_error"}'),
    }
    return {"alone": alone, "outcomes": outcomes, "client_errors": errors, "rss": rss, "server_side": server_side}


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration-s", type=float, default=600.0, help="length of the load (default: 600)")
    parser.add_argument("--rate", type=float, default=10.0, help="requests per second, all kinds (default: 10)")
    parser.add_argument(
        "--big-every-s", type=float, default=2.0, help="seconds between 3,000-question requests (0: none)"
    )
    parser.add_argument(
        "--max-chunk-ms", type=float, default=None,
        help="the server's --max-chunk-ms (default: the server's own default)",
    )
    parser.add_argument(
        "--name", default="soak", help="results file and docs section name (default: soak; another name keeps both)"
    )
    args = parser.parse_args()
    result = {"machine": machine(), "command": " ".join(["python benchmarks/decide/soak.py", *sys.argv[1:]])}
    # 3,000-question requests: over the default cap (1,024, half the default queue), so the queue is raised to 6,000
    # (a request may hold half of it) and the cap to 3,000
    server_args = ["--max-body-bytes", str(MAX_BODY), "--max-questions", "3000", "--max-queue", "6000"]
    if args.max_chunk_ms is not None:
        server_args += ["--max-chunk-ms", f"{args.max_chunk_ms:g}"]
    result["server_args"] = server_args
    with serve("embedded", *server_args) as served:
        raw = asyncio.run(soak(served.port, served.pid, args.duration_s, args.rate, args.big_every_s))
    result["uptime_after"] = uptime()
    statuses = Counter(f"{kind} {status}" for kind, status, _ in raw["outcomes"])
    small = [s for kind, status, s in raw["outcomes"] if kind == "valid" and status == 200]
    wrong = {
        key: n
        for key, n in statuses.items()
        if key.split()[0] in EXPECTED and int(key.split()[1]) != EXPECTED[key.split()[0]]
    }
    server_errors = sum(n for key, n in statuses.items() if int(key.split()[1]) >= 500)
    rss_values = [m for _, m in raw["rss"]]
    half = [m for t, m in raw["rss"] if t >= args.duration_s / 2]
    alone, loaded = pct_ms(raw["alone"]), pct_ms(small)
    result.update(
        {
            "duration_s": args.duration_s,
            "rate_per_s": args.rate,
            "big_every_s": args.big_every_s,
            "statuses": dict(sorted(statuses.items())),
            "unexpected_statuses": wrong,
            "server_errors_5xx": server_errors,
            "client_errors": raw["client_errors"][:20],
            "server_metrics": raw["server_side"],
            "small_alone": alone,
            "small_under_load": loaded,
            "p99_over_unloaded_p99": loaded["p99_ms"] / alone["p99_ms"],
            "rss_mib": {
                "first": rss_values[0],
                "max": max(rss_values),
                "last": rss_values[-1],
                "second_half_growth": (half[-1] - half[0]) if len(half) > 1 else 0.0,
                "samples": raw["rss"],
            },
        }
    )
    write_result(args.name, result)
    ratio, rss, side = result["p99_over_unloaded_p99"], result["rss_mib"], raw["server_side"]
    status_text = ", ".join(f"{k}: {n}" for k, n in sorted(statuses.items()))
    chunk = "" if args.max_chunk_ms is None else f", `--max-chunk-ms {args.max_chunk_ms:g}`"
    replace_section(
        args.name,
        f"""## Soak: mixed valid and malformed traffic with 3,000-question requests{chunk}

`jevserve serve embedded {" ".join(server_args)}`; {args.rate:g} requests/s open loop for
**{args.duration_s:g} s** (the target is 600 s; this is the duration that was run), a fixed cycle of 12 valid
1-question requests, 2 invalid JSON, 2 schema errors, 1 unknown model, 1 wrong media type, 1 oversized body and 1
client leaving mid-upload; plus a 3,000-question request every {args.big_every_s:g} s. Measured
{result["machine"]["when"]}; `uptime` before: `{result["machine"]["uptime_before"]}`; after:
`{result["uptime_after"]}` (shared machine). Command: `{result["command"]}` (results:
`benchmarks/results/{args.name}.json`).

| measure | value |
|---|---|
| responses (kind status: count) | {status_text} |
| 5xx responses / malformed requests with an unexpected status | {server_errors} / {sum(wrong.values())} |
| the server's own count: client disconnects / 499s / internal errors | \
{side["client_disconnects_total"]:.0f} / {side["requests_499"]:.0f} / {side["errors_internal"]:.0f} |
| 1-question p99 unloaded / under the soak (n = {loaded["n"]}) | {alone["p99_ms"]:.1f} / {loaded["p99_ms"]:.1f} ms |
| p99 under the soak / unloaded p99 (target < 5) | {ratio:.2f} ({"met" if ratio < 5 else "not met"}) |
| server RSS first / max / last sample | {rss["first"]:.0f} / {rss["max"]:.0f} / {rss["last"]:.0f} MiB |
| RSS growth over the second half | {rss["second_half_growth"]:+.1f} MiB |
""",
    )
    print({k: result[k] for k in ("statuses", "small_alone", "small_under_load", "p99_over_unloaded_p99")})
    print(json.dumps({k: v for k, v in rss.items() if k != "samples"}))


if __name__ == "__main__":
    main()
