"""The tool gate read by a lexical head alone: which head (chosen on the train side only), and what it does against
the tuned reader's readout on held-out calls, at the gateway's operating point and on calls written blind.

Selection (train side only): four candidates, TF-IDF over words (the bench's recipe) or character 2-5-grams within
words, each fitted on the tool-gate train states alone or with the calls composed from templates
(train/tool_calls_composed.py) in every training fold; 5 folds by request (tool_gate_baselines.folds: a held
fold's requests and calls never reach its training folds; the composed calls come from other templates and are never
held); the out-of-fold scores pooled; the candidate with the highest recall at <= 5% of held-fold benign calls
blocked is the one served (ties by AUROC).

Then the chosen head, fitted as a served head would be (train/lexical_head.py `fit_spec`: the recipe's fit rows that
ask the tool gate's question, and the composed calls of the templates not held out for the gateway's calibration)
and set on the tuned reader so that its tool-gate answer is the head's alone (`combine="alone"`); the same fitted
with ordinary calls as well (train/lexical_head.py `tool_gate_head_spec`, train/tool_calls_ordinary.py); and the
tuned reader's readout (what is served), on:
- the held-out calls of the goals table (149: agent-action-risk's test side and the rule-made calls of held-out
  requests), at <= 5% of their benign calls blocked (a point on the test curve, as the goal reads it);
- the gateway's point: the threshold blocking at most 5% of each shape of the packaged ordinary calls (BFCL's train
  side, and the composed templates' scoped calibration calls), with BFCL's held-out ordinary calls;
- `tool_calls_fresh.json` (beside this script): 60 requests, each with calls that do what was asked and one to block,
  written for this measurement by a helper that opened none of the project's calls or data; screened against every
  tool-gate train state (a call whose request or state overlaps one is dropped and counted);
- `tool_calls_fresh2.json`: 80 more requests written alike by another helper, after the rest had been measured;
- the docs' tool-call examples (probes.py), at each row's gateway threshold.

Writes benchmarks/results/tool_gate_head.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/tool_gate_head.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from decision_heads import readout_only
from probes import PROBES, probe_text, shown
from reader_goals import answerer, load_model
from tool_gate_baselines import BENIGN_RATE, folds, gateway_figures, pct, test_figures, train_cases
from tool_gate_heads import held_out_cells

from _serverbench import TRAINING_DOC, machine, publish
from jevserve.bench.data import BenchData
from jevserve.bench.neardup import ReferenceIndex
from jevserve.bench.supervised import TfidfClassifier, char_vectorizer
from jevserve.bench.tasks import TASKS
from jevserve.bench.tool_call_export import held_out_records_from
from jevserve.decide.embedder import embed_texts_fp32
from jevserve.decide.lexical_head import LexicalHead
from jevserve.decide.trained import question_key
from jevserve.serving.decision_inputs import tool_call_text
from jevserve.train.goal_cases import Unit, call_units, tool_calibration_units, tool_units
from jevserve.train.goals import auroc, rate_at, scores_of, threshold_at_rate
from jevserve.train.lexical_head import HeadSpec, calibrated, fit_spec, platt_map, tool_gate_head_spec
from jevserve.train.rules import unsafe_action
from jevserve.train.run import is_validation
from jevserve.train.tool_calls import request_of
from jevserve.train.tool_calls_composed import composed_tool_call_examples, fit_examples
from jevserve.train.tool_calls_ordinary import ordinary_call_examples
from jevserve.train.tuned_data import tuned_examples
from jevserve.train.tuned_run import recipe_examples

FRESH = Path(__file__).resolve().parent / "tool_calls_fresh.json"
# a second blind set (80 requests), written by another helper after the rest had been measured: the second head's test
FRESH2 = Path(__file__).resolve().parent / "tool_calls_fresh2.json"
# the candidate the selection picked (its table below): characters, with the composed calls, answering alone; fitted
# on the composed calls of the templates not held out for the gateway's calibration (its `scoped` shape)
SPEC = HeadSpec(unsafe_action(), "chars", "alone", lambda data: fit_examples())
CANDIDATES = {
    "words": lambda: TfidfClassifier(),
    "characters": lambda: TfidfClassifier(vectorizer=char_vectorizer),
}


def selection(data: BenchData) -> dict[str, dict]:
    """Each candidate's pooled out-of-fold AUROC and recall at <= 5% of held-fold benign calls (train side only)."""
    cases = train_cases(data)
    composed = [(ex.state, ex.answer == 0) for ex in composed_tool_call_examples()]
    texts, labels = [s for s, _ in cases], np.array([b for _, b in cases])
    rows = {}
    for name, make in CANDIDATES.items():
        for suffix, extra in (("", []), (" + composed calls", composed)):
            scores = np.full(len(cases), np.nan)
            for train, held in folds(cases):
                fit_texts = [texts[i] for i in train] + [s for s, _ in extra]
                fit_labels = np.concatenate([labels[train], np.array([b for _, b in extra], bool)])
                scores[held] = make().fit(fit_texts, fit_labels).predict_proba([texts[i] for i in held])
            scored = ~np.isnan(scores)
            s, y = scores[scored], labels[scored]
            threshold = threshold_at_rate(s[~y], BENIGN_RATE)
            rows[name + suffix] = {
                "auroc": auroc(y, s),
                "recall": rate_at(s[y], threshold).to_dict(),
                "benign blocked": rate_at(s[~y], threshold).to_dict(),
            }
    return rows


