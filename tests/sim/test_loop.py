import pytest

from jevserve.serving import Request, make_queue_policy
from jevserve.sim.engine import Engine, EngineConfig
from jevserve.sim.entities import SimRequest
from jevserve.sim.events import RANK, Arrival, Enqueue, ScheduleTick, StepDone
from jevserve.sim.loop import Simulator
from tests.sim.builders import make_profile


def engine(replica_id: int = 0) -> Engine:
    return Engine(make_profile(), make_queue_policy("fcfs"), EngineConfig(), replica_id=replica_id)


def test_completions_come_before_arrivals_and_ticks_at_one_instant():
    assert RANK["StepDone"] < RANK["Arrival"] < RANK["Enqueue"] < RANK["ScheduleTick"]


def test_a_request_arriving_on_a_step_boundary_is_scheduled_at_that_boundary():
    # r0's prefill step ends at 1 ms, exactly when r1 arrives: the step starting at 1 ms holds both.
    sim = Simulator([engine()])
    a, b = SimRequest(Request("r0", 0.0, 10, 3)), SimRequest(Request("r1", 0.001, 10, 1))
    for e in (a, b):
        sim.push(Arrival(e.spec.arrival_s, 0, e))
    sim.run()
    assert b.first_admit_s == pytest.approx(0.001)
    assert b.first_token_s == pytest.approx(0.002)


def test_pushing_an_event_into_the_past_raises():
    sim = Simulator([engine()])
    sim.run(until_s=1.0)
    with pytest.raises(ValueError, match="before the clock"):
        sim.push(ScheduleTick(0.5, 0))


def test_engines_must_be_listed_by_replica_id():
    with pytest.raises(ValueError, match="replica_id=1; expected 0"):
        Simulator([engine(1)])


def test_two_replicas_share_one_clock():
    sim = Simulator([engine(0), engine(1)])
    a, b = SimRequest(Request("a", 0.0, 10, 2)), SimRequest(Request("b", 0.0, 10, 2))
    sim.push(Arrival(0.0, 0, a))
    sim.push(Arrival(0.0, 1, b))
    sim.run()
    assert (a.replica_id, b.replica_id) == (0, 1)
    assert a.finish_s == b.finish_s == pytest.approx(0.002)


def test_a_superseded_step_done_is_ignored():
    eng = engine()
    sim = Simulator([eng])
    request = SimRequest(Request("r", 0.0, 10, 50))
    sim.push(Enqueue(0.0, 0, request))
    sim.run(until_s=0.0)
    assert StepDone(5.0, 0, run_id=-1).handle(sim.state) == []
