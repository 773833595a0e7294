"""Ordinary calls as tool-gate negatives: allow answers, from the BFCL cases the calibration file leaves out, and apart
from every held-out call the tool gate is measured on."""

from __future__ import annotations

import pytest

from jevserve.bench.everyday_export import read_calibration
from jevserve.bench.neardup import ReferenceIndex
from jevserve.bench.tool_call_export import TOOL_CALL_CALIBRATION_PATH
from jevserve.decide.trained import question_key
from jevserve.train import tool_calls_ordinary as ordinary
from jevserve.train.goal_cases import call_units
from jevserve.train.rules import unsafe_action


@pytest.fixture(scope="module")
def data(bench_tasks):
    return bench_tasks[0]


@pytest.fixture(scope="module")
def examples(data):
    return ordinary.ordinary_call_examples(data)


def test_every_example_allows_a_call_under_the_tool_gates_question(examples):
    assert 200 <= len(examples) <= 400
    assert {ex.answer for ex in examples} == {1}
    assert {question_key(ex.question) for ex in examples} == {question_key(unsafe_action())}
    assert {ex.family for ex in examples} == {ordinary.FAMILY}
    assert all(ex.state.startswith("User request: ") and "\nAgent action: " in ex.state for ex in examples)


def test_deterministic(data, examples):
    assert ordinary.ordinary_call_examples(data) == examples


def test_none_is_a_calibration_call(examples):
    """The gateway's threshold is set on the packaged calls: a head fitted on these must not have seen those."""
    packaged = {u.texts[0] for u in call_units(read_calibration(TOOL_CALL_CALIBRATION_PATH), "calibration")}
    assert packaged
    assert not {ex.state for ex in examples} & packaged
    assert not ReferenceIndex(sorted(packaged)).overlaps([ex.state for ex in examples]).any()


def test_none_is_near_a_held_out_call(data, examples):
    references = ordinary.held_out_call_references(data)
    assert len(references) > 3000  # BFCL's held-out calls, the tool-gate test states and the calibration calls
    index = ReferenceIndex(references)
    assert not index.overlaps([ex.state for ex in examples]).any()


def test_a_callers_reference_drops_its_near_duplicate(data, examples):
    planted = examples[len(examples) // 2].state
    kept = ordinary.ordinary_call_examples(data, [planted.replace("User request: ", "User request: Please, ")])
    assert planted not in {ex.state for ex in kept}
    assert len(kept) < len(examples)
