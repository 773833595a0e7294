"""CHAMP loaders: first-wrong-step annotations and the answers of four models (for routing)."""

from __future__ import annotations

import json

import pytest

from jevserve.bench.sources import SourceFormatError
from jevserve.bench.sources.champ import CHAMP_FILE, load_answers, load_steps
from tests.bench.sources_builders import write_tree

SOLUTION = "Let x be the count. Then x = 2 + 2 = 5. So the answer is 5."


def message(role: str, text: str | None, error: str | None = None) -> dict:
    """One CHAMP conversation message."""
    return {"role": role, "text": text, "error": error}


def conversation(model: str, solution: str, summary: str | None, error: str | None = None) -> dict:
    """A 0-shot CHAMP conversation: system, problem, solution, summary request, summary."""
    return {
        "messages": [
            message("System", "You are an expert on mathematics."),
            message("User", "Solve the following problem."),
            message(f"Model.{model}", solution, error),
            message("User", "Now, summarize the answer above in one sentence."),
            message(f"Model.{model}", summary, "LENGTH_PREVIOUS" if summary is None else None),
        ]
    }


def champ_file(annotations: dict, conversations: dict) -> str:
    """A v0.json with one problem."""
    problem = {
        "identifier": "P_Algebra_1",
        "_text": "What is 2 + 2?",
        "_answer": "4",
        "category": "Algebra",
        "fws_annotations": annotations,
        "conversations": conversations,
    }
    return json.dumps({"problems": {"P_Algebra_1": problem}, "concepts": {}, "hints": {}})


def test_steps_mark_the_first_wrong_step_by_character_span(tmp_path):
    start = SOLUTION.index("Then")
    end = SOLUTION.index(" So")
    notes = {
        "GPT-4|No C w/o H": {"text": SOLUTION, "start_idx": start, "end_idx": end, "author": "GPT-4"},
        "GPT-4 Turbo|No C w/o H": {"text": "2 + 2 = 4.", "start_idx": None, "end_idx": None, "author": "GPT-4 Turbo"},
    }
    by_model = {s.model: s for s in load_steps(write_tree(tmp_path, {CHAMP_FILE: champ_file(notes, {})}))}
    wrong, right = by_model["GPT-4"], by_model["GPT-4 Turbo"]
    assert (wrong.model, wrong.prompt_mode) == ("GPT-4", "No C w/o H")
    assert wrong.first_wrong_step == "Then x = 2 + 2 = 5."
    assert not wrong.is_correct
    assert right.is_correct and right.first_wrong_step is None
    assert wrong.split_key == right.split_key == "champ:P_Algebra_1"


def test_steps_reject_a_span_outside_the_text(tmp_path):
    notes = {"GPT-4|No C w/o H": {"text": "short", "start_idx": 2, "end_idx": 99, "author": "GPT-4"}}
    with pytest.raises(SourceFormatError, match=r"span \(2, 99\) does not fit a 5-char text"):
        load_steps(write_tree(tmp_path, {CHAMP_FILE: champ_file(notes, {})}))


def test_answers_take_the_solution_and_the_one_sentence_summary(tmp_path):
    conversations = {
        "GPT-4|0-Shot": conversation("GPT-4", "2 + 2 = 4.", "The answer is 4."),
        "PaLM 2 Medium|0-Shot": conversation("PaLM 2 Medium", "2 + 2 = ...", None, "LENGTH_CURRENT"),
    }
    gpt, palm = load_answers(write_tree(tmp_path, {CHAMP_FILE: champ_file({}, conversations)}))
    assert (gpt.model, gpt.final_answer, gpt.reference_answer) == ("GPT-4", "The answer is 4.", "4")
    assert not gpt.truncated
    assert (palm.final_answer, palm.truncated) == ("", True)
    assert gpt.split_key == palm.split_key == "champ:P_Algebra_1"
