import math

from jevserve.serving import Request, make_queue_policy
from jevserve.serving.engine_request import EngineRequest
from jevserve.serving.waiting_queue import WaitingQueue


def make(request_id: str, arrival_s: float, prompt: int) -> EngineRequest:
    return EngineRequest(Request(request_id, arrival_s, prompt, 10))


def test_queue_pops_in_policy_order():
    queue = WaitingQueue(make_queue_policy("spf"))
    for r in (make("a", 0.0, 30), make("b", 0.1, 10), make("c", 0.2, 20)):
        queue.push(r, 0.3)
    assert [queue.pop(0.3).spec.request_id for _ in range(3)] == ["b", "c", "a"]
    assert len(queue) == 0 and queue.peek(0.3) is None


def test_aged_request_is_re_ranked_at_its_promotion_instant():
    queue = WaitingQueue(make_queue_policy("spf", aging_s=5.0))
    queue.push(make("old-long", 0.0, 900), 0.0)
    queue.push(make("new-short", 1.0, 5), 1.0)
    assert queue.next_change_s() == 5.0
    assert queue.peek(4.9).spec.request_id == "new-short"
    assert queue.peek(5.0).spec.request_id == "old-long"
    assert queue.next_change_s() == 6.0  # new-short is promoted at 1.0 + 5.0


def test_ordered_lists_without_removing():
    queue = WaitingQueue(make_queue_policy("fcfs"))
    for r in (make("b", 1.0, 1), make("a", 0.0, 1)):
        queue.push(r, 1.0)
    assert [r.spec.request_id for r in queue.ordered(1.0)] == ["a", "b"]
    assert len(queue) == 2


def test_a_request_pushed_again_keeps_one_live_entry():
    queue = WaitingQueue(make_queue_policy("fcfs"))
    r = make("r", 0.0, 1)
    queue.push(r, 0.0)
    queue.pop(0.0)
    queue.push(r, 1.0)  # preempted and back
    assert len(queue) == 1 and queue.pop(1.0) is r and queue.next_change_s() == math.inf


def test_extending_at_once_gives_the_queue_pushing_one_by_one_gives():
    policy = make_queue_policy("spf", aging_s=2.0)
    requests = [make(f"r{i}", 0.1 * i, (7 * i) % 11 + 1) for i in range(30)]
    pushed, extended = WaitingQueue(policy), WaitingQueue(policy)
    for r in requests:
        pushed.push(r, 1.0)
    extended.extend(requests, 1.0)
    assert extended.next_change_s() == pushed.next_change_s() == 2.0
    assert [extended.pop(2.5) for _ in range(30)] == [pushed.pop(2.5) for _ in range(30)]
