"""The aiohttp-backed upstream transport over a real loopback socket: answers, streams, keep-alive and errors
arrive as httpx would give them."""

from __future__ import annotations

import asyncio
import functools
import json
import socket

import httpx
import pytest

from jevserve.gateway.transport import AiohttpTransport


def in_loop(test):
    """Run an async test function in a fresh event loop."""

    @functools.wraps(test)
    def run() -> None:
        asyncio.run(test())

    return run


async def _serve(reply: bytes, *, delay_s: float = 0.0):
    """A raw HTTP/1.1 server answering every request with `reply`; counts the connections it accepted."""
    connections = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length)
                await asyncio.sleep(delay_s)
                writer.write(reply.replace(b"{echo}", body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], connections


def _json_reply(status: str = "200 OK") -> bytes:
    body = b'{"echo":{echo}}'
    return f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: ".encode() + b"{len}\r\n\r\n" + body


def _fixed(reply: bytes, body_len: int) -> bytes:
    return reply.replace(b"{len}", str(body_len).encode())


@in_loop
async def test_json_round_trip_reuses_one_connection() -> None:
    sent = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hé"}]}).encode()
    reply = _fixed(_json_reply(), len(b'{"echo":}') + len(sent))
    server, port, connections = await _serve(reply)
    client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}/v1", transport=AiohttpTransport(max_connections=4))
    try:
        for _ in range(3):
            response = await client.post(
                "/chat/completions", content=sent, headers={"content-type": "application/json"}
            )
            assert response.status_code == 200
            assert response.json() == {"echo": json.loads(sent)}
        assert len(connections) == 1  # keep-alive: the three requests shared one connection
    finally:
        await client.aclose()
        server.close()


@in_loop
async def test_status_and_headers_are_the_upstreams() -> None:
    reply = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Length: 2\r\n\r\n{}"
    server, port, _ = await _serve(reply)
    client = httpx.AsyncClient(transport=AiohttpTransport(max_connections=1))
    try:
        response = await client.post(f"http://127.0.0.1:{port}/x", json={})
        assert (response.status_code, response.headers["retry-after"], response.json()) == (429, "2", {})
    finally:
        await client.aclose()
        server.close()


@in_loop
async def test_stream_lines_arrive_in_order() -> None:
    events = b"data: 1\n\ndata: 2\n\ndata: [DONE]\n\n"
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(events), events)
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked
    server, port, _ = await _serve(reply)
    client = httpx.AsyncClient(transport=AiohttpTransport(max_connections=1))
    try:
        request = client.build_request("POST", f"http://127.0.0.1:{port}/x", json={"stream": True})
        response = await client.send(request, stream=True)
        lines = [line async for line in response.aiter_lines() if line]
        await response.aclose()
        assert lines == ["data: 1", "data: 2", "data: [DONE]"]
    finally:
        await client.aclose()
        server.close()


@in_loop
async def test_refused_connection_is_an_httpx_connect_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        client = httpx.AsyncClient(transport=AiohttpTransport(max_connections=1))
        try:
            with pytest.raises(httpx.ConnectError) as refused:
                await client.post(f"http://127.0.0.1:{port}/x", json={})
            # the host and the reason, without aiohttp's "ssl:default", which reads as a TLS fault for plain http
            assert str(refused.value).startswith(f"cannot connect to 127.0.0.1:{port} (")
            assert "ssl" not in str(refused.value)
        finally:
            await client.aclose()


@in_loop
async def test_slow_answer_is_an_httpx_read_timeout() -> None:
    server, port, _ = await _serve(_fixed(_json_reply(), 11), delay_s=1.0)
    client = httpx.AsyncClient(transport=AiohttpTransport(max_connections=1), timeout=httpx.Timeout(0.1))
    try:
        with pytest.raises(httpx.ReadTimeout):
            await client.post(f"http://127.0.0.1:{port}/x", content=b"{}")
    finally:
        await client.aclose()
        server.close()
