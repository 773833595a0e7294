"""The micro-batcher with a deterministic fake backend (no model, no HTTP)."""

import asyncio
import time

import pytest

from jevserve.decide import batcher as batcher_module
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


def test_a_request_larger_than_max_batch_runs_in_chunks_of_at_most_max_batch():
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
        results = await asyncio.gather(blocker, *jobs, big)
        await batcher.close()
        return backend.batches, [len(r) for r in results]

    batches, sizes = asyncio.run(scenario())
    assert max(batches) <= 4 and sum(batches) == 19
    assert sizes == [1, 3, 3, 3, 9]


def test_a_small_request_waits_for_one_chunk_not_for_a_large_request():
    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=4, max_wait_ms=0)
        backend.release.clear()
        big = asyncio.ensure_future(batcher.submit(items("big", 40)))
        await until(lambda: backend.num_started == 1)  # the first chunk of the large request is running
        small = asyncio.ensure_future(batcher.submit(items("small")))
        await until(lambda: batcher.queue_depth == 37)
        backend.release.set()
        await asyncio.gather(big, small)
        await batcher.close()
        return backend.seen_states

    seen = asyncio.run(scenario())
    # the small request is the whole second batch: it neither waits behind nor shares a batch with the large one
    assert seen[:5] == [f"big #{i}" for i in range(4)] + ["small #0"]


def test_chunked_answers_equal_unchunked_answers():
    async def scenario(max_batch: int):
        batcher = Batcher(FakeBackend(), max_batch=max_batch, max_wait_ms=0)
        out = await batcher.submit(items("x", 50))
        await batcher.close()
        return out

    whole, chunked = asyncio.run(scenario(64)), asyncio.run(scenario(7))
    assert all((a == b).all() for a, b in zip(whole, chunked, strict=True))


def test_the_request_with_the_fewest_questions_left_goes_next_first_come_among_equals():
    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=4, max_wait_ms=0, max_queue=100)
        backend.release.clear()
        first = asyncio.ensure_future(batcher.submit(items("A", 12)))
        await until(lambda: backend.num_started == 1)
        second = asyncio.ensure_future(batcher.submit(items("B", 8)))
        third = asyncio.ensure_future(batcher.submit(items("C", 2)))
        await until(lambda: batcher.queue_depth == 18)
        backend.release.set()
        await asyncio.gather(first, second, third)
        await batcher.close()
        return [s.split(" ")[0] for s in backend.seen_states]

    order = asyncio.run(scenario())
    # A's first chunk runs; C (2 left) goes next, alone; then A and B have 8 left each: A came first and finishes
    assert order == ["A"] * 4 + ["C"] * 2 + ["A"] * 8 + ["B"] * 8


def test_equal_requests_sent_together_are_answered_one_after_another_not_all_at_the_end():
    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=4, max_wait_ms=0, max_queue=1000)
        backend.release.clear()
        blocker = asyncio.ensure_future(batcher.submit(items("blocker")))
        await until(lambda: backend.num_started == 1)
        done: list[str] = []

        async def client(name: str) -> None:
            await batcher.submit(items(name, 8))
            done.append(name)

        clients = [asyncio.ensure_future(client(f"c{i}")) for i in range(5)]
        await until(lambda: batcher.queue_depth == 40)
        backend.release.set()
        await asyncio.gather(blocker, *clients)
        await batcher.close()
        return done, backend

    done, backend = asyncio.run(scenario())
    # the batch each client's last question was answered in (read from what the backend saw, not from when the
    # client's task ran: the next batch may have started by then)
    ends = [sum(backend.batches[:k]) for k in range(len(backend.batches) + 1)]
    last = {state.split(" #")[0]: i for i, state in enumerate(backend.seen_states)}
    finished_in = [next(k for k in range(1, len(ends)) if ends[k] > last[f"c{c}"]) for c in range(5)]
    # two batches each, in the order they came: the first is answered after 1 + 2 batches, the last after 1 + 10
    assert done == ["c0", "c1", "c2", "c3", "c4"]
    assert finished_in == [1 + 2 * k for k in range(1, 6)]


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


