"""What the gateway benchmarks share: the stub-and-gateway setup, the prompts and bodies they send, a keep-alive
load loop reading the gateway's timing headers, and per-thread CPU from /proc."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import time
from pathlib import Path

TICKS_PER_S = os.sysconf("SC_CLK_TCK")
TOPICS = (
    "gardening",
    "tax law",
    "rust lifetimes",
    "baking bread",
    "jazz history",
    "orbital mechanics",
    "chess",
    "marathon training",
    "sql indexes",
    "medieval castles",
    "tea",
    "volcanoes",
    "origami",
    "bees",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prompts(n: int, offset: int) -> list[str]:
    """Distinct, ordinary prompts (so no embedding cache hit and no guard blocks)."""
    return [
        f"Request {offset + i}: could you explain {TOPICS[(offset + i) % len(TOPICS)]} to a beginner in "
        f"{3 + (offset + i) % 5} short points?"
        for i in range(n)
    ]


async def _post(reader, writer, path: str, body: bytes) -> tuple[int, dict[str, str]]:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    writer.write(head.encode() + body)
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    headers, length = {}, 0
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", 0))
    await reader.readexactly(length)
    return status, headers


async def load(port: int, path: str, bodies: list[bytes], concurrency: int) -> list[dict]:
    """Send every body once over `concurrency` keep-alive connections; per-request latency and gateway headers."""
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    records: list[dict] = []

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while not queue.empty():
                body = queue.get_nowait()
                started = time.perf_counter()
                status, headers = await _post(reader, writer, path, body)
                if status != 200:
                    raise RuntimeError(f"answered {status}: {headers}")
                records.append(
                    {
                        "ms": (time.perf_counter() - started) * 1000,
                        "decision_ms": float(headers.get("x-jevserve-decision-ms", "nan")),
                        "overhead_ms": float(headers.get("x-jevserve-overhead-ms", "nan")),
                    }
                )
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return records


def body(model: str, text: str) -> bytes:
    return json.dumps({"model": model, "messages": [{"role": "user", "content": text}]}).encode()


def wait_port(port: int, process: subprocess.Popen, timeout_s: float = 120, *, ready_path: str | None = None) -> None:
    """Return once `port` accepts connections and, with `ready_path` (a gateway's "/healthz", which answers 503
    while the gateway is still being built), once that path answers 200."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode}")
        try:
            if ready_path is None:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return
            elif httpx.get(f"http://127.0.0.1:{port}{ready_path}", timeout=1.0).status_code == 200:
                return
        except (OSError, httpx.HTTPError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"nothing {'ready' if ready_path else 'listens'} on {port}")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def gateway_config(stub_port: int) -> dict:
    """Route `plain` (no decision: a plain proxy) and route `decide` (guard, harm, clarify, priority), one stub."""
    return {
        "decision_timeout_ms": 30000,  # measure the decision, never its fallback
        "upstreams": [{"name": "stub", "url": f"http://127.0.0.1:{stub_port}/v1", "max_concurrency": 256}],
        "routes": [
            {"model": "plain"},
            {
                "model": "decide",
                "guard": {"action": "flag"},
                "harm": {"action": "flag"},
                "clarify": {"threshold": 1.0},
                "priority": {},
                "admission": {"deadline_s": 120},
            },
        ],
    }


def thread_cpu_s(pid: int) -> tuple[float, float]:
    """(main thread, other threads) CPU seconds of process `pid`, user + system."""
    main = other = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile (its time is lost; it is tiny)
        seconds = (int(fields[11]) + int(fields[12])) / TICKS_PER_S  # utime, stime (fields 14, 15 of stat)
        if int(task.name) == pid:
            main += seconds
        else:
            other += seconds
    return main, other


WAYS = (("direct", "stub"), ("off", "plain"), ("on", "decide"))


def cpu_per_request(pid: int, port: int, model: str, n: int, concurrency: int, offset: int) -> dict:
    """Send `n` distinct requests and return the process's CPU ms per request (event loop, other, total)."""
    bodies = [body(model, t) for t in prompts(n, offset)]
    main0, other0 = thread_cpu_s(pid)
    asyncio.run(load(port, "/v1/chat/completions", bodies, concurrency))
    main1, other1 = thread_cpu_s(pid)
    loop_ms, other_ms = (main1 - main0) * 1000 / n, (other1 - other0) * 1000 / n
    return {"event_loop_ms": loop_ms, "other_threads_ms": other_ms, "total_ms": loop_ms + other_ms}


def _rounded(summary: dict) -> dict:
    return {name: {k: round(v, 3) for k, v in s.items()} for name, s in summary.items()}


def measure_cpu(stub_pid: int, stub_port: int, gw_pid: int, gw_port: int, requests: int, rounds: int) -> dict:
    """CPU ms per request, median over rounds, for direct (the stub's own CPU), decisions off and on."""
    results: dict = {}
    offset = 50_000_000
    for concurrency in (1, 32):
        per_way: dict[str, list[dict]] = {name: [] for name, _ in WAYS}
        for _ in range(rounds):
            for name, model in WAYS:
                pid, port = (stub_pid, stub_port) if name == "direct" else (gw_pid, gw_port)
                per_way[name].append(cpu_per_request(pid, port, model, requests, concurrency, offset))
                offset += requests
        results[f"concurrency_{concurrency}"] = {
            "num_requests": requests,
            "rounds": per_way,
            "median": {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in per_way.items()},
        }
        print(f"cpu concurrency {concurrency}: {json.dumps(_rounded(results[f'concurrency_{concurrency}']['median']))}")
    return results
