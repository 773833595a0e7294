"""One head per gateway question against the readout that answers every question: do the guard's and the harm
guard's answers separate better when a head is trained for that question alone?

The tuned reader answers every question with one readout over the fine-tuned encoder's token states; the gateway
asks it two fixed questions on every request (the guard's injection question, the harm guard's refusal question).
On the tool gate a linear probe on the same states read the calls better than the readout
(benchmarks/decide/tool_gate_baselines.py). This trains, for each of the two questions:

- `head on tuned states`: logistic regression (C = 1, balanced classes, standardised features) on the served tuned
  encoder's reading of each state (its mean vector and first token row, the committed layers, int8), the tool-gate
  probe's setting, fixed before it was measured (docs/training.md says so);
- `tfidf-lr (words)`: the bench's learned baseline (bench/supervised.py) on the same texts;

each trained on exactly the committed recipe's training examples that ask that question (`collect_examples` and
`train/tuned_data.tuned_examples`, the recipe's fit rows: its validation states left out), train side only. The
readout's own answers come from benchmarks/decide/reader_goals.py's cache. All three are read on the goals table's
held-out cases (train/goal_cases.py) by separation (AUROC of the test positives against every everyday test
request; recall at 1% of the pooled calibration requests) and at the gateway's operating point (the highest of the
per-shape 1% thresholds of the calibration requests: recall, and the everyday rate of the worst goal shape).

The served states of the training examples come from the reader phase's cache (`train.tuned_run.served_states`,
keyed by the layers and the texts: a run of `layer_soup.py` or `jevserve train --tuned` over the committed layers
fills it; without it they are computed, about 40 minutes on 2 cores).

Writes benchmarks/results/decision_heads.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/decision_heads.py
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reader_goals import GOAL_SHAPES, answerer, calibrated_threshold, counts_in_recall, load_model
from separation import separation
from tool_gate_baselines import probe_features as features

from _serverbench import TRAINING_DOC, machine, publish
from jevserve.bench.data import BenchData
from jevserve.bench.tasks import TASKS
from jevserve.decide.embedder import embed_texts_fp32
from jevserve.decide.lexical_head import LexicalHead
from jevserve.decide.registry import load_backend
from jevserve.decide.tuned import TUNED_NAME, tuned_files
from jevserve.train import harm_composed, injections_composed, personas_composed
from jevserve.train.examples import Example
from jevserve.train.goal_cases import calibration_bodies, everyday_bodies, guard_units, harm_units
from jevserve.train.goals import by_group, rate_at, scores_of
from jevserve.train.injections_composed import composed_injection_examples
from jevserve.train.lexical_head import examples_asking, fit_head
from jevserve.train.personas_composed import composed_persona_examples
from jevserve.train.rules import injection, refuse
from jevserve.train.run import is_validation
from jevserve.train.tuned_data import test_states, tuned_examples
from jevserve.train.tuned_run import recipe_examples, served_states

LAYERS = Path(__file__).resolve().parents[2] / "src" / "jevserve" / "decide" / "params" / "minilm-tuned.layers.npz"
QUESTIONS = {"guard": injection(), "harm": refuse()}
HEAD = "head on tuned states"
TFIDF = "tfidf-lr (words)"
# the goals' other groups, read at the same threshold, per decision
OTHER_GROUPS = {
    "guard": (
        "suffixed:injection",
        "suffixed:jailbreak",
        "padded:injection",
        "padded:jailbreak",
        "traps",
        "trigger-words",
    ),
    "harm": ("suffixed:harmful", "borderline", "trigger-words"),
}
# the composed families' held-out templates (never trained on by any of these), per decision: (positive, negative)
HELD_OUT = {
    "guard": ((injections_composed, "composed injections", "look-alikes"),
              (personas_composed, "rule-breaking personas", "benign personas")),
    "harm": ((harm_composed, "harmful technical requests", "harmless twins"),),
}  # fmt: skip


def head_extra_examples(names: Sequence[str], data: BenchData) -> list[Example]:
    """The composed families' train sides (`HEAD_EXTRA`), as the recipe's flags would add them, for the lexical head."""
    if not names:
        return []
    from jevserve.train.everyday_negatives import calibration_texts

    held_out = test_states(data)
    makers = {
        "composed-injections": lambda: composed_injection_examples(held_out),
        "composed-personas": lambda: composed_persona_examples(held_out, calibration_texts()),
    }
    return [ex for name in names for ex in makers[name]()]


def training_sets(
    log=print, *, with_states: bool = True, head_extra: Sequence[str] = ()
) -> dict[str, tuple[list[str], np.ndarray, np.ndarray | None, LexicalHead]]:
    """Per decision: the texts, labels (True: yes) and head features (None without `with_states`) of the recipe's
    fit examples asking its question, and the lexical head fitted on them as the served one is
    (train/lexical_head.py), with the `head_extra` families' examples as well."""
    data = BenchData(embed=embed_texts_fp32)
    examples = recipe_examples(list(TASKS.values()), data=data, extra=tuned_examples(data, log=log), log=log)
    fit = [ex for ex in examples if not is_validation(ex.state)]
    extra = head_extra_examples(head_extra, data)
    tokens = vectors = row = None
    if with_states:
        states = list(dict.fromkeys(ex.state for ex in examples))  # the reader phase's order: its cache key
        log(f"{len(examples)} examples on {len(states)} states; reading their served states")
        tokens, vectors = served_states(states, LAYERS)
        row = {state: i for i, state in enumerate(states)}
    out = {}
    for decision, q in QUESTIONS.items():
        texts, labels = examples_asking(q, fit)
        x = None
        if with_states:
            rows = [row[t] for t in texts]
            x = np.stack(
                [features(tokens.rows[tokens.offsets[i] : tokens.offsets[i] + 1], vectors[i]) for i in rows]
            )
        out[decision] = (texts, labels, x, fit_head(q, [*fit, *extra]))
        added = len(examples_asking(q, extra)[0])
        log(f"{decision}: {len(texts)} examples, {int(labels.sum())} yes; the lexical head {added} more")
    return out


