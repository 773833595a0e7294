"""Request models of `POST /v1/systemone` (SYSTEMONE_API.md §3), as pydantic v2 models.

Validation errors from these models are what the server returns as 422 `detail[]`, so their `loc` and `type`
values are part of the contract (for example `union_tag_invalid` for an unknown question type and `list_type`
for a score in the old map form).
"""

from __future__ import annotations

import json
import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError, from_json

from jevserve.protocol.json_keys import first_repeated_key
from jevserve.protocol.text import Text

# The contract's option and level ranges (§3.4, §3.5). Outside them the server answers 422.
MIN_OPTIONS, MAX_OPTIONS = 2, 255
MIN_LEVELS, MAX_LEVELS = 2, 10
DEFAULT_MODEL = "jev-latest"

def _json_kind(value: Any) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", type(None): "null"}.get(type(value), "another type")


def _text(value: Any) -> str | dict[str, Any] | list[Any]:
    # One error, in the contract's words, instead of pydantic's one per union member, whose names ("str",
    # "dict[str,any]", "list[any]") reached clients as parts of the field's location.
    if isinstance(value, str | dict | list):
        return value
    raise PydanticCustomError("text_type", "expected a text: a string, a JSON object or a JSON list, not {kind}",
                              {"kind": _json_kind(value)})


def _text_or_null(value: Any) -> str | dict[str, Any] | list[Any] | None:
    return None if value is None else _text(value)


# A text on the wire (§3.1): a string, or structured JSON (an object or a list) the server renders as text.
WireText = Annotated[Any, AfterValidator(_text)]
WireTextOrNull = Annotated[Any, AfterValidator(_text_or_null)]


class NoulCriteria(BaseModel):
    """What makes a noul true and what makes it false; either side may be missing or null."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    true: WireTextOrNull = None
    false: WireTextOrNull = None


class NoulQuestion(BaseModel):
    """A yes/no question: the answer is the probability of true."""

    model_config = ConfigDict(frozen=True)

    type: Literal["noul"]
    instructions: WireTextOrNull = None
    criteria: NoulCriteria | None = None


class ChoiceQuestion(BaseModel):
    """Pick one of 2–255 named options; a description may be null (the name speaks for itself)."""

    model_config = ConfigDict(frozen=True)

    type: Literal["choice"]
    instructions: WireTextOrNull = None
    criteria: dict[str, WireTextOrNull] = Field(min_length=MIN_OPTIONS, max_length=MAX_OPTIONS)


class ScoreQuestion(BaseModel):
    """Place the state on 2–10 ordered levels, lowest first; the map form of old SDKs fails as `list_type`."""

    model_config = ConfigDict(frozen=True)

    type: Literal["score"]
    instructions: WireTextOrNull = None
    criteria: list[WireText] = Field(min_length=MIN_LEVELS, max_length=MAX_LEVELS)


Question = Annotated[NoulQuestion | ChoiceQuestion | ScoreQuestion, Field(discriminator="type")]


class SystemOneRequest(BaseModel):
    """The body of `POST /v1/systemone`. Unknown top-level fields are ignored and never reach a model."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    model: StrictStr = DEFAULT_MODEL
    state: WireText
    questions: dict[str, Question] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _reject_assets(cls, data: Any) -> Any:
        # Image assets need a vision model; a text-only server says so instead of ignoring them silently.
        if isinstance(data, dict) and data.get("assets") not in (None, {}, []):
            raise PydanticCustomError(
                "assets_unsupported", "this server is text-only: remove 'assets' (image inputs are not supported)"
            )
        return data

    @field_validator("questions")
    @classmethod
    def _ids_not_empty(cls, questions: dict[str, Question]) -> dict[str, Question]:
        if "" in questions:
            raise PydanticCustomError("empty_question_id", "question ids must be non-empty strings")
        return questions


__all__ = [
    "DEFAULT_MODEL",
    "MAX_LEVELS",
    "MAX_OPTIONS",
    "MIN_LEVELS",
    "MIN_OPTIONS",
    "ChoiceQuestion",
    "NoulCriteria",
    "NoulQuestion",
    "Question",
    "ScoreQuestion",
    "SystemOneRequest",
    "Text",
]


