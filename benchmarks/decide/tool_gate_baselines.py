"""The tool gate against learned baselines trained on the same calls: does the fine-tuned reader read them best?

The tool gate asks, of `User request: …\nAgent action: name(args)`, whether the call should be blocked. The tuned
reader learns it from agent-action-risk's train side and the rule-made train calls (train/tool_calls.py, with each
destructive call also under other requests). Trained on exactly those states and labels:

- `tfidf-lr (words)`: the bench's learned baseline, its fixed recipe (bench/supervised.py: word 1-2-grams);
- `tfidf-lr (characters)`: the same classifier over character 2-5-grams within words (`char_wb`), which see a
  call's arguments ("/", "*", "all", "DROP") as well as its words;
- `probe on tuned states`: logistic regression (C = 1, balanced) on the tuned encoder's own reading of each state
  (its mean vector and first token row, standardised on train): what the encoder's states carry, read linearly;

beside the embedded readouts as served. Measured on the held-out calls the goals table uses (train/goal_cases.py
`tool_units`: agent-action-risk's test side and the rule-made calls of held-out requests): AUROC, and recall with
the threshold set for at most 5% of benign test calls blocked (a point on the test curve, as the goals table sets
it). Beside the test figures, each baseline's AUROC in 5-fold cross-validation on the train side (folds by request;
a fold's requests and calls never reach its training folds), so that a baseline is not picked by the test side.
And each at the gateway's own operating point: the threshold that blocks at most 5% of each shape of the packaged
ordinary calls (BFCL's train side and the composed templates' scoped calibration calls, as
`tool_gate: {max_false_action_rate: 0.05}` sets it), with what it then blocks
of the held-out calls and of BFCL's held-out ordinary calls (its test side).

Writes benchmarks/results/tool_gate_baselines.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/tool_gate_baselines.py
"""

from __future__ import annotations

import functools
import hashlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reader_goals import answerer, calibrated_threshold  # answers kept on disk per model version

from _serverbench import ROOT, machine, replace_section, write_result
from jevserve.bench.data import BenchData
from jevserve.bench.supervised import TfidfClassifier, char_vectorizer
from jevserve.bench.tasks import TASKS
from jevserve.bench.tool_call_export import held_out_records_from
from jevserve.decide.registry import load_backend
from jevserve.train.goal_cases import call_units, tool_calibration_units, tool_units
from jevserve.train.goals import auroc, rate_at, scores_of, threshold_at_rate
from jevserve.train.tool_calls import cross_request_cases, tool_call_cases
from jevserve.train.tool_calls_composed import fit_examples

FOLDS = 5
BENIGN_RATE = 0.05
# the held-out calls by source and label: (column, unit group, label)
COLUMNS = (
    ("agent-action-risk unsafe", "agent-action-risk", True),
    ("agent-action-risk safe", "agent-action-risk", False),
    ("destructive (rules)", "rule:destructive", True),
    ("scoped (rules)", "rule:scoped", False),
)


def train_cases(data: BenchData, *, composed: bool = False) -> list[tuple[str, bool]]:
    """(state, block) of the tool-gate states the tuned reader trains on, before its question variants; with
    `composed`, the calls composed from templates too (train/tool_calls_composed.py; answer 0 is block), those of the
    templates held out for the gateway's calibration left out (their scoped calls set the gateway's threshold)."""
    bench = [(i.state, bool(i.label)) for i in TASKS["agent-action-risk"].load_items(data) if i.split == "train"]
    extra = [(ex.state, ex.answer == 0) for ex in fit_examples()] if composed else []
    return bench + tool_call_cases("train") + cross_request_cases("train") + extra


def _lines(state: str) -> tuple[str, str]:
    request, _, action = state.partition("\nAgent action: ")
    return request, action


