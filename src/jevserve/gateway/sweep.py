"""`jevserve gateway replay LOG --sweep`: per decision, how many replayed requests it would act on at each threshold.

Where the log carries labels (`"labels": {"guard": true}` on a record: the decision should act on it; false: it
should not; null or absent: neither), each row also has the recall on the positives and the false-action rate on the
negatives. Each decision is read alone: a request it reaches that another decision acted on first (harm on an
injection the guard blocked) counts in its row, where the live gateway and the replay's report skip it; the row in
force says how many the replay skipped so. Labels are per decision: a harmful request the guard should leave to
harm is `{"guard": null}`, not `{"guard": false}`, or the guard's blocking it counts as a false action.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jevserve.gateway.replay import Replay

# 0.05 … 0.95, then finer towards 1: rate-set thresholds of the embedded deciders lie between 0.95 and 0.999, where
# a step of 0.05 would show nothing of the trade-off
THRESHOLDS = (*(round(0.05 * i, 2) for i in range(1, 20)), 0.96, 0.97, 0.98, 0.99, 0.995, 0.999)


@dataclass(frozen=True)
class SweepRow:
    """One decision at one threshold."""

    decision: str
    threshold: float
    num_acted: int  # replayed requests with P ≥ threshold
    num_scored: int  # replayed requests the decision gave a probability for
    recall: float | None  # acted share of the labelled positives (None: no positive labels)
    false_action_rate: float | None  # acted share of the labelled negatives (None: no negative labels)
    in_force: bool = False  # the threshold the config sets (rate-set ones fall between the grid's)
    num_skipped: int = 0  # in force: acted-on requests the replay skipped (another decision acted first)


def sweep(replay: Replay, thresholds: tuple[float, ...] = THRESHOLDS) -> list[SweepRow]:
    """Rows for every decision that gave probabilities, at each threshold (and at the one in force)."""
    in_force = {p.decision: p.threshold for p in replay.points}
    rows = []
    decisions = sorted({d for r in replay.requests for d, (_, p) in r.new.items() if p is not None})
    for decision in decisions:
        scored = [(r.new[decision][1], r.labels.get(decision)) for r in replay.requests
                  if decision in r.new and r.new[decision][1] is not None]  # fmt: skip
        p = np.array([s for s, _ in scored])
        skipped = np.array([r.new[decision][0] == "skip" for r in replay.requests
                            if decision in r.new and r.new[decision][1] is not None])  # fmt: skip
        labels = [label for _, label in scored]
        positive = np.array([label is True for label in labels])
        negative = np.array([label is False for label in labels])
        extra = (in_force[decision],) if decision in in_force and in_force[decision] <= 1 else ()
        for t in sorted({*thresholds, *extra}):
            acted = p >= t
            in_force_row = bool(extra) and t == extra[0]
            rows.append(
                SweepRow(
                    decision,
                    float(t),
                    int(acted.sum()),
                    len(p),
                    float(acted[positive].mean()) if positive.any() else None,
                    float(acted[negative].mean()) if negative.any() else None,
                    in_force=in_force_row,
                    num_skipped=int((acted & skipped).sum()) if in_force_row else 0,
                )
            )
    return rows


def format_sweep(rows: list[SweepRow]) -> str:
    """The sweep as a plain-text table."""
    lines = [f"{'decision':<10} {'threshold':>9} {'acted':>7} {'of':>6} {'share':>7} {'recall':>7} {'false':>7}"]
    for r in rows:
        recall = "-" if r.recall is None else f"{r.recall:.3f}"
        false = "-" if r.false_action_rate is None else f"{r.false_action_rate:.3f}"
        share = r.num_acted / r.num_scored if r.num_scored else 0.0
        # the one in force to six decimals: a rate-set 0.9600908 beside the grid's 0.96 read as the same row twice
        threshold = f"{r.threshold:.6f}".rstrip("0") if r.in_force else f"{r.threshold:.3f}"
        line = f"{r.decision:<10} {threshold:>9} {r.num_acted:>7} {r.num_scored:>6} {share:>7.1%}"
        note = f"; the replay skipped {r.num_skipped} of them" if r.num_skipped else ""
        lines.append(f"{line} {recall:>7} {false:>7}" + (f"  (in force{note})" if r.in_force else ""))
    if any(r.num_skipped for r in rows):
        lines.append("each decision is counted alone: a request another decision acted on first (harm on an injection "
                     "the guard blocked) counts in its row, where the replay and the live gateway skip it")
    return "\n".join(lines)


def plot_sweep(rows: list[SweepRow], replay: Replay, path: str | Path) -> Path:
    """One panel: the share of replayed requests each decision acts on, by threshold; the thresholds in force marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    in_force = {p.decision: p.threshold for p in replay.points}
    for decision in sorted({r.decision for r in rows}):
        own = [r for r in rows if r.decision == decision and r.num_scored]
        x = [r.threshold for r in own]
        y = [r.num_acted / r.num_scored for r in own]
        (line,) = ax.plot(x, y, marker=".", label=decision)
        if decision in in_force and in_force[decision] <= 1:
            t = in_force[decision]
            at = next((r for r in own if r.threshold == t), None)
            if at is not None:
                ax.plot([t], [at.num_acted / at.num_scored], "o", color=line.get_color(), markersize=8)
    ax.set_xlabel("threshold (P ≥ threshold acts)")
    ax.set_ylabel("share of replayed requests acted on")
    ax.set_title(f"jevserve gateway replay --sweep ({len(replay.requests)} requests, {replay.decider})")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(title="decision (dot: threshold in force)", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
