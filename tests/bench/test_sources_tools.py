"""BFCL loaders: tool-call fit (fitting vs. no fitting candidate) and the under-specified turn of miss_param."""

from __future__ import annotations

import pytest

from jevserve.bench.sources import SourceFormatError
from jevserve.bench.sources.tools import (
    DATA_DIR,
    FITTING,
    FITTING_UNANSWERED,
    MISS_PARAM,
    NOT_FITTING,
    answer_file,
    load_miss_param,
    load_relevance,
    question_file,
)
from tests.bench.sources_builders import jsonl, write_tree

WEATHER = {"name": "get_weather", "description": "Weather for a city.", "parameters": {"type": "dict"}}
BMI = {"name": "bmi", "description": "Body mass index.", "parameters": {"type": "dict"}}


def case(case_id: str, question: str, functions: list[dict]) -> dict:
    """One single-turn BFCL entry."""
    return {"id": case_id, "question": [[{"role": "user", "content": question}]], "function": functions}


def relevance_files(**extra: list[dict]) -> dict[str, str]:
    """Every file the relevance loader reads, empty unless given (keyword: category name)."""
    files = {question_file(c): jsonl(extra.get(c, [])) for c in FITTING + FITTING_UNANSWERED + NOT_FITTING}
    files |= {answer_file(c): jsonl(extra.get(f"{c}_answers", [])) for c in FITTING}
    return files


def test_relevance_pairs_fitting_requests_with_their_calls_and_marks_irrelevant_ones(tmp_path):
    files = relevance_files(
        multiple=[case("multiple_0", "Weather in Rome?", [WEATHER, BMI])],
        multiple_answers=[{"id": "multiple_0", "ground_truth": [{"get_weather": {"city": ["Rome"]}}]}],
        irrelevance=[case("irrelevance_0", "Area of a triangle?", [BMI])],
    )
    fitting, irrelevant = load_relevance(write_tree(tmp_path, files))
    assert (fitting.relevant, fitting.category) == (True, "multiple")
    assert fitting.expected_names == frozenset({"get_weather"})
    assert fitting.expected_calls[0].arguments_json == '{"city":["Rome"]}'
    assert [f.name for f in fitting.functions] == ["get_weather", "bmi"]  # bmi is a wrong candidate
    assert (irrelevant.relevant, irrelevant.expected_calls) == (False, ())


def test_relevance_drops_a_case_shipped_both_as_fitting_and_not_fitting(tmp_path):
    files = relevance_files(
        live_simple=[case("live_simple_0", "Weather in Rome?", [WEATHER])],
        live_simple_answers=[{"id": "live_simple_0", "ground_truth": [{"get_weather": {"city": ["Rome"]}}]}],
        live_irrelevance=[case("live_irrelevance_0", "Weather in Rome?", [WEATHER]), case("li_1", "Hi", [WEATHER])],
    )
    assert [c.origin for c in load_relevance(write_tree(tmp_path, files))] == ["bfcl-relevance:li_1"]


def test_relevance_requires_an_answer_for_every_fitting_case(tmp_path):
    files = relevance_files(simple_python=[case("simple_python_0", "Weather?", [WEATHER])])
    with pytest.raises(SourceFormatError, match="id 'simple_python_0' has no possible answer"):
        load_relevance(write_tree(tmp_path, files))


def miss_param_files(ground_truth: list[list[str]], turns: list[str]) -> dict[str, str]:
    """A one-conversation miss_param set using the file-system functions, one of them excluded."""
    docs = [{"name": "mv", "description": "Move a file.", "parameters": {}}, {"name": "cp", "description": "Copy."}]
    row = {
        "id": "multi_turn_miss_param_0",
        "question": [[{"role": "user", "content": t}] for t in turns],
        "involved_classes": ["GorillaFileSystem"],
        "excluded_function": ["cp"],
    }
    return {
        question_file(MISS_PARAM): jsonl([row]),
        answer_file(MISS_PARAM): jsonl([{"id": "multi_turn_miss_param_0", "ground_truth": ground_truth}]),
        f"{DATA_DIR}/multi_turn_func_doc/gorilla_file_system.json": jsonl(docs),
    }


def test_miss_param_marks_the_turn_with_no_expected_call(tmp_path):
    turns = ["List the files.", "Move one of them to temp.", "The file is a.txt."]
    truth = [["ls()"], [], ["mv(source='a.txt', destination='temp')"]]
    (conversation,) = load_miss_param(write_tree(tmp_path, miss_param_files(truth, turns)))
    assert conversation.missing_turn == 1
    assert conversation.turns == tuple(turns)
    assert [f.name for f in conversation.functions] == ["mv"]  # "cp" is excluded upstream
    assert conversation.ground_truth[2] == ("mv(source='a.txt', destination='temp')",)


def test_miss_param_rejects_a_conversation_without_an_under_specified_turn(tmp_path):
    files = miss_param_files([["ls()"], ["pwd()"]], ["List the files.", "Where am I?"])
    with pytest.raises(SourceFormatError, match="has no under-specified turn followed by another turn"):
        load_miss_param(write_tree(tmp_path, files))
