import dataclasses

import pytest

from jevserve.serving import ReplicaState, Request, ResidentRequest


def test_request_is_frozen():
    request = Request("r", 0.0, 10, 5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.num_prompt_tokens = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs, field",
    [({"num_prompt_tokens": 0}, "num_prompt_tokens=0"), ({"num_output_tokens": 0}, "num_output_tokens=0"),
     ({"predicted_output_tokens": -1.0}, "predicted_output_tokens=-1.0")],
)
def test_request_rejects_bad_sizes_naming_the_field(kwargs, field):
    base = {"request_id": "r", "arrival_s": 0.0, "num_prompt_tokens": 10}
    with pytest.raises(ValueError, match=f"request 'r': {field}"):
        Request(**{**base, **kwargs})


@pytest.mark.parametrize(
    "computed, generated, expected",
    [(0, 0, 100), (60, 0, 40), (100, 1, 0), (120, 21, 0), (0, 21, 121)],
)
def test_remaining_prefill_counts_prompt_and_recompute_but_not_decode(computed, generated, expected):
    resident = ResidentRequest(Request("r", 0.0, 100, 50), computed, generated, True)
    assert resident.num_remaining_prefill_tokens == expected


def test_replica_state_counts_running_and_waiting():
    r = ResidentRequest(Request("r", 0.0, 10, 5), 0, 0, False)
    state = ReplicaState(0, 1.0, 10, 10, running=(r,), waiting=(r, r))
    assert state.num_outstanding == 3
