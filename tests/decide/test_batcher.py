"""The micro-batcher with a deterministic fake backend (no model, no HTTP)."""

import asyncio

import pytest

from jevserve.decide.base import DecisionItem
from jevserve.decide.batcher import Batcher
from jevserve.protocol import OverloadedError, SystemOneRequest, to_decision
from tests.helpers import FakeBackend, ticket_body

QUESTION = to_decision(SystemOneRequest.model_validate(ticket_body()).questions["team"])


def items(state: str, n: int = 1) -> list[DecisionItem]:
    return [DecisionItem(f"{state} #{i}", QUESTION) for i in range(n)]


async def until(predicate, timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.005)):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not reached")


def test_requests_queued_during_a_batch_form_the_next_batch_together():
    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=64, max_wait_ms=0)
        backend.release.clear()
        first = asyncio.ensure_future(batcher.submit(items("first")))
        await until(lambda: backend.num_started == 1)  # taken by the worker, blocked in the backend
        rest = [asyncio.ensure_future(batcher.submit(items(f"r{i}", 2))) for i in range(5)]
        await until(lambda: batcher.queue_depth == 10)
        backend.release.set()
        await asyncio.gather(first, *rest)
        await batcher.close()
        return backend.batches

    assert asyncio.run(scenario()) == [1, 10]


def test_batches_never_exceed_max_batch_but_a_large_job_is_not_split():
    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=4, max_wait_ms=0)
        backend.release.clear()
        blocker = asyncio.ensure_future(batcher.submit(items("blocker")))
        await until(lambda: backend.num_started == 1)
        jobs = [asyncio.ensure_future(batcher.submit(items(f"j{i}", 3))) for i in range(3)]
        big = asyncio.ensure_future(batcher.submit(items("big", 9)))
        await until(lambda: batcher.queue_depth == 18)
        backend.release.set()
        await asyncio.gather(blocker, *jobs, big)
        await batcher.close()
        return backend.batches

    assert asyncio.run(scenario()) == [1, 3, 3, 3, 9]


def test_results_are_the_same_alone_or_batched():
    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=64, max_wait_ms=0)
        alone = await batcher.submit(items("same"))
        backend.release.clear()
        blocker = asyncio.ensure_future(batcher.submit(items("blocker")))
        await until(lambda: backend.num_started == 1)
        crowd = [asyncio.ensure_future(batcher.submit(items(s))) for s in ("a", "same", "b")]
        backend.release.set()
        results = await asyncio.gather(blocker, *crowd)
        await batcher.close()
        return alone[0], results[2][0]

    alone, batched = asyncio.run(scenario())
    assert (alone == batched).all()


def test_full_queue_raises_overloaded_with_retry_after():
    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=8, max_wait_ms=0, max_queue=4)
        backend.release.clear()
        blocker = asyncio.ensure_future(batcher.submit(items("blocker")))
        await until(lambda: backend.num_started == 1)
        queued = asyncio.ensure_future(batcher.submit(items("q", 3)))
        await until(lambda: batcher.queue_depth == 3)
        with pytest.raises(OverloadedError) as info:
            await batcher.submit(items("over", 2))
        backend.release.set()
        await asyncio.gather(blocker, queued)
        await batcher.close()
        return info.value

    err = asyncio.run(scenario())
    assert err.status_code == 429 and int(err.headers["Retry-After"]) >= 1


def test_cancelled_submission_is_never_computed_and_harms_nobody():
    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=64, max_wait_ms=0)
        backend.release.clear()
        blocker = asyncio.ensure_future(batcher.submit(items("blocker")))
        await until(lambda: backend.num_started == 1)
        gone = asyncio.ensure_future(batcher.submit(items("gone")))
        stays = asyncio.ensure_future(batcher.submit(items("stays")))
        await until(lambda: batcher.queue_depth == 2)
        gone.cancel()
        backend.release.set()
        result = await stays
        await blocker
        await batcher.close()
        return backend.seen_states, result

    seen, result = asyncio.run(scenario())
    assert "gone #0" not in seen and "stays #0" in seen
    assert len(result) == 1


def test_a_failing_job_does_not_fail_its_batch_companions():
    async def scenario():
        backend = FakeBackend(fail_on="BAD")
        batcher = Batcher(backend, max_batch=64, max_wait_ms=0)
        backend.release.clear()
        blocker = asyncio.ensure_future(batcher.submit(items("blocker")))
        await until(lambda: backend.num_started == 1)
        good = asyncio.ensure_future(batcher.submit(items("good")))
        bad = asyncio.ensure_future(batcher.submit(items("BAD")))
        await until(lambda: batcher.queue_depth == 2)
        backend.release.set()
        await blocker
        outcome = await asyncio.gather(good, bad, return_exceptions=True)
        await batcher.close()
        return outcome

    good, bad = asyncio.run(scenario())
    assert len(good) == 1 and isinstance(bad, RuntimeError)


def test_worker_waits_for_requests_already_arriving():
    async def scenario():
        backend = FakeBackend()
        arriving = {"n": 1}
        batcher = Batcher(backend, max_batch=64, max_wait_ms=10_000, arriving=lambda: arriving["n"])
        first = asyncio.ensure_future(batcher.submit(items("first")))
        await asyncio.sleep(0.05)
        assert backend.batches == []  # held back: another request is being read
        arriving["n"] = 0
        second = asyncio.ensure_future(batcher.submit(items("second")))
        await asyncio.gather(first, second)
        await batcher.close()
        return backend.batches

    assert asyncio.run(scenario()) == [2]


def test_invalid_limits_are_refused():
    with pytest.raises(ValueError, match="max_batch"):
        Batcher(FakeBackend(), max_batch=0)
