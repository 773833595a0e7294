"""decision_heads.py and tool_gate_heads.py on made-up cases: the gateway point's figures, the readout read alone
under a name of its own, and tables that show what was measured."""

import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "decide"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "gateway"))
import decision_fallbacks as fb
import decision_heads as dh
import tool_gate_heads as th


class Composed:
    """A stand-in for a composed family's module: two harmful and two harmless held-out cases."""

    @staticmethod
    def composed_cases(side):
        assert side == "test"
        return [("bad one", True), ("bad two", True), ("fine one", False), ("fine two", False)]


def test_the_gateway_point_reads_recall_goal_shapes_other_groups_and_held_out_cases(monkeypatch):
    monkeypatch.setitem(dh.HELD_OUT, "guard", ((Composed, "composed", "look-alikes"),))
    groups = (["calibration:bare"] * 100 + ["calibration:list"] * 10 + ["everyday:bare"] * 50
              + ["everyday:system"] * 50 + ["injection"] * 4 + ["traps"] * 2)  # fmt: skip
    scores = np.concatenate([
        np.linspace(0.0, 0.5, 100),  # bare's 1% point is just above 0.495
        np.r_[np.linspace(0.0, 0.5, 9), 0.8],  # a list of 10: none may be acted on, so just above 0.8 (the highest)
        np.linspace(0.0, 0.4, 50), np.r_[np.linspace(0.0, 0.4, 49), 0.9],
        [0.1, 0.85, 0.9, 0.95], [0.2, 0.99],
    ])  # fmt: skip
    units = [SimpleNamespace(group=g) for g in groups]
    def answer(pairs):
        return [0.9 if text.startswith("bad") else 0.1 for text, _ in pairs]

    found = dh.gateway_point(units, scores, "guard", answer)
    assert 0.8 < found["threshold"] <= 0.85
    assert found["recall"]["acted"] == 3 and found["recall"]["total"] == 4
    assert found["everyday by shape"]["system"]["acted"] == 1 and found["everyday by shape"]["bare"]["acted"] == 0
    assert found["worst goal shape"] == pytest.approx(1 / 50)
    assert found["groups"]["traps"]["acted"] == 1
    assert found["held out"]["composed"]["acted"] == 2 and found["held out"]["look-alikes"]["acted"] == 0


@dataclass(frozen=True)
class Card:
    name: str


@dataclass
class FakeBackend:
    heads: dict
    weights: Path
    card: Card


def test_a_readout_with_heads_is_read_alone_under_a_name_of_its_own(tmp_path):
    from jevserve.decide.tuned import layers_file

    weights = tmp_path / "m.npz"
    weights.write_bytes(b"readout")
    layers_file(weights).write_bytes(b"layers")
    with_heads = FakeBackend({"q": object()}, weights, Card("minilm-tuned-reader"))
    alone = dh.readout_only(with_heads)
    assert alone.heads == {} and alone.card.name.startswith("minilm-tuned-reader-readout-")
    without = FakeBackend({}, weights, Card("minilm-tuned-reader-0123abcd"))
    assert dh.readout_only(without).card.name == "minilm-tuned-reader-0123abcd"  # nothing set aside: as it was


def rate(acted, total):
    return {"acted": acted, "total": total, "rate": acted / total}


def test_the_tables_show_each_models_figures():
    gateway = {"threshold": 0.6, "recall": rate(3, 4), "worst goal shape": 0.005,
               "groups": {"traps": rate(0, 2)}, "held out": {"composed": rate(1, 2)}}  # fmt: skip
    row = {"auroc": 0.99, "recall at pooled 1%": 0.9, "everyday at pooled 1%": 0.01, "gateway": gateway}
    result = {
        "title": "Heads", "command": "python benchmarks/decide/decision_heads.py", "machine": {"when": "now"},
        "train examples": {"guard": {"total": 10, "yes": 3}, "harm": {"total": 8, "yes": 2}},
        "rows": {"readout": {"guard": row, "harm": row}, "mean": {"guard": row, "harm": row}},
    }  # fmt: skip
    text = dh.markdown(result)
    assert "### Heads (generated)" in text
    assert "| guard | mean | 0.990 | 90.0% | 1.0% | 0.600 | 75.0% (3/4) | 0.50% |" in text
    assert "| readout | 0.0% (0/2) | 50.0% (1/2) |" in text
    curve = {"recall": rate(2, 4), "benign blocked": rate(0, 2)}
    tool = {"at 5% benign": curve, "gateway": {**curve, "threshold": 0.5, "ordinary held out blocked": rate(1, 10)}}
    tools = th.markdown({"command": "c", "machine": {"when": "now"}, "train states": {"total": 9, "block": 4},
                         "test calls": {"total": 6, "block": 4}, "rows": {"tfidf-lr (words)": tool}})  # fmt: skip
    assert "| tfidf-lr (words) | 50.0% (2/4) | 0.0% (0/2) | 0.500 | 50.0% (2/4) | 0.0% (0/2) | 10.0% (1/10) |" in tools
    runs = [{"round": 0, "decider": "tuned", "fell back": 3, "requests": 10, "seconds": 1.25}]
    fallbacks = fb.markdown({"command": "c", "machine": {"when": "now"}, "timeout_ms": 1000.0,
                             "whole_up_to_chars": 1000, "runs": runs})  # fmt: skip
    assert "| 0 | tuned | 3 of 10 | 1.2 |" in fallbacks and "decision timeout 1000 ms" in fallbacks
