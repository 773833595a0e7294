"""Ask an endpoint every request the bench needs, through `jevserve.client`, at most `concurrency` at a time.

Requests already in the answers cache are not sent. Each answer is appended to the cache as it arrives, so a run
that is killed (or whose endpoint goes away) resumes where it stopped and a finished run is free to repeat. A
request the endpoint refuses with a 4xx is recorded as refused and scored as "no information" (P = 0.5); any
other failure (connection lost, 5xx after the client's retries) stops the run, keeping what was answered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from tqdm import tqdm

from jevserve.bench.answers_cache import AnswersCache, request_key
from jevserve.client import SystemOneAPIError


class DecisionClient(Protocol):
    """What the runner needs of a client: `AsyncSystemOne` has it."""

    async def decide_raw(self, body: Mapping[str, Any]) -> dict:
        """POST one request body and return the JSON answer."""
        ...


@dataclass(frozen=True)
class AskStats:
    """What one round of asking did."""

    num_requests: int  # distinct requests the tasks need
    num_cached: int  # of those, already answered (or refused) before this round
    num_sent: int  # requests sent this round
    num_refused: int  # of those, refused with a 4xx
    num_decisions: int  # questions in all needed requests (one decision each)
    wall_s: float  # seconds spent asking


def keyed(model: str, bodies: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Distinct request bodies by cache key (the same state and questions asked twice are asked once)."""
    return {request_key(model, body): body for body in bodies}


async def ask_missing(
    client: DecisionClient, model: str, requests: Mapping[str, dict[str, Any]], cache: AnswersCache, *,
    concurrency: int = 32, progress: bool = True,
) -> AskStats:
    """Send every request of `requests` (key → body without `model`) that the cache lacks; returns counts."""
    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency}; expected an integer >= 1")
    started = time.perf_counter()
    missing = [key for key in requests if key not in cache]
    num_decisions = sum(len(body["questions"]) for body in requests.values())
    queue: asyncio.Queue[str] = asyncio.Queue()
    for key in missing:
        queue.put_nowait(key)
    counts = {"sent": 0, "refused": 0}
    bar = tqdm(total=len(missing), desc=f"asking {model}", unit="req", disable=not progress or not missing)

    async def worker() -> None:
        while True:
            try:
                key = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            body = {**requests[key], "model": model}
            counts["sent"] += 1
            try:
                response = await client.decide_raw(body)
            except SystemOneAPIError as exc:
                if not 400 <= exc.status_code < 500 or exc.status_code in (408, 429):
                    raise
                cache.record_error(key, exc.status_code, exc.message)
                counts["refused"] += 1
            else:
                cache.record(key, response["answers"])
            bar.update(1)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(concurrency, max(len(missing), 1))):
                group.create_task(worker())
    except BaseExceptionGroup as group_error:
        # Surface the first real failure (the others are usually the same one, or cancellations).
        raise group_error.exceptions[0] from None
    finally:
        bar.close()
    return AskStats(
        num_requests=len(requests),
        num_cached=len(requests) - len(missing),
        num_sent=counts["sent"],
        num_refused=counts["refused"],
        num_decisions=num_decisions,
        wall_s=time.perf_counter() - started,
    )
