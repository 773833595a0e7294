"""Train the reader to rank reply lengths: a pairwise loss on the length question, measured on the train side.

Where the decision is a ranking (schedule-reply-length: order requests by how long
their replies will be), train for the ranking. The reader's length question is a 5-level score trained with
cross-entropy and the ranked probability score on the level the reply's token count falls in; that says nothing
about two replies in one level. Here each batch also pays a pairwise logistic (RankNet) loss on the question's
expected level E = Σ_k k·P(level k) for every pair of the batch's reply-length examples whose true reply tokens
differ: softplus(−s·(E_longer − E_shorter)), times a weight λ. Batches hold states of similar token counts, so the
pairs mostly compare prompts of similar length: what the prompt length alone cannot order.

Everything else is the committed recipe (ReaderConfig defaults, attribute questions included), fitted on the
training states outside the temperature split and scored on the ones inside (as benchmarks/decide/reader_validation.py):
Kendall τ-b between E and the true reply tokens on the held-out reply-length prompts (paired 95% intervals of each
row's difference from λ = 0, resampling those prompts), and mean NLL / accuracy over the 23 families at
temperature 1, to see what the loss costs elsewhere. Reply tokens come from the task's train-side items only;
nothing here reads a bench test side.

Writes benchmarks/results/reader_ranking.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/reader_ranking.py [--weight 0 --weight 1 --weight 4] [--scale 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from scipy.stats import kendalltau

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import TRAINING_DOC, machine, replace_section, write_result
from jevserve.bench.data import BenchData
from jevserve.bench.stats import BOOTSTRAP_SEED, bootstrap_weights, interval
from jevserve.bench.tasks import TASKS
from jevserve.decide.embedder import embed_texts
from jevserve.decide.token_embedder import TokenEmbedder
from jevserve.train.dataset import subset
from jevserve.train.reader import ReaderConfig, reader_logits, train_reader
from jevserve.train.run import collect_examples, reader_inputs
from jevserve.train.validation import family_scores, summary

TASK = "schedule-reply-length"
NUM_RESAMPLES = 1000


def train_side_reply_tokens(data: BenchData) -> dict[str, float]:
    """Prompt → median reply tokens over the task's train-side items (a prompt may occur more than once)."""
    found: dict[str, list[float]] = defaultdict(list)
    for item in TASKS[TASK].load_items(data):
        if item.split == "train":
            found[item.state].append(float(item.label))
    return {prompt: float(np.median(tokens)) for prompt, tokens in found.items()}


def pairwise_loss(values: np.ndarray, weight: float, scale: float):
    """The extra loss `train_reader` adds per batch: RankNet on the expected level, over pairs of examples with a
    finite value (log reply tokens) whose values differ."""
    values_t = torch.from_numpy(values.astype(np.float32))

    def loss(logits: torch.Tensor, option_mask: torch.Tensor, idx: np.ndarray) -> torch.Tensor:
        v = values_t[torch.from_numpy(np.asarray(idx))]
        keep = torch.isfinite(v)
        if int(keep.sum()) < 2:
            return logits.new_zeros(())
        p = torch.softmax(logits[keep].masked_fill(~option_mask[keep], -1e9), dim=-1)
        level = (p * torch.arange(p.shape[1], dtype=p.dtype)).sum(-1)
        longer = v[keep][:, None] > v[keep][None, :]
        if not bool(longer.any()):
            return logits.new_zeros(())
        margin = level[:, None] - level[None, :]
        return weight * torch.nn.functional.softplus(-scale * margin)[longer].mean()

    return loss


def expected_level(logits: list[np.ndarray]) -> np.ndarray:
    """E[level] at temperature 1 for each score question's logits."""
    out = []
    for z in logits:
        p = np.exp(z - np.logaddexp.reduce(z))
        out.append(float((p * np.arange(len(p))).sum()))
    return np.array(out)


