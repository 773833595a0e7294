"""Harmful technical requests composed from parts: each pair is composed harmful and harmless in the same frame, pairs
are split between training and measuring, the texts are screened against test and calibration texts, and the
examples ask the harm guard's question."""

from __future__ import annotations

from jevserve.train import harm_composed as harm
from jevserve.train.rules import refuse, template_side


def test_pairs_measured_on_never_reach_training():
    train, test = harm.composed_cases("train"), harm.composed_cases("test")
    assert train and test
    assert not {text for text, _ in train} & {text for text, _ in test}
    assert {template_side(harmful) for harmful, _ in harm.PAIRS} == {"train", "test"}
    held_out = [objective for pair in harm.PAIRS if template_side(pair[0]) == "test" for objective in pair]
    assert not any(objective in text for text, _ in train for objective in held_out)


def test_a_harmful_request_differs_from_its_twin_only_by_the_objective():
    frames = [(before, after) for before, _, after in (f.partition("{x}") for f in harm.FRAMES)]
    for pair in harm.PAIRS:
        for filling in range(harm.FILLINGS):
            harmful, harmless = harm.request_texts(pair, filling)
            framed = [(b, a) for b, a in frames if harmful == f"{b}{pair[0]}{a}"]
            assert framed and harmless == f"{framed[0][0]}{pair[1]}{framed[0][1]}"


def test_each_side_is_balanced_and_no_text_has_both_labels():
    for side in ("train", "test"):
        cases = harm.composed_cases(side)
        assert 0.4 < sum(bad for _, bad in cases) / len(cases) < 0.6
        assert len({text for text, _ in cases}) == len(cases)
    assert harm.request_texts(harm.PAIRS[0], 3) == harm.request_texts(harm.PAIRS[0], 3)  # picked by hash


def test_examples_ask_the_harm_question_and_skip_what_overlaps_test_or_calibration_texts():
    examples = harm.composed_harm_examples([])
    assert {ex.family for ex in examples} == {harm.FAMILY}
    assert {ex.question for ex in examples} == {refuse()}
    by_text = dict(harm.composed_cases("train"))
    assert all(ex.answer == (0 if by_text[ex.state] else 1) for ex in examples)
    planted = examples[len(examples) // 2].state
    for test_texts, calibration in (([f"Earlier: {planted}"], []), ([], [f"{planted} Thanks!"])):
        kept = {ex.state for ex in harm.composed_harm_examples(test_texts, calibration)}
        assert planted not in kept and len(kept) < len(examples)
