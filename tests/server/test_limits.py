"""Per-request caps (questions, options) and strict checking of a local backend's probabilities."""

import logging

import numpy as np
import pytest
from fastapi.testclient import TestClient

from jevserve.server.app import DEFAULT_MAX_QUESTIONS, ServerSettings, create_app
from tests.helpers import FakeBackend, ticket_body


def many_questions(n: int, options: int = 2) -> dict:
    if options == 2:
        return {f"q{i}": {"type": "noul", "instructions": f"question {i}?"} for i in range(n)}
    return {f"q{i}": {"type": "choice", "criteria": {f"o{j}": None for j in range(options)}} for i in range(n)}


def test_too_many_questions_is_413_naming_the_cap_and_the_flag():
    with TestClient(create_app([FakeBackend()], ServerSettings(max_questions=50))) as c:
        ok = c.post("/v1/systemone", json=ticket_body(questions=many_questions(50)))
        over = c.post("/v1/systemone", json=ticket_body(questions=many_questions(51)))
    assert ok.status_code == 200
    assert over.status_code == 413 and over.json()["detail"]["error_type"] == "api_usage_error"
    assert "51 questions" in over.json()["detail"]["message"] and "--max-questions" in over.json()["detail"]["message"]


def test_a_question_cap_set_by_the_queue_names_the_queue():
    # with --max-queue 64 a 33-question request was told to raise --max-questions, which changes nothing
    with TestClient(create_app([FakeBackend()], ServerSettings(max_queue=64, max_questions=32))) as c:
        over = c.post("/v1/systemone", json=ticket_body(questions=many_questions(33)))
    assert over.status_code == 413
    assert "(--max-questions, at most half of --max-queue 64)" in over.json()["detail"]["message"]


def test_a_ten_thousand_question_body_is_refused_by_default():
    with TestClient(create_app([FakeBackend()])) as c:
        r = c.post("/v1/systemone", json=ticket_body(questions=many_questions(10_000)))
    assert r.status_code == 413 and str(DEFAULT_MAX_QUESTIONS) in r.json()["detail"]["message"]


def test_too_many_options_over_all_questions_is_413():
    with TestClient(create_app([FakeBackend()], ServerSettings(max_options=1000))) as c:
        r = c.post("/v1/systemone", json=ticket_body(questions=many_questions(5, options=255)))
    assert r.status_code == 413 and "1275 options" in r.json()["detail"]["message"]


def test_a_question_alone_over_a_lowered_option_limit_is_not_told_to_split_the_request(monkeypatch, capsys):
    # an outside tester's `--max-options 50` told one question of 255 options to "split it into several requests",
    # which no split can do, and the server started with no word that it now refuses what the contract says it MUST
    # accept
    import socket

    import uvicorn

    from jevserve.cli import main

    with TestClient(create_app([FakeBackend()], ServerSettings(max_options=50))) as c:
        one = c.post("/v1/systemone", json=ticket_body(questions=many_questions(1, options=255)))
        spread = c.post("/v1/systemone", json=ticket_body(questions=many_questions(2, options=40)))
    said = one.json()["detail"]["message"]
    assert one.status_code == 413 and said.startswith("a question has 255 options") and "split" not in said
    assert spread.status_code == 413 and "split it into several requests" in spread.json()["detail"]["message"]
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets: None)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    assert main(["serve", "remote:http://127.0.0.1:9", "--port", str(port), "--max-options", "50"]) == 0
    assert "--max-options 50 is under the contract's 255 options a question may have" in capsys.readouterr().err


def test_models_shows_the_limits_as_an_extension_field():
    with TestClient(create_app([FakeBackend()], ServerSettings(max_questions=7, max_options=99))) as c:
        body = c.get("/v1/models").json()
    assert body["x_limits"]["max_questions"] == 7 and body["x_limits"]["max_options"] == 99


class BrokenBackend(FakeBackend):
    """Returns a chosen bad vector for every item."""

    def __init__(self, vector) -> None:
        super().__init__()
        self.vector = vector

    def decide(self, items):
        super().decide(items)
        return [np.array(self.vector(item.question.num_options)) for item in items]


