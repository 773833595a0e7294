"""Reading a request body within a size cap and a deadline, for both HTTP servers (the System One server and the
gateway, which turn the two errors here into their own error shapes: 413 and 408).

A client that declares a body and stops sending it would otherwise hold its connection, and the coroutine serving
it, open for as long as it likes: uvicorn's keep-alive timeout covers idle connections, not a body in progress. Every
chunk must arrive before the body's deadline; otherwise the server answers 408 and the connection closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator

BODY_TIMEOUT_S = 30.0  # the whole body, from the first byte read to the last


class BodyTimeoutError(Exception):
    """The request body did not arrive within its deadline."""


class BodyTooLargeError(Exception):
    """The request body is over the size cap (declared so, or found so while reading)."""


async def body_chunks(stream: AsyncIterable[bytes], timeout_s: float = BODY_TIMEOUT_S) -> AsyncIterator[bytes]:
    """The chunks of `stream`, raising BodyTimeoutError when the whole body has not arrived within `timeout_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    chunks = aiter(stream)
    while True:
        try:
            chunk = await asyncio.wait_for(anext(chunks), timeout=max(0.0, deadline - loop.time()))
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise BodyTimeoutError(
                f"the request body did not arrive within {timeout_s:g} s; send the whole body without pausing"
            ) from None
        yield chunk


async def read_capped(
    content_length: str | None, stream: AsyncIterable[bytes], max_bytes: int, timeout_s: float = BODY_TIMEOUT_S
) -> bytes:
    """The body as sent; BodyTooLargeError as soon as it is over `max_bytes` (or declares so), BodyTimeoutError when
    it has not all arrived within `timeout_s`."""
    if content_length is not None and content_length.isdigit() and int(content_length) > max_bytes:
        raise BodyTooLargeError(f"request body is {content_length} bytes; the limit is {max_bytes} bytes")
    chunks, size = [], 0
    async for chunk in body_chunks(stream, timeout_s):
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLargeError(f"request body is over the limit of {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
