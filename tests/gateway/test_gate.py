"""The gateway's own queue: a serving queue policy orders waiters in front of an upstream's concurrency limit."""

from __future__ import annotations

import asyncio

import pytest

from jevserve.gateway.gate import QueueFull, UpstreamGate
from jevserve.gateway.store import MemoryStore
from jevserve.serving import Request, make_queue_policy


def make_request(request_id: str, predicted: float, arrival_s: float = 0.0) -> Request:
    return Request(request_id, arrival_s, num_prompt_tokens=10, predicted_output_tokens=predicted)


def serve_order(policy, waiting, clock=lambda: 0.0):
    """Hold the one slot, queue `waiting`, then release one at a time; returns the order they got the slot."""

    async def scenario():
        gate = UpstreamGate("u", 1, policy, MemoryStore(), clock=clock)
        await gate.acquire(make_request("holder", 0), timeout_s=1)
        order = []

        async def wait(request):
            await gate.acquire(request, timeout_s=5)
            order.append(request.request_id)

        tasks = [asyncio.create_task(wait(r)) for r in waiting]
        await asyncio.sleep(0.05)
        for _ in waiting:
            await gate.release()
            await asyncio.sleep(0.02)
        await asyncio.gather(*tasks)
        return order

    return asyncio.run(scenario())


def test_predicted_length_first_serves_the_shortest_predicted_reply_first():
    waiting = [make_request("long", 900), make_request("short", 20), make_request("mid", 200)]
    assert serve_order(make_queue_policy("plf"), waiting) == ["short", "mid", "long"]


def test_fcfs_serves_in_arrival_order():
    waiting = [make_request("a", 900, 0.0), make_request("b", 20, 1.0), make_request("c", 200, 2.0)]
    assert serve_order(make_queue_policy("fcfs"), waiting) == ["a", "b", "c"]


def test_aging_promotes_a_long_waiter_ahead_of_shorter_ones():
    # at now=100 the first request has waited 100 s ≥ aging 30 s: promoted ahead of the short newcomers
    waiting = [make_request("old-long", 900, 0.0), make_request("short", 20, 95.0), make_request("mid", 200, 96.0)]
    order = serve_order(make_queue_policy("plf", aging_s=30.0), waiting, clock=lambda: 100.0)
    assert order == ["old-long", "short", "mid"]


def test_queue_full_raises_when_max_queue_is_reached():
    async def scenario():
        gate = UpstreamGate("u", 1, make_queue_policy("fcfs"), MemoryStore())
        await gate.acquire(make_request("holder", 0), timeout_s=1)
        with pytest.raises(QueueFull):
            await gate.acquire(make_request("x", 0), timeout_s=1, max_queue=0)

    asyncio.run(scenario())


def test_waiting_past_the_timeout_raises_and_leaves_the_queue():
    async def scenario():
        gate = UpstreamGate("u", 1, make_queue_policy("fcfs"), MemoryStore())
        await gate.acquire(make_request("holder", 0), timeout_s=1)
        with pytest.raises(TimeoutError):
            await gate.acquire(make_request("x", 0), timeout_s=0.1)
        return gate.num_waiting

    assert asyncio.run(scenario()) == 0
