import json

import pytest
from pydantic import ValidationError

from jevserve.protocol import SystemOneRequest, to_decision, to_wire
from tests.helpers import ticket_body


def errors_of(body) -> list[dict]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(ValidationError) as info:
        SystemOneRequest.model_validate_json(raw)
    return info.value.errors(include_url=False)


def test_ticket_request_parses_every_question_type():
    req = SystemOneRequest.model_validate(ticket_body())
    assert [q.type for q in req.questions.values()] == ["noul", "choice", "score"]
    assert req.model == "jev-latest"


@pytest.mark.parametrize("state", ["plain", {"subject": "s", "customer": {"id": 1}}, ["a", "b"], {}, []])
def test_state_accepts_string_object_and_array(state):
    assert SystemOneRequest.model_validate(ticket_body(state=state)).state == state


@pytest.mark.parametrize("state", [None, 3, 2.5, True])
def test_state_rejects_null_numbers_and_booleans(state):
    assert errors_of(ticket_body(state=state))


@pytest.mark.parametrize("where, value, kind", [
    (("state",), None, "null"),
    (("questions", "q", "score", "criteria", 1), None, "null"),
    (("questions", "q", "choice", "criteria", "b"), 7, "a number"),
    (("questions", "q", "noul", "instructions"), True, "a boolean"),
])
def test_a_value_that_is_no_text_is_one_error_naming_what_it_is(where, value, kind):
    # pydantic's union gave one error per member, their type names ("str", "dict[str,any]") in the location
    questions = {"score": {"type": "score", "criteria": ["low", value]},
                 "choice": {"type": "choice", "criteria": {"a": None, "b": value}},
                 "noul": {"type": "noul", "instructions": value}}
    body = {"state": value if where == ("state",) else "a ticket",
            "questions": {"q": questions[where[2]] if len(where) > 1 else questions["noul"] | {"instructions": "?"}}}
    (error,) = errors_of(body)
    assert tuple(error["loc"]) == where and error["type"] == "text_type"
    assert error["msg"] == f"expected a text: a string, a JSON object or a JSON list, not {kind}"


def test_missing_model_defaults_to_alias_and_unknown_fields_are_ignored():
    body = ticket_body(x_nonce="ab12", seed=3)
    del body["model"]
    assert SystemOneRequest.model_validate(body).model == "jev-latest"


@pytest.mark.parametrize(
    ("questions", "loc", "kind"),
    [
        ({}, ("questions",), "too_short"),
        ({"q": {"instructions": "x"}}, ("questions", "q"), "union_tag_not_found"),
        ({"q": {"type": "boolean"}}, ("questions", "q"), "union_tag_invalid"),
        ({"q": {"type": "box"}}, ("questions", "q"), "union_tag_invalid"),
        ({"q": {"type": "choice", "criteria": {}}}, ("questions", "q", "choice", "criteria"), "too_short"),
        ({"q": {"type": "choice", "criteria": {"only": None}}}, ("questions", "q", "choice", "criteria"), "too_short"),
        (
            {"q": {"type": "score", "criteria": {"0": "a", "1": "b"}}},
            ("questions", "q", "score", "criteria"),
            "list_type",
        ),
        ({"q": {"type": "score", "criteria": []}}, ("questions", "q", "score", "criteria"), "too_short"),
        (
            {"q": {"type": "score", "criteria": [str(i) for i in range(11)]}},
            ("questions", "q", "score", "criteria"),
            "too_long",
        ),
        (
            {"q": {"type": "noul", "criteria": {"maybe": "x"}}},
            ("questions", "q", "noul", "criteria", "maybe"),
            "extra_forbidden",
        ),
    ],
)
def test_invalid_questions_fail_with_contract_loc_and_type(questions, loc, kind):
    errs = errors_of(ticket_body(questions=questions))
    assert any(tuple(e["loc"]) == loc and e["type"] == kind for e in errs), errs


def test_choice_accepts_255_options_and_rejects_256():
    ok = {f"option {i}": None for i in range(255)}
    SystemOneRequest.model_validate(ticket_body(questions={"q": {"type": "choice", "criteria": ok}}))
    errs = errors_of(ticket_body(questions={"q": {"type": "choice", "criteria": {**ok, "one more": None}}}))
    assert errs[0]["type"] == "too_long"


def test_null_score_level_is_rejected():
    assert errors_of(ticket_body(questions={"q": {"type": "score", "criteria": ["Calm", None]}}))


def test_not_json_is_json_invalid():
    assert errors_of(b'{"state": "x", "questio')[0]["type"] == "json_invalid"


def test_image_assets_are_refused_with_a_clear_message():
    errs = errors_of(ticket_body(assets={"img": {"type": "image", "part": "asset-0"}}))
    assert "text-only" in errs[0]["msg"]


@pytest.mark.parametrize(
    "criteria",
    [
        None,
        {"true": "yes side", "false": "no side"},
        {"true": "only yes"},
        {"false": ["only", "no"]},
        {"true": None, "false": None},
    ],
)
def test_noul_criteria_forms_are_accepted(criteria):
    q = {"type": "noul", "instructions": {"task": "check"}}
    if criteria is not None:
        q["criteria"] = criteria
    SystemOneRequest.model_validate(ticket_body(questions={"q": q}))


def test_decision_form_keeps_option_names_byte_for_byte_and_leaves_ids_out():
    names = ["환불 요청", "배송 문의", "🙂 기타", "Cafe\u0301", " spaced "]
    body = ticket_body(questions={"🎯 id": {"type": "choice", "criteria": dict.fromkeys(names)}})
    decision = to_decision(SystemOneRequest.model_validate(body).questions["🎯 id"])
    assert [o.label for o in decision.options] == names
    assert "🎯" not in repr(decision)


def test_wire_round_trip_gives_the_same_decision_form():
    for question in SystemOneRequest.model_validate(ticket_body()).questions.values():
        decision = to_decision(question)
        again = SystemOneRequest.model_validate(ticket_body(questions={"q": to_wire(decision)})).questions["q"]
        assert to_decision(again) == decision
