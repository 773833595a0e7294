"""The cache's threshold set by a rate, not by hand: what the served tuned reader and a better-ranking head serve.

Every cache candidate measured after the served pair head ranks pairs better and serves more different-answer pairs at
the gateway's hand-set 0.75 (docs/training.md, "The two texts' cosine as pair terms"). This study sets each model's
threshold as the gateway sets the guard's: the lowest that serves at most `--rate` (0 by default, the goal's) of the
calibration pairs' different-answer pairs in each kind, the calibration pairs being the different-answer pairs of the
first three blind-written sets (never fitted on; `cache_heads.py`'s BLIND, BLIND2, BLIND3); then it reads the pairs of
the other blind sets at that threshold (held out from the calibration), and at 0.75 for reference. Pairs near a
train state are dropped, as everywhere.

Writes benchmarks/results/cache_rate_point.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/cache_rate_point.py [--model tuned:PATH ...] [--rate 0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cache_heads import BLIND, BLIND2, BLIND3, BLIND4, BLIND5, BLIND6, blind_units
from reader_goals import CACHE_THRESHOLD, answerer, load_model, pct
from tool_gate_head import recipe_rows

from _serverbench import TRAINING_DOC, machine, publish
from jevserve.bench.data import BenchData
from jevserve.decide.embedder import embed_texts
from jevserve.gateway.operating_points import threshold_for_rate
from jevserve.train.goals import rate_at, scores_of

CALIBRATION = (BLIND, BLIND2, BLIND3)
# the last cache candidate, as the run that judged it on the sixth blind set wrote it
CANDIDATE = ".cache/pblock6/minilm-tuned.npz"
WRITES_CANDIDATE = ("python benchmarks/decide/cache_heads.py --analyzer pair+order+same+block+cos:differ --blind "
                    f"benchmarks/decide/cache_pairs_blind6.jsonl --write {CANDIDATE}")
HELD_OUT = (BLIND4, BLIND5, BLIND6)


def measure(models: list[str], rate: float) -> dict:
    fit_rows, _ = recipe_rows(BenchData(embed=embed_texts))
    calibration = [u for path in CALIBRATION for u in blind_units(fit_rows, path)[0]]
    held = [u for path in HELD_OUT for u in blind_units(fit_rows, path)[0]]
    rows = []
    for spec in models:
        backend = load_model(spec)
        try:
            answer = answerer(backend)
            cal, out = np.asarray(scores_of(calibration, answer)), np.asarray(scores_of(held, answer))
            name = backend.card.name
        finally:
            backend.close()
        differ = np.array([not u.label for u in calibration])
        threshold = threshold_for_rate(cal[differ], np.array([u.group for u in calibration])[differ], rate)
        labels = np.array([u.label for u in held])
        row = {"model": name, "spec": spec, "threshold": threshold}
        for key, t in (("rate", threshold), ("hand", CACHE_THRESHOLD)):
            row[key] = {
                "calibration different-answer served": rate_at(cal[differ], t).to_dict(),
                "different-answer served": rate_at(out[~labels], t).to_dict(),
                "same-answer served": rate_at(out[labels], t).to_dict(),
            }
        rows.append(row)
    return {"machine": machine(), "rate": rate, "calibration pairs": len(calibration),
            "calibration different-answer": int(sum(not u.label for u in calibration)), "held-out pairs": len(held),
            "held-out same-answer": int(sum(u.label for u in held)), "rows": rows}  # fmt: skip


def markdown(result: dict) -> str:
    lines = [
        "### The cache's threshold set by a rate (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. Threshold: the lowest serving at most "
        f"{100 * result['rate']:.0f}% of each kind of the {result['calibration different-answer']} different-answer "
        f"pairs among the first three blind-written sets' {result['calibration pairs']}; read on the other three "
        f"sets' {result['held-out pairs']} pairs ({result['held-out same-answer']} one answer serves), and at the "
        f"hand-set {CACHE_THRESHOLD:.2f} for reference.",
        "",
        "| model | threshold set by the rate | held-out different-answer served | held-out same-answer served | "
        f"at {CACHE_THRESHOLD:.2f}: different-answer | at {CACHE_THRESHOLD:.2f}: same-answer |",
        "|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        r, h = row["rate"], row["hand"]
        lines.append(f"| {row['model']} (`{row['spec']}`) | {row['threshold']:.3f} | "
                     f"{pct(r['different-answer served'])} | {pct(r['same-answer served'])} | "
                     f"{pct(h['different-answer served'])} | "
                     f"{pct(h['same-answer served'])} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="model specs (default: tuned and the moved-block candidate "
                        f"at {CANDIDATE}, which `{WRITES_CANDIDATE}` writes)")  # fmt: skip
    parser.add_argument("--rate", type=float, default=0.0, help="share of calibration pairs served (default 0)")
    args = parser.parse_args()
    models = args.model or ["tuned", f"tuned:{CANDIDATE}"]
    if args.model is None and not Path(CANDIDATE).exists():
        raise SystemExit(f"no candidate at {CANDIDATE}: write it first with `{WRITES_CANDIDATE}`")
    result = measure(models, args.rate)
    result["command"] = "python benchmarks/decide/cache_rate_point.py" + "".join(
        f" --model {m}" for m in args.model or []) + (f" --rate {args.rate}" if args.rate else "")  # fmt: skip
    publish("cache_rate_point", result, markdown(result), path=TRAINING_DOC)


if __name__ == "__main__":
    main()
