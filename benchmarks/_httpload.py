"""A minimal keep-alive HTTP/1.1 load generator on asyncio streams, light enough not to starve a 2-core server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence


async def read_content_length(reader: asyncio.StreamReader) -> int:
    """Read an HTTP/1.1 message's header lines up to the blank line; its Content-Length (0 when absent)."""
    return (await read_framing(reader))[0]


async def read_framing(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """Read an HTTP/1.1 message's header lines up to the blank line; (Content-Length or 0, chunked or not)."""
    length, chunked = 0, False
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            return length, chunked
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True


async def read_body(reader: asyncio.StreamReader, length: int, chunked: bool) -> bytes:
    """The message body: `length` bytes, or chunks to the last one (a proxy that may change a body sends those)."""
    if not chunked:
        return await reader.readexactly(length)
    parts = []
    while (size := int((await reader.readline()).split(b";")[0].strip(), 16)) > 0:
        parts.append((await reader.readexactly(size + 2))[:-2])
    while (await reader.readline()) not in (b"\r\n", b""):  # trailers, if any, then the blank line
        pass
    return b"".join(parts)


async def _post(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str, body: bytes) -> int:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    writer.write(head + body)
    await writer.drain()
    status_line = await reader.readline()
    await reader.readexactly(await read_content_length(reader))
    return int(status_line.split()[1])


async def run_load(
    host: str, port: int, bodies: Sequence[bytes], concurrency: int, path: str = "/v1/systemone"
) -> tuple[list[float], float]:
    """Send every body once over `concurrency` keep-alive connections; returns per-request latencies and wall time."""
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    latencies: list[float] = []

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while True:
                try:
                    body = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                started = time.perf_counter()
                status = await _post(reader, writer, path, body)
                latencies.append(time.perf_counter() - started)
                if status != 200:
                    raise RuntimeError(f"server answered {status}")
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, time.perf_counter() - started
