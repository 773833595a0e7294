"""Tool-use sources from bfcl-eval (Berkeley Function Calling Leaderboard): does any candidate function fit a request,
and which user turn of a multi-turn conversation lacks a detail the call needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jevserve.bench.sources.base import ChatMessage, unique_records
from jevserve.bench.sources.errors import SourceFormatError
from jevserve.bench.sources.packages import BFCL_EVAL
from jevserve.bench.sources.readers import canonical_json, field_of, read_jsonl
from jevserve.bench.sources.records_agent import ExpectedCall, FunctionDoc, ToolCallCase, ToolConversation
from jevserve.bench.sources.spec import SourceSpec

DATA_DIR = "bfcl_eval/data"
# Categories where one call to the offered functions answers the request, each with a possible_answer file.
FITTING = (
    "simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
)  # fmt: skip
# Relevant requests that ship without an answer file (BFCL scores them only on "some call was made").
FITTING_UNANSWERED = ("live_relevance",)
# Categories where none of the offered functions fits.
NOT_FITTING = ("irrelevance", "live_irrelevance")
MISS_PARAM = "multi_turn_miss_param"
# Which function-document file describes each class a multi-turn conversation involves (bfcl-eval's own layout).
FUNC_DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
    "WebSearchAPI": "web_search.json",
    "MemoryAPI_kv": "memory_kv.json",
    "MemoryAPI_vector": "memory_vector.json",
    "MemoryAPI_rec_sum": "memory_rec_sum.json",
}


def question_file(category: str) -> str:
    """The wheel path of a BFCL category's questions."""
    return f"{DATA_DIR}/BFCL_v4_{category}.json"


def answer_file(category: str) -> str:
    """The wheel path of a BFCL category's possible answers."""
    return f"{DATA_DIR}/possible_answer/BFCL_v4_{category}.json"


def function_doc(raw: Any, where: str) -> FunctionDoc:
    """A FunctionDoc from one BFCL function object (name, description, JSON-schema parameters)."""
    if not isinstance(raw, dict):
        raise SourceFormatError(f"{where}: a function must be a JSON object, got {raw!r}")
    return FunctionDoc(
        name=field_of(raw, "name", str, where),
        description=str(raw.get("description", "")),
        parameters_json=canonical_json(raw.get("parameters", {})),
    )


def _messages(turn: Any, where: str) -> tuple[ChatMessage, ...]:
    if not isinstance(turn, list) or not turn:
        raise SourceFormatError(f"{where}: a turn must be a non-empty list of messages")
    return tuple(
        ChatMessage(role=field_of(m, "role", str, where), content=field_of(m, "content", str, where)) for m in turn
    )


def _expected(ground_truth: Any, where: str) -> tuple[ExpectedCall, ...]:
    if not isinstance(ground_truth, list):
        raise SourceFormatError(f"{where}: ground_truth must be a list of calls")
    calls = []
    for call in ground_truth:
        if not isinstance(call, dict) or len(call) != 1:
            raise SourceFormatError(f"{where}: each call must be {{function name: arguments}}, got {call!r}")
        ((name, arguments),) = call.items()
        calls.append(ExpectedCall(name=name, arguments_json=canonical_json(arguments)))
    return tuple(calls)


def _cases(root: Path, category: str, relevant: bool, answered: bool) -> list[ToolCallCase]:
    path = root / question_file(category)
    answers: dict[str, tuple[ExpectedCall, ...]] = {}
    if answered:
        answer_path = root / answer_file(category)
        for number, row in read_jsonl(answer_path):
            where = f"{answer_path}:{number}"
            answers[field_of(row, "id", str, where)] = _expected(row.get("ground_truth"), where)
    cases = []
    for number, row in read_jsonl(path):
        where = f"{path}:{number}"
        case_id = field_of(row, "id", str, where)
        turns = field_of(row, "question", list, where)
        if answered and case_id not in answers:
            raise SourceFormatError(f"{where}: id {case_id!r} has no possible answer in {answer_file(category)}")
        cases.append(
            ToolCallCase(
                messages=_messages(turns[0] if turns else None, where),
                functions=tuple(function_doc(f, where) for f in field_of(row, "function", list, where)),
                relevant=relevant,
                expected_calls=answers.get(case_id, ()),
                category=category,
                origin=f"bfcl-relevance:{case_id}",
            )
        )
    return cases