async def blocked_on(batcher: Batcher, backend: FakeBackend, name: str = "blocker", n: int = 1) -> asyncio.Future:
    """The backend held on a submission of `n` questions (release the backend and await it to finish)."""
    backend.release.clear()
    backend.num_started = 0
    submitted = asyncio.ensure_future(batcher.submit(items(name, n)))
    await until(lambda: backend.num_started == 1)
    return submitted


async def held_with_three_queued(batcher: Batcher, backend: FakeBackend) -> list[asyncio.Future]:
    """The backend held on one running request with three questions queued behind it; the two submissions (release
    the backend and gather them to finish)."""
    backend.release.clear()
    backend.num_started = 0
    blocker = asyncio.ensure_future(batcher.submit(items("blocker")))
    await until(lambda: backend.num_started == 1 and batcher.queue_depth == 0)
    queued = asyncio.ensure_future(batcher.submit(items("q", 3)))
    await until(lambda: batcher.queue_depth == 3)
    return [blocker, queued]


def test_full_queue_raises_overloaded_with_retry_after():
    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=8, max_wait_ms=0, max_queue=4)
        submitted = await held_with_three_queued(batcher, backend)
        with pytest.raises(OverloadedError) as info:
            await batcher.submit(items("over", 3))  # 3 + min(3, 3) ahead > 4
        backend.release.set()
        await asyncio.gather(*submitted)
        await batcher.close()
        return info.value

    err = asyncio.run(scenario())
    assert err.status_code == 429 and int(err.headers["Retry-After"]) >= 1
    # "32 of them ahead of this request; limit 32" read as if it should have passed: its own questions are named
    assert "3 of them ahead of this request, which asks 3: 6 in all, over the limit of 4" in str(err)


def test_a_burst_of_refusals_is_told_successive_times_each_the_previous_requests_work_later(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(batcher_module, "_now", lambda: clock[0])

    def refused(batcher: Batcher, n: int) -> OverloadedError:
        with pytest.raises(OverloadedError) as info:
            batcher.check_room(n)
        return info.value

    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=8, max_wait_ms=0, max_queue=4)
        submitted = await held_with_three_queued(batcher, backend)
        batcher._seconds_per_item = 0.25  # no batch finishes while the backend is held, so it stays measured as this
        spq = batcher._seconds_per_item
        burst = [refused(batcher, n) for n in (3, 4, 3)]  # all at the same moment; 3 questions ahead of each
        clock[0] += 10.0  # every promised time has passed
        later = refused(batcher, 3)
        backend.release.set()
        await asyncio.gather(*submitted)
        await batcher.close()
        return spq, burst, later

    spq, (a, b, c), later = asyncio.run(scenario())
    # each comes back when the work left (what was ahead, what the clients refused before it bring back, its own)
    # fits the queue of 4: the first when 1 of the 3 ahead is left (1 + its 3 = 4), but never before a second ...
    assert a.retry_after_s == 1.0  # at least a second ((3 + 3 - 4) * spq is less)
    assert b.retry_after_s == pytest.approx((3 + 3 + 4 - 4) * spq)  # ... then after the first one's 3 questions more
    assert c.retry_after_s == pytest.approx((3 + 3 + 4 + 3 - 4) * spq)  # ... and the second one's 4
    assert later.retry_after_s == 1.0  # the promises have passed: the work ahead again
    assert [e.headers["retry-after-ms"] for e in (a, b, c)] == ["1000", "1500", "2250"]
    assert [e.headers["Retry-After"] for e in (a, b, c)] == ["1", "2", "3"]  # whole seconds, rounded up


def test_promises_not_kept_by_the_time_the_queue_runs_dry_are_forgotten(monkeypatch):
    monkeypatch.setattr(batcher_module, "_now", lambda: 7.0)  # the clock stands still: only the drained queue resets

    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=8, max_wait_ms=0, max_queue=4)

        async def refusal_with_three_queued() -> float:
            submitted = await held_with_three_queued(batcher, backend)
            batcher._seconds_per_item = 0.25
            batcher._seconds_per_unit = 0.0  # the time per question alone, as the promises' arithmetic is checked on
            hints = []
            for _ in range(4):  # four clients refused; none of them comes back
                with pytest.raises(OverloadedError) as info:
                    batcher.check_room(3)
                hints.append(info.value.retry_after_s)
            backend.release.set()
            await asyncio.gather(*submitted)
            await until(lambda: batcher._promised_until <= 7.0)
            return hints

        first = await refusal_with_three_queued()
        second = await refusal_with_three_queued()
        await batcher.close()
        return first, second

    first, second = asyncio.run(scenario())
    assert first[1] < first[2] < first[3]  # the promises spread the first burst (past the 1 s floor)
    assert second == pytest.approx(first)  # and were forgotten once the queue ran dry


