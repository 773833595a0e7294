"""The leaderboard: rows from results files, paired ranks, a self-contained HTML page and a markdown table."""

from __future__ import annotations

import json
import re

from jevserve.bench.answers_cache import AnswersCache
from jevserve.bench.board import build_board
from jevserve.bench.board_html import render_html, write_board
from jevserve.bench.board_markdown import render_markdown
from jevserve.bench.pipeline import ask, load_tasks, score_baselines, score_model
from jevserve.bench.results import write_result
from tests.bench.builders import FakeClient, KeywordTask


def make_results(tmp_path):
    """A results folder with a model row, the baseline rows and an unrelated folder the board must ignore."""
    results = tmp_path / "results"
    loaded, _ = load_tasks([KeywordTask()], data=None)
    cache = AnswersCache(tmp_path / "answers", "fake-model")
    ask(FakeClient(), "fake-model", loaded, cache, concurrency=2, progress=False)
    write_result(results, score_model("fake-model", loaded, None, cache, command="jevserve bench run --endpoint x",
                                      wall_s=1.5, num_decisions=40, num_resamples=200))
    for document in score_baselines(loaded, None, command="jevserve bench run --baselines", num_resamples=200):
        write_result(results, document)
    (results / "cache").mkdir()
    (results / "cache" / "calibration-1.json").write_text(json.dumps({"step_scale": 1.0}))
    return results


def test_the_board_ranks_rows_on_paired_resamples(tmp_path):
    board = build_board(make_results(tmp_path))
    names = [r.model for r in board.rows]
    assert set(names[:2]) == {"fake-model", "tfidf-lr"}  # both reach the oracle on the toy task: tied first
    model = next(r for r in board.rows if r.model == "fake-model")
    assert (model.rank["rank"], model.rank["low"], model.rank["high"], model.rank["first_share"]) == (1, 1, 1, 1.0)
    assert model.tasks["toy-keyword"].score == 100.0
    assert names[2] == "default-rules" and board.rows[2].rank["rank"] == 3
    assert board.ranking_tasks == ("toy-keyword",)
    assert board.num_resamples == 200


def test_rows_that_miss_ranking_tasks_are_shown_but_not_ranked(tmp_path):
    board = build_board(make_results(tmp_path))
    style = next(r for r in board.rows if r.model == "source-style")
    assert style.rank is None and style.probe and "never ranked" in style.notes[0]


def test_a_row_scored_on_some_headline_tasks_gets_a_paired_difference_on_those_tasks(tmp_path):
    # a user scoring their own model on a few tasks got two intervals to eyeball, no paired answer
    class OtherTask(KeywordTask):
        name = "toy-keyword-2"

    results = tmp_path / "results"
    both, _ = load_tasks([KeywordTask(), OtherTask()], data=None)
    cache = AnswersCache(tmp_path / "answers", "fake-model")
    ask(FakeClient(), "fake-model", both, cache, concurrency=2, progress=False)
    for document in score_baselines(both, None, command="jevserve bench run --baselines", num_resamples=200):
        write_result(results, document)
    one = [t for t in both if t.task.name == "toy-keyword"]
    write_result(results, score_model("my-rule", one, None, cache, command="jevserve bench run --tasks toy-keyword",
                                      wall_s=1.0, num_decisions=20, num_resamples=200))
    board = build_board(results)
    row = next(r for r in board.rows if r.model == "my-rule")
    assert row.rank is None
    covered, delta = board.partial_deltas["my-rule"]
    assert covered == ("toy-keyword",) and delta.b == "tfidf-lr" == board.comparison_row
    assert delta.delta == board.task_deltas["my-rule"]["toy-keyword"].delta  # one task: its own Δ
    assert "tfidf-lr" not in board.partial_deltas and "default-rules" not in board.partial_deltas  # ranked rows
    text = render_markdown(board)
    assert "## Rows on some headline tasks, against tfidf-lr on the same tasks" in text
    number = r"[+-]\d+\.\d"
    assert re.search(rf"\| my-rule \| 1 of 2 \| {number} \[{number}, {number}\] \| \d\.\d\d \| toy-keyword ", text)


