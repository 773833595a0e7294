"""Composed tool calls: deterministic, balanced, parseable, and apart from the hand-written calls measured on."""

from __future__ import annotations

import json
import re

import pytest

from jevserve.bench.neardup import ReferenceIndex
from jevserve.train import tool_calls_composed as composed
from jevserve.train.tool_calls import tool_call_cases

_STATE = re.compile(r"User request: (?P<request>[^\n]+)\nAgent action: (?P<name>[a-z_0-9]+)\((?P<args>\{.*\})\)", re.S)


@pytest.fixture(scope="module")
def examples():
    return composed.composed_tool_call_examples()


def test_deterministic(examples):
    assert composed.composed_tool_call_examples() == examples
    assert composed.composed_groups() == composed.composed_groups()


def test_size_and_balance(examples):
    assert 1500 <= len(examples) <= 2500
    destructive = sum(ex.answer == 0 for ex in examples) / len(examples)
    assert 0.40 <= destructive <= 0.50
    assert len(composed.DOMAINS) >= 28
    assert {ex.family for ex in examples} == {composed.FAMILY}
    assert {ex.answer for ex in examples} == {0, 1}


def test_no_duplicate_states(examples):
    assert len({ex.state for ex in examples}) == len(examples)


def test_states_parse_back(examples):
    for ex in examples:
        match = _STATE.fullmatch(ex.state)
        assert match, ex.state
        assert isinstance(json.loads(match["args"]), dict)
        assert "{" not in match["request"]  # every slot filled
        assert not re.search(r"\{[a-z_]+\}", match["args"]), ex.state


def test_every_destructive_call_also_under_another_request(examples):
    requests_per_call: dict[str, set[str]] = {}
    for ex in composed.unscreened_examples():
        if ex.answer == 0:
            call = ex.state.split("\n", 1)[1]
            requests_per_call.setdefault(call, set()).add(composed.request_of(ex.state))
    assert all(len(requests) >= 2 for requests in requests_per_call.values())


def test_no_overlap_with_test_side_hand_written_calls(examples):
    states = [state for state, _ in tool_call_cases("test")]
    assert states
    requests = {composed.request_of(state) for state in states}
    index = ReferenceIndex(states + sorted(requests))
    assert not index.overlaps([ex.state for ex in examples]).any()
    assert not index.overlaps([composed.request_of(ex.state) for ex in examples]).any()
    normalised = {composed._normalised(request) for request in requests}
    assert not any(composed._normalised(composed.request_of(ex.state)) in normalised for ex in examples)


def test_screen_drops_planted_near_duplicate(examples):
    planted = composed.request_of(examples[len(examples) // 2].state)
    kept = composed.screen(examples, ["Please, " + planted.upper()])
    assert planted not in {composed.request_of(ex.state) for ex in kept}
    assert len(kept) < len(examples)
    assert composed.screen(examples, []) == list(examples)


def test_calibration_templates_are_a_third_of_every_domains_share_and_never_fitted_on():
    templates = [(domain, t[0]) for domain, groups in composed.DOMAINS.items() for t in groups]
    held = [t for t in templates if composed.is_calibration_template(t[1])]
    assert 0.2 <= len(held) / len(templates) <= 0.45
    assert len({domain for domain, _ in held}) >= 20  # held out by template: most domains keep both kinds
    requests = composed.calibration_requests()
    fitted = composed.fit_examples()
    assert fitted and not {composed.request_of(ex.state) for ex in fitted} & requests
    assert {ex.answer for ex in fitted} == {0, 1}


def test_scoped_calibration_records_are_the_held_templates_scoped_calls_as_a_reply_carries_them():
    from jevserve.train.goal_cases import call_units

    records = composed.scoped_calibration_records()
    assert records == composed.scoped_calibration_records() and len(records) >= 150
    assert [r["id"] for r in records] == sorted(r["id"] for r in records)
    assert {r["shape"] for r in records} == {"scoped"}
    requests = composed.calibration_requests()
    assert all(r["body"]["messages"][-1]["content"] in requests for r in records)
    scoped = {composed.call_state(request, name, args) for request, calls, _ in composed.composed_groups()
              for name, args in calls}  # fmt: skip
    destructive = {composed.call_state(request, name, args) for request, _, calls in composed.composed_groups()
                   for name, args in calls}  # fmt: skip
    states = [u.texts[0] for u in call_units(records, "calibration")]  # read as the gateway's tool gate reads them
    assert len(states) == sum(len(r["tool_calls"]) for r in records)
    assert set(states) <= scoped and not set(states) & destructive
