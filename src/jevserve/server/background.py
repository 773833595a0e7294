"""Run a server app in a background thread of this process (bench runs against `embedded`, tests)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from jevserve.argtypes import http_url


@contextmanager
def running_server(
    app: FastAPI, *, host: str = "127.0.0.1", port: int = 0, start_timeout_s: float = 120.0
) -> Iterator[str]:
    """Serve `app` on a free port (or `port`) until the block ends; yields the base URL."""
    config = uvicorn.Config(app, host=host, port=port, log_level="error", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="jevserve-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"server did not start on {host}:{port}")
        time.sleep(0.01)
    bound_port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield http_url(host, bound_port)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
