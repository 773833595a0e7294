"""Result files: a quick run of a few tasks never replaces, on disk or on the board, a row's broader run."""

from __future__ import annotations

from jevserve.bench.results import latest_results, read_result, write_result


def _document(date: str, tasks: list[str], model: str = "m") -> dict:
    return {"model": model, "date": date, "command": "jevserve bench run", "tasks": {t: {"score": 1.0} for t in tasks}}


def test_a_same_day_run_of_fewer_tasks_goes_beside_the_broader_one(tmp_path):
    full = write_result(tmp_path, _document("2026-12-05", ["a", "b", "c"]))
    partial = write_result(tmp_path, _document("2026-12-05", ["a"]))
    assert full.name == "2026-12-05.json" and partial.name.startswith("2026-12-05.") and partial != full
    assert set(read_result(full)["tasks"]) == {"a", "b", "c"}  # kept
    again = write_result(tmp_path, _document("2026-12-05", ["a", "b", "c", "d"]))  # a broader run replaces it
    assert again == full and set(read_result(full)["tasks"]) == {"a", "b", "c", "d"}


def test_the_board_reads_a_rows_broadest_run_and_names_a_newer_narrower_one(tmp_path):
    write_result(tmp_path, _document("2026-12-04", ["a", "b", "c"]))
    newer = write_result(tmp_path, _document("2026-12-05", ["a"]))
    latest = latest_results(tmp_path)
    (document,) = latest.documents
    assert document["date"] == "2026-12-04" and len(document["tasks"]) == 3
    (note,) = latest.ignored
    assert str(newer) in note and "scores 1 of the 3 tasks" in note


def test_a_row_that_always_scores_the_same_few_tasks_is_read_from_its_newest_run(tmp_path):
    write_result(tmp_path, _document("2026-12-04", ["a"], model="peer"))
    write_result(tmp_path, _document("2026-12-05", ["a"], model="peer"))
    latest = latest_results(tmp_path)
    assert [d["date"] for d in latest.documents] == ["2026-12-05"] and latest.ignored == ()


def test_the_board_says_which_newer_run_it_left_out(tmp_path):
    import copy

    from jevserve.bench.board import build_board
    from jevserve.bench.board_markdown import render_markdown
    from tests.bench.test_board import make_results

    results = make_results(tmp_path)
    (path,) = (results / "fake-model").glob("*.json")
    narrower = copy.deepcopy(read_result(path))
    narrower["tasks"] = {}  # a later run that scored nothing of what the complete one did
    narrower["date"] = "2999-01-01"
    write_result(results, narrower)
    board = build_board(results)
    row = next(r for r in board.rows if r.model == "fake-model")
    assert row.date != "2999-01-01" and row.rank is not None  # the complete run stays on the board, ranked
    assert any("2999-01-01" in w and "left out although newer" in w for w in board.warnings)
    assert "left out although newer" in render_markdown(board)


def test_two_same_day_runs_of_other_tasks_the_board_reads_the_later_and_names_the_other(tmp_path):
    # an outside tester's two 2-task runs of one day: the board showed the earlier and never named the later
    import os

    first = write_result(tmp_path, _document("2026-12-06", ["route", "cache"]))
    write_result(tmp_path, _document("2026-12-06", ["verify", "steps"]))
    os.utime(first, (1_000_000, 1_000_000))  # written first, whatever the file system's clock resolution
    latest = latest_results(tmp_path)
    (document,) = latest.documents
    assert set(document["tasks"]) == {"verify", "steps"}
    (note,) = latest.ignored
    assert str(first) in note and "cache, route" in note and "run those tasks together" in note


