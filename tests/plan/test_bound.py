import pytest

from jevserve.plan.bound import stability_bound, step_time_s
from jevserve.plan.demand import request_demand
from jevserve.serving import Request
from jevserve.sim.step_time import StepTimeModel
from tests.plan.builders import make_workload


def demand_of(requests, st):
    return request_demand(requests, st, max_num_batched_tokens=8192, block_size=16)


def test_without_token_work_the_slot_bound_is_slots_over_lifetime():
    st = StepTimeModel(10_000.0, 0.0, 0.0)
    d = demand_of(make_workload(), st)
    b = stability_bound(d, constant_s=0.01, max_num_seqs=64, num_kv_blocks=10**9, max_num_batched_tokens=8192)
    assert b.slots_rps == pytest.approx(64 / (d.mean_steps * 0.01))
    assert b.binding == "batch slots"


def test_kv_memory_binds_for_long_replies_in_a_small_cache():
    st = StepTimeModel(4000.0, 17.0, 4.0)
    d = demand_of(make_workload(output=2000), st)
    b = stability_bound(d, constant_s=0.004, max_num_seqs=1024, num_kv_blocks=5000, max_num_batched_tokens=8192)
    assert b.binding == "kv memory" and b.kv_rps < b.slots_rps


def test_compute_binds_when_token_work_fills_the_steps():
    st = StepTimeModel(4000.0, 17.0, 4.0)
    d = demand_of(make_workload(prompt=4000, output=10), st)
    b = stability_bound(d, constant_s=0.004, max_num_seqs=1024, num_kv_blocks=10**6, max_num_batched_tokens=8192)
    assert b.binding == "compute" and b.compute_rps < min(b.slots_rps, b.kv_rps)


def test_compute_binds_when_token_work_fills_the_steps_though_slots_are_smallest():
    # prompts cost their token work in few steps, replies many: slots give the lowest limit, yet at it token work fills
    # over 90% of each step, so more slots would buy little (as `plan --num-requests 1` showed: 135/138/137 req/s)
    st = StepTimeModel(4000.0, 17.0, 4.0)
    d = demand_of(make_workload(prompt=4000, output=10), st)
    tight = dict(constant_s=0.004, num_kv_blocks=10**6, max_num_batched_tokens=8192)
    slots_smallest = next(
        b for b in (stability_bound(d, max_num_seqs=n, **tight) for n in range(1, 1024))
        if b.slots_rps < b.compute_rps and b.token_work_share >= 0.9
    )
    assert slots_smallest.binding == "compute"
    few_slots = stability_bound(d, max_num_seqs=1, **tight)
    assert few_slots.token_work_share < 0.9 and few_slots.binding == "batch slots"


@pytest.mark.parametrize("blocks", [[1000, 2000, 5000, 20_000, 100_000]])
def test_bound_never_falls_when_memory_or_batch_cap_grows(blocks):
    st = StepTimeModel(4000.0, 17.0, 4.0)
    d = demand_of(make_workload(output=800), st)
    rates = [stability_bound(d, constant_s=0.004, max_num_seqs=256, num_kv_blocks=b,
                             max_num_batched_tokens=8192).rate_rps for b in blocks]
    assert rates == sorted(rates) and rates[0] < rates[-1]
    caps = [stability_bound(d, constant_s=0.004, max_num_seqs=s, num_kv_blocks=10**6,
                            max_num_batched_tokens=8192).rate_rps for s in (8, 32, 128, 512)]
    assert caps == sorted(caps) and caps[0] < caps[-1]


def test_the_compute_limit_counts_one_step_constant_per_full_token_budget():
    st = StepTimeModel(4000.0, 10.0, 0.0)
    d = demand_of([Request("r", 0.0, 4096, 1)] * 10, st)  # a prompt is half a token budget, no decode
    b = stability_bound(d, constant_s=0.004, max_num_seqs=1024, num_kv_blocks=10**6, max_num_batched_tokens=8192)
    assert b.compute_rps == pytest.approx(1 / (4096 * 10e-6 + 0.004 / 2))


def test_decode_tokens_share_the_token_budget_with_prompts():
    # an outside tester planned 38.9 req/s on a 16-token budget where the simulator served 9.7: the limit counted
    # prompt tokens only, while every running request's decode token takes a place in each step's budget too
    st = StepTimeModel(4000.0, 0.0, 0.0)  # no token work: the budget alone limits
    d = request_demand([Request("r", 0.0, 10, 11)] * 10, st, max_num_batched_tokens=16, block_size=16)
    b = stability_bound(d, constant_s=0.004, max_num_seqs=1024, num_kv_blocks=10**6, max_num_batched_tokens=16)
    assert d.mean_budget_tokens == 10 + 10  # its prompt and 10 decode steps (the first token comes with the prefill)
    assert b.compute_rps == pytest.approx(16 / (20 * 0.004))