@pytest.mark.parametrize(
    "vector",
    [
        lambda n: [float("nan")] * n,
        lambda n: [-1.0] + [2.0 / (n - 1)] * (n - 1),
        lambda n: [0.0] * n,
        lambda n: [1.0] * n,
        lambda n: [1.0 / (n + 1)] * (n + 1),
    ],
    ids=["nan", "negative", "all-zero", "unnormalised", "wrong-length"],
)
def test_a_local_backend_returning_a_non_distribution_is_500_with_a_logged_cause_never_an_answer(vector, caplog):
    app = create_app([BrokenBackend(vector)])
    with caplog.at_level(logging.ERROR, logger="jevserve.server"), TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/v1/systemone", json=ticket_body())
    assert r.status_code == 500 and r.json()["detail"]["error_type"] == "internal_error"
    assert "invalid probability vector" in r.json()["detail"]["message"]
    assert any("invalid" in rec.getMessage() for rec in caplog.records)


class CrashingBackend(FakeBackend):
    def decide(self, items):
        raise RuntimeError("the model crashed")


def test_a_500_is_counted_with_its_status_and_answers_no_question():
    app = create_app([CrashingBackend()])
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/v1/systemone", json=ticket_body())
        metrics = c.get("/metrics").text
    assert r.status_code == 500 and r.json()["detail"]["error_type"] == "internal_error"
    assert 'jevserve_requests_total{route="/v1/systemone",status="500"} 1.0' in metrics
    assert "jevserve_questions_total{" not in metrics  # none was answered


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json_numbers_and_get_422(number):
    question = '{"a": {"type": "noul", "instructions": "Is it about money?"}}'
    bodies = [f'{{"state": {{"x": {number}}}, "questions": {question}}}',
              f'{{"state": "NaN and Infinity are words", "questions": {question}, "extra": [{number}]}}']  # fmt: skip
    with TestClient(create_app([FakeBackend()])) as c:
        for body in bodies:
            r = c.post("/v1/systemone", content=body.encode(), headers={"content-type": "application/json"})
            assert r.status_code == 422, body
            assert "NaN and Infinity are not JSON numbers" in r.json()["detail"][0]["msg"]
        words = f'{{"state": "NaN and Infinity are words", "questions": {question}}}'
        assert c.post("/v1/systemone", content=words.encode(), headers={"content-type": "application/json"}).is_success


@pytest.mark.parametrize("number", ["1e999", "-1e400", "1" + "0" * 400 + ".5"])
def test_a_number_beyond_a_double_gets_422_not_a_500_when_it_is_echoed(number):
    # a score level is echoed in the answer's legend: read as infinity, it could not be written back
    body = f'{{"state": "x", "questions": {{"q": {{"type": "score", "criteria": [{{"v": {number}}}, "b"]}}}}}}'
    with TestClient(create_app([FakeBackend()])) as c:
        r = c.post("/v1/systemone", content=body.encode(), headers={"content-type": "application/json"})
        assert r.status_code == 422 and "out of range" in r.json()["detail"][0]["msg"]
        fine = body.replace(number, "1e300").replace("1e300.5", "1e300")  # a large finite number is echoed as sent
        r = c.post("/v1/systemone", content=fine.encode(), headers={"content-type": "application/json"})
        assert r.status_code == 200 and r.json()["answers"]["q"]["legend"]["0"] == {"v": 1e300}


def test_a_lone_surrogate_escape_is_named_as_such():
    body = b'{"state": "\\ud800", "questions": {"a": {"type": "noul", "instructions": "Is it?"}}}'
    with TestClient(create_app([FakeBackend()])) as c:
        r = c.post("/v1/systemone", content=body, headers={"content-type": "application/json"})
        paired = c.post("/v1/systemone", content=body.replace(b"\\ud800", b"\\ud83d\\ude00"),
                        headers={"content-type": "application/json"})  # fmt: skip
    assert r.status_code == 422 and "lone UTF-16 surrogate" in r.json()["detail"][0]["msg"]
    assert paired.status_code == 200