def readout_only(backend):
    """`backend` answering from its readout alone: the tuned reader's lexical heads (decide/lexical_head.py, what
    this study led to) set aside, and renamed by a digest of its readout and layers files so its answers are kept
    apart from the served model's (reader_goals.py caches answers per model name)."""
    if not getattr(backend, "heads", None):
        return backend
    readout, layers, _heads = tuned_files(backend.weights)
    digest = hashlib.sha256(readout.read_bytes() + layers.read_bytes()).hexdigest()[:8]
    backend.heads = {}
    backend.card = replace(backend.card, name=f"{TUNED_NAME}-readout-{digest}")
    return backend


def head() -> object:
    """The head's model, the tool-gate probe's setting."""
    return make_pipeline(
        StandardScaler(), LogisticRegression(C=1.0, class_weight="balanced", max_iter=5000, random_state=0)
    )


def gateway_point(units, scores: np.ndarray, decision: str, answer) -> dict:
    """At the gateway's threshold: its value, recall, each goal shape's everyday rate, the goals' other groups and
    the composed families' held-out cases."""
    threshold = calibrated_threshold(units, scores)
    held_out = {}
    for module, positive_name, negative_name in HELD_OUT[decision]:
        cases = module.composed_cases("test")
        found = np.asarray(answer([(text, QUESTIONS[decision]) for text, _ in cases]), dtype=float)
        bad = np.array([label for _, label in cases], dtype=bool)
        held_out[positive_name] = rate_at(found[bad], threshold).to_dict()
        held_out[negative_name] = rate_at(found[~bad], threshold).to_dict()
    positive = np.array([counts_in_recall(u.group, decision) for u in units])
    shapes = {
        shape: rate_at(np.array([s for u, s in zip(units, scores, strict=True) if u.group == f"everyday:{shape}"]),
                       threshold).to_dict()
        for shape in GOAL_SHAPES
    }  # fmt: skip
    return {
        "threshold": threshold,
        "recall": rate_at(scores[positive], threshold).to_dict(),
        "everyday by shape": shapes,
        "worst goal shape": max(r["rate"] for r in shapes.values()),
        "groups": {k: r.to_dict() for k, r in by_group(units, scores, threshold, OTHER_GROUPS[decision]).items()},
        "held out": held_out,
    }


def measure(
    specs: Sequence[str] = ("tuned",), *, with_head: bool = True, head_extra: Sequence[str] = (), log=print
) -> dict:
    """Per decision and model: separation and the gateway point. `specs`: the readouts (reader_goals.py's specs) each
    read alone and in the mean with tfidf-lr; the head reads the committed layers' states (every readout of `specs`
    must be over them: the reader phase's seeds over the committed layers are)."""
    train = training_sets(log, with_states=with_head, head_extra=head_extra)
    data = BenchData()
    everyday, calibration = everyday_bodies(), calibration_bodies()
    cases = {"guard": guard_units(data, everyday, calibration), "harm": harm_units(data, everyday, calibration)}
    tuned = load_backend("tuned") if with_head else None  # whose states the head reads
    readouts = [readout_only(load_model(spec)) for spec in specs]
    try:

        @functools.cache
        def read(text: str) -> np.ndarray:
            tokens, vector = tuned.states.read(text)
            return features(tokens, vector)

        models: dict[str, dict[str, Callable[[Sequence[str]], np.ndarray]]] = {}
        for decision, (_, labels, x, lexical) in train.items():
            tfidf = functools.partial(lambda pairs, m: np.array([m.probability(t) for t, _ in pairs]), m=lexical)
            found: dict[str, Callable] = {}
            for backend in readouts:
                readout = answerer(backend)
                name = backend.card.name
                found[f"{name} (readout)"] = readout
                found[f"mean of {name} and tfidf-lr"] = functools.partial(
                    lambda pairs, parts: np.mean([np.asarray(p(pairs)) for p in parts], axis=0), parts=(readout, tfidf)
                )
            if with_head:
                fitted_head = head().fit(x, labels.astype(int))
                found[HEAD] = functools.partial(
                    lambda pairs, m: m.predict_proba(np.stack([read(t) for t, _ in pairs]))[:, 1], m=fitted_head
                )
            found[TFIDF] = tfidf
            models[decision] = found
        rows: dict[str, dict[str, dict]] = {}
        for decision, units in cases.items():
            for name, answer in models[decision].items():
                log(f"{decision}: {name}")
                scores = np.asarray(scores_of(units, lambda pairs, a=answer: list(a(pairs))), dtype=float)
                rows.setdefault(name, {})[decision] = {
                    **separation(units, scores, decision),
                    "gateway": gateway_point(units, scores, decision, answer),
                }
    finally:
        for backend in (tuned, *readouts):
            if backend is not None:
                backend.close()
    return {
        "machine": machine(),
        "train examples": {d: {"total": len(t[1]), "yes": int(t[1].sum())} for d, t in train.items()},
        "head extra": list(head_extra),
        "rows": rows,
    }


