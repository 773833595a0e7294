"""A misbehaving System One upstream on 127.0.0.1 for fault-injection tests: the state text picks the fault.

A state starting with `mode:<name>` gets that behaviour; anything else is answered correctly (deterministic
probabilities). The server counts requests and the peak number in flight.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

SLOW_S = 0.3


def good_answer(question: dict) -> dict:
    kind = question["type"]
    if kind == "noul":
        return {"type": "noul", "noul": 0.8}
    names = list(question["criteria"]) if kind == "choice" else [str(i) for i in range(len(question["criteria"]))]
    probs = {name: 1.0 / len(names) for name in names}
    if kind == "choice":
        return {"type": "choice", "choice": names[0], "probabilities": probs, "confidence": 0.0}
    legend = dict(zip(names, question["criteria"], strict=True))
    return {"type": "score", "score": 0.0, "legend": legend, "probabilities": probs, "confidence": 0.0}


class FakeUpstream:
    """Counters shared with the test, and the Starlette app."""

    def __init__(self) -> None:
        self.hits = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.app = Starlette(routes=[Route("/v1/systemone", self.systemone, methods=["POST"])])

    async def systemone(self, request: Request) -> Response:
        self.hits += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return await self._answer(json.loads(await request.body()))
        finally:
            self.in_flight -= 1

    async def _answer(self, body: dict) -> Response:
        state = body["state"] if isinstance(body["state"], str) else ""
        mode = state.split()[0].removeprefix("mode:") if state.startswith("mode:") else "ok"
        answers = {qid: good_answer(q) for qid, q in body["questions"].items()}
        ok = {"model": body["model"], "answers": answers, "usage": {"input_tokens": 1234, "output_tokens": 0}}
        if mode == "slow":
            await asyncio.sleep(SLOW_S)
        elif mode == "hung":
            await asyncio.sleep(3600)
        elif mode == "429":
            return _error(429, "rate_limit_error", "slow down", {"Retry-After": "1", "retry-after-ms": "50"})
        elif mode == "429forever":  # an absurd hint and a body with no detail
            return Response("{}", 429, {"Retry-After": "99999999999"}, media_type="application/json")
        elif mode == "503":
            return _error(503, "overloaded_error", "upstream is down for maintenance")
        elif mode == "401":
            return _error(401, "authentication_error", "invalid API key")
        elif mode == "404":
            return _error(404, "not_found", "unknown model")
        elif mode == "422":
            return _error(422, "api_usage_error", "the upstream's stricter rule")
        elif mode == "wrongcase":
            for answer in answers.values():
                if "probabilities" in answer:
                    answer["probabilities"] = {k.lower(): v for k, v in answer["probabilities"].items()}
        elif mode == "nan":
            for answer in answers.values():
                if answer["type"] == "noul":
                    answer["noul"] = float("nan")
            return Response(json.dumps(ok), media_type="application/json")  # json.dumps writes NaN
        elif mode in ("boolnoul", "textnoul"):  # what lax parsing would read as a certain yes, and as 0.5
            for answer in answers.values():
                if answer["type"] == "noul":
                    answer["noul"] = True if mode == "boolnoul" else "0.5"
        elif mode == "negativeusage":
            ok["usage"]["input_tokens"] = -5
        elif mode == "missing":
            answers.popitem()
        elif mode == "zstd":  # an encoding the proxy does not ask for (httpx would inflate it whole)
            return Response(b"(zstd frame)", 200, {"Content-Encoding": "zstd"}, media_type="application/json")
        elif mode == "gzipbomb":  # 40 KB of gzip that inflates to 32 MiB
            return Response(gzip.compress(b" " * (32 * 1024 * 1024)), 200, {"Content-Encoding": "gzip"},
                            media_type="application/json")
        elif mode == "429broken":  # a refusal whose body breaks off: still the refusal, with its hint
            async def broken():
                yield b'{"detail": {"mess'
                raise RuntimeError("connection dropped")

            return StreamingResponse(broken(), 429, {"Retry-After": "3"}, media_type="application/json")
        elif mode == "redirect":
            return Response("", 307, {"Location": "https://elsewhere.example/v1/systemone"})
        elif mode == "empty503":
            return Response("", 503)
        elif mode == "huge":  # a valid answer padded past the contract's 16 MiB
            ok["x_pad"] = "a" * (17 * 1024 * 1024)
        elif mode == "truncated":
            return Response(json.dumps(ok)[:40], media_type="application/json")
        return JSONResponse(ok)


def _error(status: int, error_type: str, message: str, headers: dict | None = None) -> Response:
    return JSONResponse({"detail": {"error_type": error_type, "message": message}}, status, headers=headers)


@contextmanager
def fake_upstream() -> Iterator[tuple[str, FakeUpstream]]:
    """Serve a FakeUpstream on a free loopback port; yields (base URL, the upstream's counters)."""
    upstream = FakeUpstream()
    with serving(upstream.app) as url:
        yield url, upstream


@contextmanager
def serving(app) -> Iterator[str]:
    """Serve an ASGI app on a free loopback port; yields its base URL."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="critical", access_log=False, timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("fake upstream did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def resetting_upstream() -> Iterator[str]:
    """A loopback port that reads a little of each request and then resets the connection (RST)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.recv(1024)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