def test_a_state_nested_past_the_parsers_depth_is_said_to_be_too_deep_not_invalid():
    # valid JSON nested 200 deep was answered "Invalid JSON: recursion limit exceeded"
    def nested(depth: int) -> dict:
        state: dict = {"leaf": "x"}
        for _ in range(depth):
            state = {"a": state}
        return {"state": state, "questions": {"q": {"type": "noul", "instructions": "Is it?"}}}

    with TestClient(create_app([FakeBackend()])) as c:
        deep = c.post("/v1/systemone", json=nested(250))
        fine = c.post("/v1/systemone", json=nested(100))
    assert deep.status_code == 422 and "deeper than this server reads" in deep.json()["detail"][0]["msg"]
    assert fine.status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        '{"state": "x", "questions": {"a": {"type": "noul"}, "a": {"type": "choice", "criteria": {"p": "", "q": ""}}}}',
        '{"state": "x", "questions": {"a": {"type": "choice", "criteria": {"p": "one", "q": null, "p": "two"}}}}',
        '{"state": {"who": "me", "who": "you"}, "questions": {"a": {"type": "noul"}}}',
        # two option names, one repeated: once called "at least 2 items", about the option left after the parse
        '{"state": "x", "questions": {"a": {"type": "choice", "criteria": {"A": null, "A": null}}}}',
    ],
)
def test_a_key_repeated_in_one_object_gets_422_rather_than_a_silently_lost_question_or_option(body):
    with TestClient(create_app([FakeBackend()])) as c:
        r = c.post("/v1/systemone", content=body.encode(), headers={"content-type": "application/json"})
        assert r.status_code == 422
        detail = r.json()["detail"][0]
        assert detail["type"] == "duplicate_key" and "appears more than once" in detail["msg"]
        # the same keys in different objects are fine
        fine = '{"state": {"a": 1}, "questions": {"a": {"type": "choice", "criteria": {"a": null, "b": null}}}}'
        assert c.post("/v1/systemone", content=fine.encode(), headers={"content-type": "application/json"}).is_success


@pytest.mark.parametrize(
    "extra",
    ['"x_extra": {"z": 1, "z": 2}', '"x_extra": [{"z": 1, "z": 2}]', '"x_extra": 1, "x_extra": 2'],
)
def test_a_key_repeated_only_in_a_field_the_server_ignores_refuses_nothing(extra):
    # an outside tester's repeated key inside an unknown field refused the whole request; the contract says unknown
    # fields SHOULD be ignored
    body = '{"state": "x", "questions": {"a": {"type": "noul"}}, ' + extra + "}"
    with TestClient(create_app([FakeBackend()])) as c:
        r = c.post("/v1/systemone", content=body.encode(), headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text


def test_a_body_that_is_not_json_is_told_so_even_when_it_also_repeats_a_key():
    # an outside tester's body repeated a key and had trailing characters: it was called a duplicate key
    body = b'{"state": "x", "questions": {"a": {"type": "noul"}, "a": {"type": "noul"}}} trailing'
    with TestClient(create_app([FakeBackend()])) as c:
        r = c.post("/v1/systemone", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"][0]["type"] == "json_invalid"


def test_a_utf8_byte_order_mark_is_ignored_and_errors_carry_a_request_id():
    body = b'{"state": "x", "questions": {"a": {"type": "noul", "instructions": "Is it?"}}}'
    with TestClient(create_app([FakeBackend()])) as c:
        r = c.post("/v1/systemone", content=b"\xef\xbb\xbf" + body, headers={"content-type": "application/json"})
        assert r.status_code == 200 and set(r.json()["answers"]) == {"a"}
        bad = c.post("/v1/systemone", content=b"{", headers={"content-type": "application/json"})
        unknown = c.post("/v1/systemone", content=body.replace(b'"state"', b'"model": "nope", "state"'),
                         headers={"content-type": "application/json"})  # fmt: skip
    assert bad.status_code == 422 and len(bad.headers["x-typesafe-request-id"]) == 32
    assert unknown.status_code == 404 and len(unknown.headers["x-typesafe-request-id"]) == 32


class _Limited(FakeBackend):
    """Refuses, as the embedded encoder does, a state or question text marked as over its token limit."""

    def check(self, items):
        from jevserve.decide.base import InputTooLongError

        for item in items:
            if "LONGSTATE" in item.state:
                raise InputTooLongError("state has more than 512 tokens, this model's limit; shorten or split it")
            if "LONG" in item.question.instructions:
                raise InputTooLongError("a question's instructions or option text has more than 512 tokens")


def test_a_question_text_over_the_models_limit_is_named_by_its_id():
    questions = {f"q{i}": {"type": "noul", "instructions": "Is it fine?"} for i in range(5)}
    questions["q3"] = {"type": "noul", "instructions": "LONG " * 3}
    with TestClient(create_app([_Limited()])) as c:
        r = c.post("/v1/systemone", json={"state": "a ticket", "questions": questions})
        assert r.status_code == 413 and r.json()["detail"]["message"].startswith("question 'q3': a question's")
        whole = c.post("/v1/systemone", json={"state": "LONGSTATE", "questions": questions})
    assert whole.status_code == 413 and whole.json()["detail"]["message"].startswith("state has more than")
