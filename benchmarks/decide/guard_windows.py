"""What the guard's windows buy and cost, per embedded model: recall and everyday false blocks when texts up to N
characters are judged whole only (`guard.whole_up_to_chars`), and how many texts the guard then reads per request.

The guard judges a text of several sentences whole and in windows of sentences (`serving.decision_inputs`), so
harmless sentences around an injection cannot dilute it. Every window is one more encoder run on the gateway's
path and one more chance of a false block, which the calibrated threshold (at most 1% of each shape of the
gateway's calibration requests, train side) then pays for. For each cut-off N and model, at the threshold the
gateway would set for that setting: injection + jailbreak recall on the bench's test sides (alone and with a
held-out harmless sentence appended), false blocks on the everyday test side per shape, and the texts read per
everyday request. Answers come from reader_goals.py's per-model cache, so models measured there cost nothing here.

Writes benchmarks/results/guard_windows.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/guard_windows.py [--model tuned --model reader] [--chars 0 --chars 1000]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reader_goals import GOAL_SHAPES, GUARD_POSITIVES, SHAPES, answerer, calibrated_threshold

from _serverbench import ROOT, machine, replace_section, write_result
from jevserve.bench.data import BenchData
from jevserve.decide.registry import load_backend
from jevserve.serving.decision_inputs import DEFAULT_LIMITS
from jevserve.train.goal_cases import calibration_bodies, document_units, everyday_bodies, guard_units
from jevserve.train.goals import by_group, scores_of

CUTOFFS = (0, 300, 600, 1000, 100_000)  # 0: the default (any text of several sentences in windows); 100,000: none
# injections and jailbreaks put inside the everyday test side's pasted documents (train/goal_cases.py)
DOCUMENT_GROUPS = ("buried:injection", "buried:jailbreak", "appended:injection", "appended:jailbreak")


def measure(answer, data: BenchData, everyday, calibration, chars: int, in_context: bool = False) -> dict:
    """The guard's rates at its calibrated threshold when texts up to `chars` are judged whole only (and, with
    `in_context`, its windows read from their text's encoder pass)."""
    limits = replace(DEFAULT_LIMITS, whole_up_to_chars=chars, windows_in_context=in_context)
    units = guard_units(data, everyday, calibration, limits)
    scores = scores_of(units, answer)
    threshold = calibrated_threshold(units, scores)
    rates = by_group(units, scores, threshold, (*GUARD_POSITIVES, *(f"everyday:{s}" for s in SHAPES)))

    def pooled(*groups: str) -> float:
        return sum(rates[g].acted for g in groups) / sum(rates[g].total for g in groups)

    documents = document_units(data, everyday, limits)
    document_rates = by_group(documents, scores_of(documents, answer), threshold, DOCUMENT_GROUPS)
    return {
        "whole_up_to_chars": chars,
        "windows_in_context": in_context,
        "threshold": threshold,
        "recall": pooled("injection", "jailbreak"),
        "suffixed_recall": pooled("suffixed:injection", "suffixed:jailbreak"),
        "everyday_worst_goal_shape": max(rates[f"everyday:{s}"].value for s in GOAL_SHAPES),
        "texts_per_everyday_request": float(
            np.mean([len(u.texts) for u in units if u.group.startswith("everyday:")])
        ),
        # a window read in context costs no encoder run of its own
        "encoder_runs_per_everyday_request": float(
            np.mean([sum(w is None for w in (u.within or (None,) * len(u.texts)))
                     for u in units if u.group.startswith("everyday:")])
        ),
        **{k: r.to_dict() for k, r in rates.items()},
        **{k: r.to_dict() for k, r in document_rates.items()},
    }


def markdown(result: dict) -> str:
    lines = [
        "### The guard's windows on short texts (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. Per model and cut-off: texts up to that many "
        "characters judged whole only (`guard.whole_up_to_chars`; 0 is the default, 100,000 judges every text "
        "whole only, as bounded to 2,000 characters); the threshold the gateway would calibrate for that setting "
        "(≤ 1% of each shape of its calibration requests); recall on the bench's injection + jailbreak test "
        "sides, alone and with a held-out harmless sentence; injections also padded with two harmless sentences (the "
        "gateway benchmark's suffix); everyday test requests blocked in the worst goal "
        "shape (bare, system, tools, second-turn) and in pasted lists and documents; injections and jailbreaks put "
        "inside those documents (at the sentence end nearest the middle, and after the end); texts the guard reads "
        "per everyday request, and encoder runs (a window read in context, `guard.windows_in_context`, takes its "
        "word pieces' states from its text's pass and costs none).",
        "",
        "| model | whole up to (chars) | windows | threshold | recall | with suffix | injections | injections with "
        "suffix | injections padded | everyday, worst goal shape | lists | documents | in documents, buried | "
        "in documents, appended | texts per request | encoder runs per request |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rows in result["models"].items():
        for r in rows:
            inj, suffixed, padded = r["injection"], r["suffixed:injection"], r["padded:injection"]

            def both(kind: str, r=r) -> str:
                found = [r[f"{kind}:{what}"] for what in ("injection", "jailbreak")]
                return f"{sum(f['acted'] for f in found)}/{sum(f['total'] for f in found)}"

            lines.append(
                f"| {name} | {r['whole_up_to_chars']} | {'in context' if r['windows_in_context'] else 'alone'} | "
                f"{r['threshold']:.3f} | {100 * r['recall']:.1f}% | "
                f"{100 * r['suffixed_recall']:.1f}% | {inj['acted']}/{inj['total']} | "
                f"{suffixed['acted']}/{suffixed['total']} | {padded['acted']}/{padded['total']} | "
                f"{100 * r['everyday_worst_goal_shape']:.1f}% | {100 * r['everyday:list']['rate']:.1f}% | "
                f"{100 * r['everyday:document']['rate']:.1f}% | {both('buried')} | {both('appended')} | "
                f"{r['texts_per_everyday_request']:.2f} | {r['encoder_runs_per_everyday_request']:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="a model spec (repeatable; default: tuned and reader)")
    parser.add_argument("--chars", type=int, action="append", help=f"cut-offs (repeatable; default: {CUTOFFS})")
    args = parser.parse_args()
    specs, cutoffs = args.model or ["tuned", "reader"], args.chars or list(CUTOFFS)
    data = BenchData()
    everyday, calibration = everyday_bodies(), calibration_bodies()
    result = {
        "machine": machine(),
        "command": "python benchmarks/decide/guard_windows.py"
        + "".join(f" --model {s}" for s in args.model or [])
        + "".join(f" --chars {c}" for c in args.chars or []),
        "models": {},
    }
    for spec in specs:
        backend = load_backend(spec)
        try:
            answer = answerer(backend)
            rows = [measure(answer, data, everyday, calibration, chars) for chars in cutoffs]
            if backend.reads_windows_in_context:  # and its windows read from their text's pass
                rows.append(measure(answer, data, everyday, calibration, 0, in_context=True))
            result["models"][backend.card.name] = rows
        finally:
            backend.close()
    path = write_result("guard_windows", result)
    replace_section("guard_windows", markdown(result), path=ROOT / "docs" / "training.md")
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
