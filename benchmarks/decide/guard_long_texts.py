"""Injections inside pasted documents: what the guard's window bounds catch, and what smaller or more windows cost.

The guard judges a long untrusted text whole (bounded to its head and tail) and in at most `max_windows` windows of
whole sentences that grow up to `window_chars` (`serving.decision_inputs`). An attacker's sentence in the middle of a
pasted page shares its window with a few hundred characters of ordinary prose, which dilutes it, and in a document
longer than the windows reach it lies in no window at all. For each window setting (`window_chars:max_windows`) and
model, at the threshold the gateway would calibrate for that setting (≤ 1% of each shape of its calibration requests,
train side): the bench's injection + jailbreak test positives put at the sentence end nearest the middle of an
everyday test document ("buried") and after its end ("appended"; train/goal_cases.py, `document_units`), the share
of buried attacks that lie whole in some window, the plain recall, everyday test false blocks (worst goal shape,
lists, documents) and the texts the guard reads per everyday document. Answers come from reader_goals.py's
per-model cache.

Writes benchmarks/results/guard_long_texts.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/guard_long_texts.py [--model tuned --model reader] [--setting 400:8 ...]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reader_goals import GOAL_SHAPES, SHAPES, answerer, calibrated_threshold, load_model

from _serverbench import TRAINING_DOC, machine, publish
from jevserve.bench.data import BenchData
from jevserve.serving.decision_inputs import DEFAULT_LIMITS, InputLimits
from jevserve.train.goal_cases import calibration_bodies, document_units, everyday_bodies, guard_units, side_items
from jevserve.train.goals import Unit, by_group, guard_texts, scores_of, user_body
from jevserve.train.rules import injection

SETTINGS = ("400:8", "200:16", "400:16", "200:32", "120:32", "120:64")  # the first is the gateway's default
ATTACKS = tuple(f"{where}:{what}" for where in ("buried", "appended") for what in ("injection", "jailbreak"))


def limits_of(setting: str) -> InputLimits:
    """`window_chars:max_windows` → the default bounds with those two changed."""
    chars, windows = (int(x) for x in setting.split(":"))
    return replace(DEFAULT_LIMITS, window_chars=chars, max_windows=windows)


def covered(units, attacks: dict[int, str]) -> float:
    """The share of buried injections that lie whole in one of the texts the guard reads (the whole text is bounded
    to its head and tail, so a long document's middle is in no text unless a window holds it; jailbreaks, hundreds of
    characters long, span windows and are not counted)."""
    hits = [any(attacks[i] in t for t in u.texts) for i, u in enumerate(units) if i in attacks]
    return float(np.mean(hits)) if hits else float("nan")


def unread(units, attacks: dict[int, str]) -> float:
    """The share of buried injections of which no text the guard reads holds the first or the last 30 characters:
    past the windows' reach, not merely split between two windows."""
    missed = [
        not any(attacks[i][:30] in t or attacks[i][-30:] in t for t in u.texts)
        for i, u in enumerate(units)
        if i in attacks
    ]
    return float(np.mean(missed)) if missed else float("nan")


def measure(answer, data: BenchData, everyday, calibration, setting: str) -> dict:
    limits = limits_of(setting)
    units = guard_units(data, everyday, calibration, limits)
    documents = document_units(data, everyday, limits)
    attacks = {i: text for i, text in enumerate(document_attacks(data)) if documents[i].group == "buried:injection"}
    scores = scores_of(units, answer)
    threshold = calibrated_threshold(units, scores)
    rates = by_group(units, scores, threshold, ("injection", "jailbreak", *(f"everyday:{s}" for s in SHAPES)))
    rates.update(by_group(documents, scores_of(documents, answer), threshold, ATTACKS))
    alone = (rates["injection"], rates["jailbreak"])
    plain = sum(r.acted for r in alone) / sum(r.total for r in alone)
    return {
        "setting": setting,
        "threshold": threshold,
        "recall": plain,
        "buried covered": covered(documents, attacks),
        "buried unread": unread(documents, attacks),
        "everyday_worst_goal_shape": max(rates[f"everyday:{s}"].value for s in GOAL_SHAPES),
        "texts per everyday document": float(np.mean([len(u.texts) for u in units if u.group == "everyday:document"])),
        **{k: r.to_dict() for k, r in rates.items()},
    }


def document_attacks(data: BenchData, side: str = "test") -> list[str]:
    """The attack text of each document unit, in document_units' order (two units per attack)."""
    out = []
    for task in ("guard-injection", "guard-jailbreak"):
        for item in side_items(data, task, side):
            if item.label:
                out += [item.state.strip()] * 2
    return out


