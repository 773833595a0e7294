import numpy as np

from jevserve.serving import Request
from jevserve.serving.engine_request import EngineRequest
from jevserve.serving.running_batch import RunningBatch


def specs(n: int) -> list[Request]:
    return [Request(f"r{i}", 0.0, 10 + i, 5, None if i % 2 else 4.0) for i in range(n)]


def test_loaded_rows_get_their_request_object_when_they_leave():
    batch = RunningBatch(capacity=2)
    batch.load(specs(3), prompt=np.array([10, 11, 12]), output=np.array([5, 6, 7]), computed=np.array([9, 11, 3]),
               generated=np.array([1, 1, 0]), blocks=np.array([1, 1, 1]))
    assert batch.n == 3 and batch.requests == [None, None, None]
    assert batch.scheduled[:3].tolist() == [0, 0, 0]
    popped = batch.pop(1)
    assert isinstance(popped, EngineRequest) and popped.spec.request_id == "r1"
    assert (popped.num_output_tokens, popped.num_computed, popped.num_generated, popped.num_blocks) == (6, 11, 1, 1)
    assert batch.prompt[: batch.n].tolist() == [10, 12] and [s.request_id for s in batch.specs] == ["r0", "r2"]


def test_appended_and_loaded_rows_share_the_columns_and_grow_past_the_capacity():
    batch = RunningBatch(capacity=1)
    request = EngineRequest(Request("a", 0.0, 20, 8, 6.5), num_computed=4)
    batch.append(request, num_scheduled=16)
    batch.load(specs(2), prompt=np.array([10, 11]))
    assert batch.n == 3 and batch.prompt[:3].tolist() == [20, 10, 11] and batch.computed[:3].tolist() == [4, 0, 0]
    assert batch.predicted[0] == 6.5 and batch.scheduled[0] == 16 and batch.requests[0] is request


def test_remove_syncs_the_rows_and_keeps_the_rest_in_order():
    batch = RunningBatch()
    requests = [EngineRequest(s) for s in specs(4)]
    for r in requests:
        batch.append(r, 0)
    batch.generated[:4] = [1, 2, 3, 4]
    assert batch.remove(np.array([0, 2])) == [requests[0], requests[2]]
    assert (requests[2].num_generated, batch.generated[: batch.n].tolist()) == (3, [2, 4])
    assert batch.requests == [requests[1], requests[3]]
