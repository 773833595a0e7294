"""The gateway's default questions are the bench tasks' questions, so the bench's measurements apply to them."""

from __future__ import annotations

import itertools
import json

import pytest

from jevserve.bench.tasks import (
    agent_action_risk,
    agent_clarify,
    cache_pairs,
    guard_harmful,
    guard_injection,
    guard_overrefusal,
    route_math,
    schedule_reply_length,
)
from jevserve.gateway import questions
from jevserve.gateway.config import default_config
from jevserve.gateway.policies import POLICIES


@pytest.mark.parametrize(
    ("key", "bench_question"),
    [
        ("injection", guard_injection.INJECTION_QUESTION),
        ("refuse", guard_harmful.REFUSE_QUESTION),
        ("refuse", guard_overrefusal.REFUSE_QUESTION),
        ("reuse", cache_pairs.QUESTIONS["reuse"]),
        ("ask", agent_clarify.QUESTIONS["ask"]),
        ("unsafe_action", agent_action_risk.QUESTIONS["unsafe"]),
        ("length", schedule_reply_length.LENGTH_QUESTIONS["length"]),
    ],
)
def test_default_questions_are_worded_exactly_as_the_bench_tasks(key, bench_question):
    assert questions.DEFAULTS[key] == bench_question


def test_the_route_question_is_route_math_with_request_for_math_problem():
    generalised = json.dumps(route_math.QUESTIONS["cheap_ok"]).replace("math problem", "request")
    assert questions.DEFAULTS["cheap_ok"] == json.loads(generalised.replace("problem", "request"))


def test_length_level_tokens_are_the_middles_of_the_bench_level_edges():
    edges = (0, *schedule_reply_length.LENGTH_LEVEL_EDGES)
    middles = [(a + b) / 2 for a, b in itertools.pairwise(edges)]
    assert (*middles, edges[-1] * 1.5) == questions.LENGTH_LEVEL_TOKENS


def test_the_reuse_state_is_the_bench_cache_pairs_state():
    assert questions.cache_pair_state("a?", "b?") == cache_pairs.pair_state("a?", "b?")


def test_every_default_policy_asks_its_default_question():
    route = default_config().routes[0]
    for key, cls in POLICIES.items():
        config = getattr(route, key)
        if config is not None:
            assert config.question is None and cls.question_key in questions.DEFAULTS, key
