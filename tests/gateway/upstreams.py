"""Builders for gateway tests: stub upstreams as handler functions, apps wired to them, a loopback server."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import zlib
from collections.abc import Callable

import httpx
import numpy as np
import uvicorn

from jevserve.gateway.app import create_app
from jevserve.gateway.config import parse_config
from jevserve.gateway.decider import Decider, FixedDecider


def completion(
    text: str = "hello from the stub",
    *,
    model: str = "stub",
    finish_reason: str = "stop",
    tool_calls: list | None = None,
) -> dict:
    message: dict = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }


def sse_events(texts: list[str], *, model: str = "stub", usage: bool = True, done: bool = True) -> bytes:
    chunks = [
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": model,
            "choices": [{"index": 0, "delta": {"content": t}, "finish_reason": None}],
        }
        for t in texts
    ]
    chunks.append(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
    )
    if usage:
        chunks.append(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": model,
                "choices": [],
                "usage": {"prompt_tokens": 3, "completion_tokens": len(texts), "total_tokens": 3 + len(texts)},
            }
        )
    out = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks)
    return out + (b"data: [DONE]\n\n" if done else b"")


class CutStream(httpx.AsyncByteStream):
    """A response body that sends `first` and then fails as a dropped connection would."""

    def __init__(self, first: bytes) -> None:
        self.first = first

    async def __aiter__(self):
        yield self.first
        raise httpx.ReadError("connection reset by upstream")

    async def aclose(self) -> None:
        return None


class StubUpstream:
    """An OpenAI-compatible handler: records requests; `reply(body)` decides the answer."""

    def __init__(self, reply: Callable[[dict], httpx.Response] | None = None) -> None:
        self.requests: list[dict] = []
        self.reply = reply or self.default_reply

    @staticmethod
    def default_reply(body: dict) -> httpx.Response:
        if body.get("stream"):
            return httpx.Response(
                200, content=sse_events(["hello", " from", " the stub"]), headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json=completion(model=body.get("model", "stub")))

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        return self.reply(body)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def streamed_when_asked(reply: Callable[[dict], httpx.Response]) -> Callable[[dict], httpx.Response]:
    """`reply`'s whole chat completion, sent as the events vLLM would stream for it when the request streams: per
    choice its content, each tool call (id, type and name, then its arguments) or legacy function call, its finish."""
    def streaming(body: dict) -> httpx.Response:
        whole = reply(body)
        if not body.get("stream"):
            return whole
        completion = whole.json()
        head = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
        chunks = []
        for choice in completion["choices"]:
            index, message = choice["index"], choice["message"]
            def chunk(delta, finish=None, index=index):
                return {**head, "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}
            chunks.append(chunk({"role": "assistant", "content": message.get("content") or ""}))
            for position, call in enumerate(message.get("tool_calls") or []):
                function = call["function"]
                chunks.append(chunk({"tool_calls": [{"index": position, "id": call["id"], "type": "function",
                                                     "function": {"name": function["name"], "arguments": ""}}]}))
                chunks.append(chunk({"tool_calls": [{"index": position,
                                                     "function": {"arguments": function["arguments"]}}]}))
            if message.get("function_call"):
                chunks.append(chunk({"function_call": message["function_call"]}))
            chunks.append(chunk({}, choice["finish_reason"]))
        events = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
        return httpx.Response(200, content=events, headers={"content-type": "text/event-stream"})

    return streaming


def char_embed(texts):
    """Bag-of-characters unit vectors: near-identical texts are near, so tests control cache neighbours."""
    rows = []
    for text in texts:
        v = np.zeros(64, dtype=np.float32)
        for ch in text.lower():
            v[ord(ch) % 64] += 1
        rows.append(v / max(float(np.linalg.norm(v)), 1e-9))
    return np.stack(rows)


def make_app(
    route: dict | None = None,
    *,
    answers: dict | None = None,
    decider=None,
    upstreams=None,
    config: dict | None = None,
    store=None,
):
    """A gateway with one route `m` (extra keys from `route`) over stub upstreams (name → StubUpstream)."""
    upstreams = upstreams or {"u": StubUpstream()}
    data = {
        "decision_timeout_ms": 300,
        "upstreams": [{"name": n, "url": f"http://{n}.test/v1", "max_retries": 1, "backoff_s": 0.0} for n in upstreams],
        "routes": [{"model": "m", **(route or {})}],
        **(config or {}),
    }
    decider = decider or FixedDecider(answers or {})
    app = create_app(
        parse_config(data),
        decider=decider,
        transports={n: u.transport() if isinstance(u, StubUpstream) else u for n, u in upstreams.items()},
        embed=char_embed,
        store=store,
    )
    return app, decider, upstreams


def client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://gw")


def run(coro):
    return asyncio.run(coro)


class LoopbackServer:
    """Serve an app with uvicorn on a free loopback port in a thread (context manager)."""

    def __init__(self, app) -> None:
        self.app = app
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.sock = sock
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> LoopbackServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("loopback server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)


class TextDecider(Decider):
    """A decider whose answers depend only on the text it is shown: `score(policy, state)` is P(first option).

    With `hash_score` any change in what a decision reads can flip its verdict, as a real model's can; tests use it
    to show that something (a system prompt, offered tools) does not reach a decision's text.
    """

    name = "text"

    def __init__(self, score: Callable[[str, str], float]) -> None:
        self.score = score
        self.states: list[str] = []

    async def decide(self, asks):
        out = {}
        for a in asks:
            self.states.append(a.state)
            p = float(self.score(a.question_id.partition(":")[0], a.state))
            n = a.question.num_options
            out[a.question_id] = np.array([p, 1.0 - p]) if n == 2 else np.full(n, 1.0 / n)
        return out


def hash_score(policy: str, state: str) -> float:
    """A probability fixed by the text alone (crc32), spread over [0, 1)."""
    return (zlib.crc32(f"{policy}\0{state}".encode()) % 1000) / 1000
