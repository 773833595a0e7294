"""The README-results check itself, on a README and results written here."""

import json

from tests.docs.results_table import check_row, resolve, results_rows

GATEWAY_SOURCE = "<!-- from r/g.json: /all/rate*100, /all/count, /all/n -->"
BOARD_SOURCE = "<!-- from r/b.json: /rows/0/score, /rows/0/low, /rows/0/high -->"
README = f"""# jevserve

## Results

| what | result | command | more |
|---|---|---|---|
| guard, everyday refused | 0.2 % (4 of 1,708) | `python benchmarks/x.py` | [gateway](docs/g.md) {GATEWAY_SOURCE} |
| headline | 12.7 [−37.1, 24.8] | `jevserve bench board` | [board](docs/b.md) {BOARD_SOURCE} |
| no source | 3.5 ms | `x` | y |

## Next
"""


def _files(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "g.json").write_text(json.dumps({"all": {"rate": 4 / 1708, "count": 4, "n": 1708}}))
    (tmp_path / "r" / "b.json").write_text(json.dumps({"rows": [{"score": 12.71, "low": -37.06, "high": 24.8}]}))


def test_rows_are_read_with_their_sources():
    rows = results_rows(README)
    assert [r.cells[0] for r in rows] == ["guard, everyday refused", "headline", "no source"]
    assert rows[0].source_file == "r/g.json" and rows[0].pointers == ("/all/rate*100", "/all/count", "/all/n")
    assert rows[0].figures == ["0.2", "4", "1,708"] and rows[1].figures == ["12.7", "−37.1", "24.8"]
    assert rows[0].cells[-1] == "[gateway](docs/g.md)"  # the comment is not part of the cell


def test_figures_that_match_their_sources_pass(tmp_path):
    _files(tmp_path)
    rows = results_rows(README)
    assert check_row(rows[0], tmp_path) == [] and check_row(rows[1], tmp_path) == []


def test_a_figure_its_source_does_not_give_fails(tmp_path):
    _files(tmp_path)
    (tmp_path / "r" / "b.json").write_text(json.dumps({"rows": [{"score": 12.76, "low": -37.06, "high": 24.8}]}))
    assert check_row(results_rows(README)[1], tmp_path) == [
        "README.md:8: shows 12.7, but r/b.json /rows/0/score is 12.760"
    ]


def test_a_row_without_a_source_or_with_a_missing_key_fails(tmp_path):
    _files(tmp_path)
    rows = results_rows(README)
    assert "names no source" in check_row(rows[2], tmp_path)[0]
    (tmp_path / "r" / "g.json").write_text(json.dumps({"all": {"rate": 0.002, "n": 1708}}))
    assert "has no number at /all/count" in check_row(rows[0], tmp_path)[0]
    (tmp_path / "r" / "g.json").unlink()
    assert check_row(rows[0], tmp_path) == ["README.md:7: r/g.json does not exist"]


def test_json_pointer_escapes():
    assert resolve({"a/b": {"~c": [1, 2]}}, "/a~1b/~0c/1") == 2
