from pathlib import Path

from jevserve.lab.queue_order.report import (
    GENERATED_END,
    GENERATED_START,
    generated_section,
    markers,
    plot,
    write_doc,
)
from tests.lab.queue_order.test_tables import make_agg


def make_result(name: str, knob: str = "output_scale", calibration_target: float | None = 1.13,
                seeds: tuple[int, ...] = (0, 1)) -> dict:
    meta = {"scenario": name, "title": f"{name} title", "profile": "p", "engine": "max_num_seqs=1024",
            "knob": knob, "knob_title": "reply-length multiplier", "knob_value": 19.5, "knob_note": "calibrated",
            "calibration_reused": False, "calibration_wall_s": 10.0, "sweep_wall_s": 20.0, "num_cells": 160,
            "num_reused": 0, "predictions": {"kind": "file", "path": "p.jsonl"}, "mean_prompt_tokens": 89.0,
            "output_tokens": {"mean": 5900.0, "p50": 5000.0, "p90": 11000.0, "p99": 15000.0, "max": 24000.0},
            "num_capped": 0, "max_model_len": 40960, "rates": [1.30, 1.42, 1.54], "seeds": list(seeds),
            "calibration_target": calibration_target}
    return {"meta": meta, "policies": make_agg()}


def test_generated_section_puts_the_default_scenario_first_and_links_its_plots(tmp_path):
    results = {"thinking": make_result("thinking"), "two-seqs": make_result("two-seqs", "step_scale")}
    images = {n: [tmp_path / "img" / f"queue-order-{n}-attainment.png", tmp_path / "img" / f"queue-order-{n}-ttft.png"]
              for n in results}
    common = {"command": "jevserve sim queue-order", "num_requests": 2000, "slo": "ttft_ms <= 1000",
              "decision_delay_ms": 92.0, "aging_s": 10.0, "wall_s": 30.0, "jobs": 2}
    text = generated_section(results, common, images, tmp_path / "q.md")
    assert text.startswith(GENERATED_START) and text.endswith(GENERATED_END)
    assert "SLO: ttft_ms <= 1000" in text
    assert text.index("## Scenario `thinking` (the default)") < text.index("## Scenario `two-seqs`:")
    assert "![SLO attainment vs rate, thinking](img/queue-order-thinking-attainment.png)" in text


COMMON = {"command": "jevserve sim queue-order", "num_requests": 2000, "slo": "ttft_ms <= 1000",
          "decision_delay_ms": 92.0, "aging_s": 10.0, "wall_s": 30.0, "jobs": 2}
FCFS_GOODPUT_ROW = "| goodput (req/s) | FCFS | 1.13 | "


def _images(tmp_path, *names: str) -> dict:
    return {n: [tmp_path / f"{n}-a.png", tmp_path / f"{n}-t.png"] for n in names}


def _row(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(start))


def test_the_published_goodput_is_fitted_only_where_the_knob_was_calibrated_to_it(tmp_path):
    images = _images(tmp_path, "two-seqs", "thinking")
    calibrated = {"two-seqs": make_result("two-seqs", "step_scale"), "thinking": make_result("thinking")}
    text = generated_section(calibrated, COMMON, images, tmp_path / "q.md")
    assert _row(text, FCFS_GOODPUT_ROW).startswith(FCFS_GOODPUT_ROW + "**fitted** (calibration target) |")
    fixed = {"two-seqs": make_result("two-seqs", "step_scale", calibration_target=None)}  # --step-scale given
    text = generated_section(fixed, COMMON, images, tmp_path / "q.md")
    # the table cannot tell whether the value given was calibrated on these runs: it says what that depends on
    assert _row(text, FCFS_GOODPUT_ROW).startswith(FCFS_GOODPUT_ROW + "knob fixed by hand: fitted where these runs")
    mixed = {"two-seqs": make_result("two-seqs", "step_scale", calibration_target=1.0),  # another target
             "thinking": make_result("thinking")}
    text = generated_section(mixed, COMMON, images, tmp_path / "q.md")
    assert "| **fitted** in `thinking`; prediction in `two-seqs` |" in _row(text, FCFS_GOODPUT_ROW)


def test_one_seed_is_said_to_give_no_interval(tmp_path):
    one = generated_section({"thinking": make_result("thinking", seeds=(0,))}, COMMON, _images(tmp_path, "thinking"),
                            tmp_path / "q.md")
    assert "with one seed there is no interval" in one and "nan" not in one
    two = generated_section({"thinking": make_result("thinking")}, COMMON, _images(tmp_path, "thinking"),
                            tmp_path / "q.md")
    assert "with 2 seeds the interval is mean ± 12.7 standard errors, wide" in two


def test_plot_writes_both_figures(tmp_path):
    paths = plot(make_agg(), tmp_path, stem="queue-order-x")
    assert [p.name for p in paths] == ["queue-order-x-attainment.png", "queue-order-x-ttft.png"]
    assert all(Path(p).stat().st_size > 1000 for p in paths)


def test_write_doc_replaces_only_the_generated_section(tmp_path):
    doc = tmp_path / "q.md"
    doc.write_text(f"# Title\n\nhand-written intro\n\n{GENERATED_START}\nold\n{GENERATED_END}\n\nhand-written end\n")
    write_doc(doc, f"{GENERATED_START}\nnew\n{GENERATED_END}")
    text = doc.read_text()
    assert "hand-written intro" in text and "hand-written end" in text and "new" in text and "old" not in text


def test_a_variant_has_its_own_block_with_headings_one_level_down(tmp_path):
    results = {"two-seqs": make_result("two-seqs", "step_scale")}
    images = {"two-seqs": [tmp_path / "img" / "a.png", tmp_path / "img" / "t.png"]}
    common = {"command": "jevserve sim queue-order --section long", "num_requests": 2000, "slo": "ttft_ms <= 1000",
              "decision_delay_ms": 92.0, "aging_s": 10.0, "wall_s": 30.0, "jobs": 2}
    start, end = markers("long")
    text = generated_section(results, common, images, tmp_path / "q.md", section="long")
    assert text.startswith(start) and text.endswith(end) and start != GENERATED_START
    assert "\n### Setup\n" in text and "\n### Scenario `two-seqs` (the default)" in text
    doc = tmp_path / "q.md"
    doc.write_text(f"# Q\n\n{GENERATED_START}\nmain\n{GENERATED_END}\n\n## Variant\n\n{start}\nold\n{end}\n")
    write_doc(doc, text, section="long")
    written = doc.read_text()
    assert f"{GENERATED_START}\nmain\n{GENERATED_END}" in written and "old" not in written and "### Setup" in written
