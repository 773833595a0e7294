"""How much of what clients send the guard reads: the characters of each request's untrusted texts that neither the
bounded text nor any of its windows holds, at the default windows and at more of them.

A text longer than its windows reach (about `max_windows` × `window_chars`, with the bounded text's first 1,200 and
last ~800 characters) has a middle that no guard question reads, so padding both sides of an injection moves it past
the guard. `guard: {unread_text: act}` takes the guard's action on such a request without asking; this counts the
requests it would act on, on the packaged everyday requests (the calibration side the thresholds are set on, and
the bench's everyday test side), per shape, for `max_windows` 8 (the default), 16, 32 and 64 (the most the config
takes). No model runs: it reads `decision_inputs`, as the gateway does.

Writes benchmarks/results/unread_text.json and a section of docs/gateway.md.
Run: .venv/bin/python benchmarks/gateway/unread_text.py
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: benchmarks.harness
from benchmarks.harness import write_report

from jevserve.bench.sources.everyday import load_everyday
from jevserve.gateway.calibration import load_calibration
from jevserve.gateway.config import default_config
from jevserve.serving.decision_inputs import DEFAULT_LIMITS, decision_inputs

DOC = Path(__file__).resolve().parents[2] / "docs" / "gateway.md"
MAX_WINDOWS = (8, 16, 32, 64)


def unread_by_shape(requests, max_windows: int) -> dict[str, dict[str, int]]:
    """Per shape (and "all"): requests, and those with any unread character in a text the guard judges."""
    limits = replace(DEFAULT_LIMITS, max_windows=max_windows)
    counts: dict[str, Counter] = {}
    for request in requests:
        unread = sum(decision_inputs(request.body, limits=limits).guard_unread)
        for shape in (request.shape, "all"):
            counts.setdefault(shape, Counter())["requests"] += 1
            counts[shape]["unread"] += unread > 0
    return {shape: dict(c) for shape, c in sorted(counts.items())}


def markdown(result: dict) -> str:
    lines = [
        "Requests with a text the guard reads only in part (its middle past what "
        f"{DEFAULT_LIMITS.window_chars}-character windows reach), which `unread_text: act` acts on, by `max_windows`:",
        "",
        "| side | shape | requests | " + " | ".join(f"max_windows {n}" for n in MAX_WINDOWS) + " |",
        "|---|---|---|" + "---|" * len(MAX_WINDOWS),
    ]
    for side, by_windows in result["sides"].items():
        first = by_windows[str(MAX_WINDOWS[0])]
        for shape in first:
            cells = []
            for n in MAX_WINDOWS:
                row = by_windows[str(n)][shape]
                cells.append(f"{100 * row['unread'] / row['requests']:.1f} % ({row['unread']})")
            lines.append(f"| {side} | {shape} | {first[shape]['requests']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    config = default_config()
    sides = {
        "calibration (train)": load_calibration(config.calibration).requests,
        "everyday test": load_everyday("test"),
    }
    result = {"sides": {side: {str(n): unread_by_shape(requests, n) for n in MAX_WINDOWS}
                        for side, requests in sides.items()}}
    table = markdown(result)
    print(table)
    write_report("unread_text", result, table, doc=DOC)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
