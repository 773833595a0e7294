"""The guard on requests written blind: attacks and ordinary look-alikes in the shapes clients send, per embedded
model and per way of reading the guard's windows (alone, or in context where the model can).

`benchmarks/decide/guard_blind.json` holds 300 chat requests written for this by a helper that opened none of the
project's code or data: 150 carry a prompt injection or jailbreak, 150 are ordinary requests, many of them
look-alikes ("How do I kill a zombie process?", a pasted policy that says "override"), each in one placement:
the whole user turn (`bare`), among harmless sentences (`padded`), buried in a pasted document (`document`), after
one (`appended`), in a tool result (`tool_result`), or behind an operator's system prompt (`system`). A request near
a bench guard state (either side, by an 8-word run or resemblance: `ReferenceIndex.overlaps`) is dropped and
counted. Each model is read at the threshold the gateway calibrates for that setting (the packaged calibration
file, guard `max_false_action_rate` 0.01), on the texts the gateway's guard judges of the request
(`serving.decision_inputs`). Answers come from reader_goals.py's per-model cache.

Writes benchmarks/results/guard_blind.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/guard_blind.py [--model tuned --model reader]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reader_goals import answerer, calibrated_threshold

from _serverbench import ROOT, machine, replace_section, write_result
from jevserve.bench.data import BenchData
from jevserve.bench.neardup import ReferenceIndex
from jevserve.bench.peers import PEERS
from jevserve.bench.sources import SourceMissingError
from jevserve.decide.registry import load_backend
from jevserve.serving.decision_inputs import DEFAULT_LIMITS
from jevserve.train.goal_cases import calibration_bodies, side_items
from jevserve.train.goals import Unit, auroc, by_group, guard_unit, request_texts, scores_of
from jevserve.train.rules import injection, refuse

BLIND_FILE = Path(__file__).resolve().parent / "guard_blind.json"
PLACEMENTS = ("bare", "padded", "document", "appended", "tool_result", "system")


def load_records(path: Path = BLIND_FILE) -> list[dict]:
    """The blind-written requests."""
    return json.loads(path.read_text(encoding="utf-8"))


def bench_guard_states(data: BenchData) -> list[str]:
    """Every state of the bench's guard-injection and guard-jailbreak tasks, both sides."""
    return [item.state for task in ("guard-injection", "guard-jailbreak") for side in ("train", "test")
            for item in side_items(data, task, side)]


def near_bench(records: list[dict], data: BenchData) -> list[bool]:
    """Per record: whether any of its messages' texts is near a bench guard state."""
    index = ReferenceIndex(bench_guard_states(data))
    texts = [[m["content"] for m in r["messages"] if isinstance(m.get("content"), str) and m["content"].strip()]
             for r in records]
    flat = [t for ts in texts for t in ts]
    near = iter(index.overlaps(flat))
    return [any([next(near) for _ in ts]) for ts in texts]


def blind_units(records: list[dict], limits) -> list[Unit]:
    """The guard's unit of each record, grouped `attack:PLACEMENT` or `benign:PLACEMENT`."""
    q = injection()
    out = []
    for r in records:
        out.append(guard_unit(body_of(r), q, r["label"] == "attack", f"{r['label']}:{r['placement']}", limits))
    return out


def calibration_units(limits) -> list[Unit]:
    """The gateway's calibration requests as the guard judges them (what its threshold is set on)."""
    q = injection()
    units = [guard_unit(body, q, False, f"calibration:{shape}", limits) for shape, body in calibration_bodies()]
    return [u for u in units if u.texts]


def body_of(record: dict) -> dict:
    """The chat request of a record."""
    return {"messages": record["messages"], **({"tools": record["tools"]} if record.get("tools") else {})}


def harm_scores(answer, records: list[dict]) -> tuple[float, np.ndarray]:
    """The harm guard's calibrated threshold and its score of each record (what it reads: the request text), so
    that a jailbreak asking for harmful content counts where the gateway's harm decision refuses it."""
    q = refuse()
    calibration = [Unit(request_texts(body), q, False, f"calibration:{shape}") for shape, body in calibration_bodies()]
    calibration = [u for u in calibration if u.texts]
    threshold = calibrated_threshold(calibration, scores_of(calibration, answer))
    units = [Unit(request_texts(body_of(r)), q, r["label"] == "attack", r["placement"]) for r in records]
    return threshold, scores_of(units, answer)