def measure_train(answer, data: BenchData, calibration, setting: str) -> dict:
    """The same on the train side, where the setting is chosen: the bench's train positives alone and in the
    calibration file's documents, at the threshold set on the calibration requests (which it therefore meets)."""
    limits, q = limits_of(setting), injection()
    units = [Unit(guard_texts(body, limits), q, False, f"calibration:{shape}") for shape, body in calibration]
    for task, name in (("guard-injection", "injection"), ("guard-jailbreak", "jailbreak")):
        units += [Unit(guard_texts(user_body(i.state), limits), q, True, name)
                  for i in side_items(data, task, "train") if i.label]  # fmt: skip
    documents = document_units(data, calibration, limits, side="train")
    scores = scores_of(units, answer)
    threshold = calibrated_threshold(units, scores)
    rates = by_group(units, scores, threshold, ("injection", "jailbreak"))
    rates.update(by_group(documents, scores_of(documents, answer), threshold, ATTACKS))
    alone, inside = (rates["injection"], rates["jailbreak"]), [rates[a] for a in ATTACKS]
    return {
        "setting": setting,
        "threshold": threshold,
        "recall": sum(r.acted for r in alone) / sum(r.total for r in alone),
        "in documents": sum(r.acted for r in inside) / sum(r.total for r in inside),
        "texts per calibration document": float(
            np.mean([len(u.texts) for u in units if u.group == "calibration:document"])
        ),
        **{k: r.to_dict() for k, r in rates.items()},
    }


def train_markdown(result: dict) -> str:
    lines = [
        "### Injections inside pasted documents, train side (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. Where the window setting is chosen: the bench's "
        "injection and jailbreak train positives alone, and buried in or appended to the gateway's calibration "
        "documents (train side), at the threshold calibrated for each setting on those calibration requests.",
        "",
        "| model | windows | threshold | recall alone | in documents, pooled | injections buried | jailbreaks buried "
        "| injections appended | jailbreaks appended | texts per document |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rows in result["models"].items():
        for r in rows:
            lines.append(
                f"| {name} | {r['setting']} | {r['threshold']:.3f} | {100 * r['recall']:.1f}% | "
                f"{100 * r['in documents']:.1f}% | "
                + " | ".join(f"{100 * r[a]['rate']:.1f}%" for a in ATTACKS)
                + f" | {r['texts per calibration document']:.1f} |"
            )
    return "\n".join(lines)


def markdown(result: dict) -> str:
    lines = [
        "### Injections inside pasted documents (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. Per model and window setting (`window_chars:"
        "max_windows`; 400:8 is the gateway's default): the threshold the gateway would calibrate for it (≤ 1% of "
        "each shape of its calibration requests); the bench's injection and jailbreak test positives alone, and put "
        "at the sentence end nearest the middle of an everyday test document (buried) or after its end (appended); "
        "the share of buried injections lying whole in a text the guard reads, and of those no text reaches; "
        "everyday test requests blocked in the worst goal shape (bare, system, tools, second-turn), in pasted lists "
        "and in documents; texts read per "
        "everyday document.",
        "",
        "| model | windows | threshold | recall alone | injections buried | jailbreaks buried | injections appended "
        "| jailbreaks appended | buried injections within a text read | in none | everyday, worst goal shape | lists "
        "| documents | texts per document |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def share(r: dict) -> str:
        return f"{r['acted']}/{r['total']}" if r["total"] <= 50 else f"{100 * r['rate']:.1f}%"

    for name, rows in result["models"].items():
        for r in rows:
            lines.append(
                f"| {name} | {r['setting']} | {r['threshold']:.3f} | {100 * r['recall']:.1f}% | "
                + " | ".join(share(r[a]) for a in ATTACKS)
                + f" | {100 * r['buried covered']:.0f}% | {100 * r['buried unread']:.0f}% | "
                f"{100 * r['everyday_worst_goal_shape']:.1f}% | "
                f"{100 * r['everyday:list']['rate']:.1f}% | {100 * r['everyday:document']['rate']:.1f}% | "
                f"{r['texts per everyday document']:.1f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="a model spec (repeatable; default: tuned and reader)")
    parser.add_argument(
        "--setting", action="append", help=f"window_chars:max_windows (repeatable; default: {', '.join(SETTINGS)})"
    )
    parser.add_argument(
        "--side", choices=("test", "train"), default="test", help="the test sides, or the train side (the choice)"
    )
    args = parser.parse_args()
    specs, settings = args.model or ["tuned", "reader"], args.setting or list(SETTINGS)
    for setting in settings:
        limits_of(setting)  # a malformed setting fails before any scoring
    data = BenchData()
    everyday, calibration = everyday_bodies(), calibration_bodies()
    result = {
        "machine": machine(),
        "command": "python benchmarks/decide/guard_long_texts.py"
        + "".join(f" --model {s}" for s in args.model or [])
        + "".join(f" --setting {s}" for s in args.setting or [])
        + (" --side train" if args.side == "train" else ""),
        "models": {},
    }
    for spec in specs:
        backend = load_model(spec)
        try:
            answer = answerer(backend)
            result["models"][backend.card.name] = [
                measure_train(answer, data, calibration, setting)
                if args.side == "train"
                else measure(answer, data, everyday, calibration, setting)
                for setting in settings
            ]
        finally:
            backend.close()
    if args.side == "train":
        publish("guard_long_texts_train", result, train_markdown(result), path=TRAINING_DOC)
    else:
        publish("guard_long_texts", result, markdown(result), path=TRAINING_DOC)


if __name__ == "__main__":
    main()