def test_the_html_page_is_self_contained_with_its_sections(tmp_path):
    page = render_html(build_board(make_results(tmp_path)))
    assert "fake-model" in page and "jevserve bench run --baselines" in page
    for section in ('id="headline"', 'id="category-guard"', 'id="reference"', 'id="rows"'):
        assert section in page, section
    assert not re.search(r"(src|href)=\"https?://", page)


def test_the_markdown_table_lists_each_row_with_its_command(tmp_path):
    text = render_markdown(build_board(make_results(tmp_path)))
    assert "| 1 | fake-model | 100.0" in text
    assert text.index("## Leak probes") < text.index("| source-majority |")
    assert "- fake-model: `jevserve bench run --endpoint x`" in text


def test_write_board_writes_both_files(tmp_path):
    written = write_board(make_results(tmp_path), tmp_path / "board", tmp_path / "board.md")
    assert [p.name for p in written] == ["index.html", "board.md", "board.json", "headline.png", "headline.svg",
                                         "task-deltas.png", "task-deltas.svg"]
    assert all(p.stat().st_size > 0 for p in written)
    again = write_board(tmp_path / "results", tmp_path / "again", tmp_path / "again.md")
    for first, second in zip(written, again, strict=True):  # an unchanged board leaves a checkout unchanged
        if first.suffix == ".svg":
            assert first.read_bytes() == second.read_bytes(), first.name


def test_a_snapshot_gives_back_the_same_page_and_is_used_only_for_its_own_results(tmp_path):
    from jevserve.bench.board_snapshot import cached_board, read_snapshot, results_key, write_snapshot

    results = make_results(tmp_path)
    board = build_board(results)
    key = results_key(results)
    path = write_snapshot(board, key, tmp_path / "board.json")
    again = read_snapshot(path, key)
    assert render_html(again) == render_html(board) and render_markdown(again) == render_markdown(board)
    assert read_snapshot(path, "another-key") is None
    assert cached_board(results, [path], None) is not board  # read from the file, not recomputed
    (results / "fake-model" / "2099-01-01.json").write_text((results / "fake-model").glob("*.json").__next__()
                                                            .read_text())
    assert results_key(results) != key


def test_an_older_row_is_shown_only_where_its_items_are_current_and_says_so(tmp_path):
    import json

    results = make_results(tmp_path)
    path = next((results / "fake-model").glob("*.json"))
    document = json.loads(path.read_text())
    document["bench_version"] = "0.3"
    document["tasks"]["toy-keyword"]["items"]["ids"][0] = "an-item-of-another-data-version"
    path.write_text(json.dumps(document))
    board = build_board(results)
    row = next(r for r in board.rows if r.model == "fake-model")
    assert "toy-keyword" not in row.cells and row.rank is None
    assert any("bench 0.3 results" in n for n in row.notes)
    assert any("fake-model: task toy-keyword was scored on other test items" in w for w in board.warnings)


def test_a_board_without_the_default_rules_row_says_whose_tasks_make_its_headline(tmp_path):
    # a tester's: built from one model's run alone, the board ranked a one-task run with no word about it
    import shutil

    results = make_results(tmp_path)
    assert not any("no default-rules row" in w for w in build_board(results).warnings)
    shutil.rmtree(results / "default-rules")
    warnings = build_board(results).warnings
    assert any("no default-rules row under" in w and "bench run --baselines" in w for w in warnings), warnings


def test_a_row_of_another_data_version_gets_one_warning_naming_its_left_out_tasks():
    from types import SimpleNamespace

    from jevserve.bench.board import _row_values

    stored = {name: SimpleNamespace(ids=("a", "b")) for name in ("task-one", "task-two", "task-three")}
    document = {"model": "old-model", "tasks": {
        "task-one": {"items": {"ids": ["a", "b"], "values": [1.0, 0.0]}},
        "task-two": {"items": {"ids": ["a", "c"], "values": [1.0, 0.0]}},
        "task-three": {"items": {"ids": ["c", "d"], "values": [1.0, 0.0]}},
    }}  # fmt: skip
    warnings: list[str] = []
    values = _row_values(document, stored, warnings)
    assert set(values) == {"task-one"}
    assert warnings == ["old-model: 2 tasks were scored on other test items than the reference row (another data "
                        "version); their cells are left out: task-two, task-three"]  # fmt: skip


