"""The answers cache: keys, appending, reading back, torn lines."""

from __future__ import annotations

import pytest

from jevserve.bench.answers_cache import AnswersCache, request_key, safe_name


def make_body(state: str = "hello", qid: str = "q") -> dict:
    return {"state": state, "questions": {qid: {"type": "noul", "instructions": "Is it?"}}}


def test_request_key_depends_on_the_model_and_the_request_not_on_key_order_or_the_model_field():
    body = make_body()
    reordered = {"questions": body["questions"], "state": body["state"], "model": "ignored"}
    assert request_key("m1", body) == request_key("m1", reordered)
    assert request_key("m1", body) != request_key("m2", body)
    assert request_key("m1", body) != request_key("m1", make_body(state="hello!"))


def test_answers_survive_a_reopen(tmp_path):
    cache = AnswersCache(tmp_path, "jev-x")
    cache.record("k1", {"q": {"type": "noul", "noul": 0.7}})
    cache.record_error("k2", 413, "state too long")
    cache.close()
    again = AnswersCache(tmp_path, "jev-x")
    assert again.get("k1") == {"q": {"type": "noul", "noul": 0.7}}
    assert "k2" in again and again.get("k2") is None
    assert again.errors["k2"]["status"] == 413


def test_a_torn_last_line_is_skipped_and_the_next_answer_starts_a_new_line(tmp_path):
    cache = AnswersCache(tmp_path, "jev-x")
    cache.record("k1", {"q": {"type": "noul", "noul": 0.1}})
    cache.close()
    with cache.path.open("a", encoding="utf-8") as f:
        f.write('{"key": "k2", "answ')  # a run killed in the middle of a write
    torn = AnswersCache(tmp_path, "jev-x")
    assert torn.num_torn_lines == 1 and "k2" not in torn
    torn.record("k3", {"q": {"type": "noul", "noul": 0.3}})
    torn.close()
    reread = AnswersCache(tmp_path, "jev-x")
    assert set(reread.answers) == {"k1", "k3"}


def test_safe_name_rejects_a_name_with_nothing_usable():
    assert safe_name("org/model:v1") == "org_model_v1"
    with pytest.raises(ValueError, match="no usable characters"):
        safe_name("///")


def test_a_version_keeps_answers_of_another_version_apart(tmp_path):
    from jevserve.bench.answers_cache import AnswersCache

    old = AnswersCache(tmp_path, "jev-minilm-1", "aaa")
    old.record("k", {"q": {"type": "noul", "noul": 0.9}})
    old.close()
    assert "k" in AnswersCache(tmp_path, "jev-minilm-1", "aaa")
    assert "k" not in AnswersCache(tmp_path, "jev-minilm-1", "bbb")
    assert AnswersCache(tmp_path, "jev-minilm-1").path.name == "jev-minilm-1.jsonl"


DAMAGED_LINES = {
    "not utf-8": b'\xff\xfe garbage',
    "null bytes": b"\x00" * 20,
    "a list": b"[1, 2, 3]",
    "a key that is no string": b'{"key": 5, "answers": {}}',
    "a wrongly typed answer": b'{"key": "k2", "answers": {"q": {"type": "noul", "noul": "banana"}}}',
    "out of range": b'{"key": "k2", "answers": {"q": {"type": "noul", "noul": 7.5}}}',
    "nan": b'{"key": "k2", "answers": {"q": {"type": "noul", "noul": NaN}}}',
    "probabilities that do not sum to 1": b'{"key": "k2", "answers": {"q": {"type": "choice", '
                                          b'"probabilities": {"a": 0.9, "b": 0.9}}}}',
    "a refusal whose status is about the endpoint": b'{"key": "k2", "error": {"status": 401, "message": "bad key"}}',
}


@pytest.mark.parametrize("line", DAMAGED_LINES.values(), ids=DAMAGED_LINES)
def test_a_damaged_line_is_skipped_so_its_request_is_asked_again(tmp_path, line):
    cache = AnswersCache(tmp_path, "jev-x")
    cache.record("k1", {"q": {"type": "noul", "noul": 0.1}})
    cache.close()
    with cache.path.open("ab") as f:
        f.write(line + b"\n")
    cache.record("k3", {"q": {"type": "noul", "noul": 0.3}})
    cache.close()
    reread = AnswersCache(tmp_path, "jev-x")
    assert set(reread.answers) == {"k1", "k3"} and "k2" not in reread and reread.num_torn_lines == 1


def test_answers_are_answered_only_when_they_answer_every_question_asked(tmp_path):
    from jevserve.bench.answers_cache import answers_problem

    questions = {"q": {"type": "noul"}, "team": {"type": "choice", "criteria": {"Billing": None, "Sales": None}},
                 "level": {"type": "score", "criteria": ["low", "high"]}}
    good = {"q": {"type": "noul", "noul": 1},
            "team": {"type": "choice", "probabilities": {"Billing": 0.7, "Sales": 0.3}},
            "level": {"type": "score", "probabilities": {"0": 0.5, "1": 0.5}}}
    assert answers_problem(questions, good) is None
    assert "no answer to question 'team'" in answers_problem(questions, {"q": good["q"], "level": good["level"]})
    other_options = {**good, "team": {"type": "choice", "probabilities": {"Billing": 0.7, "Tech": 0.3}}}
    assert "asked ['Billing', 'Sales']" in answers_problem(questions, other_options)
    cache = AnswersCache(tmp_path, "jev-x")
    cache.record("k1", good)
    cache.record("k2", {})
    cache.record_error("k3", 413, "too long")
    assert cache.answered("k1", questions) and not cache.answered("k2", questions) and cache.answered("k3", questions)
