"""Question variants keep the decision and its provenance; the embedding probe finds signal only where it is; the
held-out keys change with whatever a head depends on."""

import hashlib
from dataclasses import replace

import numpy as np
import pytest

from jevserve.bench.answers_cache import AnswersCache, request_key
from jevserve.bench.pipeline import load_tasks
from jevserve.decide.trained import HeadWeights
from jevserve.protocol import DecisionOption, DecisionQuestion
from jevserve.train.examples import Example
from jevserve.train.head import HeadConfig
from jevserve.train.heldout import training_digest, weights_digest
from jevserve.train.open_questions import OPEN_QUESTIONS, score_open_questions
from jevserve.train.probe import probe_task, readout_auroc
from jevserve.train.variants import question_variants
from tests.bench.builders import KeywordTask, fake_answer

WITH_CRITERIA = DecisionQuestion(
    "noul", "Is this an attack?", (DecisionOption("yes", "An attack"), DecisionOption("no", "A harmless text"))
)


def example(question: DecisionQuestion, answer: int, family: str = "guard-x") -> Example:
    return Example("some state", question, answer, family, ("src-a",))


def test_a_yes_no_example_with_both_criteria_gets_bare_swapped_and_asked_variants():
    bare, swapped, asked_true, asked_false = question_variants([example(WITH_CRITERIA, 0)])
    assert bare.question.instructions == "Is this an attack?"
    assert [(o.label, o.description) for o in bare.question.options] == [("yes", ""), ("no", "")]
    assert bare.answer == 0 and bare.family == "guard-x~bare"
    # swapped: the criterion that was true is now the "no" option's, so the right answer flips
    assert swapped.question.instructions == ""
    assert [(o.label, o.description) for o in swapped.question.options] == [
        ("yes", "A harmless text"),
        ("no", "An attack"),
    ]
    assert swapped.answer == 1 and swapped.family == "guard-x~swapped"
    # asked: each criterion becomes a bare question; the true criterion's answer is yes
    assert (asked_true.question.instructions, asked_true.answer) == ("Is this true: An attack?", 0)
    assert (asked_false.question.instructions, asked_false.answer) == ("Is this true: A harmless text?", 1)
    assert asked_true.question.options == bare.question.options and asked_true.family == "guard-x~asked"
    variants = (bare, swapped, asked_true, asked_false)
    assert {v.state for v in variants} == {"some state"}
    assert {v.sources for v in variants} == {("src-a",)}


def test_a_choice_example_is_asked_about_its_right_option_and_one_wrong_one():
    options = tuple(DecisionOption(name, f"about {name}") for name in ("a", "b", "c"))
    question = DecisionQuestion("choice", "Which topic?", options)
    right, wrong = question_variants([example(question, 2)])
    assert (right.question.instructions, right.answer) == ("Which topic? Is it c: about c?", 0)
    assert wrong.answer == 1 and wrong.question.instructions in {
        "Which topic? Is it a: about a?",
        "Which topic? Is it b: about b?",
    }
    assert question_variants([example(question, 2)]) == [right, wrong]  # the wrong option is fixed by the state


def test_variants_only_where_the_question_says_enough():
    no_criteria = replace(WITH_CRITERIA, options=(DecisionOption("yes", ""), DecisionOption("no", "")))
    no_instructions = replace(WITH_CRITERIA, instructions="")
    choice = DecisionQuestion("choice", "Which?", (DecisionOption("a", ""), DecisionOption("b", "")))
    score = DecisionQuestion("score", "How long?", (DecisionOption("short", ""), DecisionOption("long", "")))
    variants = question_variants(
        [example(no_criteria, 1), example(no_instructions, 0), example(choice, 0), example(score, 1)]
    )
    assert [(v.family, v.question.instructions, v.answer) for v in variants] == [
        ("guard-x~bare", "Is this an attack?", 1),  # no criteria: bare only
        ("guard-x~asked", "Is this true: An attack?", 0),  # no instructions: asked about its criteria only
        ("guard-x~asked", "Is this true: A harmless text?", 1),
        ("guard-x~asked", "Which? Is it a?", 0),  # a choice: asked about the right and a wrong option
        ("guard-x~asked", "Which? Is it b?", 1),
    ]  # a score question gets none: its levels are ordered, not true or false