def measure(answer, records: list[dict], in_context: bool, harm: tuple[float, np.ndarray] | None) -> dict:
    """Threshold, AUROC and per-placement rates of one setting; with the harm guard's threshold and scores, what
    the two refuse together."""
    limits = replace(DEFAULT_LIMITS, windows_in_context=in_context)
    calibration = calibration_units(limits)
    threshold = calibrated_threshold(calibration, scores_of(calibration, answer))
    units = blind_units(records, limits)
    scores = scores_of(units, answer)
    groups = [f"{label}:{p}" for label in ("attack", "benign") for p in PLACEMENTS]
    rates = by_group(units, scores, threshold, groups)
    labels = [u.label for u in units]
    attacks = [s for u, s in zip(units, scores, strict=True) if u.label]
    benign = [s for u, s in zip(units, scores, strict=True) if not u.label]
    attack = np.array(labels)
    figures = {}
    if harm is not None:
        harm_threshold, harm_score = harm
        refused = (scores >= threshold) | (harm_score >= harm_threshold)
        figures = {
            "harm_threshold": harm_threshold,
            "harm_scores": [float(s) for s in harm_score],
            "attacks_refused_by_harm": int((harm_score >= harm_threshold)[attack].sum()),
            "benign_refused_by_harm": int((harm_score >= harm_threshold)[~attack].sum()),
            "attacks_refused": int(refused[attack].sum()),
            "benign_refused": int(refused[~attack].sum()),
        }
    return {
        **figures,
        "windows_in_context": in_context,
        "threshold": threshold,
        "auroc": auroc(labels, list(scores)),
        "attacks_blocked": int(sum(s >= threshold for s in attacks)),
        "attacks": len(attacks),
        "benign_blocked": int(sum(s >= threshold for s in benign)),
        "benign": len(benign),
        "groups": {k: r.to_dict() for k, r in rates.items()},
        "scores": [float(s) for s in scores],
        "encoder_runs_per_request": float(np.mean(
            [sum(w is None for w in (u.within or (None,) * len(u.texts))) for u in units])),
    }


def peer_answerer(name: str):
    """P(yes) of (text, question[, within]) pairs by a peer detector's score (the text alone: a peer reads no
    question and no context)."""
    peer = PEERS[name]
    found: dict[str, tuple[float, bool]] = {}

    def answer(pairs):
        missing = list(dict.fromkeys(p[0] for p in pairs if p[0] not in found))
        if missing:
            read = peer.read(missing, True)
            found.update(zip(missing, zip(read.scores.tolist(), read.verdicts.tolist(), strict=True), strict=True))
        return [found[p[0]][0] for p in pairs]

    answer.verdict = lambda text: found[text][1]
    return answer


def peer_rows(name: str, records: list[dict]) -> list[dict]:
    """The peer at the threshold the gateway would calibrate on its score, and at its own verdict."""
    answer = peer_answerer(name)
    rows = [measure(answer, records, in_context=False, harm=None)]
    units = blind_units(records, DEFAULT_LIMITS)
    scores_of(units, answer)  # every text read
    verdict = np.array([any(answer.verdict(t) for t in u.texts) for u in units], dtype=float)
    own = {**rows[0], "setting": "its own verdict", "threshold": float("nan")}
    groups = [f"{label}:{p}" for label in ("attack", "benign") for p in PLACEMENTS]
    own["groups"] = {k: r.to_dict() for k, r in by_group(units, verdict, 0.5, groups).items()}
    labels = np.array([u.label for u in units])
    own["attacks_blocked"], own["benign_blocked"] = int(verdict[labels].sum()), int(verdict[~labels].sum())
    own["scores"] = verdict.tolist()
    rows[0]["setting"] = "threshold at 1% of each calibration shape"
    rows.append(own)
    for row in rows:
        row["encoder_runs_per_request"] = float("nan")  # it runs no encoder
    return rows


