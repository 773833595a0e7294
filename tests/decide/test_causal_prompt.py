from __future__ import annotations

from collections.abc import Sequence

from jevserve.decide.causal_prompt import ANSWER_CUE, plan_question, question_text, state_text
from jevserve.protocol import DecisionOption, DecisionQuestion


def word_encode(text: str) -> list[int]:
    """A fake tokenizer: one token per space-led word, so " A" is one token; ids are stable hashes of the pieces."""
    pieces, current = [], ""
    for ch in text:
        if ch in " \n" and current:
            pieces.append(current)
            current = ""
        current += ch
    pieces.append(current)
    return [sum(map(ord, p)) * 1000 + len(p) for p in pieces if p]


def char_encode(text: str) -> list[int]:
    """A fake tokenizer with one token per character: no label is a single token."""
    return [ord(c) for c in text]


def splitting(encode, broken: str):
    """Wrap an encoder so that one label encodes to two tokens."""

    def wrapped(text: str) -> Sequence[int]:
        return [1, 2] if text == broken else encode(text)

    return wrapped


def choice(n: int, instructions: str = "Which team?") -> DecisionQuestion:
    options = tuple(DecisionOption(f"team {i}", f"handles case {i}" if i % 2 else "") for i in range(n))
    return DecisionQuestion("choice", instructions, options)


def score(n: int) -> DecisionQuestion:
    return DecisionQuestion("score", "How angry?", tuple(DecisionOption(f"level text {i}", "") for i in range(n)))


def noul(instructions: str = "Refund?", true: str = "", false: str = "") -> DecisionQuestion:
    return DecisionQuestion("noul", instructions, (DecisionOption("yes", true), DecisionOption("no", false)))


def test_label_readout_when_every_label_is_one_distinct_token():
    plan = plan_question(choice(26), word_encode)
    assert plan.readout == "label"
    assert plan.answer_ids == tuple((word_encode(f" {c}")[0],) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    assert plan.prompt_ids == tuple(word_encode(question_text(choice(26), "label")))


def test_choice_over_26_options_reads_option_names_closed_by_newline():
    question = choice(27)
    plan = plan_question(question, word_encode)
    assert plan.readout == "name"
    assert plan.answer_ids[3] == tuple(word_encode(" team 3\n"))
    assert "- team 3: handles case 3" in question_text(question, "name")


def test_name_readout_when_one_label_splits_into_two_tokens():
    assert plan_question(choice(5), splitting(word_encode, " C")).readout == "name"
    assert plan_question(score(4), splitting(word_encode, " 2")).readout == "name"
    assert plan_question(noul(), splitting(word_encode, " no")).readout == "name"


def test_name_readout_of_score_and_noul_uses_numbers_and_yes_no():
    assert plan_question(score(3), char_encode).answer_ids == tuple(tuple(char_encode(f" {i}\n")) for i in range(3))
    assert plan_question(noul(), char_encode).answer_ids == (tuple(char_encode(" yes\n")), tuple(char_encode(" no\n")))


def test_label_readout_of_score_uses_level_numbers():
    plan = plan_question(score(10), word_encode)
    assert plan.readout == "label"
    assert plan.answer_ids == tuple((word_encode(f" {i}")[0],) for i in range(10))


def test_question_text_lists_options_with_letters_and_ends_with_answer_cue():
    text = question_text(choice(3), "label")
    assert text.splitlines() == [
        "Question: Which team?",
        "Options:",
        "A. team 0",
        "B. team 1: handles case 1",
        "C. team 2",
        "Answer with the letter of one option.",
        ANSWER_CUE,
    ]


def test_score_text_numbers_levels_from_zero():
    lines = question_text(score(3), "label").splitlines()
    header = "Levels, from lowest (0) to highest (2):"
    assert lines[1:5] == [header, "0. level text 0", "1. level text 1", "2. level text 2"]


def test_noul_text_shows_given_criteria_and_a_default_question_without_instructions():
    text = question_text(noul(instructions="", true="asks for money back"), "label")
    assert text.splitlines() == [
        "Question: Does the text fit the description?",
        "Answer yes if: asks for money back",
        "Answer yes or no.",
        ANSWER_CUE,
    ]


def test_state_text_keeps_the_state_unchanged_between_header_and_blank_line():
    assert state_text("  Ünïcode\tstate ") == "Text:\n  Ünïcode\tstate \n\n"


def test_plan_counts_fed_tokens_and_positions():
    plan = plan_question(choice(30), word_encode)
    longest = max(len(a) for a in plan.answer_ids)
    assert plan.num_positions == len(plan.prompt_ids) + longest - 1
    assert plan.num_input_tokens == len(plan.prompt_ids) + sum(len(a) - 1 for a in plan.answer_ids)
