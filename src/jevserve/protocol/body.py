"""Reading a request body within a deadline, for both HTTP servers (the System One server and the gateway).

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
