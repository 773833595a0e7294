"""One bench row before and after a change of the model behind it, task by task, beside a reference row.

Reads two results files of the same row (the earlier one from git, by revision, so the comparison needs no copy of
old results kept around) and the newest results of the reference row (default tfidf-lr), and tabulates per task
the score before and after, the change, the reference's score and which side of it each lands, with the headline
and the everyday false-action rates the results record. No model is asked: every number is read from the results
files the bench wrote (`jevserve bench run`); the paired P(Δ > 0) of the headlines is the board's.

Writes benchmarks/results/row_change_<section>.json and section <section> of docs/training.md.
Run: python benchmarks/bench/row_change.py --before REV:results/ROW/DATE.json --after results/ROW/DATE.json
     [--reference tfidf-lr] [--mark TASK ...] [--section NAME] [--title TEXT]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import ROOT, TRAINING_DOC, publish
from jevserve.bench.results import latest_results

COMMAND = "python benchmarks/bench/row_change.py"


def read_results(where: str) -> dict:
    """A results file from the work tree (`PATH`) or from git (`REV:PATH`)."""
    if ":" in where:
        shown = subprocess.run(["git", "show", where], cwd=ROOT, capture_output=True, text=True)
        if shown.returncode != 0:
            raise SystemExit(f"git show {where} failed: {shown.stderr.strip()}")
        return json.loads(shown.stdout)
    return json.loads((ROOT / where).read_text())


def everyday_rate(task: dict) -> str:
    """The task's everyday false-action rate as the results record it, or a dash."""
    everyday = task.get("everyday")
    return "–" if not everyday else f"{100 * everyday['rate']:.2f}%"


def compare(before: dict, after: dict, reference: dict, marked: set[str]) -> tuple[list[dict], dict]:
    """Rows per task (in the after file's order) and the totals."""
    rows = []
    for name, task in after["tasks"].items():
        old, new, ref = before["tasks"][name]["score"], task["score"], reference["tasks"][name]["score"]
        rows.append({"task": name, "marked": name in marked, "before": old, "after": new, "change": new - old,
                     "reference": ref, "ahead": new > ref, "ahead_before": old > ref,
                     "everyday_before": everyday_rate(before["tasks"][name]), "everyday_after": everyday_rate(task)})
    changed = [r["change"] for r in rows if r["marked"]]
    totals = {
        "headline_before": before["average"]["score"], "headline_after": after["average"]["score"],
        "ahead_before": sum(r["ahead_before"] for r in rows), "ahead_after": sum(r["ahead"] for r in rows),
        "tasks": len(rows), "marked_mean_change": sum(changed) / len(changed) if changed else None,
    }  # fmt: skip
    return rows, totals


def markdown(rows: list[dict], totals: dict, args: argparse.Namespace, reference_name: str) -> str:
    lines = [
        f"### {args.title} (generated)", "",
        f"`{COMMAND} {shlex.join(sys.argv[1:])}`. Scores per task (0 = the default "
        f"rule, 100 = the oracle) before and after, against {reference_name}; marked (*): the tasks the change is "
        "about. Everyday: the share of everyday test requests the task's decision acts on.", "",
        f"| task | before | after | change | {reference_name} | ahead of it (before → after) "
        "| everyday before → after |",
        "|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for r in rows:
        side = f"{'yes' if r['ahead_before'] else 'no'} → {'yes' if r['ahead'] else 'no'}"
        lines.append(f"| {r['task']}{' *' if r['marked'] else ''} | {r['before']:.1f} | {r['after']:.1f} | "
                     f"{r['change']:+.1f} | {r['reference']:.1f} | {side} | "
                     f"{r['everyday_before']} → {r['everyday_after']} |")
    mean = totals["marked_mean_change"]
    lines += ["", f"Headline {totals['headline_before']:.2f} → {totals['headline_after']:.2f}; ahead of "
              f"{reference_name} on {totals['ahead_before']} → {totals['ahead_after']} of {totals['tasks']} tasks"
              + (f"; mean change over the marked tasks {mean:+.2f}." if mean is not None else ".")]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the earlier results file: PATH or REV:PATH (from git)")
    parser.add_argument("--after", required=True, help="the later results file: PATH or REV:PATH")
    parser.add_argument("--reference", default="tfidf-lr", help="the row compared against (its newest results)")
    parser.add_argument("--mark", action="append", default=[], help="a task the change is about (repeatable)")
    parser.add_argument("--section", default="row_change", help="the docs/training.md section to write")
    parser.add_argument("--title", default="One row before and after a change", help="the section's title")
    args = parser.parse_args()
    before, after = read_results(args.before), read_results(args.after)
    if before["model"] != after["model"]:
        raise SystemExit(f"two rows: {before['model']} and {after['model']}; compare one row with itself")
    reference = next((d for d in latest_results(ROOT / "results").documents if d["model"] == args.reference), None)
    if reference is None:
        raise SystemExit(f"no results of {args.reference} under results/")
    unknown = set(args.mark) - set(after["tasks"])
    if unknown:
        raise SystemExit(f"--mark names tasks the results do not hold: {sorted(unknown)}")
    rows, totals = compare(before, after, reference, set(args.mark))
    result = {"command": f"{COMMAND} {shlex.join(sys.argv[1:])}", "row": after["model"],
              "reference": args.reference, "before": args.before, "after": args.after, "tasks": rows, **totals}
    publish(f"row_change_{args.section}", result, markdown(rows, totals, args, args.reference), path=TRAINING_DOC)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
