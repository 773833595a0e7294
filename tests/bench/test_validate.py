"""`jevserve bench validate`: a results file as `bench run` writes it passes; tampered ones name their problem."""

from __future__ import annotations

import copy
import json

from jevserve.bench.pipeline import BENCH_VERSION
from jevserve.bench.results import latest_results
from jevserve.bench.validate import validate_document
from jevserve.cli import main
from tests.bench.test_board import make_results


def _rows(tmp_path):
    results = make_results(tmp_path)
    documents = {d["model"]: d for d in latest_results(results).documents}
    return results, documents["fake-model"], documents["default-rules"]


def test_a_row_written_by_bench_run_is_valid(tmp_path):
    _, model, reference = _rows(tmp_path)
    assert validate_document(model, reference, BENCH_VERSION) == []


def test_tampered_rows_name_what_is_wrong(tmp_path):
    _, model, reference = _rows(tmp_path)
    cases = {
        "labels differ": lambda d: d["tasks"]["toy-keyword"]["items"]["labels"].reverse(),
        "predictions for": lambda d: d["tasks"]["toy-keyword"]["items"]["values"].pop(),
        "stored score": lambda d: d["tasks"]["toy-keyword"].update(score=99.0),
        "bench_version": lambda d: d.update(bench_version="0.3"),
        "unknown task": lambda d: d["tasks"].update({"guard-nope": d["tasks"]["toy-keyword"]}),
        "items_sha256": lambda d: d["tasks"]["toy-keyword"].update(items_sha256="0" * 64),
        # an outside tester's forged summary numbers passed as valid: every stored number is recomputed
        "average.score": lambda d: d["average"].update(score=55.0),
        "average_all.interval": lambda d: d["average_all"].update(interval=[80.0, 95.0]),
        "stored score_interval": lambda d: d["tasks"]["toy-keyword"].update(score_interval=[80.0, 95.0]),
        "stored gap_share ": lambda d: d["tasks"]["toy-keyword"].update(gap_share=99.0),
        "stored p_beats_rule": lambda d: d["tasks"]["toy-keyword"].update(
            p_beats_rule=0.0 if d["tasks"]["toy-keyword"]["p_beats_rule"] > 0.5 else 1.0),
        "metrics.model.value": lambda d: d["tasks"]["toy-keyword"]["metrics"]["model"].update(value=0.123),
        # an outside tester's: a malformed seed raised numpy's TypeError; a yes/no prediction of 0.5 or NaN passed
        # (truthy, so no score moved); a date that is none and an impossible Brier score passed
        "bootstrap_seed 'abc': expected an integer >= 0": lambda d: d.update(bootstrap_seed="abc"),
        "toy-keyword: prediction #0 is 0.5; this task's actions are true or false":
            lambda d: d["tasks"]["toy-keyword"]["items"]["values"].__setitem__(0, 0.5),
        "prediction #1 is nan": lambda d: d["tasks"]["toy-keyword"]["items"]["values"].__setitem__(1, float("nan")),
        "date 'not-a-date': expected YYYY-MM-DD": lambda d: d.update(date="not-a-date"),
        "brier -5": lambda d: d["tasks"]["toy-keyword"].update(brier=-5),
        # a re-tester's: a binary Brier score or an ECE past 1, a bool, an ISO week date, a task's items as a list
        "brier 1.5; expected a number from 0 to 1": lambda d: d["tasks"]["toy-keyword"].update(brier=1.5),
        "brier True": lambda d: d["tasks"]["toy-keyword"].update(brier=True),
        "ece -3": lambda d: d["tasks"]["toy-keyword"].update(ece=-3),
        "date '2026-W49-3'": lambda d: d.update(date="2026-W49-3"),
        "a field is not what `bench run` writes": lambda d: d["tasks"]["toy-keyword"].update(items=[1]),
        "its test default rule's actions differ": lambda d: d["tasks"]["toy-keyword"]["items"]["default"].append(1),
    }
    for expected, tamper in cases.items():
        document = copy.deepcopy(model)
        tamper(document)
        problems = validate_document(document, reference, BENCH_VERSION)
        assert any(expected in p for p in problems), (expected, problems)


def test_a_row_the_endpoint_mostly_refused_is_kept_off_the_board_and_a_few_refusals_are_not(tmp_path):
    from jevserve.bench.board import build_board
    from jevserve.bench.results import write_result

    results, model, reference = _rows(tmp_path)
    assert model["num_items"] > 0 and model["num_unanswered"] == 0
    refused = {**copy.deepcopy(model), "num_unanswered": round(0.8 * model["num_items"])}
    (problem,) = validate_document(refused, reference, BENCH_VERSION)
    assert "items unanswered (80.0%)" in problem and "over 5%" in problem
    few = {**copy.deepcopy(model), "num_unanswered": 1}  # 1 of 40 items: 2.5%
    assert model["num_items"] == 40 and validate_document(few, reference, BENCH_VERSION) == []
    write_result(results, refused)  # the board shows it, with what the refusals mean for its scores
    row = next(r for r in build_board(results).rows if r.model == "fake-model")
    assert any("items unanswered" in note and "scored as no information" in note for note in row.notes)
    assert row.rank is None and "over 5% of its items unanswered: not ranked" in row.notes  # as validate refuses it


def test_the_command_exits_1_and_prints_each_problem(tmp_path, capsys):
    results, model, _ = _rows(tmp_path)
    bad = copy.deepcopy(model)
    bad["tasks"]["toy-keyword"]["score"] = -5.0
    path = tmp_path / "submission.json"
    path.write_text(json.dumps(bad))
    good = next((results / "fake-model").glob("*.json"))
    assert main(["bench", "validate", str(good), "--results", str(results)]) == 0
    assert main(["bench", "validate", str(path), "--results", str(results)]) == 1
    out = capsys.readouterr().out
    assert "valid" in out and "stored score -5.0" in out


def test_a_valid_row_of_some_tasks_is_told_it_will_not_be_ranked(tmp_path, capsys):
    from jevserve.bench.results import write_result

    results, model, reference = _rows(tmp_path)
    broader = copy.deepcopy(reference)  # a reference of two tasks, the model's row scoring one of them
    broader["tasks"]["toy-copy"] = copy.deepcopy(broader["tasks"]["toy-keyword"])
    broader.get("average", {}).pop("tasks", None)
    write_result(results, broader)
    path = tmp_path / "some.json"
    path.write_text(json.dumps(model))
    assert main(["bench", "validate", str(path), "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "valid" in out and "scores 1 of the 2 headline tasks" in out and "missing: toy-copy" in out


def test_a_result_whose_metadata_is_not_an_object_of_strings_is_left_out_not_a_traceback(tmp_path):
    # a re-tester's `"metadata": [1, 2]` passed `validate` and took `bench board` down after 80 s of work
    import pytest

    from jevserve.bench.results import ResultsFormatError, read_result

    _, model, _ = _rows(tmp_path)
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({**model, "metadata": [1, 2]}))
    with pytest.raises(ResultsFormatError, match="'metadata' is list, not an object of strings"):
        read_result(path)
    path.write_text('{"big": ' + "9" * 5000 + ", " + json.dumps(model)[1:])  # past Python's 4,300 digits
    with pytest.raises(ResultsFormatError, match="not valid JSON"):
        read_result(path)
