import json
import math

import pytest
from benchmarks.harness import (
    ROOT,
    Checkpoint,
    command_line,
    latency_summary,
    time_rounds,
    watch_load,
    write_report,
)


def test_time_rounds_runs_the_warmup_untimed_then_times_each_round():
    calls = []
    timing = time_rounds(lambda: calls.append(1), rounds=3, warmup=2)
    assert len(calls) == 5
    assert len(timing.wall_s) == len(timing.cpu_s) == 3
    assert timing.as_dict()["rounds"] == 3 and timing.min_s <= timing.median_s <= max(timing.wall_s)


def test_time_rounds_refuses_zero_rounds():
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        time_rounds(lambda: None, rounds=0)


def test_latency_summary_in_milliseconds():
    summary = latency_summary([0.001 * i for i in range(1, 101)], percentiles=(50, 90))
    assert summary == {"p50_ms": pytest.approx(50.5), "p90_ms": pytest.approx(90.1), "max_ms": pytest.approx(100.0),
                       "n": 100}
    assert math.isnan(latency_summary([])["p50_ms"]) and latency_summary([])["n"] == 0


def test_watch_load_records_before_and_after():
    with watch_load() as load:
        assert load.after is None
    assert load.after is not None and load.wall_s >= 0
    assert load.note().startswith(f"{load.before.num_cpus} CPUs; 1-minute load average")


def test_command_line_is_relative_to_the_repository():
    script = str(ROOT / "benchmarks" / "sim" / "speed.py")
    shown = command_line([script, "--repeats", "3", "--name", "a b"])
    assert shown == "python benchmarks/sim/speed.py --repeats 3 --name 'a b'"


def test_write_report_writes_json_and_replaces_only_its_section(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("# Doc\n\nHand-written text.\n\n<!-- section:speed -->\nold numbers\n<!-- /section:speed -->\n"
                   "\nMore.\n")
    with watch_load() as load:
        pass
    path = write_report("speed", {"median_s": 1.5, "missing": math.nan}, "| a |\n|---|\n| 1 |", doc=doc, load=load,
                        command="python benchmarks/x.py", results_dir=tmp_path / "results")
    record = json.loads(path.read_text())
    assert record["command"] == "python benchmarks/x.py" and record["result"] == {"median_s": 1.5, "missing": None}
    assert record["load"]["before"]["num_cpus"] >= 1
    text = doc.read_text()
    assert "old numbers" not in text and "Hand-written text." in text and text.endswith("More.\n")
    assert "Command: `python benchmarks/x.py`; " in text and "| 1 |" in text
    write_report("speed", {}, "new", doc=doc, command="c", results_dir=tmp_path / "results")
    assert doc.read_text().count("<!-- section:speed -->") == 1


def test_checkpoint_resumes_finished_cases(tmp_path):
    path = tmp_path / "run.jsonl"
    first = Checkpoint(path, {"rate": 1.4})
    first.add("a", {"goodput": 1.0})
    first.add("b", {"goodput": math.inf})
    again = Checkpoint(path, {"rate": 1.4})
    assert again.done("a") and again.done("b") and not again.done("c")
    assert again.records() == {"a": {"goodput": 1.0}, "b": {"goodput": None}}


def test_checkpoint_drops_a_half_written_line_and_keeps_appending(tmp_path):
    path = tmp_path / "run.jsonl"
    Checkpoint(path, {}).add("a", {"x": 1})
    with path.open("a") as fh:
        fh.write('{"key": "b", "rec')  # killed while writing case b
    resumed = Checkpoint(path, {})
    assert resumed.records() == {"a": {"x": 1}}
    resumed.add("b", {"x": 2})
    assert Checkpoint(path, {}).records() == {"a": {"x": 1}, "b": {"x": 2}}


def test_checkpoint_refuses_other_settings_unless_fresh(tmp_path):
    path = tmp_path / "run.jsonl"
    Checkpoint(path, {"rate": 1.4}).add("a", {})
    with pytest.raises(ValueError, match="other settings"):
        Checkpoint(path, {"rate": 2.0})
    assert Checkpoint(path, {"rate": 2.0}, fresh=True).records() == {}
