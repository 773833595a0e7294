"""The gateway while it starts: every request answered at once, none left waiting on an open port.

Building the gateway can take minutes: a decider whose calibration scores are neither packaged nor cached scores
every calibration request for each rate-based decision first (operating_points.py). A listening port that nothing
reads from holds a client's request until the client gives up, so `StartingApp` serves the port while the gateway is
built: until the build is done, `GET /healthz` answers 503 with `"status": "starting"` and what is being done (how
far, in tenths), and any other request 503 in OpenAI's error shape with `Retry-After` (OpenAI's clients retry 503s
and honour the header); then every request goes to the gateway's app, whose lifespan it runs. A build that fails
calls `on_failure` (the CLI prints the error and stops the server with exit status 2).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI

from jevserve.gateway.app import json_response

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

RETRY_AFTER_S = 5


class StartingApp:
    """An ASGI app that builds the gateway's app in a thread at startup and answers 503 until it is built."""

    def __init__(
        self,
        build: Callable[[Callable[[str], None]], FastAPI],
        *,
        on_ready: Callable[[FastAPI], None] | None = None,
        on_failure: Callable[[Exception], None] | None = None,
        retry_after_s: int = RETRY_AFTER_S,
    ) -> None:
        self.build = build
        self.on_ready = on_ready
        self.on_failure = on_failure
        self.retry_after_s = retry_after_s
        self.app: FastAPI | None = None
        self.failed: Exception | None = None
        self.doing = "loading"  # the latest progress message of the build
        self.started = time.monotonic()
        self._lifespans = contextlib.AsyncExitStack()

    def progress(self, message: str) -> None:
        """Record what the build is doing (it runs in a thread; a str assignment is atomic)."""
        self.doing = message

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif self.app is not None:
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            await self._starting(scope, receive, send)
        # a websocket before the app is built: nothing in the gateway speaks it, so it is simply not accepted

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._start_build()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self._lifespans.aclose()  # the built app's lifespan: the gateway is closed there
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _start_build(self) -> None:
        loop = asyncio.get_running_loop()

        def run() -> None:
            app: FastAPI | None = None
            failed: Exception | None = None
            try:
                app = self.build(self.progress)
            except Exception as exc:  # any failure is reported, and ends the start
                failed = exc
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the server stopped, no one to tell
                loop.call_soon_threadsafe(lambda: loop.create_task(self._finish(app, failed)))

        # a daemon thread: an interrupt during the build stops the process without waiting for the scoring to end
        threading.Thread(target=run, name="gateway-build", daemon=True).start()

    async def _finish(self, app: FastAPI | None, failed: Exception | None) -> None:
        if app is not None:
            try:
                await self._lifespans.enter_async_context(app.router.lifespan_context(app))
            except Exception as exc:  # reported as a failed build
                app, failed = None, exc
        if app is not None:
            self.app = app
            if self.on_ready is not None:
                self.on_ready(app)
        else:
            self.failed = failed
            if self.on_failure is not None and failed is not None:
                self.on_failure(failed)

    async def _starting(self, scope: Scope, receive: Receive, send: Send) -> None:
        elapsed = time.monotonic() - self.started
        headers = {"Retry-After": str(self.retry_after_s)}
        if self.failed is not None:
            message = f"the gateway failed to start: {self.failed}"
            body: dict = {"error": {"message": message, "type": "api_error", "param": None, "code": "start_failed"}}
            if scope["path"] == "/healthz":
                body = {"status": "failed", "detail": str(self.failed)}
            response = json_response(body, 503)
        elif scope["path"] == "/healthz":
            body = {"status": "starting", "detail": self.doing, "elapsed_s": round(elapsed, 1)}
            response = json_response(body, 503, headers)
        else:
            message = (
                f"the gateway is starting ({self.doing}; {elapsed:.0f} s so far); "
                f"retry in {self.retry_after_s} s or poll GET /healthz until it answers 200"
            )
            error = {"message": message, "type": "api_error", "param": None, "code": "starting"}
            response = json_response({"error": error}, 503, headers)
        await response(scope, receive, send)