def test_refusals_of_a_concurrent_backend_are_spread_the_same_way(monkeypatch):
    monkeypatch.setattr(batcher_module, "_now", lambda: 50.0)
    backend = FakeBackend()
    backend.concurrent = True
    batcher = Batcher(backend, max_queue=4)
    batcher._in_flight = 4  # questions being answered by the backend
    batcher._seconds_per_item = spq = 0.5
    hints = []
    for n in (2, 1):
        with pytest.raises(OverloadedError) as info:
            batcher.check_room(n)
        hints.append(info.value.retry_after_s)
    assert hints == pytest.approx([(4 + 2 - 4) * spq, (4 + 2 + 1 - 4) * spq])


def test_a_small_request_is_admitted_while_a_large_one_fills_the_queue_but_a_second_large_one_is_not():
    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=4, max_wait_ms=0, max_queue=20)
        backend.release.clear()
        big = asyncio.ensure_future(batcher.submit(items("big", 30)))
        await until(lambda: backend.num_started == 1)
        small = asyncio.ensure_future(batcher.submit(items("small", 2)))
        await until(lambda: batcher.queue_depth == 28)
        with pytest.raises(OverloadedError):
            await batcher.submit(items("big2", 30))
        backend.release.set()
        return [len(r) for r in await asyncio.gather(big, small)]

    assert asyncio.run(scenario()) == [30, 2]


def test_a_failing_chunk_fails_only_its_request_and_its_remaining_chunks_are_never_computed():
    async def scenario():
        backend = FakeBackend(fail_on="BAD")
        batcher = Batcher(backend, max_batch=2, max_wait_ms=0)
        bad_items = items("ok", 1) + items("BAD", 1) + items("later", 4)
        outcome = await asyncio.gather(
            batcher.submit(bad_items), batcher.submit(items("good", 3)), return_exceptions=True
        )
        await batcher.close()
        return outcome, backend.seen_states

    (bad, good), seen = asyncio.run(scenario())
    assert isinstance(bad, RuntimeError) and len(good) == 3
    assert not any(s.startswith("later") for s in seen)


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


class PerItemBackend(FakeBackend):
    """Takes 5 ms per question, like a backend that runs each sequence on its own."""

    def decide(self, items):
        time.sleep(0.005 * len(items))
        return super().decide(items)


def test_a_time_budget_cuts_batches_to_what_the_backend_answers_in_about_that_time():
    async def scenario():
        backend = PerItemBackend()
        batcher = Batcher(backend, max_batch=64, max_wait_ms=0, max_chunk_ms=20)
        result = await batcher.submit(items("big", 100))
        await batcher.close()
        return backend.batches, len(result)

    batches, answered = asyncio.run(scenario())
    assert answered == 100 and sum(batches) == 100
    # the first batch is not cut (nothing measured yet); after it every question takes >= 5 ms: 20 ms hold 4
    assert len(batches) > 10 and max(batches[1:]) <= 4


def test_invalid_limits_are_refused():
    with pytest.raises(ValueError, match="max_batch"):
        Batcher(FakeBackend(), max_batch=0)


def test_one_slow_small_batch_does_not_multiply_the_time_per_question():
    class Timed(FakeBackend):
        def decide(self, items):
            time.sleep(0.001 * len(items) if len(items) > 1 else 0.05)  # 1 ms a question; one straggler of 50 ms
            return super().decide(items)

    async def scenario():
        batcher = Batcher(Timed(), max_batch=32, max_wait_ms=0)
        for i in range(3):
            await batcher.submit(items(f"fast{i}", 32))
        await batcher.submit(items("slow"))
        spq = batcher._seconds_per_item
        await batcher.close()
        return spq

    # weighted by questions: (3 x 32 ms + 50 ms) / 97 questions, about 1.5 ms; a per-batch running mean gave 25 ms
    assert asyncio.run(scenario()) < 0.005


