"""Which questions the tuned reader answers with a lexical head: the guard's and the cache's, and every bench yes/no
question that no gateway default asks, so that a head never moves another gateway answer."""

from __future__ import annotations

from jevserve.bench.tasks import TASKS
from jevserve.decide.trained import question_key
from jevserve.gateway.questions import DEFAULTS, wire_to_decision
from jevserve.train.lexical_head import BENCH_ONLY_QUESTIONS, PAIR_ANALYZER, PAIR_C, REUSE_ANALYZER, head_specs
from jevserve.train.rules import injection, question, reuse


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


def test_of_the_gateways_questions_only_the_guards_and_the_caches_have_heads():
    keys = {question_key(spec.question) for spec in head_specs()}
    assert keys & _gateway_keys() == {question_key(injection()), question_key(reuse())}
    cache_questions = {question_key(reuse()), question_key(question("cache-chats", "reuse"))}
    for spec in head_specs():
        key = question_key(spec.question)
        pair = key in cache_questions
        analyzer = REUSE_ANALYZER if key == question_key(reuse()) else PAIR_ANALYZER if pair else "words"
        assert (spec.analyzer, spec.combine) == (analyzer, "mean")
        assert spec.c == (PAIR_C if pair else 1.0)
