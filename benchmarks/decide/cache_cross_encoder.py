"""A cross-encoder for the cache question, out of fold on the train side: a measurement for the next study, not served.

Every cache head measured so far reads the two texts as terms (what they do not share, their cosine), and each that
ranked better served more different-answer pairs at the top of the scale (docs/training.md, "The two texts' cosine as
pair terms"). A cross-encoder reads the two texts together, every word of one against every word of the other. This
script fine-tunes the shipped all-MiniLM-L6-v2 (every layer, with a linear head over the mean of its token states)
on the recipe's fit rows that ask the gateway's reuse question, in the five folds by cached text the cache heads were
selected in, and reads each fold's held-out rows, beside the served pair head fitted on the same folds and the mean of
the two. `top`: the share of same-answer pairs scoring above every different-answer pair of their fold, which is what
a threshold serving no different-answer pair can serve. Torch on CPU is not bit-reproducible: a rerun moves the
figures in their last digits.

Writes benchmarks/results/cache_cross_encoder.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/cache_cross_encoder.py [--epochs 3]   (about 4 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cache_heads import FOLDS, fold_of
from tool_gate_head import recipe_rows

from _serverbench import TRAINING_DOC, machine, publish
from jevserve.bench.data import BenchData
from jevserve.bench.supervised import TfidfClassifier
from jevserve.decide.embedder import embed_texts_fp32
from jevserve.decide.lexical_head import pair_texts
from jevserve.decide.trained import question_key
from jevserve.train.goals import auroc
from jevserve.train.lexical_head import PAIR_ANALYZER, PAIR_C, examples_asking, pair_vectorizer
from jevserve.train.rules import reuse

BATCH, LEARNING_RATE, MAX_TOKENS = 16, 4e-5, 128


def cross_encoder_scores(
    pairs: list[tuple[str, str]],
    labels: np.ndarray,
    folds: np.ndarray,
    epochs: int,
    layers: int | None = None,
    segments: bool = True,
) -> np.ndarray:
    """P(same answer) of each pair from a cross-encoder fine-tuned on the other folds: every layer, or the top
    `layers` (the rest frozen, as the tuned reader's are); with `segments` False every token reads segment 0, as the
    embedded graphs are exported (onnx_build passes zeros)."""
    import torch
    from transformers import AutoTokenizer

    from jevserve.decide.onnx_build import load_bert, shipped_model_dir

    torch.set_num_threads(2)
    tokenizer = AutoTokenizer.from_pretrained(str(shipped_model_dir()))

    def read(bert, head, idx):
        x = tokenizer([pairs[i][0] for i in idx], [pairs[i][1] for i in idx], padding=True, truncation=True,
                      max_length=MAX_TOKENS, return_tensors="pt")  # fmt: skip
        if not segments:
            x["token_type_ids"] = torch.zeros_like(x["token_type_ids"])
        states = bert(**x).last_hidden_state
        mask = x["attention_mask"].unsqueeze(-1).float()
        return head((states * mask).sum(1) / mask.sum(1)).squeeze(-1)

    scores = np.zeros(len(pairs))
    for fold in range(FOLDS):
        torch.manual_seed(fold)
        bert, head = load_bert(), torch.nn.Linear(384, 1)
        if layers is not None:
            for name, weight in bert.named_parameters():
                weight.requires_grad = any(f"encoder.layer.{i}." in name for i in range(6 - layers, 6))
        tuned = [w for w in bert.parameters() if w.requires_grad]
        optimiser = torch.optim.AdamW([*tuned, *head.parameters()], lr=LEARNING_RATE, weight_decay=0.01)
        train, held = np.where(folds != fold)[0], np.where(folds == fold)[0]
        rng = np.random.default_rng(fold)
        bert.train()
        for _ in range(epochs):
            order = rng.permutation(train)
            for start in range(0, len(order), BATCH):
                idx = order[start : start + BATCH]
                target = torch.tensor(labels[idx], dtype=torch.float)
                loss = torch.nn.functional.binary_cross_entropy_with_logits(read(bert, head, idx), target)
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
        bert.eval()
        with torch.no_grad():
            for start in range(0, len(held), 64):
                idx = held[start : start + 64]
                scores[idx] = torch.sigmoid(read(bert, head, idx)).numpy()
        print(f"fold {fold + 1}/{FOLDS} done", flush=True)
    return scores


def pair_head_scores(texts: list[str], labels: np.ndarray, folds: np.ndarray) -> np.ndarray:
    """P(same answer) of each pair from the served pair head's recipe fitted on the other folds."""
    scores = np.zeros(len(texts))
    for fold in range(FOLDS):
        held = folds == fold
        model = TfidfClassifier(c=PAIR_C, vectorizer=partial(pair_vectorizer, PAIR_ANALYZER))
        model.fit([t for t, h in zip(texts, held, strict=True) if not h], labels[~held])
        scores[held] = model.predict_proba([t for t, h in zip(texts, held, strict=True) if h])
    return scores


def top(scores: np.ndarray, labels: np.ndarray, folds: np.ndarray) -> float:
    """The share of same-answer pairs above every different-answer pair of their fold."""
    above = sum(int((scores[(folds == f) & labels] > scores[(folds == f) & ~labels].max()).sum()) for f in range(FOLDS))
    return above / int(labels.sum())


def measure(epochs: int, layers: int | None = None, segments: bool = True) -> dict:
    fit_rows, _ = recipe_rows(BenchData(embed=embed_texts_fp32))
    question = reuse()
    picked = [ex for ex in fit_rows if question_key(ex.question) == question_key(question)]
    texts, labels = examples_asking(question, picked)
    folds = np.array([fold_of(t) for t in texts])
    bench = np.array([ex.family == "cache-pairs" for ex in picked])
    pairs = [(a.strip(), b.strip()) for a, b in (pair_texts(t) for t in texts)]
    head = pair_head_scores(texts, labels, folds)
    cross = cross_encoder_scores(pairs, labels, folds, epochs, layers, segments)
    rows = {}
    for name, scores in (("pair head (served terms)", head), ("cross-encoder", cross),
                         ("mean of the two", 0.5 * (head + cross))):  # fmt: skip
        rows[name] = {"all": auroc(labels, scores), "bench": auroc(labels[bench], scores[bench]),
                      "rule-made": auroc(labels[~bench], scores[~bench]),
                      "top": top(scores, labels, folds)}  # fmt: skip
    return {"machine": machine(), "epochs": epochs, "layers": layers or 6, "segments": segments,
            "rows": len(texts), "yes": int(labels.sum()),
            "bench rows": int(bench.sum()), "figures": rows}  # fmt: skip


def markdown(result: dict) -> str:
    variant = (f", its top {result['layers']} layers tuned" if result.get("layers", 6) != 6 else "") + (
        ", one segment" if not result.get("segments", True) else "")  # fmt: skip
    lines = [
        f"### A cross-encoder for the cache question{variant}, out of fold on the train side (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. The recipe's {result['rows']} fit rows asking the "
        f"gateway's reuse question ({result['yes']} one answer serves; {result['bench rows']} of them cache-pairs' "
        f"own), {FOLDS} folds by cached text; the cross-encoder's top {result.get('layers', 6)} of 6 layers "
        f"fine-tuned {result['epochs']} epochs per fold, "
        + ("the second text in segment 1" if result.get("segments", True) else "both texts in segment 0")
        + ". Not served: a measurement for the next study.",
        "",
        "| reader | AUROC, all rows | cache-pairs' rows | rule-made rows | same-answer above every different-answer |",
        "|---|---|---|---|---|",
    ]
    for name, f in result["figures"].items():
        lines.append(f"| {name} | {f['all']:.3f} | {f['bench']:.3f} | {f['rule-made']:.3f} | {100 * f['top']:.1f}% |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3, help="fine-tuning epochs per fold (default 3)")
    parser.add_argument("--layers", type=int, choices=range(1, 7), help="fine-tune only the top N layers")
    parser.add_argument("--no-segments", action="store_true", help="both texts in segment 0 (as the graphs are run)")
    args = parser.parse_args()
    result = measure(args.epochs, args.layers, not args.no_segments)
    flags = (f" --epochs {args.epochs}" if args.epochs != 3 else "") + (f" --layers {args.layers}" if args.layers
             else "") + (" --no-segments" if args.no_segments else "")  # fmt: skip
    result["command"] = "python benchmarks/decide/cache_cross_encoder.py" + flags
    name = "cache_cross_encoder" + flags.replace(" --", "_").replace(" ", "").replace("-", "_")
    publish(name, result, markdown(result), path=TRAINING_DOC)


if __name__ == "__main__":
    main()
