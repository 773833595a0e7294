"""Which questions the tuned reader answers with a lexical head: the guard's, and every bench yes/no question that no
gateway default asks, so that a head never moves another gateway answer."""

from __future__ import annotations

from jevserve.bench.tasks import TASKS
from jevserve.decide.trained import question_key
from jevserve.gateway.decider import wire_to_decision
from jevserve.gateway.questions import DEFAULTS
from jevserve.train.lexical_head import BENCH_ONLY_QUESTIONS, head_specs
from jevserve.train.rules import injection, question


def _gateway_keys() -> set[str]:
    return {question_key(wire_to_decision(wire)) for wire in DEFAULTS.values()}


def test_bench_only_questions_are_every_bench_yes_no_primary_the_gateway_does_not_ask():
    primaries = {
        question_key(wire_to_decision(task.questions[task.primary]))
        for task in TASKS.values()
        if task.questions[task.primary]["type"] == "noul"
    }
    listed = {question_key(question(task, qid)) for task, qid in BENCH_ONLY_QUESTIONS}
    assert len(listed) == len(BENCH_ONLY_QUESTIONS)  # no question listed twice
    assert listed == primaries - _gateway_keys()
    for task, qid in BENCH_ONLY_QUESTIONS:
        assert TASKS[task].primary == qid


def test_of_the_gateways_questions_only_the_guards_has_a_head():
    keys = {question_key(spec.question) for spec in head_specs()}
    assert keys & _gateway_keys() == {question_key(injection())}
    assert all((spec.analyzer, spec.combine) == ("words", "mean") for spec in head_specs())
