"""Every figure of the README's results table equals the committed result it cites, rounded as shown."""

from __future__ import annotations

from pathlib import Path

from tests.docs.results_table import MAX_ROWS, check_row, results_rows

ROOT = Path(__file__).resolve().parents[2]


def _rows():
    return results_rows((ROOT / "README.md").read_text(encoding="utf-8"))


def test_the_readme_has_a_short_results_table():
    assert 1 <= len(_rows()) <= MAX_ROWS


def test_every_readme_figure_matches_the_result_it_cites():
    problems = [problem for row in _rows() for problem in check_row(row, ROOT)]
    assert not problems, "\n".join(problems)


def test_every_row_names_the_command_that_regenerates_it_and_a_doc():
    for row in _rows():
        command, more = row.cells[2], row.cells[3]
        assert command.startswith("`") and ("jevserve" in command or "benchmarks/" in command), row
        assert "](docs/" in more, row