def load_relevance(root: Path) -> tuple[ToolCallCase, ...]:
    """Requests with candidate functions: fitting ones (with their right calls) and ones no candidate fits."""
    cases: list[ToolCallCase] = []
    for category in FITTING:
        cases += _cases(root, category, relevant=True, answered=True)
    for category in FITTING_UNANSWERED:
        cases += _cases(root, category, relevant=True, answered=False)
    for category in NOT_FITTING:
        cases += _cases(root, category, relevant=False, answered=False)
    # A few request + function sets ship both as fitting and as not fitting; those are dropped.
    return unique_records(cases, label_of=lambda case: case.relevant)


def _class_functions(root: Path, classes: list[Any], excluded: set[str], where: str) -> tuple[FunctionDoc, ...]:
    functions = []
    for name in classes:
        if name not in FUNC_DOC_FILES:
            raise SourceFormatError(f"{where}: involved class {name!r} has no function-document file we know")
        path = root / DATA_DIR / "multi_turn_func_doc" / FUNC_DOC_FILES[name]
        for number, row in read_jsonl(path):
            doc = function_doc(row, f"{path}:{number}")
            if doc.name not in excluded:
                functions.append(doc)
    return tuple(functions)


def load_miss_param(root: Path) -> tuple[ToolConversation, ...]:
    """BFCL multi-turn conversations where one turn lacks a parameter: its ground truth is empty (the model should
    ask), and the following turn supplies the missing detail."""
    path = root / question_file(MISS_PARAM)
    answer_path = root / answer_file(MISS_PARAM)
    answers = {
        field_of(row, "id", str, f"{answer_path}:{n}"): row.get("ground_truth") for n, row in read_jsonl(answer_path)
    }
    records = []
    for number, row in read_jsonl(path):
        where = f"{path}:{number}"
        case_id = field_of(row, "id", str, where)
        turns = tuple(_messages(t, where)[-1].content for t in field_of(row, "question", list, where))
        truth = answers.get(case_id)
        if not isinstance(truth, list) or len(truth) != len(turns):
            raise SourceFormatError(f"{where}: id {case_id!r} needs one ground-truth list per turn ({len(turns)})")
        # The first turn with no expected call is the under-specified one (two conversations also have a later
        # no-op turn); a turn must follow it to supply the detail.
        empty = [i for i, calls in enumerate(truth) if not calls]
        if not empty or empty[0] + 1 >= len(turns):
            raise SourceFormatError(f"{where}: id {case_id!r} has no under-specified turn followed by another turn")
        classes = field_of(row, "involved_classes", list, where)
        records.append(
            ToolConversation(
                turns=turns,
                functions=_class_functions(root, classes, set(row.get("excluded_function") or ()), where),
                ground_truth=tuple(tuple(str(c) for c in calls) for calls in truth),
                missing_turn=empty[0],
                origin=f"bfcl-miss-param:{case_id}",
            )
        )
    return unique_records(records)


SOURCES = (
    SourceSpec(
        name="bfcl-relevance",
        family="tool-fit",
        archive=BFCL_EVAL,
        files=tuple(question_file(c) for c in FITTING + FITTING_UNANSWERED + NOT_FITTING)
        + tuple(answer_file(c) for c in FITTING),
        loader=load_relevance,
        record_kind="ToolCallCase",
        description="requests with candidate functions: fitting calls vs. no fitting candidate",
    ),
    SourceSpec(
        name="bfcl-miss-param",
        family="clarify",
        archive=BFCL_EVAL,
        files=(question_file(MISS_PARAM), answer_file(MISS_PARAM), f"{DATA_DIR}/multi_turn_func_doc/*.json"),
        loader=load_miss_param,
        record_kind="ToolConversation",
        description="multi-turn tool conversations with one under-specified user turn",
    ),
)