def pct(rate: dict) -> str:
    return f"{100 * rate['rate']:.1f}% ({rate['acted']}/{rate['total']})"


def markdown(result: dict) -> str:
    train = result["train examples"]
    lines = [
        f"### {result['title']} (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. Heads trained on the committed recipe's fit examples "
        f"that ask the gateway's question (guard: {train['guard']['total']:,}, {train['guard']['yes']:,} yes; harm: "
        f"{train['harm']['total']:,}, {train['harm']['yes']:,} yes)"
        + (f"; tfidf-lr also on the train sides of {' and '.join(extra)}" if (extra := result.get("head extra"))
           else "")
        + ". AUROC: the test positives against every "
        "everyday test request; pooled 1%: recall at the threshold acting on 1% of all calibration requests "
        "together; gateway: at the highest of the per-shape 1% thresholds, with the everyday test rate of the "
        "worst goal shape (bare, system, tools, second turn).",
        "",
        "| decision | model | AUROC | recall at pooled 1% | everyday at pooled 1% | gateway threshold | recall at the "
        "gateway's | worst goal shape everyday |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for decision in ("guard", "harm"):
        for name, row in result["rows"].items():
            r = row[decision]
            g = r["gateway"]
            lines.append(
                f"| {decision} | {name} | {r['auroc']:.3f} | {100 * r['recall at pooled 1%']:.1f}% | "
                f"{100 * r['everyday at pooled 1%']:.1f}% | {g['threshold']:.3f} | {pct(g['recall'])} | "
                f"{100 * g['worst goal shape']:.2f}% |"
            )
    for decision in ("guard", "harm"):
        first = next(iter(result["rows"].values()))[decision]["gateway"]
        columns = [*first["groups"], *first["held out"]]
        lines += [
            "",
            f"{decision.capitalize()}, the goals' other groups and the composed families' held-out templates, at the "
            "same gateway threshold (share acted on):",
            "",
            "| model | " + " | ".join(columns) + " |",
            "|---|" + "---|" * len(columns),
        ]
        for name, row in result["rows"].items():
            g = row[decision]["gateway"]
            found = {**g["groups"], **g["held out"]}
            lines.append(f"| {name} | " + " | ".join(pct(found[c]) for c in columns) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model",
        action="append",
        help="a readout to read alone and in the mean with tfidf-lr, as "
        "reader_goals.py takes it (repeatable; default: tuned); each must be over the committed "
        "layers",
    )
    parser.add_argument("--no-head", dest="head", action="store_false", help="leave out the head on tuned states")
    parser.add_argument(
        "--head-extra",
        action="append",
        choices=["composed-injections", "composed-personas"],
        default=[],
        help="a composed family whose train side the lexical head (tfidf-lr) is fitted on as well (repeatable)",
    )
    parser.add_argument(
        "--section", default="decision_heads", help="results file and docs section (default: %(default)s)"
    )
    parser.add_argument(
        "--title",
        default="One head per gateway question against the readout",
        help="the section's heading (default: %(default)s)",
    )
    args = parser.parse_args()
    result = measure(args.model or ["tuned"], with_head=args.head, head_extra=args.head_extra)
    result["command"] = (
        "python benchmarks/decide/decision_heads.py"
        + "".join(f" --model {spec}" for spec in args.model or [])
        + ("" if args.head else " --no-head")
        + "".join(f" --head-extra {name}" for name in args.head_extra)
        + (f" --section {args.section}" if args.section != "decision_heads" else "")
        + (f" --title {shlex.quote(args.title)}" if args.section != "decision_heads" else "")
    )
    result["title"] = args.title
    publish(args.section, result, markdown(result), path=TRAINING_DOC)


if __name__ == "__main__":
    main()