def test_a_result_without_its_tasks_is_left_out_of_the_board_and_named(tmp_path):
    # an outside tester's results file had the result kind and version but no `tasks`: the web site said it was
    # serving, and every board, model and task page was a 500 (KeyError), not only its row
    import json

    from jevserve.bench.results import KIND, VERSION

    write_result(tmp_path, _document("2026-12-04", ["a"], model="good"))
    (tmp_path / "cut").mkdir()
    cut = tmp_path / "cut" / "2026-12-05.json"
    cut.write_text(json.dumps({"kind": KIND, "version": VERSION, "model": "cut"}))
    latest = latest_results(tmp_path)
    assert [d["model"] for d in latest.documents] == ["good"]
    (note,) = latest.ignored
    assert str(cut) in note and "'tasks'" in note


def test_a_result_of_another_model_in_a_rows_folder_is_left_out_and_named(tmp_path):
    # an outside tester put tfidf-lr's file into jev-minilm-2/: that row vanished from the board and tfidf-lr
    # was on it twice
    import json
    import shutil

    write_result(tmp_path, _document("2026-12-04", ["a"], model="good"))
    (tmp_path / "other").mkdir()
    shutil.copy(next((tmp_path / "good").glob("*.json")), tmp_path / "other" / "2026-12-05.json")
    latest = latest_results(tmp_path)
    assert [d["model"] for d in latest.documents] == ["good"]
    (note,) = latest.ignored
    assert "is a result of 'good', not of the row its folder is (other)" in note
    assert json.loads((tmp_path / "other" / "2026-12-05.json").read_text())["model"] == "good"


def test_validate_refuses_everyday_numbers_that_do_not_add_up():
    # an outside tester changed a task's everyday false-action rate from 28.1% to 1%: the file was "valid" and the
    # board printed 1.0%
    import copy
    from pathlib import Path

    from jevserve.bench.validate import everyday_problems

    committed = Path(__file__).resolve().parents[2] / "results" / "jev-minilm-2" / "2026-12-02.json"
    everyday = read_result(committed)["tasks"]["guard-injection"]["everyday"]
    assert everyday_problems(everyday) == []
    changed = copy.deepcopy(everyday)
    changed["rate"] = 0.01
    assert any("rate 0.01 is not acted/n" in p for p in everyday_problems(changed))
    fewer = copy.deepcopy(everyday)
    fewer["acted"], fewer["rate"] = 17, 17 / fewer["n"]  # the count changed with its rate, the list not
    found = everyday_problems(fewer)
    assert any("interval" in p for p in found) and any("distinct acted requests" in p for p in found)


def test_validate_counts_the_items_a_file_scored_where_it_does_not_say_how_many():
    # an outside tester set num_unanswered to 10000 in a file written before num_items was kept: "valid"
    from pathlib import Path

    from jevserve.bench.validate import validate_document

    results = Path(__file__).resolve().parents[2] / "results"
    reference = read_result(results / "default-rules" / "2026-12-02.json")
    document = read_result(results / "jev-minilm-2" / "2026-12-02.json")
    assert "num_items" not in document and validate_document(document, reference, "0.4") == []
    # one task of it is enough for the rule, which counts the tasks' train and test items (rescoring every task
    # again took half this test's time)
    name, task = next(iter(document["tasks"].items()))
    items = int(task["n_train"]) + int(task["n_test"])
    one = {**document, "tasks": {name: task}}
    assert not any("over 5%" in p for p in validate_document({**one, "num_unanswered": items // 20}, reference, "0.4"))
    problems = validate_document({**one, "num_unanswered": items // 20 + 1}, reference, "0.4")
    assert any("over 5%" in p for p in problems)


def test_a_result_with_a_key_twice_is_refused(tmp_path):
    # an outside tester's file held a task twice, the altered copy first: the parse kept the other, and it passed
    import pytest

    from jevserve.bench.results import KIND, VERSION, ResultsFormatError

    path = tmp_path / "2026-12-05.json"
    path.write_text(f'{{"kind": "{KIND}", "version": {VERSION}, "model": "m", '
                    '"tasks": {"a": {"score": 99.0}, "a": {"score": 1.0}}}')
    with pytest.raises(ResultsFormatError, match="the key 'a' twice"):
        read_result(path)
