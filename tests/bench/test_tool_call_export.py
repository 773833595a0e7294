"""The tool gate's packaged ordinary calls: BFCL's train side, none a readout trained on, and the composed templates'
scoped calibration calls; reproducible from the data."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from jevserve.bench.sources import split_of
from jevserve.bench.sources.records_agent import ExpectedCall
from jevserve.bench.tool_call_export import (
    TOOL_CALL_CALIBRATION_PATH,
    calibration_bytes,
    calibration_records_from,
    first_acceptable,
    held_out_records_from,
    openai_calls,
    ordinary_call_cases,
    shape_of,
    tool_call_records,
    trained_tool_fit_ids,
)
from jevserve.gateway.calibration import load_calibration
from jevserve.train.tool_calls_composed import scoped_calibration_records


def test_a_possible_answer_becomes_one_concrete_call():
    answer = json.dumps({"base": [10, 10.0], "unit": ["", "units"], "height": [5], "mode": "fast"})
    assert first_acceptable(answer) == {"base": 10, "height": 5, "mode": "fast"}  # "" first: the parameter is optional
    case = SimpleNamespace(record_id="r1", expected_calls=(ExpectedCall("area", answer), ExpectedCall("log", "{}")))
    calls = openai_calls(case)
    assert [c["function"]["name"] for c in calls] == ["area", "log"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"base": 10, "height": 5, "mode": "fast"}
    assert calls == openai_calls(case) and calls[0]["id"] != calls[1]["id"]
    assert shape_of("live_multiple") == "live" and shape_of("simple_python") == "curated"


def test_only_fitting_cases_of_the_side_with_calls_and_not_trained_on_are_kept():
    def case(record_id, relevant=True, calls=True):
        return SimpleNamespace(record_id=record_id, split_key=record_id, relevant=relevant,
                               expected_calls=(ExpectedCall("f", "{}"),) if calls else ())  # fmt: skip

    ids = [f"case-{k}" for k in range(40)]
    train = [i for i in ids if split_of(i) == "train"]
    cases = [case(i) for i in ids] + [case("x", relevant=False), case("y", calls=False)]
    kept = ordinary_call_cases(cases, "train", trained_ids={train[0]})
    assert [c.record_id for c in kept] == train[1:]


def test_the_packaged_file_is_the_train_sides_untrained_calls_byte_for_byte(bench_tasks):
    data, _ = bench_tasks
    trained = trained_tool_fit_ids(data)
    cases = {c.record_id: c for c in data.source("bfcl-relevance")}
    packaged = load_calibration(TOOL_CALL_CALIBRATION_PATH)
    assert len(packaged.requests) > 1000
    scoped = scoped_calibration_records()
    assert {r.request_id for r in packaged.requests if r.shape == "scoped"} == {r["id"] for r in scoped}
    for request in packaged.requests:
        if request.shape == "scoped":
            continue
        case = cases[request.request_id]
        assert split_of(case.split_key) == "train" and case.relevant and request.request_id not in trained
        assert len(request.tool_calls) == len(case.expected_calls)
    test_ids = {r["id"] for r in held_out_records_from(data)}
    assert test_ids and not test_ids & {r.request_id for r in packaged.requests}
    rebuilt = calibration_records_from(data, scoped)
    assert calibration_bytes(rebuilt) == TOOL_CALL_CALIBRATION_PATH.read_bytes(), "jevserve bench export-tool-calls"


@pytest.mark.parametrize("side", ["train", "test"])
def test_every_record_is_a_calibration_request_with_its_calls(side, bench_tasks):
    data, _ = bench_tasks
    records = tool_call_records(ordinary_call_cases(data.source("bfcl-relevance"), side))
    assert records and all(r["tool_calls"] and r["body"]["messages"][-1]["role"] == "user" for r in records)


def test_the_command_line_hands_the_export_the_composed_scoped_calls(tmp_path):
    """The bench may not import the training package: the command line hands `export-tool-calls` its scoped calls."""
    from jevserve.cli import build_parser

    args = build_parser().parse_args(["bench", "export-tool-calls", "--out", str(tmp_path / "calls.jsonl.gz")])
    assert args.func.__name__ == "export_tool_calls_command"
    assert args.scoped_calibration_records() == scoped_calibration_records()