def test_step_time_grows_with_rate_and_is_infinite_at_the_compute_limit():
    st = StepTimeModel(4000.0, 17.0, 4.0)
    d = demand_of(make_workload(), st)
    limit = 1 / d.mean_work_s
    times = [step_time_s(f * limit, 0.004, d) for f in (0.0, 0.5, 0.9)]
    assert times[0] == pytest.approx(0.004) and times == sorted(times)
    assert step_time_s(limit, 0.004, d) == float("inf")


def test_a_roofline_adds_the_peak_compute_and_bandwidth_limits_and_never_raises_a_limit():
    from jevserve.sim.roofline import Roofline

    roof = Roofline(peak_flops=1e15, memory_bandwidth=1e12, weight_bytes=1e9, flops_per_token=1e11,
                    kv_bytes_per_token=1e5, attention_flops_per_pair=1e6)
    fit = StepTimeModel(4000.0, 17.0, 4.0)
    bounded = StepTimeModel(4000.0, 17.0, 4.0, roofline=roof)
    workload = make_workload()
    caps = {"constant_s": 0.004, "max_num_seqs": 1024, "num_kv_blocks": 10**6, "max_num_batched_tokens": 8192}
    plain = stability_bound(demand_of(workload, fit), **caps)
    d = demand_of(workload, bounded)
    b = stability_bound(d, **caps)
    assert b.peak_compute_rps == pytest.approx(1.0 / d.floor.mean_compute_s)
    assert b.rate_rps <= plain.rate_rps and b.slots_rps <= plain.slots_rps and b.kv_rps <= plain.kv_rps
    assert b.binding == "peak compute" and b.rate_rps == pytest.approx(b.peak_compute_rps)
    assert step_time_s(0.5 * b.rate_rps, 0.004, d) >= step_time_s(0.5 * b.rate_rps, 0.004, demand_of(workload, fit))


def test_the_mean_step_counts_prefill_steps_at_their_fit_and_decode_steps_at_their_floor():
    # long prompts, medium replies, a floor that reads much KV per decode step: prefill steps are the fit's, decode
    # steps the floor's, and their mean is longer than the larger of the two means (the bound once used that, and
    # put an outside tester's H100 replica 30% above the simulator)
    from jevserve.plan.bound import busy_per_second
    from jevserve.sim.roofline import Roofline

    roof = Roofline(peak_flops=1e16, memory_bandwidth=3e12, weight_bytes=1.5e10, flops_per_token=1.6e10,
                    kv_bytes_per_token=1.5e5, attention_flops_per_pair=6e5)
    st = StepTimeModel(5750.0, 17.25, 6.0, roofline=roof)
    d = demand_of([Request(str(i), 0.0, 3000 + 100 * (i % 5), 200) for i in range(50)], st)
    rate, constant = 10.0, 0.00575
    tau = step_time_s(rate, constant, d, peak_compute=False)
    fit_alone = constant / (1 - rate * d.mean_work_s)
    floor_alone = d.floor.weights_s / (1 - rate * d.floor.mean_memory_s)
    assert tau > 1.5 * max(fit_alone, floor_alone)
    assert busy_per_second(rate, constant, d, tau, peak_compute=False) == pytest.approx(1.0)
    # the KV limit is where what the replica holds at that mean step fills the cache
    b = stability_bound(d, constant_s=constant, max_num_seqs=1024, num_kv_blocks=25_000, max_num_batched_tokens=8192)
    held = b.kv_rps * d.mean_kv_block_steps * step_time_s(b.kv_rps, constant, d, peak_compute=False)
    assert b.binding == "kv memory" and held == pytest.approx(25_000, rel=1e-3)


def test_without_a_floor_the_busy_time_is_the_closed_form():
    from jevserve.plan.bound import busy_per_second

    st = StepTimeModel(4000.0, 17.0, 4.0)
    d = demand_of(make_workload(), st)
    tau = step_time_s(20.0, 0.004, d)
    assert tau == pytest.approx(0.004 / (1 - 20.0 * d.mean_work_s))
    assert busy_per_second(20.0, 0.004, d, tau) == pytest.approx(1.0)
