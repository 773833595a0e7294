"""row_change.py on made-up results: per task before, after and against the reference row, the count of tasks
ahead, the marked tasks' mean change, and an earlier results file read from git."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "bench"))
import row_change as rc


def results(scores: dict[str, float], headline: float, everyday: dict[str, float] | None = None) -> dict:
    everyday = everyday or {}
    tasks = {
        name: {"score": score, **({"everyday": {"rate": everyday[name]}} if name in everyday else {})}
        for name, score in scores.items()
    }
    return {"model": "m", "average": {"score": headline}, "tasks": tasks}


def test_each_task_is_compared_before_after_and_against_the_reference():
    before = results({"a": 10.0, "b": 5.0, "c": 1.0}, 5.3, {"a": 0.1})
    after = results({"a": 12.0, "b": 3.0, "c": 1.0}, 5.7, {"a": 0.05})
    reference = results({"a": 11.0, "b": 4.0, "c": 2.0}, 5.0)
    rows, totals = rc.compare(before, after, reference, {"a", "b"})
    by_task = {r["task"]: r for r in rows}
    assert [r["task"] for r in rows] == ["a", "b", "c"]
    assert by_task["a"]["change"] == 2.0 and by_task["a"]["ahead"] and not by_task["a"]["ahead_before"]
    assert by_task["b"]["ahead_before"] and not by_task["b"]["ahead"]
    assert by_task["a"]["everyday_before"] == "10.00%" and by_task["a"]["everyday_after"] == "5.00%"
    assert by_task["c"]["everyday_after"] == "–"
    assert (totals["ahead_before"], totals["ahead_after"], totals["tasks"]) == (1, 1, 3)
    assert totals["marked_mean_change"] == 0.0  # +2 and −2 over the two marked tasks
    assert (totals["headline_before"], totals["headline_after"]) == (5.3, 5.7)
    assert rc.compare(before, after, reference, set())[1]["marked_mean_change"] is None


def test_an_earlier_results_file_is_read_from_git(tmp_path, monkeypatch):
    git = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "r.json").write_text(json.dumps(results({"a": 1.0}, 1.0)))
    subprocess.run([*git, "-C", str(tmp_path), "add", "r.json"], check=True)
    subprocess.run([*git, "-C", str(tmp_path), "commit", "-qm", "r"], check=True)
    (tmp_path / "r.json").write_text(json.dumps(results({"a": 2.0}, 2.0)))
    monkeypatch.setattr(rc, "ROOT", tmp_path)
    assert rc.read_results("HEAD:r.json")["tasks"]["a"]["score"] == 1.0  # the committed version
    assert rc.read_results("r.json")["tasks"]["a"]["score"] == 2.0  # the work tree's
    with pytest.raises(SystemExit, match="git show"):
        rc.read_results("HEAD:missing.json")