class PerStateBackend(FakeBackend):
    """Takes 20 ms per distinct state and nothing per question: the cost of an encoder that reads each text once."""

    def decide(self, items):
        time.sleep(0.02 * len({item.state for item in items}))
        return super().decide(items)


def test_work_counts_each_text_once_by_its_length_and_questions_little():
    short = [DecisionItem("hello", QUESTION)] * 10
    assert batcher_module.work_units(short) == pytest.approx(1 + 5 / 256 + 10 * batcher_module.QUESTION_UNITS)
    long_text = DecisionItem("x" * 100_000, QUESTION)
    assert batcher_module.work_units([long_text]) == pytest.approx(1 + batcher_module.MAX_STATE_UNITS + 0.05)


def test_with_a_deadline_requests_that_cannot_be_answered_in_time_are_turned_away_before_queueing():
    async def scenario():
        backend = PerStateBackend()
        batcher = Batcher(backend, max_batch=64, max_wait_ms=0)
        assert batcher.expected_wait_s(items("cold", 3)) is None  # nothing measured yet: no estimate, no refusal
        await batcher.submit(items("warm", 5))  # 5 states in 100 ms: the time per unit of work is measured
        # a burst sent together, each of 5 texts (~100 ms of work) and a 350 ms deadline: the first two fit within
        # the headroom (0.8 x 350 ms), later ones are judged against those queued before them, at once
        burst = [asyncio.ensure_future(batcher.submit(items(f"b{i}", 5), budget_s=0.35)) for i in range(6)]
        results = await asyncio.gather(*burst, return_exceptions=True)
        refused = [isinstance(r, batcher_module.DeadlineUnreachable) for r in results]
        answered_states = len(backend.seen_states)
        no_deadline = await batcher.submit(items("later", 2))  # without a deadline nothing is turned away
        await batcher.close()
        return refused, answered_states, len(no_deadline)

    refused, answered_states, later = asyncio.run(scenario())
    assert refused[:2] == [False, False] and all(refused[3:]) and later == 2
    assert answered_states == 5 + 5 * refused.count(False)  # a refused request's questions were never computed


def test_the_estimate_is_scaled_down_where_requests_are_answered_sooner_than_estimated_and_never_up():
    batcher = Batcher(FakeBackend(), max_batch=64, max_wait_ms=0)

    def answered(estimate_s: float, took_s: float) -> None:
        job = batcher_module._Job(items("x"), None, 0, estimate_s=estimate_s, submitted=time.perf_counter() - took_s)
        batcher._learn_wait(job)

    for _ in range(10):
        answered(1.0, 0.2)  # answered in a fifth of the estimate
    scale = batcher._estimate_scale
    assert 0.25 <= scale < 0.5  # a tenth of the way to 0.2 each time: 0.2 + 0.8 * 0.9 ** 10 = 0.48
    for _ in range(50):
        answered(0.1, 0.3)  # three times the estimate: moves it back up, never past 1
    assert scale < batcher._estimate_scale <= 1.0
    before = batcher._estimate_scale
    answered(0.01, 1.0)  # an estimate this small says too little to learn from
    assert batcher._estimate_scale == before


def test_a_window_read_in_context_costs_its_texts_pass_once_not_a_pass_of_its_own():
    text = "First sentence of a message. " * 10
    asked = [DecisionItem(text, QUESTION), DecisionItem(text[:29], QUESTION, text),
             DecisionItem(text[29:58], QUESTION, text)]
    in_context = batcher_module.work_units(asked, in_context=True)
    assert in_context == pytest.approx(batcher_module.work_units(asked[:1]) + 2 * batcher_module.QUESTION_UNITS)
    assert batcher_module.work_units(asked) > in_context  # a backend that reads windows alone runs each