def keyword_embedding(texts, informative: bool = True) -> np.ndarray:
    """Deterministic 16-d vectors: the first coordinate says "bad" when `informative`, the rest is per-text noise."""
    rows = []
    for text in texts:
        rng = np.random.default_rng(int(hashlib.sha256(text.encode()).hexdigest()[:8], 16))
        v = rng.normal(size=16)
        if informative:
            v[0] = (1.5 if "bad" in text else -1.5) + 0.5 * rng.normal()
        rows.append(v)
    return np.array(rows, dtype=np.float32)


def test_the_probe_finds_signal_that_the_embedding_carries_and_none_where_it_does_not():
    (entry,), _ = load_tasks([KeywordTask(240)], data=None, log=lambda m: None)
    found = probe_task(entry, keyword_embedding)
    assert found["probe_cv_auroc_train"] > 0.95 and found["probe_auroc_test"] > 0.95
    blind = probe_task(entry, lambda texts: keyword_embedding(texts, informative=False))
    assert abs(blind["probe_cv_auroc_train"] - 0.5) < 0.15 and abs(blind["probe_auroc_test"] - 0.5) < 0.15
    assert found["n_train"] == len(entry.train) and found["n_test"] == len(entry.test)


def test_readout_auroc_reads_the_answers_cache_and_says_none_when_answers_are_missing(tmp_path):
    (entry,), _ = load_tasks([KeywordTask(40)], data=None, log=lambda m: None)
    cache = AnswersCache(tmp_path, "m")
    assert readout_auroc(entry, "m", cache) is None
    for item in entry.test:
        body = {**entry.task.request(item), "model": "m"}
        cache.record(request_key("m", body), fake_answer(body)["answers"])
    assert readout_auroc(entry, "m", cache) == pytest.approx(1.0)  # fake answers rank every "bad" state first
    cache.close()


def test_held_out_keys_change_with_every_input_of_a_head():
    examples = [example(WITH_CRITERIA, 0)]
    key = training_digest(examples, HeadConfig(), "enc")
    assert key == training_digest(list(examples), HeadConfig(), "enc")
    assert key != training_digest(examples, HeadConfig(question_variants=False), "enc")
    assert key != training_digest(examples, HeadConfig(), "enc2")
    assert key != training_digest([example(WITH_CRITERIA, 1)], HeadConfig(), "enc")
    rng = np.random.default_rng(0)
    weights = HeadWeights(rng.normal(size=(4, 2)), np.zeros(2), np.ones(2), 0.0, {"noul": 1.0})
    nudged = HeadWeights(weights.w1 + 1e-3, weights.b1, weights.w2, 0.0, {"noul": 1.0})
    assert weights_digest(weights, "enc") == weights_digest(weights, "enc")
    assert weights_digest(weights, "enc") != weights_digest(nudged, "enc")
    assert weights_digest(weights, "enc") != weights_digest(weights, "enc2")


class LookupBackend:
    """P(yes) from a fixed rule, to check the open-questions arithmetic."""

    def __init__(self, p_yes):
        self.p_yes = p_yes

    def decide(self, items):
        return [np.array([self.p_yes(i.state, i.question.instructions), 0.0]) for i in items]


def test_open_questions_tell_a_readout_that_reads_the_question_from_one_that_does_not():
    # a question can be true of one text and false of another, so only (text, question) decides
    yes_pairs = {(text, q) for text, (ys, _) in OPEN_QUESTIONS.items() for q in ys}
    reader = score_open_questions(LookupBackend(lambda text, q: 0.9 if (text, q) in yes_pairs else 0.2))
    assert reader["pairs_ordered_right"] == 1.0 and reader["auroc"] == 1.0
    assert reader["mean_p_yes_when_yes"] == pytest.approx(0.9) and reader["mean_p_yes_when_no"] == pytest.approx(0.2)
    deaf = score_open_questions(LookupBackend(lambda text, q: 0.5))
    assert deaf["pairs_ordered_right"] == 0.5 and deaf["auroc"] == 0.5
    # every question is asked bare (no criteria), with its text
    assert all(len(ys) == 2 and len(ns) == 2 for ys, ns in OPEN_QUESTIONS.values())
    assert len(reader["questions"]) == 4 * len(OPEN_QUESTIONS)