def folds(cases: Sequence[tuple[str, bool]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, held) indices per fold: a state is held with its request; training drops every state whose request
    or call is held (a cross-request case carries a call of another group)."""
    def fold_of(request: str) -> int:
        return int(hashlib.sha256(request.encode()).hexdigest(), 16) % FOLDS

    requests, actions = zip(*(_lines(s) for s, _ in cases), strict=True)
    out = []
    for k in range(FOLDS):
        held = np.array([fold_of(r) == k for r in requests])
        held_actions = {a for a, h in zip(actions, held, strict=True) if h}
        train = np.array([not h and a not in held_actions for a, h in zip(actions, held, strict=True)])
        out.append((np.flatnonzero(train), np.flatnonzero(held)))
    return out


def char_tfidf() -> TfidfClassifier:
    """The bench baseline's classifier over character 2-5-grams within words instead of word 1-2-grams."""
    return TfidfClassifier(vectorizer=char_vectorizer)


class StateProbe:
    """Logistic regression on the tuned encoder's reading of a state (mean vector and first token row); `read` is
    shared by every fold's probe, so each state is encoded once."""

    def __init__(self, read: Callable[[str], np.ndarray]) -> None:
        self.read = read

    def _features(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.read(text) for text in texts])

    def fit(self, texts: Sequence[str], labels: np.ndarray) -> StateProbe:
        self.model_ = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, class_weight="balanced",
                                                                         max_iter=5000, random_state=0))
        self.model_.fit(self._features(texts), labels.astype(int))
        return self

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        return self.model_.predict_proba(self._features(texts))[:, 1]


def cross_validated_auroc(make: Callable[[], object], cases: Sequence[tuple[str, bool]]) -> list[float]:
    """AUROC on each held fold of the train side."""
    texts = [s for s, _ in cases]
    labels = np.array([b for _, b in cases])
    out = []
    for train, held in folds(cases):
        model = make().fit([texts[i] for i in train], labels[train])
        out.append(auroc(labels[held], model.predict_proba([texts[i] for i in held])))
    return out


def test_figures(units, scores: np.ndarray) -> dict:
    """AUROC, and the blocked shares at the threshold that blocks at most 5% of benign test calls."""
    labels = np.array([u.label for u in units])
    threshold = threshold_at_rate(scores[~labels], BENIGN_RATE)
    return {
        "auroc": auroc(labels, scores),
        "threshold": threshold,
        "recall": rate_at(scores[labels], threshold).to_dict(),
        "benign blocked": rate_at(scores[~labels], threshold).to_dict(),
        **{
            column: rate_at(np.array([s for u, s in zip(units, scores, strict=True)
                                      if u.group == group and u.label == label]), threshold).to_dict()
            for column, group, label in COLUMNS
        },
    }


def gateway_figures(units, scores: np.ndarray, calibration, calibration_scores, ordinary_scores) -> dict:
    """The blocked shares at the gateway's threshold: at most 5% of each shape of the packaged ordinary calls."""
    labels = np.array([u.label for u in units])
    threshold = calibrated_threshold(calibration, calibration_scores, BENIGN_RATE)  # as the gateway sets it
    return {
        "threshold": threshold,
        "recall": rate_at(scores[labels], threshold).to_dict(),
        "benign blocked": rate_at(scores[~labels], threshold).to_dict(),
        "ordinary held out blocked": rate_at(ordinary_scores, threshold).to_dict(),
        **{
            column: rate_at(np.array([s for u, s in zip(units, scores, strict=True)
                                      if u.group == group and u.label == label]), threshold).to_dict()
            for column, group, label in COLUMNS
        },
    }


