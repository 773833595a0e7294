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


def make_result(name: str, knob: str = "output_scale") -> dict:
    meta = {"scenario": name, "title": f"{name} title", "profile": "p", "engine": "max_num_seqs=1024",
            "knob": knob, "knob_title": "reply-length multiplier", "knob_value": 19.5, "knob_note": "calibrated",
            "calibration_reused": False, "calibration_wall_s": 10.0, "sweep_wall_s": 20.0, "num_cells": 160,
            "num_reused": 0, "predictions": {"kind": "file", "path": "p.jsonl"}, "mean_prompt_tokens": 89.0,
            "output_tokens": {"mean": 5900.0, "p50": 5000.0, "p90": 11000.0, "p99": 15000.0, "max": 24000.0},
            "num_capped": 0, "max_model_len": 40960, "rates": [1.30, 1.42, 1.54], "seeds": [0, 1]}
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