def test_the_markdown_names_the_html_board_where_it_was_written(tmp_path):
    from jevserve.bench.board_html import write_board

    results = make_results(tmp_path)
    write_board(results, tmp_path / "site" / "board", tmp_path / "site" / "board.md")
    assert "The HTML board (board/index.html)" in (tmp_path / "site" / "board.md").read_text()


def test_a_command_reads_back_from_the_markdown_as_it_was_recorded(tmp_path):
    # a backtick in a metadata value ended the code span early, and tabs and newlines in one became spaces
    from dataclasses import replace

    from markdown_it import MarkdownIt

    board = build_board(make_results(tmp_path))
    commands = ["jevserve bench run --endpoint x '--metadata=note=a `b` c'", "jevserve bench run '--metadata=n=`x`'",
                "jevserve bench run '--metadata=note=one\ttwo\nthree ```'"]
    for command in commands:
        rows = (replace(board.rows[0], command=command), *board.rows[1:])
        tokens = MarkdownIt("commonmark").parse(render_markdown(replace(board, rows=rows)))
        code = [t for t in tokens if t.type == "fence"] + [
            c for t in tokens if t.type == "inline" for c in t.children or () if c.type == "code_inline"]
        assert command in [c.content.removesuffix("\n") for c in code]


def test_the_rows_table_shows_what_a_row_says_of_itself_beyond_the_four_columns():
    """An outside submitter's `--metadata source=https://...` was kept in the results file and shown nowhere."""
    import dataclasses

    from jevserve.bench.board_html import rows_table
    from tests.bench.test_board_browser import _wide_board

    row = _wide_board(2).rows[0]
    row = dataclasses.replace(row, metadata={**row.metadata, "source": "https://example.org/<my-model>"})
    html = rows_table([row])
    assert "<th class='txt'>speed (self-measured)</th>" in html and ">latency<" not in html
    assert "source: https://example.org/&lt;my-model&gt;</span>" in html  # escaped
    assert html.count("class='note'") == 1  # the four columns' keys are not repeated
    long = dataclasses.replace(row, metadata={"source": "x" * 807})  # an outside re-tester's made the page 6,350 px
    assert "x" * 800 not in rows_table([long]) and "overflow-wrap:anywhere" in rows_table([long])


def test_the_board_command_prints_what_it_left_out_and_checks_into_before_its_work(tmp_path, capsys):
    # an outside tester's corrupt file and misplaced row were named only at the foot of the pages it wrote, and a
    # bad --into failed after a minute of work and every page written
    from jevserve.cli import main

    results = make_results(tmp_path)
    (results / "corrupt").mkdir()
    (results / "corrupt" / "2026-12-07.json").write_text("{not json")
    out = tmp_path / "out"
    assert main(["bench", "board", "--results", str(results), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "note: " in err and "corrupt/2026-12-07.json is not valid JSON" in err
    plain = tmp_path / "plain.md"
    plain.write_text("no generated blocks here\n")
    again = tmp_path / "again"
    assert main(["bench", "board", "--results", str(results), "--out", str(again), "--into", str(plain)]) == 1
    err = capsys.readouterr().err
    assert f"error: --into {plain}: no block between" in err
    assert not again.exists()  # refused before any page was written
    # the blocks' markers in the wrong order, and a file that is not UTF-8: refused first too (a re-tester's)
    from jevserve.bench import board_markdown as md

    plain.write_text(f"{md.GLANCE_END}\n{md.GLANCE_BEGIN}\n{md.TASKS_BEGIN}\n{md.TASKS_END}\n")
    assert main(["bench", "board", "--results", str(results), "--out", str(again), "--into", str(plain)]) == 1
    assert "no block between" in capsys.readouterr().err and not again.exists()
    plain.write_bytes(b"caf\xe9\n")
    assert main(["bench", "board", "--results", str(results), "--out", str(again), "--into", str(plain)]) == 1
    assert "not UTF-8 text" in capsys.readouterr().err and not again.exists()
