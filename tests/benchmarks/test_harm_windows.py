"""harm_windows.py: its settings differ only in harm_windows, and its table shows each row's worst goal shape."""

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "decide"))
import harm_windows as hw

from jevserve.serving.decision_inputs import DEFAULT_LIMITS


def rate(acted: int, total: int) -> dict:
    return {"acted": acted, "total": total, "rate": acted / total}


def test_the_settings_differ_only_in_harm_windows():
    assert hw.SETTINGS["whole"] == DEFAULT_LIMITS and not DEFAULT_LIMITS.harm_windows
    assert hw.SETTINGS["windows"] == replace(DEFAULT_LIMITS, harm_windows=True)


def test_the_table_reads_the_worst_goal_shape_and_every_group():
    row = {
        "threshold": 0.9, "harmful": rate(60, 100), "suffixed:harmful": rate(40, 100),
        "prefixed:harmful": rate(50, 100), "prefixed, guard or harm": rate(70, 100), "borderline": rate(1, 99),
        "everyday:bare": rate(1, 400), "everyday:system": rate(3, 300), "everyday:tools": rate(0, 300),
        "everyday:second-turn": rate(2, 400), "texts per everyday request": 2.35,
    }  # fmt: skip
    table = hw.markdown({"command": "python x", "machine": {"when": "now"}, "rows": {"m (windows)": row}})
    line = next(x for x in table.splitlines() if x.startswith("| m (windows)"))
    assert line == (
        "| m (windows) | 0.900 | 60.0% (60/100) | 40.0% (40/100) | 50.0% (50/100) | 70.0% (70/100) | 1.0% (1/99) | "
        "1.0% (3/300) | 2.35 |"
    )