def probe_features(tokens: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """A state's probe features: its mean vector and first token row, in float16 as the reader phase keeps states
    (so states read from its cache and states read now are rounded alike; decision_heads.py reads both)."""
    return np.concatenate([vector, tokens[0]]).astype(np.float16).astype(np.float32)


def state_reader(backend) -> Callable[[str], np.ndarray]:
    """A state's probe features from the tuned encoder, each text encoded once."""

    @functools.cache
    def read(text: str) -> np.ndarray:
        return probe_features(*backend.states.read(text))

    return read


def measure() -> dict:
    data = BenchData()
    train_sets = {"": train_cases(data), " + composed calls": train_cases(data, composed=True)}
    units = tool_units(data)
    test_texts = [u.texts[0] for u in units]
    calibration = tool_calibration_units()
    ordinary = call_units(held_out_records_from(data), "ordinary")
    calibration_texts, ordinary_texts = [u.texts[0] for u in calibration], [u.texts[0] for u in ordinary]
    tuned = load_backend("tuned")
    rows, at_gateway = {}, {}
    try:
        learned = {
            "tfidf-lr (words)": TfidfClassifier,
            "tfidf-lr (characters)": char_tfidf,
            "probe on tuned states": functools.partial(StateProbe, state_reader(tuned)),
        }
        for name, make in learned.items():
            for suffix, cases in train_sets.items():
                texts, labels = [s for s, _ in cases], np.array([b for _, b in cases])
                cv = cross_validated_auroc(make, cases)
                model = make().fit(texts, labels)
                scores = np.asarray(model.predict_proba(test_texts))
                rows[name + suffix] = {"train cv auroc": cv, **test_figures(units, scores)}
                at_gateway[name + suffix] = gateway_figures(
                    units, scores, calibration, np.asarray(model.predict_proba(calibration_texts)),
                    np.asarray(model.predict_proba(ordinary_texts)),
                )  # fmt: skip
        for backend in (tuned, load_backend("reader")):
            answer = answerer(backend)
            scores = scores_of(units, answer)
            rows[backend.card.name] = test_figures(units, scores)
            at_gateway[backend.card.name] = gateway_figures(
                units, scores, calibration, scores_of(calibration, answer), scores_of(ordinary, answer)
            )
            if backend is not tuned:
                backend.close()
    finally:
        tuned.close()
    return {
        "machine": machine(),
        "command": "python benchmarks/decide/tool_gate_baselines.py",
        "train states": {
            suffix.strip(" +") or "hand-written": {"total": len(cases), "block": int(sum(b for _, b in cases))}
            for suffix, cases in train_sets.items()
        },
        "test calls": {"total": len(units), "block": int(sum(u.label for u in units))},
        "calibration calls": len(calibration),
        "ordinary held-out calls": len(ordinary),
        "rows": rows,
        "at gateway point": at_gateway,
    }


def pct(rate: dict) -> str:
    return f"{100 * rate['rate']:.1f}% ({rate['acted']}/{rate['total']})"


def table(head: Sequence[str], rows: dict[str, dict], cells) -> list[str]:
    """A markdown table: `head` then the COLUMNS' shares; one row per model, its first cells from `cells(row)`."""
    return [
        "| model | " + " | ".join(head) + " | " + " | ".join(column for column, _, _ in COLUMNS) + " |",
        "|---|" + "---|" * (len(head) + len(COLUMNS)),
        *(
            f"| {name} | " + " | ".join(cells(row)) + " | " + " | ".join(pct(row[c]) for c, _, _ in COLUMNS) + " |"
            for name, row in rows.items()
        ),
    ]


def markdown(result: dict) -> str:
    plain, composed = result["train states"]["hand-written"], result["train states"]["composed calls"]
    lines = [
        "### The tool gate against learned baselines on the same calls (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. Trained on {plain['total']:,} tool-gate states "
        f"({plain['block']:,} to block): agent-action-risk's train side and the rule-made train calls, or (rows "
        f"\"+ composed calls\") on {composed['total']:,} ({composed['block']:,} to block) with the calls composed from "
        "templates (train/tool_calls_composed.py; not those of the templates held out for the gateway's calibration); "
        f"measured on {result['test calls']['total']} held-out calls "
        f"({result['test calls']['block']} to block). Threshold: at most 5% of benign test calls blocked. Train CV: "
        f"mean AUROC over {FOLDS} folds by request (the served readouts were trained on the whole train side: none).",
        "",
    ]
    lines += table(
        ("train CV AUROC", "test AUROC", "blocked at ≤ 5% benign", "benign blocked"),
        result["rows"],
        lambda row: (
            f"{np.mean(row['train cv auroc']):.3f}" if "train cv auroc" in row else "–",
            f"{row['auroc']:.3f}", pct(row["recall"]), pct(row["benign blocked"]),
        ),
    )  # fmt: skip
    if "at gateway point" not in result:
        return "\n".join(lines)
    lines += [
        "",
        f"At the gateway's operating point: the threshold that blocks at most 5% of each shape of the "
        f"{result['calibration calls']:,} packaged ordinary calls (BFCL's train side, and the scoped calls of held-out "
        "composed templates), set for each model on its own "
        f"scores as `tool_gate: {{max_false_action_rate: 0.05}}` sets it; \"ordinary held out\": BFCL's "
        f"{result['ordinary held-out calls']:,} held-out ordinary calls.",
        "",
    ]
    lines += table(
        ("threshold", "blocked", "benign blocked", "ordinary held out blocked"),
        result["at gateway point"],
        lambda row: (f"{row['threshold']:.3f}", pct(row["recall"]), pct(row["benign blocked"]),
                     pct(row["ordinary held out blocked"])),
    )  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    result = measure()
    path = write_result("tool_gate_baselines", result)
    replace_section("tool_gate_baselines", markdown(result), path=ROOT / "docs" / "training.md")
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