def fresh_units(data: BenchData, path: Path | None = None) -> tuple[list[Unit], int]:
    """The blind-written calls of `path` (default FRESH) as the gateway reads them (compact arguments), less any that
    overlap a train state; and how many were dropped."""
    question = unsafe_action()
    units = []
    for group in json.loads((path or FRESH).read_text()):
        for key, block in (("allow", False), ("block", True)):
            for call in group[key]:
                wire = {"function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}
                units.append(Unit((tool_call_text(group["request"], wire),), question, block, f"fresh:{key}"))
    references = [s for s, _ in train_cases(data, composed=True)]
    index = ReferenceIndex(references + sorted({request_of(s) for s in references}))
    states = [u.texts[0] for u in units]
    near = np.array(index.overlaps(states)) | np.array(index.overlaps([request_of(s) for s in states]))
    return [u for u, dropped in zip(units, near, strict=True) if not dropped], int(near.sum())


def fresh_figures(units: list[Unit], scores: np.ndarray, gateway_threshold: float) -> dict:
    """Blocked shares on the blind-written calls: at <= 5% of their own benign calls blocked, and at the gateway's."""
    labels = np.array([u.label for u in units])
    curve = threshold_at_rate(scores[~labels], BENIGN_RATE)
    return {
        "auroc": auroc(labels, scores),
        "recall at 5% benign": rate_at(scores[labels], curve).to_dict(),
        "benign blocked at 5% benign": rate_at(scores[~labels], curve).to_dict(),
        "recall at gateway": rate_at(scores[labels], gateway_threshold).to_dict(),
        "benign at gateway": rate_at(scores[~labels], gateway_threshold).to_dict(),
    }


def platt_of(raw: LexicalHead, validation: list) -> dict:
    """The Platt map (a, b) the uncalibrated head gets on the validation rows, and how many rows it was fitted on."""
    a, b = platt_map(raw, validation)
    rows = [ex for ex in validation if question_key(ex.question) == raw.question]
    return {"a": a, "b": b, "validation rows": len(rows), "validation to block": sum(ex.answer == 0 for ex in rows)}


def ordinary_near_blind(data: BenchData, fresh: list[Unit]) -> int:
    """How many of the second head's ordinary calls are near a blind-written call (its screening does not read the
    blind sets, which live here)."""
    return len(ordinary_call_examples(data)) - len(ordinary_call_examples(data, [u.texts[0] for u in fresh]))


def recipe_rows(data: BenchData) -> tuple[list, list]:
    """The recipe's fit rows and its validation rows, as a served head is fitted and calibrated on."""
    examples = recipe_examples(list(TASKS.values()), data=data, extra=tuned_examples(data, log=print))
    return [ex for ex in examples if not is_validation(ex.state)], [ex for ex in examples if is_validation(ex.state)]


def tool_gate_head(rows: tuple[list, list], data: BenchData, spec: HeadSpec = SPEC) -> LexicalHead:
    """A candidate fitted as a served head would be: the recipe's fit rows and the spec's own examples (calibrated
    on the validation rows where the spec asks)."""
    head = fit_spec(spec, rows[0], data, rows[1])
    if head is None:
        raise SystemExit("no tool-gate examples to fit a head on: fetch the bench data first (jevserve data fetch)")
    return head


def with_head(backend, head: LexicalHead):
    """The tuned reader answering the tool gate's question with `head` alone, under a name of its own (answers are
    cached per model name)."""
    digest = hashlib.sha256(head.coef.tobytes() + head.idf.tobytes()).hexdigest()[:8]
    backend.heads = {**backend.heads, head.question: head}
    backend.card = replace(backend.card, name=f"{backend.card.name}-tool-gate-head-{digest}")
    return backend


def measure() -> dict:
    data = BenchData(embed=embed_texts_fp32)
    units = tool_units(data)
    calibration = tool_calibration_units()
    ordinary = call_units(held_out_records_from(data), "ordinary")
    fresh, dropped = fresh_units(data)
    fresh2, dropped2 = fresh_units(data, FRESH2)
    rows_fitted = recipe_rows(data)
    raw = tool_gate_head(rows_fitted, data, replace(tool_gate_head_spec(), calibrate=False))
    heads = {
        "head, composed calls": tool_gate_head(rows_fitted, data),
        "head, composed and ordinary calls": calibrated(raw, rows_fitted[1]),  # what fit_spec makes of the spec
        "the same, without agent-action-risk's calls": tool_gate_head(rows_fitted, data, replace(
            tool_gate_head_spec(), leave_out_sources=TASKS["agent-action-risk"].sources)),
    }
    probes = [(label, probe) for decision, label, probe in PROBES if decision == "tool gate"]
    platt = platt_of(raw, rows_fitted[1])
    rows = {}
    for label in ("readout", *heads):
        backend = load_model("tuned")
        backend = readout_only(backend) if label == "readout" else with_head(backend, heads[label])
        try:
            answer = answerer(backend)
            test, cal = scores_of(units, answer), scores_of(calibration, answer)
            gate = gateway_figures(units, test, calibration, cal, scores_of(ordinary, answer))
            rows[f"{backend.card.name} ({label})"] = {
                "at 5% benign": test_figures(units, test),
                "gateway": gate,
                "fresh": fresh_figures(fresh, scores_of(fresh, answer), gate["threshold"]),
                "fresh2": fresh_figures(fresh2, scores_of(fresh2, answer), gate["threshold"]),
                "probes": [
                    {"probe": shown(probe), "label": kind, "p": float(p), "acted": bool(p >= gate["threshold"])}
                    for (kind, probe), p in zip(probes, answer([(probe_text(q), unsafe_action()) for _, q in probes]),
                                                strict=True)
                ],
            }
        finally:
            backend.close()
    return {
        "machine": machine(),
        "selection": selection(data),
        "test calls": {"total": len(units), "block": int(sum(u.label for u in units))},
        "fresh calls": {"total": len(fresh), "block": int(sum(u.label for u in fresh)), "dropped": dropped},
        "fresh2 calls": {"total": len(fresh2), "block": int(sum(u.label for u in fresh2)), "dropped": dropped2},
        "ordinary calls near a blind call": ordinary_near_blind(data, fresh + fresh2),
        "platt": platt,
        "rows": rows,
    }


def markdown(result: dict) -> str:
    test, fresh = result["test calls"], result["fresh calls"]
    lines = [
        "### The tool gate read by a lexical head alone (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. Selection, on the train side only: out-of-fold scores "
        "of 5 folds by request over the tool-gate train states, pooled; recall at ≤ 5% of held-fold benign calls "
        "blocked (the highest is served).",
        "",
        "| candidate | out-of-fold AUROC | recall at ≤ 5% benign | benign blocked |",
        "|---|---|---|---|",
    ]
    for name, row in result["selection"].items():
        lines.append(f"| {name} | {row['auroc']:.3f} | {pct(row['recall'])} | {pct(row['benign blocked'])} |")
    lines += [
        "",
        "The tool gate's readout alone (served), the selected head (its composed calls those of the templates not "
        "held out for the gateway's calibration) and the same head fitted with ordinary calls as well: "
        f"{test['total']} held-out calls ({test['block']} to block) at "
        "≤ 5% of their benign calls blocked; at the gateway's threshold (≤ 5% of each shape of the packaged ordinary "
        f"calls) with BFCL's held-out ordinary calls; and {fresh['total']} calls written blind ({fresh['block']} to "
        f"block; {fresh['dropped']} dropped as near a train state), at ≤ 5% of their benign calls and at the "
        "gateway's threshold.",
        "",
        "| model | held out: blocked at ≤ 5% benign | benign | gateway threshold | held out blocked there | benign "
        "there | ordinary held out there | blind: AUROC | blind: blocked at ≤ 5% benign | blind: blocked at the "
        "gateway's | blind: benign there |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in result["rows"].items():
        blind = row["fresh"]
        lines.append(
            f"| {name} | {held_out_cells(row)} | {blind['auroc']:.3f} | {pct(blind['recall at 5% benign'])} | "
            f"{pct(blind['recall at gateway'])} | {pct(blind['benign at gateway'])} |"
        )
    fresh2 = result["fresh2 calls"]
    lines += [
        "",
        f"A second blind set, written by another helper after the rows above had been measured: {fresh2['total']} "
        f"calls ({fresh2['block']} to block; {fresh2['dropped']} dropped as near a train state; of the second head's "
        f"ordinary calls, {result['ordinary calls near a blind call']} near a call of either blind set). The "
        f"second head's answers are Platt-scaled on the recipe's validation rows that ask the tool gate's question "
        f"({result['platt']['validation rows']}, {result['platt']['validation to block']} to block): P = sigmoid("
        f"{result['platt']['a']:.3f} × logit + {result['platt']['b']:.3f}), a monotone map that leaves every "
        "threshold set by a rate where it was.",
        "",
        "| model | blind 2: AUROC | blocked at ≤ 5% of its benign | benign there | blocked at the gateway's | benign "
        "there |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in result["rows"].items():
        blind = row["fresh2"]
        lines.append(
            f"| {name} | {blind['auroc']:.3f} | {pct(blind['recall at 5% benign'])} | "
            f"{pct(blind['benign blocked at 5% benign'])} | {pct(blind['recall at gateway'])} | "
            f"{pct(blind['benign at gateway'])} |"
        )
    names = list(result["rows"])
    lines += ["", "The docs' tool-call examples at each row's gateway threshold (**acted**: blocked):", "",
              "| example | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]  # fmt: skip
    for i, probe in enumerate(result["rows"][names[0]]["probes"]):
        cells = []
        for name in names:
            found = result["rows"][name]["probes"][i]
            cells.append(f"{found['p']:.3f}" + (" **acted**" if found["acted"] else ""))
        lines.append(f"| {probe['label']}: {probe['probe']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    result = measure()
    result["command"] = "python benchmarks/decide/tool_gate_head.py"
    publish("tool_gate_head", result, markdown(result), path=TRAINING_DOC)


if __name__ == "__main__":
    main()
