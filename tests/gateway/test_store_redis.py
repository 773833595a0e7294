"""Two gateway replicas sharing one real Redis server: cache, rate limit, circuit and in-flight limit are shared."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess

import httpx
import pytest
import redis

from jevserve.gateway.store_redis import RedisStore
from tests.gateway.upstreams import StubUpstream, client, completion, make_app

HI = {"model": "m", "messages": [{"role": "user", "content": "what is the capital of France?"}]}


@pytest.fixture
def redis_clean(redis_url):
    redis.Redis.from_url(redis_url).flushdb()
    return redis_url


def replicas(url, route, answers=None, upstreams=None, config=None):
    """Two apps over the same upstream stubs, each with its own connection to the same Redis."""
    upstreams = upstreams or {"u": StubUpstream()}
    return [
        make_app(route, answers=answers, upstreams=upstreams, config=config, store=RedisStore(url))[0] for _ in range(2)
    ]


def test_a_cached_answer_stored_by_one_replica_is_served_by_the_other(redis_clean):
    stub = StubUpstream()
    one, two = replicas(redis_clean, {"cache": {"min_similarity": 0.5}}, {"cache": 0.95}, {"u": stub})

    async def scenario():
        async with client(one) as a, client(two) as b:
            first = await a.post("/v1/chat/completions", json=HI)
            second = await b.post("/v1/chat/completions", json=HI)
        return first, second

    first, second = asyncio.run(scenario())
    assert first.headers.get("x-jevserve-cache") is None
    assert second.headers["x-jevserve-cache"] == "hit"
    assert len(stub.requests) == 1


def test_the_rate_limit_is_shared_across_replicas(redis_clean):
    one, two = replicas(redis_clean, {"rate_limit": {"requests_per_s": 0.01, "burst": 3}})
    key = {"Authorization": "Bearer shared-key"}

    async def scenario():
        async with client(one) as a, client(two) as b:
            return [(await c.post("/v1/chat/completions", json=HI, headers=key)).status_code for c in (a, b, a, b, a)]

    assert asyncio.run(scenario()) == [200, 200, 200, 429, 429]


def test_a_circuit_opened_by_one_replica_is_open_for_the_other(redis_clean):
    bad = StubUpstream(lambda body: httpx.Response(502, json={"error": {"message": "down"}}))
    good = StubUpstream()
    config = {
        "upstreams": [
            {"name": "a", "url": "http://a.test/v1", "max_retries": 0, "breaker_failures": 2},
            {"name": "b", "url": "http://b.test/v1"},
        ]
    }
    one, two = replicas(redis_clean, {}, upstreams={"a": bad, "b": good}, config=config)

    async def scenario():
        async with client(one) as a, client(two) as b:
            await a.post("/v1/chat/completions", json=HI)
            await b.post("/v1/chat/completions", json=HI)
            return await b.post("/v1/chat/completions", json=HI)

    third = asyncio.run(scenario())
    assert third.headers["x-jevserve-upstream"] == "b"
    assert len(bad.requests) == 2  # the second failure, on the other replica, opened the shared circuit


def test_one_replica_alone_claims_a_half_open_circuits_trial(redis_clean):
    async def scenario():
        one, two = RedisStore(redis_clean), RedisStore(redis_clean)
        try:
            assert not await one.claim_trial("a", 30.0)  # closed: nothing to claim
            await one.record_result("a", False, 1, 0.2)  # opened for 0.2 s
            assert not await two.claim_trial("a", 30.0)  # still open
            await asyncio.sleep(0.4)
            claims = await asyncio.gather(*[s.claim_trial("a", 30.0) for s in (one, two) * 5])
            held = (await two.circuit("a")).open_until
            await two.record_result("a", True, 1, 0.2)  # the trial answered: closed
            return claims, held, await one.circuit("a"), await one.claim_trial("a", 30.0)
        finally:
            await one.aclose()
            await two.aclose()

    claims, held, closed, again = asyncio.run(scenario())
    assert sum(claims) == 1  # one of ten requests, on either replica
    assert held > redis.Redis.from_url(redis_clean).time()[0] + 20  # held open while the trial tries
    assert closed.open_until == 0.0 and closed.num_failures == 0 and not again


def test_the_in_flight_limit_is_shared_across_replicas(redis_clean):
    release = asyncio.Event()

    async def slow(request):
        await release.wait()
        return httpx.Response(200, json=completion())

    config = {"upstreams": [{"name": "u", "url": "http://u.test/v1", "max_concurrency": 1}]}
    route = {"admission": {"action": "reject", "max_queue": 0}}
    one, two = replicas(redis_clean, route, upstreams={"u": httpx.MockTransport(slow)}, config=config)

    async def scenario():
        async with client(one) as a, client(two) as b:
            first = asyncio.create_task(a.post("/v1/chat/completions", json=HI))
            await asyncio.sleep(0.2)
            busy = await b.post("/v1/chat/completions", json=HI)
            release.set()
            done = await first
            after = await b.post("/v1/chat/completions", json=HI)
            return done, busy, after

    done, busy, after = asyncio.run(scenario())
    assert (done.status_code, busy.status_code, after.status_code) == (200, 429, 200)


def test_a_store_nobody_answers_at_is_refused_at_start_not_on_each_request(redis_clean):
    import socket

    from jevserve.gateway.runtime import open_store

    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(ValueError, match=rf"store redis://127.0.0.1:{port}/0: no Redis answers there"):
        open_store(f"redis://127.0.0.1:{port}/0")
    assert isinstance(open_store(redis_clean), RedisStore)  # one that answers is opened


def _redis_server(port: int, workdir: str):
    from tests.conftest import REDIS_INSTALL, _wait_for_port, redis_server_binary

    binary = redis_server_binary()
    if binary is None:
        pytest.skip(f"no redis-server found; install one with: {REDIS_INSTALL}")
    process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                "--dir", workdir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_port(port, process)
    return process


def test_a_redis_that_stops_costs_no_request_and_is_shared_again_when_it_is_back(tmp_path):
    # A stopped Redis once made every request of every replica a 500 (missing from the log and the metrics), and
    # /healthz and /metrics with them; the replica carries on with its own state and goes back to Redis when it answers
    from tests.processes import free_port

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    server = _redis_server(port, str(tmp_path))
    stub = StubUpstream()
    log = tmp_path / "log.jsonl"
    route = {"cache": {"min_similarity": 0.5}, "rate_limit": {"requests_per_s": 100, "burst": 100}}
    one, two = (make_app(route, answers={"cache": 0.95}, upstreams={"u": stub}, config={"log": {"path": str(log)}},
                         store=RedisStore(url, retry_s=0.2))[0] for _ in range(2))
    other = {**HI, "messages": [{"role": "user", "content": "and the capital of Spain?"}]}

    async def scenario():
        nonlocal server
        async with client(one) as a, client(two) as b:
            shared = [await a.post("/v1/chat/completions", json=HI), await b.post("/v1/chat/completions", json=HI)]
            server.terminate()
            server.wait(timeout=10)
            alone = [await a.post("/v1/chat/completions", json=other), await a.post("/v1/chat/completions", json=other)]
            health, metrics = await a.get("/healthz"), await a.get("/metrics")
            server = _redis_server(port, str(tmp_path))
            await asyncio.sleep(0.3)
            back = [await b.post("/v1/chat/completions", json=other), await a.post("/v1/chat/completions", json=other)]
            return shared, alone, health, metrics, back, (await b.get("/healthz")).json()

    try:
        shared, alone, health, metrics, back, healthy = asyncio.run(scenario())
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert [r.status_code for r in shared + alone + back] == [200] * 6
    assert shared[1].headers["x-jevserve-cache"] == "hit"  # through the shared cache
    assert alone[1].headers["x-jevserve-cache"] == "hit"  # through the replica's own entries
    assert health.status_code == 200 and "not answering" in health.json()["store"]
    assert metrics.status_code == 200
    # the restarted Redis is empty: the first replica's entries stayed its own, so the other asks the upstream
    assert back[0].headers.get("x-jevserve-cache") is None and back[1].headers["x-jevserve-cache"] == "hit"
    assert healthy["store"] == f"{url}: shared"
    assert len(log.read_text().splitlines()) == 6  # every request logged


def test_a_frozen_redis_costs_a_request_at_most_its_timeout():
    import socket
    import time

    with socket.socket() as frozen:  # accepts connections and never answers, as a SIGSTOPped Redis does
        frozen.bind(("127.0.0.1", 0))
        frozen.listen(16)
        url = f"redis://127.0.0.1:{frozen.getsockname()[1]}/0"
        app = make_app({"cache": {}}, store=RedisStore(url, timeout_s=0.3))[0]

        async def scenario():
            async with client(app) as c:
                started = time.monotonic()
                first = await c.post("/v1/chat/completions", json=HI)
                return first, time.monotonic() - started, await c.post("/v1/chat/completions", json=HI)

        first, seconds, second = asyncio.run(scenario())
    assert first.status_code == 200 and second.status_code == 200 and seconds < 3
    assert second.headers["x-jevserve-cache"] == "hit"  # the replica's own entry, Redis not asked again yet


def test_slots_given_back_while_redis_stalls_are_returned_when_it_answers_again(redis_clean):
    # a stall of a second while requests finished left the shared count at its limit with nothing in flight: every
    # later request of the route, on every replica, waited out its deadline and got 429 until someone ran DEL
    async def scenario():
        store = RedisStore(redis_clean, retry_s=0.0)
        assert await store.try_acquire("up", 2) and await store.try_acquire("up", 2)
        real_release, real_acquire = store._release, store._try_acquire

        async def stalled(*args, **kwargs):
            raise redis.TimeoutError("Timeout reading from socket")

        store._release = stalled
        await store.release("up")
        await store.release("up")
        held_during = await store.in_flight("up")  # Redis answers reads again: the two are still held there

        async def ran_then_stalled(*args, **kwargs):  # the script ran, its answer never came
            await real_acquire(*args, **kwargs)
            raise redis.TimeoutError("Timeout reading from socket")

        store._release, store._try_acquire = real_release, ran_then_stalled
        local = await store.try_acquire("up", 2)  # taken from the replica's own state meanwhile
        await store.release("up")
        store._try_acquire = real_acquire
        first, second = await store.try_acquire("up", 2), await store.try_acquire("up", 2)
        third = await store.try_acquire("up", 2)
        held = await store.in_flight("up")
        await store.release("up")
        await store.release("up")
        return held_during, local, (first, second, third), held, await store.in_flight("up")

    held_during, local, taken, held, after = asyncio.run(scenario())
    assert held_during == 2 and local
    assert taken == (True, True, False) and held == 2  # the stalled ones removed first, then the limit holds
    assert after == 0


def test_a_slot_whose_client_left_during_a_stall_is_given_back_by_the_replicas_next_call(redis_clean):
    # a client that left while its slot's script waited in a frozen Redis: the script ran when Redis resumed, and
    # the slot's id was kept nowhere (only Redis errors were handled); and a replica's stalled slots went back only
    # with its next request to that same upstream, while the other replicas waited out their deadlines
    async def scenario():
        store = RedisStore(redis_clean, retry_s=0.0)
        real_acquire = store._try_acquire
        resumed = asyncio.Event()

        async def frozen_then_runs(*args, **kwargs):
            await resumed.wait()  # the client leaves meanwhile
            await real_acquire(*args, **kwargs)

        store._try_acquire = frozen_then_runs
        waiting = asyncio.ensure_future(store.try_acquire("up", 1))
        await asyncio.sleep(0.05)
        waiting.cancel()
        resumed.set()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        await asyncio.sleep(0.05)  # what the frozen Redis does when it resumes: the script runs
        await real_acquire(keys=["jevserve:gw:slots:up"], args=[1, store._unreturned["up"][0], 0])
        store._try_acquire = real_acquire
        stale = await store.in_flight("up")
        await store.circuit("other")  # any request of the replica, to any upstream, gives the stale slot back
        return stale, await store.in_flight("up")

    stale, after = asyncio.run(scenario())
    assert (stale, after) == (1, 0)