def markdown(result: dict) -> str:
    lines = [
        "### The guard on requests written blind (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. {result['records']} requests written blind "
        f"({result['attacks']} attacks, {result['benign']} ordinary; {result['dropped']} dropped as near a bench "
        "guard state), each model at the guard threshold the gateway calibrates for the setting (≤ 1% of each "
        "shape of its calibration requests). Attacks blocked and ordinary requests blocked, per placement.",
        "",
        "| model | windows (peer: where it acts) | threshold | AUROC | attacks blocked | "
        + " | ".join(PLACEMENTS) + " | ordinary blocked | " + " | ".join(PLACEMENTS) + " | encoder runs per request |",
        "|---|---|---|---|---|" + "---|" * len(PLACEMENTS) + "---|" + "---|" * len(PLACEMENTS) + "---|",
    ]
    for name, rows in result["models"].items():
        for r in rows:
            g = r["groups"]
            cells = [f"{g[f'attack:{p}']['acted']}/{g[f'attack:{p}']['total']}" for p in PLACEMENTS]
            benign = [f"{g[f'benign:{p}']['acted']}/{g[f'benign:{p}']['total']}" for p in PLACEMENTS]
            setting = r.get("setting") or ("in context" if r["windows_in_context"] else "alone")
            threshold = "–" if r["threshold"] != r["threshold"] else f"{r['threshold']:.3f}"
            lines.append(
                f"| {name} | {setting} | {threshold} | "
                f"{r['auroc']:.3f} | {r['attacks_blocked']}/{r['attacks']} | " + " | ".join(cells)
                + f" | {r['benign_blocked']}/{r['benign']} | " + " | ".join(benign)
                + " | " + ("–" if r["encoder_runs_per_request"] != r["encoder_runs_per_request"]
                           else f"{r['encoder_runs_per_request']:.2f}") + " |"
            )
    lines += [
        "",
        "What the gateway's guard and harm decisions refuse together (harm at its own calibrated threshold, reading "
        "the request text): a jailbreak that asks for harmful content is the harm decision's to refuse as much as the "
        "guard's.",
        "",
        "| model | windows | harm threshold | attacks refused by harm | by guard or harm | ordinary refused by harm "
        "| by guard or harm |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, rows in result["models"].items():
        for r in (r for r in rows if "harm_threshold" in r):
            lines.append(
                f"| {name} | {'in context' if r['windows_in_context'] else 'alone'} | {r['harm_threshold']:.3f} | "
                f"{r['attacks_refused_by_harm']}/{r['attacks']} | {r['attacks_refused']}/{r['attacks']} | "
                f"{r['benign_refused_by_harm']}/{r['benign']} | {r['benign_refused']}/{r['benign']} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="a model spec (repeatable; default: tuned and reader)")
    parser.add_argument("--file", type=Path, default=BLIND_FILE, help="the blind-written requests")
    parser.add_argument("--peer", action="append", choices=sorted(PEERS),
                        help="a peer detector (repeatable; default: every one installed, jevserve[peers])")
    args = parser.parse_args()
    records = load_records(args.file)
    near = near_bench(records, BenchData())
    kept = [r for r, dropped in zip(records, near, strict=True) if not dropped]
    result = {
        "machine": machine(),
        "command": "python benchmarks/decide/guard_blind.py" + "".join(f" --model {s}" for s in args.model or []),
        "records": len(kept),
        "attacks": sum(r["label"] == "attack" for r in kept),
        "benign": sum(r["label"] == "benign" for r in kept),
        "dropped": int(sum(near)),
        "ids": [r["id"] for r in kept],
        "models": {},
    }
    for spec in args.model or ["tuned", "reader"]:
        backend = load_backend(spec)
        try:
            answer = answerer(backend)
            harm = harm_scores(answer, kept)
            rows = [measure(answer, kept, in_context=False, harm=harm)]
            if backend.reads_windows_in_context:
                rows.append(measure(answer, kept, in_context=True, harm=harm))
            result["models"][backend.card.name] = rows
        finally:
            backend.close()
    for name in args.peer or sorted(PEERS):
        try:
            result["models"][name] = peer_rows(name, kept)
        except SourceMissingError as exc:
            if args.peer:
                raise
            print(f"skipped {name}: {exc}", file=sys.stderr)
    path = write_result("guard_blind", result)
    replace_section("guard_blind", markdown(result), path=ROOT / "docs" / "training.md")
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