def test_no_retry_hint_reaches_the_sdks_thirty_second_give_up(monkeypatch):
    from jevserve.decide import batcher as batcher_module

    monkeypatch.setattr(batcher_module, "_now", lambda: 0.0)

    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=8, max_wait_ms=0, max_queue=4)
        submitted = await held_with_three_queued(batcher, backend)
        batcher._seconds_per_item = 20.0  # slow enough that the work ahead is minutes
        with pytest.raises(OverloadedError) as info:
            batcher.check_room(4)
        backend.release.set()
        await asyncio.gather(*submitted)
        await batcher.close()
        return info.value

    refused = asyncio.run(scenario())
    assert refused.retry_after_s == batcher_module.MAX_RETRY_AFTER_S < 30


def test_a_request_whose_answer_would_come_later_than_answer_within_s_is_told_when_to_come_back(monkeypatch):
    # a burst of a thousand 1-question clients was admitted whole by counting questions, and the last waited 50 s,
    # past the SDK's 10-s timeout, which then sent the request again to the same queue
    monkeypatch.setattr(batcher_module, "_now", lambda: 100.0)

    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=8, max_wait_ms=0, answer_within_s=2.0)
        await batcher.submit(items("first"))  # measured; nothing was ahead of it
        submitted = await held_with_three_queued(batcher, backend)
        batcher._seconds_per_unit = 1.0  # a short text is about one unit: a second each from here
        own = batcher_module.work_units(items("late"))
        hints = []
        for _ in range(2):  # the same moment: the second is told to come after the first's work
            with pytest.raises(OverloadedError) as info:
                await batcher.submit(items("late"))
            hints.append(info.value)
        assert backend.num_started == 1  # nothing refused was queued
        backend.release.set()
        await asyncio.gather(*submitted)
        # an empty queue admits any request, whatever its own work (20 texts, 20 s by the estimate)
        alone = await batcher.submit(items("long", 20))
        await batcher.close()
        return own, hints, len(alone)

    own, (first, second), alone = asyncio.run(scenario())
    # ahead: what is left of the running blocker and the queued request's share (1 of its 3 texts), a second each
    ahead = batcher_module.work_units(items("blocker")) + batcher_module.work_units(items("q", 3)) / 3
    assert "over the 2 s this server answers within (--answer-within-s)" in str(first)
    # told to come back when what is left ahead, with its own work, fits 2 s (less the blocker's time run)
    assert first.retry_after_s == pytest.approx(ahead + own - 2.0, abs=0.05)
    assert second.retry_after_s == pytest.approx(first.retry_after_s + own, abs=0.02)
    assert alone == 20


def test_without_answer_within_s_a_request_waits_however_long_the_queue():
    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=8, max_wait_ms=0)
        await batcher.submit(items("first"))
        submitted = await held_with_three_queued(batcher, backend)
        batcher._seconds_per_unit = 1.0
        late = asyncio.ensure_future(batcher.submit(items("late")))
        await until(lambda: batcher.queue_depth == 4)
        backend.release.set()
        answered = await late
        await asyncio.gather(*submitted)
        await batcher.close()
        return len(answered)

    assert asyncio.run(scenario()) == 1


def test_a_full_queues_retry_hint_is_sized_by_what_its_queued_texts_cost_not_by_the_questions_timed_before(monkeypatch):
    # after requests of 32 questions about one short text, the time per question timed was tiny, and a burst of
    # requests of 8 questions about a long text each was told to come back in 1 s, all together, for seconds of work
    monkeypatch.setattr(batcher_module, "_now", lambda: 3.0)

    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=8, max_wait_ms=0, max_queue=16)
        blocker = await blocked_on(batcher, backend)
        long_text = "a long ticket pasted in full " * 20  # 580 characters: 1 + 580/256 units
        queued = asyncio.ensure_future(batcher.submit([DecisionItem(long_text, QUESTION)] * 8))
        await until(lambda: batcher.queue_depth == 8)
        # a slow model, timed before on requests of many questions about one short text each: half a second a unit,
        # a hundredth of a second a question
        batcher._measured, batcher._seconds_per_unit, batcher._seconds_per_item = True, 0.5, 0.01
        with pytest.raises(OverloadedError) as info:
            batcher.check_room(16)
        spq = batcher._queued_seconds_per_item()
        backend.release.set()
        await asyncio.gather(blocker, queued)
        await batcher.close()
        return info.value, spq

    refused, spq = asyncio.run(scenario())
    text_units = 1 + len("a long ticket pasted in full " * 20) / batcher_module.STATE_UNIT_CHARS
    units = text_units + 8 * batcher_module.QUESTION_UNITS
    assert spq == pytest.approx(units * 0.5 / 8)  # the queued text's units, over its questions
    # told when the 8 ahead and its own 16, less the queue's 16, will have run at that cost (1.83 s, where the time
    # per question timed before said 0.08 s, and the floor 1 s)
    assert refused.retry_after_s == pytest.approx((8 + 16 - 16) * spq) and refused.retry_after_s > 1.5


