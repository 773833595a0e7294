import pytest

from jevserve.plan.planner import CapacityModel, PlanError, plan_for, plan_replicas
from jevserve.sim.engine import EngineConfig
from tests.plan.builders import make_profile, make_workload


def replicas(rate, *, memory=80.0, output=400, slo_s=1.0):
    return plan_for(rate, make_workload(output=output), make_profile(gpu_memory_gib=memory), EngineConfig(),
                    ttft_slo_s=slo_s).replicas


def test_replicas_never_fall_as_the_rate_grows():
    counts = [replicas(r) for r in (10, 50, 100, 200, 400, 800, 1600)]
    assert counts == sorted(counts) and counts[0] == 1 and counts[-1] > counts[0]


def test_replicas_never_grow_as_gpu_memory_grows_for_a_memory_bound_workload():
    counts = [replicas(100, memory=m, output=3000) for m in (24, 32, 48, 80, 141)]
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1]


def test_plan_reports_the_binding_resource_and_gpus():
    plan = plan_for(100, make_workload(output=3000), make_profile(gpu_memory_gib=24), EngineConfig(),
                    ttft_slo_s=1.0, gpus_per_replica=2)
    assert plan.capacity.bound.binding == "kv memory"
    assert plan.gpus == 2 * plan.replicas
    assert plan.per_replica_rate_rps <= plan.capacity.slo_rate_rps


def test_an_slo_no_replica_can_meet_says_what_to_change():
    model = CapacityModel(make_workload(), make_profile(), EngineConfig(), ttft_slo_s=0.001)
    with pytest.raises(PlanError, match=r"cannot meet TTFT <= 1 ms .* loosen --slo-ttft-ms"):
        plan_replicas(10, model.capacity())


@pytest.mark.parametrize("kwargs, message", [({"rate_rps": 0}, "--rate 0"), ({"gpus_per_replica": 0},
                                                                             "--gpus-per-replica 0")])
def test_bad_plan_inputs_name_the_option(kwargs, message):
    capacity = CapacityModel(make_workload(), make_profile(), EngineConfig(), ttft_slo_s=1.0).capacity()
    with pytest.raises(PlanError, match=message):
        plan_replicas(**{"rate_rps": 10, "capacity": capacity, **kwargs})


def test_no_replica_is_planned_above_max_load_of_its_bound():
    capacity = CapacityModel(make_workload(), make_profile(), EngineConfig(), ttft_slo_s=10.0).capacity()
    bound = capacity.bound.rate_rps
    assert capacity.slo_rate_rps >= 0.98 * bound  # a loose SLO: only the bound limits
    rate = 4 * 0.97 * bound  # four replicas at 97% of the bound each
    default = plan_replicas(rate, capacity)
    assert default.replicas == 5 and default.utilisation <= 0.9 and default.limited_by == "stability bound"
    assert plan_replicas(rate, capacity, max_load=1.0).replicas == 4
    with pytest.raises(PlanError, match="--max-load 0"):
        plan_replicas(rate, capacity, max_load=0.0)


def test_the_command_lines_max_load_default_is_the_planners():
    import argparse

    from jevserve.plan import cli
    from jevserve.plan.planner import MAX_LOAD

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    assert parser.parse_args(["plan"]).max_load == MAX_LOAD
