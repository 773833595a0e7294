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

Decide = Callable[[Mapping[str, str], bytes], Forward | Respond]


def rewrite_model(headers: Mapping[str, str], body: bytes) -> Forward | Respond:
    """The default script: set the body's model to `small`, stamp a header, keep the reply for close()."""
    if not body:
        return Forward()
    try:
        payload = json.loads(body)
    except ValueError:
        return error_reply(400, "request body is not valid JSON")
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

    async def response_body(self, body: bytes) -> bytes | None:
        self.script.replies.append(body)
        return self.script.replace_reply(body)

    async def close(self, end: StreamEnd) -> None:
        self.script.ends.append(end)


@contextlib.asynccontextmanager
async def serving(decisions, settings: StreamSettings | None = None) -> AsyncIterator[grpc.aio.Channel]:
    """An ext_proc server on a free loopback port and a channel to it, torn down afterwards."""
    server = ExtProcServer(decisions, settings)
    port = await server.start("127.0.0.1:0")
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield channel
    finally:
        await channel.close()
        await server.stop(grace_s=0.5)