def test_a_text_queued_ahead_is_not_counted_again_in_a_later_requests_wait(monkeypatch):
    # requests about one shared document, each with its own question, read the document once (in one batch, or
    # from the backend's cache after): counted once per request, a burst of 8 of them at a fresh gateway was
    # estimated at 1.3 s of work, 21 of 24 were turned away, and the 3 admitted took 0.3 s
    document = "A pasted document that several users ask about. " * 40
    counted: set[str] = set()
    first = batcher_module.work_units([DecisionItem(document, QUESTION)], counted=counted)
    again = batcher_module.work_units([DecisionItem(document, QUESTION)], counted=counted)
    assert first == batcher_module.work_units([DecisionItem(document, QUESTION)])
    assert again == pytest.approx(batcher_module.QUESTION_UNITS) and counted == {document}

    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=8, max_wait_ms=0, max_queue=64)
        blocker = await blocked_on(batcher, backend)
        batcher._measured, batcher._seconds_per_unit, batcher._running = True, 0.01, None
        queued = asyncio.ensure_future(batcher.submit([DecisionItem(document, QUESTION)]))
        await until(lambda: batcher.queue_depth == 1)
        ahead, own = batcher._raw_wait_parts([DecisionItem(document, QUESTION), DecisionItem("its own", QUESTION)])
        backend.release.set()
        await asyncio.gather(blocker, queued)
        await batcher.close()
        return ahead, own

    ahead, own = asyncio.run(scenario())
    assert ahead == pytest.approx(first * 0.01)
    assert own == pytest.approx(batcher_module.work_units([DecisionItem("its own", QUESTION)]) * 0.01
                                + batcher_module.QUESTION_UNITS * 0.01)


def test_a_requests_later_chunks_are_charged_its_questions_not_its_text_again():
    # the short chunks max_chunk_ms cuts (about one question each) were each charged the request's whole text, read
    # once and then taken from the model's cache: the time per unit learned was several times too low
    document = "A ticket pasted in full, read once for all of its questions. " * 10
    asked = [DecisionItem(document, QUESTION)] * 4

    async def scenario():
        backend = FakeBackend()
        batcher = Batcher(backend, max_batch=1, max_wait_ms=0, max_queue=64)
        timed: list[float] = []
        real_time_batch = batcher._time_batch
        batcher._time_batch = lambda n, units, elapsed: (timed.append(units), real_time_batch(n, units, elapsed))
        await batcher.submit(asked)
        await batcher.close()
        return timed

    timed = asyncio.run(scenario())
    first = batcher_module.work_units(asked[:1])
    assert timed == pytest.approx([first] + [batcher_module.QUESTION_UNITS] * 3)


class ReadingTextsBackend(FakeBackend):
    """A backend whose questions about states marked "long" have texts of their own to read, in `turns` turns."""

    def __init__(self, turns: int) -> None:
        super().__init__()
        self.turns = turns
        self.calls: list[str] = []  # "prepare <state>" or "decide <states>", in the order the backend was called

    def text_chars(self, items):
        if any("long" in item.state for item in items):
            return 10 * batcher_module.PREPARED_TEXT_CHARS
        return 5_000 if any("medium" in item.state for item in items) else 10  # a request of 5 KB of texts

    def prepare(self, items, budget_s):
        self.num_started += 1
        self.release.wait(10)
        self.calls.append(f"prepare {items[0].state}")
        return sum(c.startswith("prepare") for c in self.calls) >= self.turns

    def decide(self, items):
        self.calls.append("decide " + " ".join(item.state for item in items))
        return super().decide(items)


