"""A live engine served by uvicorn in the test's event loop, on a free port."""

from __future__ import annotations

import asyncio
import contextlib
import functools

import uvicorn

from jevserve.engine.app import create_app
from jevserve.engine.core import LiveEngine
from jevserve.engine.lengths import ReplyLengths
from jevserve.serving import EngineConfig, make_queue_policy
from jevserve.sim.profile import load_profile

MODEL = "test-model"


@functools.cache
def reply_lengths() -> ReplyLengths:
    """One ReplyLengths for the whole test run (reading ShareGPT takes a second or two)."""
    return ReplyLengths(max_model_len=40960)


@contextlib.asynccontextmanager
async def serve(*, speedup: float = 200.0, policy: str = "fcfs", max_num_waiting: int = 10_000,
                stream_interval: int = 1, **config):
    """Yield (base URL, engine) of a live engine on qwen3-8b-h200 running in this event loop."""
    engine = LiveEngine(load_profile("qwen3-8b-h200"), EngineConfig(**config), make_queue_policy(policy),
                        speedup=speedup, stream_interval=stream_interval)
    app = create_app(engine, reply_lengths(), model_name=MODEL, max_num_waiting=max_num_waiting)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", engine
    finally:
        server.should_exit = True
        await task
