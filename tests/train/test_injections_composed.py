"""Injections composed from parts: each carrier holds an injection and a look-alike, carriers are split between
training and measuring, the texts are screened against references, and the examples ask the guard's question."""

from __future__ import annotations

import base64
import re

from jevserve.train import injections_composed as composed
from jevserve.train.rules import injection, template_side


def test_carriers_measured_on_never_reach_training():
    train, test = composed.composed_cases("train"), composed.composed_cases("test")
    assert train and test
    assert not {text for text, _ in train} & {text for text, _ in test}
    sides = {template_side(carrier) for carrier in composed.CARRIERS}
    assert sides == {"train", "test"}


def test_each_side_has_both_labels_and_no_text_has_both():
    for side in ("train", "test"):
        cases = composed.composed_cases(side)
        labels = [bad for _, bad in cases]
        assert 0.3 < sum(labels) / len(labels) < 0.7
        assert len({text for text, _ in cases}) == len(cases)


def _plain(text: str) -> str:
    """The text with a base64 payload decoded and letter-spacing undone, lower case."""
    payload = re.search(r"do what it says: ([A-Za-z0-9+/=]+)", text)
    if payload:
        text = base64.b64decode(payload.group(1)).decode()
    return text.lower().replace(" ", "")


def test_an_injection_carries_a_takeover_and_a_lookalike_does_not():
    takeovers = [t.lower().replace(" ", "") for t in composed.TAKEOVERS]
    for carrier in composed.CARRIERS:
        for filling in range(composed.FILLINGS):
            bad = _plain(composed.injection_text(carrier, filling))
            assert any(t in bad for t in takeovers), bad
            good = composed.lookalike_text(carrier, filling).lower().replace(" ", "")
            assert not any(t in good for t in takeovers), good


def test_a_carrier_keeps_its_text_around_what_it_holds():
    carrier = next(c for c in composed.CARRIERS if c.startswith("Please summarise this email"))
    head = carrier.split("{x}")[0]
    assert composed.injection_text(carrier, 3).startswith(head)
    assert composed.lookalike_text(carrier, 3).startswith(head)
    # picked by hash: the same filling gives the same text, whatever was made before
    assert composed.injection_text(carrier, 3) == composed.injection_text(carrier, 3)


def test_screen_drops_texts_that_overlap_a_reference():
    cases = composed.composed_cases("train")
    planted = cases[len(cases) // 2][0]
    kept = composed.screen(cases, ["Earlier: " + planted])
    assert planted not in {text for text, _ in kept} and len(kept) < len(cases)
    assert composed.screen(cases, []) == cases


def test_examples_ask_the_guards_injection_question():
    examples = composed.composed_injection_examples([])
    assert {ex.family for ex in examples} == {composed.FAMILY}
    assert {ex.question for ex in examples} == {injection()}
    by_text = dict(composed.composed_cases("train"))
    assert all(ex.answer == (0 if by_text[ex.state] else 1) for ex in examples)
