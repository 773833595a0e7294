"""The live engine's timeline is the simulator's: same planner, same step times, on the engine's clock."""

import asyncio
import time

import pytest

from jevserve.engine.core import LiveEngine
from jevserve.serving import EngineConfig, Request, make_queue_policy
from jevserve.sim.profile import load_profile
from jevserve.sim.run import simulate
from jevserve.sim.workloads.sharegpt import sample_sharegpt


def test_requests_arriving_together_get_the_simulators_first_token_and_finish_times():
    profile = load_profile("qwen3-8b-h200")
    config = EngineConfig(max_num_seqs=16, num_kv_blocks=150, fast_forward=False)  # tight KV: preemptions
    sample = sample_sharegpt(40, seed=2, split="test")

    async def live():
        # The clock stands still while the requests arrive, then jumps far ahead, so the engine never waits for
        # the wall clock and runs its steps back to back on its own clock.
        now = [time.monotonic()]
        engine = LiveEngine(profile, config, make_queue_policy("fcfs"), clock=lambda: now[0])
        requests = [engine.submit(r.request_id, r.num_prompt_tokens, r.num_output_tokens) for r in sample]
        now[0] += 1e6
        task = asyncio.create_task(engine.run())
        while not all(r.finished for r in requests):
            await asyncio.sleep(0)
        task.cancel()
        return requests, engine.num_preemptions

    requests, preemptions = asyncio.run(live())
    entities, recorder = simulate([Request(r.request_id, 0.0, r.num_prompt_tokens, r.num_output_tokens)
                                   for r in sample], profile, make_queue_policy("fcfs"), config)
    assert preemptions == recorder.num_preemptions > 0
    for request, entity in zip(requests, entities, strict=True):
        assert request.first_token_s == pytest.approx(entity.first_token_s, rel=1e-12)
        assert request.finish_s == pytest.approx(entity.finish_s, rel=1e-12)