def test_a_request_with_long_question_texts_has_them_read_in_turns_between_other_requests_batches():
    # one question with 255 options of a page each held an encoder backend for about a minute, in one batch no
    # chunking can cut: a one-question request sent half a second after it waited the whole minute
    async def scenario():
        backend = ReadingTextsBackend(turns=3)
        batcher = Batcher(backend, max_batch=64, max_wait_ms=0, max_chunk_ms=25)
        backend.release.clear()
        long = asyncio.ensure_future(batcher.submit(items("long")))
        await until(lambda: backend.num_started == 1)  # its first turn of reading is under way
        small = asyncio.ensure_future(batcher.submit(items("small")))
        await until(lambda: batcher.queue_depth == 2)
        backend.release.set()
        answers = await asyncio.gather(long, small)
        await batcher.close()
        return backend.calls, answers

    calls, (long_answer, _) = asyncio.run(scenario())
    # the small request waits for one turn; the long one's questions are batched once its texts are read
    assert calls == ["prepare long #0", "decide small #0", "prepare long #0", "prepare long #0", "decide long #0"]
    alone = asyncio.run(_answers_of(FakeBackend(), items("long")))
    assert all((a == b).all() for a, b in zip(long_answer, alone, strict=True))  # what reading in turns changes: none


async def _answers_of(backend, asked):
    batcher = Batcher(backend, max_batch=64, max_wait_ms=0)
    out = await batcher.submit(asked)
    await batcher.close()
    return out


def test_short_question_texts_and_an_uncut_batcher_read_nothing_in_turns():
    async def scenario(max_chunk_ms, state):
        backend = ReadingTextsBackend(turns=3)
        batcher = Batcher(backend, max_batch=64, max_wait_ms=0, max_chunk_ms=max_chunk_ms)
        await batcher.submit(items(state))
        await batcher.close()
        return backend.calls

    assert asyncio.run(scenario(25, "short")) == ["decide short #0"]
    # 5 KB of texts is read ahead too: at a threshold of 16 KB, a dozen such requests held a small one 8 to 15 s
    assert asyncio.run(scenario(25, "medium"))[0] == "prepare medium #0"
    assert asyncio.run(scenario(None, "long")) == ["decide long #0"]  # --max-chunk-ms 0: nothing is cut


def test_a_request_whose_texts_cannot_be_read_fails_alone():
    class Failing(ReadingTextsBackend):
        def prepare(self, items, budget_s):
            raise RuntimeError("cannot read these texts")

    async def scenario():
        backend = Failing(turns=1)
        batcher = Batcher(backend, max_batch=64, max_wait_ms=0, max_chunk_ms=25)
        long = asyncio.ensure_future(batcher.submit(items("long")))
        small = asyncio.ensure_future(batcher.submit(items("small")))
        done = await asyncio.gather(long, small, return_exceptions=True)
        await batcher.close()
        return done

    long, small = asyncio.run(scenario())
    assert isinstance(long, RuntimeError) and len(small) == 1


def test_several_requests_with_long_texts_are_read_one_at_a_time_and_a_small_one_waits_for_one_turn():
    # a dozen requests of 15 KB each, just under the threshold then, were read within batches, and a small request
    # waited behind all of them for 8 to 15 s
    class TwoTurnsEach(ReadingTextsBackend):
        def prepare(self, items, budget_s):
            self.num_started += 1
            self.release.wait(10)
            self.calls.append(f"prepare {items[0].state}")
            return self.calls.count(f"prepare {items[0].state}") >= 2

    async def scenario():
        backend = TwoTurnsEach(turns=0)
        batcher = Batcher(backend, max_batch=64, max_wait_ms=0, max_chunk_ms=25)
        backend.release.clear()
        longs = [asyncio.ensure_future(batcher.submit(items(f"long{i}"))) for i in range(3)]
        await until(lambda: backend.num_started == 1)
        small = asyncio.ensure_future(batcher.submit(items("small")))
        await until(lambda: batcher.queue_depth == 4)
        backend.release.set()
        await asyncio.gather(*longs, small)
        await batcher.close()
        return backend.calls

    calls = asyncio.run(scenario())
    assert calls[:2] == ["prepare long0 #0", "decide small #0"]
    assert calls.count("decide small #0") == 1 and len([c for c in calls if c.startswith("prepare")]) == 6
