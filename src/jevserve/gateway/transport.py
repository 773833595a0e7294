"""The network under the gateway's upstream clients: an httpx transport that sends through aiohttp.

Why not httpx's own: its connection pool (httpcore 1.x) scans every pooled connection on each request start and
end, and asks the OS whether each idle one is readable (one `poll` syscall per connection), so with 32 requests
in flight a request cost the gateway ~4 ms of CPU (2 ms at concurrency 1), most of it in that scan; it also
writes headers and body as two syscalls and parses replies in Python. aiohttp keeps idle connections in a stack,
writes a small request in one syscall and parses with its C parser. The gateway still speaks httpx everywhere
above this (requests, responses, errors, and the transports tests inject), so only the wire changes.

aiohttp's errors are raised as the httpx errors they correspond to, so retries, fallbacks and stream error events
work as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import httpx

# Idle upstream connections are closed after this long: under uvicorn's default keep-alive (5 s, what vLLM
# runs), so the gateway closes an idle connection before the server does and never writes into a closing one.
KEEPALIVE_S = 4.0


class AiohttpTransport(httpx.AsyncBaseTransport):
    """Send httpx requests over one aiohttp session (created on the loop that first uses it)."""

    def __init__(self, *, max_connections: int, keepalive_s: float = KEEPALIVE_S) -> None:
        self.max_connections = max_connections
        self.keepalive_s = keepalive_s
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session_for_loop(self) -> aiohttp.ClientSession:
        # An aiohttp session belongs to one event loop; a caller on another loop gets a session of its own.
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.max_connections, keepalive_timeout=self.keepalive_s)
            # auto_decompress off: httpx.Response decodes Content-Encoding itself; cookies: httpx's client keeps
            # them (the gateway's clients send none), so aiohttp keeps no jar of its own
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar()
            )
            self._loop = loop
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send `request`; the response body streams from the connection until read or closed."""
        session = self._session_for_loop()
        timeout = request.extensions.get("timeout", {})
        client_timeout = aiohttp.ClientTimeout(
            total=None,
            connect=_add(timeout.get("pool"), timeout.get("connect")),
            sock_connect=timeout.get("connect"),
            sock_read=timeout.get("read"),
        )
        content = await request.aread()
        try:
            response = await session.request(
                request.method,
                str(request.url),
                headers=request.headers.multi_items(),
                data=content or None,
                allow_redirects=False,
                timeout=client_timeout,
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
            )
        except Exception as exc:
            raise _as_httpx_error(exc, request) from exc
        return httpx.Response(
            response.status,
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers],
            stream=_Body(response, request),
            extensions={"http_version": b"HTTP/1.1"},
            request=request,
        )

    async def aclose(self) -> None:
        """Close the session and its connections."""
        if self._session is not None and not self._session.closed:
            await self._session.close()


class _Body(httpx.AsyncByteStream):
    """An aiohttp response body as an httpx stream; closing it gives the connection back (or drops it)."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except Exception as exc:
            raise _as_httpx_error(exc, self._request) from exc

    async def aclose(self) -> None:
        self._response.release()


def _as_httpx_error(exc: Exception, request: httpx.Request) -> Exception:
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(f"connecting timed out: {exc}", request=request)
    if isinstance(exc, asyncio.TimeoutError):  # aiohttp's read timeouts are TimeoutErrors too
        return httpx.ReadTimeout(f"no answer in time: {exc}", request=request)
    if isinstance(exc, aiohttp.ClientConnectorError) and not isinstance(exc, aiohttp.ClientSSLError):
        # aiohttp's text names "ssl:default" even for plain http, which reads as a TLS fault in the gateway's log
        reason = getattr(exc.os_error, "strerror", None) or exc.os_error
        return httpx.ConnectError(f"cannot connect to {exc.host}:{exc.port} ({reason})", request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(str(exc), request=request)
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return httpx.RemoteProtocolError(str(exc) or type(exc).__name__, request=request)
    if isinstance(exc, aiohttp.ClientError | OSError):
        return httpx.ReadError(f"{type(exc).__name__}: {exc}", request=request)
    return exc


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b
