"""Replay planned requests against a server on their schedule, at most `max_concurrency` at once, until all are
done or the replay is interrupted (Ctrl-C): requests in flight then are recorded as "interrupted", and those not yet
sent (their send time not reached, or waiting for a concurrency slot) as "not sent", apart from every sent figure."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Sequence

import aiohttp

from jevserve.loadgen.client import INTERRUPTED_ERROR, NOT_SENT, RequestResult, request_body, send
from jevserve.loadgen.workload import PlannedRequest


async def replay(
    requests: Sequence[PlannedRequest],
    *,
    url: str,
    model: str,
    chat: bool,
    max_concurrency: int | None = None,
    speedup: float = 1.0,
    timeout_s: float = 600.0,
    ignore_eos: bool = False,
    on_done: Callable[[RequestResult], None] | None = None,
    stop: asyncio.Event | None = None,
    handle_sigint: bool = True,
) -> tuple[list[RequestResult], bool]:
    """Send every request at its `send_s / speedup` wall seconds after the start; returns (one result per request,
    in the order given, and whether the replay was stopped early by `stop` or SIGINT). `handle_sigint=False` leaves
    SIGINT to the caller (which sets `stop` on it)."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    if handle_sigint:
        with contextlib.suppress(NotImplementedError, RuntimeError):  # no signal handlers off the main thread
            loop.add_signal_handler(signal.SIGINT, stop.set)
    results = [RequestResult(r.request_id, r.send_s / speedup, num_prompt_tokens=r.num_prompt_tokens,
                             planned_s=r.send_s / speedup) for r in requests]
    gate = asyncio.Semaphore(max_concurrency) if max_concurrency else contextlib.nullcontext()
    connector = aiohttp.TCPConnector(limit=max_concurrency or 0, force_close=False)
    started = time.perf_counter()

    async def one(request: PlannedRequest, result: RequestResult) -> None:
        await asyncio.sleep(max(0.0, request.send_s / speedup - (time.perf_counter() - started)))
        async with gate:
            body = request_body(request, model=model, chat=chat, ignore_eos=ignore_eos)
            await send(session, url, body, result, timeout_s=timeout_s, started=started)
        if on_done is not None:
            on_done(result)

    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as session:
        tasks = [asyncio.create_task(one(r, x)) for r, x in zip(requests, results, strict=True)]
        everything = asyncio.gather(*tasks)
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({everything, stopped}, return_when=asyncio.FIRST_COMPLETED)
        interrupted = not everything.done()
        if interrupted:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            # a gather ends with a CancelledError once one of its tasks is cancelled: retrieve it, or asyncio
            # prints "Future exception was never retrieved" with its traceback
            with contextlib.suppress(asyncio.CancelledError):
                await everything
        stopped.cancel()
    if handle_sigint:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
    cut_at = time.perf_counter() - started
    for result in results:
        if not result.ok and result.error is None:
            result.error = INTERRUPTED_ERROR if result.sent else NOT_SENT
            if result.sent:
                result.cut_s = max(0.0, cut_at - result.send_s)
    return results, interrupted
