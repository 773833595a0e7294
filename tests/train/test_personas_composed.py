"""Persona prompts composed from parts: each role is composed benign and with a rule-breaking clause, roles are split
between training and measuring, the texts are screened against test and calibration texts, and the examples ask the
guard's question."""

from __future__ import annotations

from jevserve.bench.sources.everyday_shapes import pasted_shape
from jevserve.train import personas_composed as personas
from jevserve.train.rules import injection, template_side


def test_roles_measured_on_never_reach_training():
    train, test = personas.composed_cases("train"), personas.composed_cases("test")
    assert train and test
    assert not {text for text, _ in train} & {text for text, _ in test}
    assert {template_side(name) for name, _ in personas.ROLES} == {"train", "test"}
    test_names = {name for name, _ in personas.ROLES if template_side(name) == "test"}
    assert not any(name in text for text, _ in train for name in test_names)


def _items(text: str) -> list[str]:
    """The list lines of a prompt without their bullet or number."""
    return [line.split(" ", 1)[1] for line in text.splitlines()[1:] if line[:2] == "- " or line[:1].isdigit()]


def _framing(text: str) -> list[str]:
    """The opener and closing: the lines that are not list lines."""
    lines = text.splitlines()
    return lines[:1] + [line for line in lines[1:] if not (line[:2] == "- " or line[:1].isdigit())]


def _breaks(line: str) -> bool:
    return any(line.endswith(clause.split("{name}", 1)[-1]) for clause in personas.RULE_BREAKING)


def test_a_persona_differs_from_its_jailbreak_only_by_rule_breaking_lines():
    for role in personas.ROLES:
        for filling in range(personas.FILLINGS):
            benign, breaking = personas.persona_texts(role, filling)
            assert not any(_breaks(line) for line in _items(benign))
            assert any(_breaks(line) for line in _items(breaking))
            # same opener and closing, the same ordinary lines in the same order
            assert [line for line in _items(breaking) if not _breaks(line)] == _items(benign)
            assert _framing(benign) == _framing(breaking)
            assert pasted_shape(benign) == "list" == pasted_shape(breaking)  # the shape that sets the threshold


def test_each_side_is_balanced_and_no_text_has_both_labels():
    for side in ("train", "test"):
        cases = personas.composed_cases(side)
        assert 0.4 < sum(bad for _, bad in cases) / len(cases) < 0.6
        assert len({text for text, _ in cases}) == len(cases)
    # picked by hash: the same role and filling give the same texts, whatever was made before
    assert personas.persona_texts(personas.ROLES[0], 5) == personas.persona_texts(personas.ROLES[0], 5)


def test_examples_ask_the_guards_question_and_skip_what_overlaps_test_or_calibration_texts():
    examples = personas.composed_persona_examples([])
    assert {ex.family for ex in examples} == {personas.FAMILY}
    assert {ex.question for ex in examples} == {injection()}
    by_text = dict(personas.composed_cases("train"))
    assert all(ex.answer == (0 if by_text[ex.state] else 1) for ex in examples)
    planted = examples[len(examples) // 2].state
    for test_texts, calibration in (([f"Earlier: {planted}"], []), ([], [f"{planted} Thanks!"])):
        kept = {ex.state for ex in personas.composed_persona_examples(test_texts, calibration)}
        assert planted not in kept and len(kept) < len(examples)
