import numpy as np

from jevserve.serving import Request
from jevserve.sim.entities import SimRequest
from jevserve.sim.running import StepEnds, TimedRunningBatch


def make_batch(n: int) -> tuple[TimedRunningBatch, list[SimRequest]]:
    requests = [SimRequest(Request(f"r{i}", 0.0, 10 + i, 5)) for i in range(n)]
    batch = TimedRunningBatch(StepEnds())
    for i, r in enumerate(requests):
        batch.append(r, num_scheduled=i)
    return batch, requests


def test_rows_keep_admission_order_and_the_requests_fields():
    batch, requests = make_batch(3)
    assert batch.requests == requests and [s.request_id for s in batch.specs] == ["r0", "r1", "r2"]
    assert batch.prompt[: batch.n].tolist() == [10, 11, 12]
    assert batch.scheduled[: batch.n].tolist() == [0, 1, 2]
    assert batch.streak[: batch.n].tolist() == [-1, -1, -1]


def test_the_arrays_grow_past_their_first_capacity():
    batch, requests = make_batch(200)
    assert batch.n == 200 and batch.prompt[199] == 209 and batch.requests[199] is requests[199]


def test_pop_syncs_the_request_and_moves_later_rows_up():
    batch, requests = make_batch(3)
    batch.computed[1], batch.generated[1], batch.blocks[1] = 11, 1, 1
    popped = batch.pop(1)
    assert popped is requests[1]
    assert (popped.num_computed, popped.num_generated, popped.num_blocks) == (11, 1, 1)
    assert batch.requests == [requests[0], requests[2]] and batch.prompt[: batch.n].tolist() == [10, 12]


def test_remove_takes_several_rows_and_keeps_the_order_of_the_rest():
    batch, requests = make_batch(5)
    removed = batch.remove(np.array([0, 3]))
    assert removed == [requests[0], requests[3]]
    assert batch.requests == [requests[1], requests[2], requests[4]]
    assert batch.prompt[: batch.n].tolist() == [11, 12, 14] and len(batch.specs) == 3


def test_a_streak_of_consecutive_tokens_becomes_one_array_of_step_ends():
    batch, requests = make_batch(1)
    for t in (0.1, 0.2, 0.3, 0.4):
        batch.ends.append(t)
    batch.ends.extend(np.array([0.5, 0.6]))
    batch.streak[0] = 1  # tokens at steps 1 .. 3
    batch.close_streak(0, 4)
    assert len(requests[0].token_times) == 1
    assert requests[0].token_times[0].tolist() == [0.2, 0.3, 0.4]
    assert batch.streak[0] == -1
    batch.close_streak(0, 6)  # no streak: nothing recorded
    assert len(requests[0].token_times) == 1


def test_step_ends_grow_past_their_first_capacity():
    ends = StepEnds()
    ends.extend(np.arange(3000, dtype=np.float64))
    ends.append(3000.0)
    assert ends.count == 3001 and ends.between(2998, 3001).tolist() == [2998.0, 2999.0, 3000.0]
