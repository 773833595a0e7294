"""Rescore committed results under the v0.4 scoring and measure how well the headline resolves.

Reads the newest results file of every row (the stored test actions: no model is asked), adds each task's
train-side default share from the data (what decides near-oracle tasks; results files written before v0.4 lack
it), and computes the board on shared draws with several bootstrap seeds. Reports, for the chosen row: its headline
with the 95% interval, the interval's width, and how much the bounds move with the seed; the share of draws on
which default-rules ranks first; the paired headline difference against another row (`--against`, default
tfidf-lr) with its P(Δ > 0) on each seed's draws; and the old (stored) headline beside the new one.

Writes benchmarks/results/bench_rescore.json and prints a markdown table.
Run: python benchmarks/bench/rescore.py [--results results] [--row jev-minilm-2] [--against tfidf-lr] [--seeds 5]
     [--resamples 10000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from jevserve.bench import TASKS, BenchData
from jevserve.bench.board import REFERENCE_ROW, build_board
from jevserve.bench.evaluate import evaluate
from jevserve.bench.pipeline import load_tasks
from jevserve.bench.results import latest_results, write_result
from jevserve.bench.stats import BOOTSTRAP_SEED


def train_shares(data: BenchData) -> dict[str, float | None]:
    """Per task, the share of the chance-to-oracle range the default rule closes on the train side."""
    loaded, _ = load_tasks(list(TASKS.values()), data, log=lambda m: print(m, file=sys.stderr))
    return {e.task.name: evaluate(e.task, e.train, e.test, data).default_train_share for e in loaded}


def with_shares(results: Path, shares: dict[str, float | None], into: Path, rows: set[str] | None) -> Path:
    """A copy of the newest results of each row (all, or `rows` and the reference) with the train shares set."""
    for document in latest_results(results).documents:
        if rows is not None and document["model"] not in rows | {REFERENCE_ROW}:
            continue
        for name, task in document["tasks"].items():
            task.setdefault("default_train_share", shares.get(name))
        write_result(into, document)
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--row", default="jev-minilm-2")
    parser.add_argument("--against", default="tfidf-lr", help="the row the paired difference is taken against")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/bench_rescore.json"))
    args = parser.parse_args()
    from jevserve.decide.embedder import embed_texts_fp32

    shares = train_shares(BenchData(embed=embed_texts_fp32))
    stored = next(d for d in latest_results(args.results).documents if d["model"] == args.row)
    report = {"row": args.row, "resamples": args.resamples, "train_shares": shares,
              "stored_headline": stored["average"], "stored_version": stored.get("bench_version"), "seeds": []}
    with tempfile.TemporaryDirectory() as tmp:
        every = with_shares(args.results, shares, Path(tmp) / "all", None)
        pair = with_shares(args.results, shares, Path(tmp) / "pair", {args.row, args.against})
        for k in range(args.seeds):
            started = time.perf_counter()
            board = build_board(every if k == 0 else pair, num_resamples=args.resamples, seed=BOOTSTRAP_SEED + k)
            row = next(r for r in board.rows if r.model == args.row)
            default = next(r for r in board.rows if r.model == REFERENCE_ROW)
            against = next((d for d in board.pairs if (d.a, d.b) == (args.row, args.against)), None)
            entry = {"seed": BOOTSTRAP_SEED + k, "score": row.average.score, "low": row.average.low,
                     "high": row.average.high, "width": row.average.high - row.average.low,
                     "default_first_share": default.rank["first_share"] if default.rank else None,
                     "near_oracle_tasks": list(board.near_oracle_tasks), "seconds": time.perf_counter() - started}
            if against is not None:
                entry["against"] = {"row": args.against, "delta": against.delta, "low": against.low,
                                    "high": against.high, "p_greater": against.p_greater}
            if k == 0:
                entry["rows"] = {r.model: {"score": r.average.score, "low": r.average.low, "high": r.average.high,
                                           "rank": r.rank} for r in board.rows}
                entry["mdd"] = board.mdd
                entry["mdd_rows"] = list(board.mdd_rows)
            report["seeds"].append(entry)
            print(f"seed {entry['seed']}: {row.average.score:.1f} [{row.average.low:.1f}, {row.average.high:.1f}] "
                  f"width {entry['width']:.1f} ({entry['seconds']:.0f} s)", file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    lows = [s["low"] for s in report["seeds"]]
    highs = [s["high"] for s in report["seeds"]]
    report["bound_spread"] = {"low": max(lows) - min(lows), "high": max(highs) - min(highs)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    old = report["stored_headline"]
    print(f"| {args.row} | v{report['stored_version']} stored: {old['score']:.1f} [{old['interval'][0]:.1f}, "
          f"{old['interval'][1]:.1f}] | v0.4: {report['seeds'][0]['score']:.1f} [{lows[0]:.1f}, {highs[0]:.1f}] "
          f"(width {highs[0] - lows[0]:.1f}) | bounds over {args.seeds} seeds: "
          f"low ±{report['bound_spread']['low'] / 2:.2f}, high ±{report['bound_spread']['high'] / 2:.2f} |")
    p_greater = [s["against"]["p_greater"] for s in report["seeds"] if "against" in s]
    if p_greater:
        print(f"P(Δ > 0) of {args.row} against {args.against} over {len(p_greater)} seeds: "
              f"{min(p_greater):.4f} to {max(p_greater):.4f}")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
