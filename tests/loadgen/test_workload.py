import math

import numpy as np

from jevserve.loadgen.workload import plan_requests, random_requests, send_times, sharegpt_requests
from jevserve.sim.workloads.sharegpt import sample_sharegpt


def test_sharegpt_requests_are_the_simulators_sample_with_their_prompt_texts():
    items = sharegpt_requests(20, seed=3, split="test")
    sample = sample_sharegpt(20, seed=3, split="test")
    assert [(i[0], i[2], i[3]) for i in items] == [(r.request_id, r.num_prompt_tokens, r.num_output_tokens)
                                                   for r in sample]
    assert all(isinstance(i[1], str) and i[1] for i in items)


def test_send_times_are_all_at_once_for_an_infinite_rate_and_seeded_otherwise():
    assert send_times(5, request_rate=math.inf, process="poisson", seed=0, cv=1.0).tolist() == [0.0] * 5
    a = send_times(50, request_rate=10.0, process="gamma", seed=1, cv=2.0)
    assert np.array_equal(a, send_times(50, request_rate=10.0, process="gamma", seed=1, cv=2.0)) and a[0] == 0.0
    assert 2.0 < a[-1] < 10.0  # about 49 gaps of 0.1 s


def test_random_requests_have_the_asked_lengths():
    (request,) = plan_requests(random_requests(1, input_len=7, output_len=3, seed=0), np.array([0.5]))
    assert len(request.prompt.split()) == 7 and request.max_tokens == 3 and request.send_s == 0.5