def markdown(result: dict) -> str:
    lines = [
        "## Training the reader to rank reply lengths (train side)",
        "",
        f"The committed reader recipe plus a pairwise (RankNet) loss of weight λ on the length question's expected "
        f"level (scale s = {result['scale']}), fitted on {result['num_fit']} train examples outside the temperature "
        f"split; τ-b between the expected level and the true reply tokens on the {result['num_ranked']} held-out "
        "reply-length prompts (paired 95% intervals against λ = 0), and the 23 families' mean NLL / accuracy at "
        "temperature 1.",
        "",
        "| λ | τ-b | τ-b − (λ = 0) [95%] | mean NLL | mean accuracy | reply-length NLL | train s |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        diff = row.get("tau_minus_base")
        cell = "–" if diff is None else f"{diff['value']:+.3f} [{diff['interval'][0]:+.3f}, {diff['interval'][1]:+.3f}]"
        lines.append(
            f"| {row['weight']:g} | {row['tau_b']:.3f} | {cell} | {row['mean_nll']:.3f} | {row['mean_accuracy']:.3f} "
            f"| {row['families'][TASK]['nll']:.3f} | {row['train_s']:.0f} |"
        )
    info = result["machine"]
    lines += ["", f"Command: `{result['command']}` ({info['cpus']} cores, {info['when']})."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weight", type=float, action="append", default=[], help="λ values (repeatable; 0 first)")
    parser.add_argument("--scale", type=float, default=2.0, help="s: logistic scale per level of difference")
    args = parser.parse_args()
    weights_tried = sorted(set(args.weight or [0.0, 1.0, 4.0]))
    if weights_tried[0] != 0.0:
        weights_tried = [0.0, *weights_tried]  # the control every row is paired with
    data = BenchData(embed=embed_texts)
    examples = collect_examples(data, list(TASKS.values()), variants=True, attributes=True)
    inputs = reader_inputs(examples, TokenEmbedder("int8"))
    reply_tokens = train_side_reply_tokens(data)
    values = np.array(
        [
            np.log(reply_tokens[ex.state]) if ex.family == TASK and ex.question.kind == "score" else np.nan
            for ex in examples
        ]
    )
    missing = int(sum(ex.family == TASK for ex in examples) - np.isfinite(values).sum())
    if missing:
        raise SystemExit(f"{missing} reply-length examples have no train-side reply tokens: the lookup is wrong")
    fit_rows = np.flatnonzero(~inputs.held)
    attribute = np.array([f.startswith("attribute:") for f in inputs.embedded.families])
    scored_rows = np.flatnonzero(inputs.held & ~attribute)
    ranked = np.flatnonzero(np.isfinite(values[scored_rows]))  # positions in scored_rows
    truth = np.exp(values[scored_rows][ranked])
    resampled = bootstrap_weights(list(range(len(ranked))), NUM_RESAMPLES, BOOTSTRAP_SEED)
    scored = subset(inputs.embedded, scored_rows)

    rows, base_levels = [], None
    for weight in weights_tried:
        extra = pairwise_loss(values[fit_rows], weight, args.scale) if weight else None
        started = time.perf_counter()
        net = train_reader(
            subset(inputs.embedded, fit_rows), inputs.tokens, inputs.token_index[fit_rows], ReaderConfig(),
            extra_loss=extra,
        )
        elapsed = time.perf_counter() - started
        logits = reader_logits(net.weights({}), scored, inputs.tokens, inputs.token_index[scored_rows])
        levels = expected_level([logits[i] for i in ranked])
        scores = family_scores(logits, scored.answers, scored.families)
        row = {
            "weight": weight,
            "train_s": elapsed,
            "tau_b": float(kendalltau(levels, truth, variant="b").statistic),
            **summary(scores),
            "families": scores,
        }
        if base_levels is None:
            base_levels = levels
        else:
            diffs = []
            for counts in resampled:
                pick = np.repeat(np.arange(len(ranked)), counts)
                diffs.append(
                    kendalltau(levels[pick], truth[pick], variant="b").statistic
                    - kendalltau(base_levels[pick], truth[pick], variant="b").statistic
                )
            base_tau = rows[0]["tau_b"]
            row["tau_minus_base"] = {"value": row["tau_b"] - base_tau, "interval": interval(np.array(diffs))}
        rows.append(row)
        print(f"λ={weight}: τ-b {row['tau_b']:.3f}, {summary(scores)}", file=sys.stderr)
    result = {
        "machine": machine(),
        "command": "python benchmarks/decide/reader_ranking.py"
        + "".join(f" --weight {w:g}" for w in args.weight)
        + (f" --scale {args.scale:g}" if args.scale != 2.0 else ""),
        "scale": args.scale,
        "num_fit": len(fit_rows),
        "num_ranked": len(ranked),
        "rows": rows,
    }
    path = write_result("reader_ranking", result)
    replace_section("reader_ranking", markdown(result), TRAINING_DOC)
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
