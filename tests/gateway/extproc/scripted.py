"""A stand-in for the gateway's decisions behind the ext_proc seam: outcomes set by the test, calls recorded."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field

import grpc

from jevserve.gateway.extproc import (
    Exchange,
    ExtProcServer,
    Forward,
    Respond,
    ResponseEdit,
    ResponsePlan,
    StreamEnd,
    StreamSettings,
    error_reply,
)
from jevserve.gateway.shapes import completion_to_chunks, sse

Decide = Callable[[Mapping[str, str], bytes], Forward | Respond]


def answer(completion: dict, *, stream: bool, headers: Mapping[str, str]) -> Respond:
    """A gateway-written chat completion as an immediate reply: JSON, or chunks ending in [DONE] when streaming."""
    if not stream:
        return Respond(200, json.dumps(completion).encode(), {**headers, "content-type": "application/json"})
    events = [sse(c) for c in completion_to_chunks(completion, include_usage=False)] + [sse("[DONE]")]
    return Respond(200, b"".join(events), {**headers, "content-type": "text/event-stream"})


def read_json(body: bytes) -> dict | Respond:
    """The request body as JSON, or the 400 the gateway's reader answers when it is not."""
    try:
        return json.loads(body)
    except ValueError:
        return error_reply(400, "request body is not valid JSON")


def rewrite_model(headers: Mapping[str, str], body: bytes) -> Forward | Respond:
    """The default script: set the body's model to `small`, stamp a header, keep the reply for close()."""
    payload = read_json(body) if body else Forward()
    if not isinstance(payload, dict):
        return payload
    payload["model"] = "small"
    return Forward(
        set_headers={"x-gateway-model-name": "small"},
        body=json.dumps(payload).encode(),
        response=ResponsePlan.OBSERVE,
        response_headers={"x-jevserve-decisions": "route=route"},
    )


@dataclass
class Scripted:
    """Decisions whose outcome comes from `decide`; every exchange's calls and its StreamEnd are recorded."""

    decide: Decide = rewrite_model
    replace_reply: Callable[[bytes], bytes | None] = lambda body: None
    delay_s: float = 0.0
    fail: bool = False
    reply_fail: bool = False  # reading the held reply raises
    name: str = "scripted"
    seen: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    replies: list[bytes] = field(default_factory=list)
    ends: list[StreamEnd] = field(default_factory=list)
    closed: asyncio.Event | None = None

    def open(self) -> Exchange:
        return _ScriptedExchange(self)

    async def aclose(self) -> None:
        return None

    async def wait_for_ends(self, n: int, timeout_s: float = 5.0) -> list[StreamEnd]:
        """The first `n` StreamEnds, waiting for streams still closing."""
        async with asyncio.timeout(timeout_s):
            while len(self.ends) < n:
                await asyncio.sleep(0.01)
        return self.ends


class _ScriptedExchange(Exchange):
    def __init__(self, script: Scripted) -> None:
        self.script = script

    async def request(self, headers: Mapping[str, str], body: bytes) -> Forward | Respond:
        self.script.seen.append((dict(headers), body))
        if self.script.delay_s:
            await asyncio.sleep(self.script.delay_s)
        if self.script.fail:
            raise RuntimeError("decision backend is down")
        return self.script.decide(headers, body)

    async def response_headers(self, status: int, headers: Mapping[str, str]) -> ResponseEdit:
        return ResponseEdit(set_headers={"x-upstream-status": str(status)})

    async def response_body(self, body: bytes, *, undecided: str | None = None) -> ResponseEdit:
        if undecided is not None:  # no fallbacks of its own: `--failure` decides, as the tests of it expect
            raise NotImplementedError(undecided)
        self.script.replies.append(body)
        if self.script.reply_fail:
            raise RuntimeError("reply decisions are down")
        return ResponseEdit(set_headers={"x-reply-read": "1"}, body=self.script.replace_reply(body))

    async def close(self, end: StreamEnd) -> None:
        self.script.ends.append(end)


@contextlib.asynccontextmanager
async def serving_at(decisions, settings: StreamSettings | None = None) -> AsyncIterator[tuple[grpc.aio.Channel, int]]:
    """An ext_proc server on a free loopback port: a channel to it and the port, torn down afterwards."""
    server = ExtProcServer(decisions, settings)
    port = await server.start("127.0.0.1:0")
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield channel, port
    finally:
        await channel.close()
        await server.stop(grace_s=0.5)


@contextlib.asynccontextmanager
async def serving(decisions, settings: StreamSettings | None = None) -> AsyncIterator[grpc.aio.Channel]:
    """An ext_proc server on a free loopback port and a channel to it, torn down afterwards."""
    async with serving_at(decisions, settings) as (channel, _port):
        yield channel
