"""The tool gate's readout and its lexical baseline together: does the mean of the tuned readout's P(block) and the
bench's tfidf-lr (words), fitted on the same tool-gate train states, read the calls better than the readout alone?

The guard's answer became such a mean (benchmarks/decide/decision_heads.py, docs/training.md "One head per gateway
question, and the lexical baseline beside the readout"); on the tool gate the learned baselines already read the
held-out calls better than the readout (benchmarks/decide/tool_gate_baselines.py). Here, per readout (the committed
one and the reader phase's other seeds over the same layers, each read alone: any lexical head set aside): the
readout alone and its mean with tfidf-lr (words) fitted on the recipe's tool-gate train states less its validation
states (what a served head would be fitted on), on tool_gate_baselines.py's held-out calls (at most 5% of benign
test calls blocked) and at the gateway's tool-gate point (at most 5% of each shape of the packaged ordinary calls),
with BFCL's held-out ordinary calls beside it.

Writes benchmarks/results/tool_gate_heads.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/tool_gate_heads.py [--model tuned --model tuned:PATH ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from decision_heads import readout_only
from reader_goals import answerer, load_model
from tool_gate_baselines import gateway_figures, pct, test_figures, train_cases

from _serverbench import TRAINING_DOC, machine, publish
from jevserve.bench.data import BenchData
from jevserve.bench.supervised import TfidfClassifier
from jevserve.bench.tool_call_export import held_out_records_from
from jevserve.train.goal_cases import call_units, tool_calibration_units, tool_units
from jevserve.train.goals import scores_of
from jevserve.train.run import is_validation


def measure(specs: list[str]) -> dict:
    data = BenchData()
    cases = [(state, block) for state, block in train_cases(data) if not is_validation(state)]
    tfidf = TfidfClassifier().fit([s for s, _ in cases], np.array([b for _, b in cases]))
    units = tool_units(data)
    calibration = tool_calibration_units()
    ordinary = call_units(held_out_records_from(data), "ordinary")

    def lexical(group) -> np.ndarray:
        return np.asarray(tfidf.predict_proba([u.texts[0] for u in group]))

    words = {"test": lexical(units), "calibration": lexical(calibration), "ordinary": lexical(ordinary)}
    rows: dict[str, dict] = {}
    for spec in specs:
        backend = readout_only(load_model(spec))
        try:
            answer = answerer(backend)
            alone = {
                "test": scores_of(units, answer),
                "calibration": scores_of(calibration, answer),
                "ordinary": scores_of(ordinary, answer),
            }
            for label, scores in (("readout", alone), ("mean", {k: (alone[k] + words[k]) / 2 for k in alone})):
                rows[f"{backend.card.name} ({label})"] = {
                    "spec": spec,
                    "at 5% benign": test_figures(units, scores["test"]),
                    "gateway": gateway_figures(
                        units, scores["test"], calibration, scores["calibration"], scores["ordinary"]
                    ),
                }
        finally:
            backend.close()
    rows["tfidf-lr (words)"] = {
        "at 5% benign": test_figures(units, words["test"]),
        "gateway": gateway_figures(units, words["test"], calibration, words["calibration"], words["ordinary"]),
    }
    return {
        "machine": machine(),
        "train states": {"total": len(cases), "block": int(sum(b for _, b in cases))},
        "test calls": {"total": len(units), "block": int(sum(u.label for u in units))},
        "rows": rows,
    }


def markdown(result: dict) -> str:
    train, test = result["train states"], result["test calls"]
    lines = [
        "### The tool gate's readout and its lexical baseline together (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. tfidf-lr (words) fitted on {train['total']:,} tool-gate "
        f"train states ({train['block']:,} to block: agent-action-risk's train side, the rule-made calls and the "
        f"cross-request calls, the recipe's validation states left out); measured on {test['total']} held-out calls "
        f"({test['block']} to block, 56 benign). Mean: of the readout's P(block) and tfidf-lr's. Gateway: the "
        "threshold blocking at most 5% of each shape of the packaged ordinary calls; ordinary held out: BFCL's "
        "held-out calls.",
        "",
        "| model | blocked at ≤ 5% benign | benign blocked | gateway threshold | blocked at the gateway's | benign "
        "blocked there | ordinary held out blocked there |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in result["rows"].items():
        lines.append(f"| {name} | {held_out_cells(row)} |")
    return "\n".join(lines)


def held_out_cells(row: dict) -> str:
    """A row's held-out calls at <= 5% benign and at the gateway's threshold, as table cells."""
    curve, gate = row["at 5% benign"], row["gateway"]
    return (
        f"{pct(curve['recall'])} | {pct(curve['benign blocked'])} | {gate['threshold']:.3f} | "
        f"{pct(gate['recall'])} | {pct(gate['benign blocked'])} | {pct(gate['ordinary held out blocked'])}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", action="append", help="a tuned readout, as reader_goals.py takes it (repeatable; default: tuned)"
    )
    args = parser.parse_args()
    result = measure(args.model or ["tuned"])
    result["command"] = "python benchmarks/decide/tool_gate_heads.py" + "".join(
        f" --model {spec}" for spec in args.model or []
    )
    publish("tool_gate_heads", result, markdown(result), path=TRAINING_DOC)


if __name__ == "__main__":
    main()