# An escaped UTF-16 high surrogate not followed by an escaped low one, or a low one not preceded by a high one.
_LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|(?<![0-9a-fA-F]{4})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def parse_request(body: bytes) -> SystemOneRequest:
    """The request in `body`, or a ValidationError (422) that says what is wrong with it.

    pydantic's JSON parser takes `NaN`, `Infinity` and `-Infinity` for numbers, which JSON does not have (RFC 8259
    §6): such a body is refused, as the gateway refuses it. An unpaired surrogate escape is named as such; the
    parser calls it "unexpected end of hex escape".
    """
    # A UTF-8 byte-order mark, which some Windows tools write: RFC 8259 §8.1 lets a parser ignore it, and this one does
    body = body.removeprefix(b"\xef\xbb\xbf")
    if b"NaN" in body or b"Infinity" in body:  # cheap first look; the parse below decides
        try:
            from_json(body, allow_inf_nan=False)
        except ValueError as exc:
            try:
                from_json(body, allow_inf_nan=True)
            except ValueError:
                pass  # invalid either way: pydantic's own message below
            else:
                raise _invalid_json(f"NaN and Infinity are not JSON numbers ({exc})") from None
    if _MAYBE_OUT_OF_RANGE.search(body):  # cheap first look: an exponent of 3+ digits, or 309+ digits in a row
        try:
            parsed = from_json(body, allow_inf_nan=False)
        except ValueError:
            parsed = None  # invalid anyway: pydantic's own message below
        if parsed is not None and _has_non_finite(parsed):
            raise _invalid_json("a number is out of range: beyond ±1.8e308 it is no finite double") from None
    # a repeated key first: the parse keeps the last, so the schema would judge what is left (two option names,
    # one kept: "at least 2 items") and name another fault than the client's
    _refuse_duplicate_keys(body)
    try:
        request = SystemOneRequest.model_validate_json(body)
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()) and _LONE_SURROGATE.search(body):
            message = "a lone UTF-16 surrogate escape (\\ud800–\\udfff without its pair) is not text"
            raise _invalid_json(message) from None
        if any(e["type"] == "json_invalid" and "recursion limit" in e["msg"] for e in exc.errors()):
            # valid JSON past the parser's depth (pydantic-core's, about 200 objects and arrays within each other):
            # said so, not called invalid
            raise _invalid_json("the body nests objects and arrays deeper than this server reads (about 200 levels "
                                "within each other); send a flatter state") from None
        raise
    return request


class _Parsed(dict):
    """A parsed JSON object that remembers the first key repeated in it or in any object within it."""

    repeated: str | None = None  # repeated in this object itself
    repeated_within: str | None = None  # here or in an object it contains


def _repeated_in(value: Any) -> str | None:
    stack = [value]
    while stack:  # lists are walked here; an object carries what was found within it already
        item = stack.pop()
        if isinstance(item, _Parsed):
            if item.repeated_within is not None:
                return item.repeated_within
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _noting_repeats(pairs: list[tuple[str, Any]]) -> _Parsed:
    parsed = _Parsed(pairs)
    parsed.repeated = first_repeated_key(pairs)
    parsed.repeated_within = parsed.repeated or next(
        (found for _, value in pairs if (found := _repeated_in(value)) is not None), None)
    return parsed


# The fields a request is read by; a repeated key within any other is in a field the server ignores (the contract:
# unknown fields SHOULD be ignored), so it refuses nothing
_READ_FIELDS = frozenset({"model", "state", "questions", "assets"})


def _refuse_duplicate_keys(body: bytes) -> None:
    """A 422 for a key repeated within one JSON object of what the request is read by. JSON parsers keep the last of
    them (pydantic's too), so a repeated question id or option name would lose a question or an option without a
    word; RFC 8259 §4 leaves such objects' meaning to the parser. A second parse of an already valid body: a few ms
    per MB, a tenth of the validation's own time."""
    try:
        top = json.loads(body, object_pairs_hook=_noting_repeats)
    except (ValueError, RecursionError):
        return  # not JSON (pydantic's json_invalid says so), or a body pydantic reads and this parser does not
    if not isinstance(top, _Parsed) or top.repeated_within is None:
        return
    if top.repeated in _READ_FIELDS:
        key = top.repeated
    else:
        key = next((found for name, value in top.items() if name in _READ_FIELDS
                    and (found := _repeated_in(value)) is not None), None)
        if key is None:
            return
    raise ValidationError.from_exception_data(
        "SystemOneRequest",
        [InitErrorDetails(
            type=PydanticCustomError(
                "duplicate_key",
                "the key {key} appears more than once in one JSON object; only one of them would be read (each "
                "question id, option name and field may appear once)",
                {"key": json.dumps(key, ensure_ascii=False)},
            ),
            loc=(),
            input="",
        )],
        input_type="json",
    )


# Numbers that may overflow a double: the parser reads `1e999` as infinity, which no JSON answer can carry back
_MAYBE_OUT_OF_RANGE = re.compile(rb"[eE][+-]?0*[0-9]{3,}|[0-9]{309,}")


def _has_non_finite(value: object) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _invalid_json(message: str) -> ValidationError:
    return ValidationError.from_exception_data(
        "SystemOneRequest", [InitErrorDetails(type="json_invalid", loc=(), input="", ctx={"error": message})],
        input_type="json",
    )
