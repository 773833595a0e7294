"""Is the frozen encoder the reading model's ceiling? Fine-tune MiniLM's top layer(s) with the reader, train side only.

The reading model (decide/reader.py) attends over the encoder's last-layer token states, which no training has
touched. This experiment trains the reader together with a copy of the encoder's top layer(s): the hidden states
entering them are computed once per training state (torch, fp32, the shipped weights, the same 256-token windows
and first 512 positions the reader reads) and kept on disk; each step runs the copied layer(s) over the states of
its batch and back-propagates into them. Batches are formed from states (all of a state's examples together), so
each state passes through the layer(s) once per epoch.

The control is the same loop with the layer(s) frozen (same fp32 states, same batches, same seed): the difference
between the two rows is what fine-tuning the top of the encoder adds. The sentence vector, the question and option
vectors (the trained readout's features) stay the frozen int8 encoder's in both. Scored like
benchmarks/reader_validation.py: fitted on the training examples outside the states held out by hash, scored on the
held-out ones at temperature 1, mean over the bench's families; attribute questions scored apart. Nothing here reads
a bench test side, and nothing here is served: it measures a direction before the serving graph is built for it.

Writes benchmarks/results/reader_top_layer.json and a section of docs/benchmarks.md.
Run: .venv/bin/python benchmarks/reader_top_layer.py [--layers 1] [--layer-lr 3e-5 ...]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).parent))
from _serverbench import machine, replace_section, write_result
from jevserve.bench.data import BenchData
from jevserve.bench.stats import BOOTSTRAP_SEED, NUM_RESAMPLES, bootstrap_weights, interval
from jevserve.bench.tasks import TASKS
from jevserve.decide.embedder import WINDOW_TOKENS, embed_texts
from jevserve.decide.onnx_build import cache_dir, graph_key, shipped_model_dir
from jevserve.decide.token_embedder import READ_TOKENS, TokenEmbedder
from jevserve.train.dataset import subset
from jevserve.train.head import batches_by, family_weights, option_loss
from jevserve.train.reader import ReaderConfig, ReaderNet, batch_inputs, reader_logits
from jevserve.train.run import collect_examples, reader_inputs
from jevserve.train.token_states import TokenStates
from reader_validation import family_scores, paired_difference, per_example, resampled_family_means, summary

NUM_LAYERS = 6  # all-MiniLM-L6-v2


def load_bert():
    from transformers import AutoModel

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return AutoModel.from_pretrained(shipped_model_dir(), attn_implementation="eager", local_files_only=True).eval()


def state_windows(texts: list[str], embedder: TokenEmbedder) -> tuple[list[list[int]], np.ndarray]:
    """The encoder windows the reader reads of each text (as Embedder forms them, up to READ_TOKENS positions) and
    each window's text."""
    windows: list[list[int]] = []
    owners: list[int] = []
    for i, enc in enumerate(embedder.tokenizer.encode_batch(texts, add_special_tokens=False)):
        ids, read = enc.ids, 0
        for start in range(0, max(len(ids), 1), WINDOW_TOKENS):
            if read >= READ_TOKENS:
                break
            window = [embedder._cls_id, *ids[start : start + WINDOW_TOKENS], embedder._sep_id]
            windows.append(window)
            owners.append(i)
            read += len(window)
    return windows, np.array(owners, dtype=np.int64)


def layer_inputs(texts: list[str], windows: list[list[int]], bert, first_layer: int) -> TokenStates:
    """Hidden states entering layer `first_layer` for every window (ragged per window), float16, disk-cached."""
    digest = hashlib.sha256(f"{graph_key()}-layer-inputs-{first_layer}-{READ_TOKENS}".encode())
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass") + b"\x1e")
    path = cache_dir() / "top-layer" / f"{digest.hexdigest()[:16]}.npz"
    if path.exists():
        with np.load(path) as data:
            return TokenStates(data["rows"], data["offsets"])
    lengths = np.array([len(w) for w in windows])
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    rows = np.empty((offsets[-1], 384), np.float16)
    order = np.argsort(lengths, kind="stable")
    chunks = [order[i : i + 32] for i in range(0, len(order), 32)]
    with torch.no_grad():
        for chunk in tqdm(chunks, desc=f"hidden states entering layer {first_layer + 1}", unit="batch"):
            width = int(lengths[chunk].max())
            ids = torch.zeros((len(chunk), width), dtype=torch.int64)
            mask = torch.zeros((len(chunk), width), dtype=torch.int64)
            for row, w in enumerate(chunk):
                ids[row, : lengths[w]] = torch.tensor(windows[w])
                mask[row, : lengths[w]] = 1
            hidden = bert(
                input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids), output_hidden_states=True
            ).hidden_states[first_layer]
            for row, w in enumerate(chunk):
                rows[offsets[w] : offsets[w + 1]] = hidden[row, : lengths[w]].numpy().astype(np.float16)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, rows=rows, offsets=offsets)
    tmp.replace(path)
    return TokenStates(rows, offsets)


class TopLayers(torch.nn.Module):
    """Copies of the encoder's top layers, run on each window's incoming hidden states; a state's token states are
    its windows' outputs in order, cut at READ_TOKENS and scaled to unit rows (as the reader serves them)."""

    def __init__(self, bert, first_layer: int) -> None:
        super().__init__()
        import copy

        self.layers = torch.nn.ModuleList(copy.deepcopy(bert.encoder.layer[i]) for i in range(first_layer, NUM_LAYERS))
        self.eval()  # no dropout: the served encoder has none, and runs repeat

    def forward(self, windows: list[torch.Tensor]) -> list[torch.Tensor]:
        width = max(len(w) for w in windows)
        x = torch.zeros((len(windows), width, 384))
        keep = torch.zeros((len(windows), width), dtype=torch.bool)
        for row, w in enumerate(windows):
            x[row, : len(w)] = w
            keep[row, : len(w)] = True
        additive = torch.zeros((len(windows), 1, 1, width)).masked_fill(~keep[:, None, None, :], -1e9)
        for layer in self.layers:
            x = layer(x, attention_mask=additive)
            x = x[0] if isinstance(x, tuple) else x
        return [x[row, : len(w)] for row, w in enumerate(windows)]


def state_tokens(
    top: TopLayers, inputs: TokenStates, window_offsets: np.ndarray, states: np.ndarray
) -> list[torch.Tensor]:
    """Unit token states of `states` through `top` (window_offsets[s]:window_offsets[s+1] are state s's windows)."""
    windows, owner = [], []
    for k, s in enumerate(states):
        for w in range(window_offsets[s], window_offsets[s + 1]):
            windows.append(torch.from_numpy(inputs.of(w).astype(np.float32)))
            owner.append(k)
    outputs = top(windows)
    parts: list[list[torch.Tensor]] = [[] for _ in states]
    for k, out in zip(owner, outputs, strict=True):
        parts[k].append(out)
    return [torch.nn.functional.normalize(torch.cat(p)[:READ_TOKENS], dim=-1) for p in parts]


def train_with_top(
    data,
    frozen_tokens: TokenStates,
    token_index: np.ndarray,
    top: TopLayers,
    inputs: TokenStates,
    window_offsets: np.ndarray,
    config: ReaderConfig,
    layer_lr: float,
    states_per_batch: int,
) -> ReaderNet:
    """The reader's training loop (train/reader.py) with batches of whole states and the top layers in the graph;
    layer_lr 0 keeps them frozen."""
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    weights = family_weights(data.families)
    is_score = torch.tensor([q.kind == "score" for q in data.questions])
    answers = torch.from_numpy(data.answers)
    states = np.unique(token_index)
    order = np.argsort(token_index, kind="stable")
    bounds = np.searchsorted(token_index[order], states)
    ends = np.append(bounds[1:], len(order))
    examples_of = {s: order[b:e] for s, b, e in zip(states, bounds, ends, strict=True)}
    lengths = frozen_tokens.lengths()[states].astype(np.float64)
    model = ReaderNet(config)
    groups = [{"params": model.parameters(), "lr": config.learning_rate, "weight_decay": config.weight_decay}]
    if layer_lr:
        groups.append({"params": top.parameters(), "lr": layer_lr, "weight_decay": 0.01})
    else:
        top.requires_grad_(False)
    optimiser = torch.optim.AdamW(groups)
    steps = config.epochs * math.ceil(len(states) / states_per_batch)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimiser, max_lr=[g["lr"] for g in groups], total_steps=steps
    )
    bar = tqdm(total=steps, desc=f"reader + top layers (layer lr {layer_lr:g})", unit="step")
    for _ in range(config.epochs):
        for batch in batches_by(lengths * (1.0 + 0.3 * rng.random(len(lengths))), states_per_batch, rng):
            batch_states = states[batch]
            idx = np.concatenate([examples_of[s] for s in batch_states])
            phi, queries_in, options, _, _, option_mask = batch_inputs(data, frozen_tokens, token_index, idx)
            with torch.set_grad_enabled(bool(layer_lr)):
                tokens = state_tokens(top, inputs, window_offsets, batch_states)
            where = {s: k for k, s in enumerate(batch_states)}
            padded = torch.nn.utils.rnn.pad_sequence(tokens, batch_first=True)
            mask = torch.arange(padded.shape[1])[None, :] < torch.tensor([len(t) for t in tokens])[:, None]
            pick = torch.tensor([where[s] for s in token_index[idx]])
            logits = model(phi, queries_in, options, padded[pick], mask[pick])
            loss = option_loss(logits, option_mask, answers[idx], is_score[idx], weights[idx], config.rps_weight)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            bar.update(1)
    bar.close()
    return model


def scored_tokens(
    top: TopLayers, inputs: TokenStates, window_offsets: np.ndarray, states: np.ndarray
) -> tuple[TokenStates, dict[int, int]]:
    """Token states of `states` through `top` as a TokenStates (float32 rows), and each state's place in it."""
    parts = []
    with torch.no_grad():
        for i in range(0, len(states), 64):
            parts += [t.numpy() for t in state_tokens(top, inputs, window_offsets, states[i : i + 64])]
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    return TokenStates(np.concatenate(parts), offsets), {int(s): k for k, s in enumerate(states)}


def markdown(result: dict) -> str:
    def difference(row: dict, measure: str) -> str:
        return paired_difference(row.get("against_frozen"), measure)

    lines = [
        "## Reading model with the encoder's top layers fine-tuned, train-side validation (issue 13)",
        "",
        f"`{result['command']}`, {result['machine']['when']}: {result['num_fit']} training examples "
        f"(attribute questions included) on {result['num_fit_states']} states, {result['num_validation']} held out "
        f"by state, mean over {result['num_families']} families at temperature 1 (as in the recipe table above). "
        "Every row runs the same loop on fp32 hidden states of the shipped weights, batches of whole states; "
        "the frozen row trains only the reader. Fidelity of the fp32 last-layer states to the served int8 ones: "
        f"mean cosine {result['fidelity_cosine']:.4f}. Differences from the frozen row: paired, the held-out states "
        f"resampled with replacement ({NUM_RESAMPLES} resamples, 95% percentile interval).",
        "",
        "| top layers | layer learning rate | mean NLL | mean accuracy | NLL − frozen [95%] | accuracy − frozen [95%] "
        "| attribute accuracy | train s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['layers']} | {row['layer_lr']:g} | {row['mean_nll']:.3f} | {row['mean_accuracy']:.3f} | "
            f"{difference(row, 'nll')} | {difference(row, 'accuracy')} | {row['attribute_accuracy']:.3f} | "
            f"{row['train_s']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=1, help="how many of the encoder's top layers to copy (1-6)")
    parser.add_argument(
        "--layer-lr",
        type=float,
        action="append",
        help="peak learning rate of the copied layers (repeatable; 0 = frozen; default: 0 and 3e-5)",
    )
    parser.add_argument("--states-per-batch", type=int, default=34, help="~128 examples: 3.5 per state on average")
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    embedder = TokenEmbedder("int8")
    examples = collect_examples(BenchData(embed=embed_texts), list(TASKS.values()), variants=True, attributes=True)
    reader_in = reader_inputs(examples, embedder)
    texts = list(dict.fromkeys(ex.state for ex in examples))
    windows, owners = state_windows(texts, embedder)
    window_offsets = np.searchsorted(owners, np.arange(len(texts) + 1)).astype(np.int64)
    bert = load_bert()
    first_layer = NUM_LAYERS - args.layers
    inputs = layer_inputs(texts, windows, bert, first_layer)

    # The windows must give the reader's token counts, and the frozen fp32 layers the served int8 states.
    check = np.arange(0, len(texts), max(1, len(texts) // 300))
    frozen_top = TopLayers(bert, first_layer)
    with torch.no_grad():
        fp32 = state_tokens(frozen_top, inputs, window_offsets, check)
    cosines = []
    for s, t in zip(check, fp32, strict=True):
        served = reader_in.tokens.of(s).astype(np.float32)
        if len(served) != len(t):
            raise SystemExit(f"state {s}: {len(t)} positions here, {len(served)} in the reader's token states")
        cosines.append(float(np.mean(np.sum(served * t.numpy(), axis=1))))
    fidelity = float(np.mean(cosines))
    print(f"fp32 vs int8 last-layer token states: mean cosine {fidelity:.4f}", file=sys.stderr)

    attribute = np.array([f.startswith("attribute:") for f in reader_in.embedded.families])
    fit_rows = np.flatnonzero(~reader_in.held)
    validation_rows = np.flatnonzero(reader_in.held & ~attribute)
    attribute_rows = np.flatnonzero(reader_in.held & attribute)
    fit = subset(reader_in.embedded, fit_rows)
    validation = subset(reader_in.embedded, validation_rows)
    attribute_validation = subset(reader_in.embedded, attribute_rows)
    held_states = np.unique(reader_in.token_index[reader_in.held])
    config = ReaderConfig()
    # One set of resampling weights (held-out states drawn with replacement) for every row: paired differences.
    weights_resampled = bootstrap_weights(
        reader_in.token_index[validation_rows].tolist(), NUM_RESAMPLES, BOOTSTRAP_SEED
    ).astype(np.float64)
    resampled: dict[float, tuple[np.ndarray, np.ndarray]] = {}
    rows = []
    for layer_lr in sorted(set(args.layer_lr or [0.0, 3e-5])):  # the frozen row first: the others are paired with it
        top = TopLayers(bert, first_layer)
        started = time.perf_counter()
        net = train_with_top(
            fit,
            reader_in.tokens,
            reader_in.token_index[fit_rows],
            top,
            inputs,
            window_offsets,
            config,
            layer_lr,
            args.states_per_batch,
        )
        elapsed = time.perf_counter() - started
        weights = net.weights({})
        tokens, place = scored_tokens(top, inputs, window_offsets, held_states)

        def logits_of(part, rows_, weights=weights, tokens=tokens, place=place):
            index = np.array([place[int(s)] for s in reader_in.token_index[rows_]])
            return reader_logits(weights, part, tokens, index)

        validation_logits = logits_of(validation, validation_rows)
        scores = family_scores(validation_logits, validation.answers, validation.families)
        nll, right = per_example(validation_logits, validation.answers)
        on_attributes = logits_of(attribute_validation, attribute_rows)
        accuracy = float(
            np.mean([np.argmax(z) == a for z, a in zip(on_attributes, attribute_validation.answers, strict=True)])
        )
        rows.append(
            {
                "layers": args.layers,
                "layer_lr": layer_lr,
                "train_s": elapsed,
                **summary(scores),
                "attribute_accuracy": accuracy,
                "families": scores,
            }
        )
        resampled[layer_lr] = (
            resampled_family_means(nll, validation.families, weights_resampled),
            resampled_family_means(right, validation.families, weights_resampled),
        )
        if layer_lr and 0.0 in resampled:
            nll_diff = resampled[layer_lr][0] - resampled[0.0][0]
            accuracy_diff = resampled[layer_lr][1] - resampled[0.0][1]
            frozen = next(r for r in rows if r["layer_lr"] == 0.0)
            rows[-1]["against_frozen"] = {
                "nll": rows[-1]["mean_nll"] - frozen["mean_nll"],
                "nll_interval": interval(nll_diff),
                "accuracy": rows[-1]["mean_accuracy"] - frozen["mean_accuracy"],
                "accuracy_interval": interval(accuracy_diff),
            }
        print(f"layer lr {layer_lr:g}: {summary(scores)}, attribute accuracy {accuracy:.3f}", file=sys.stderr)
    result = {
        "machine": machine(),
        "command": "python benchmarks/reader_top_layer.py"
        + (f" --layers {args.layers}" if args.layers != 1 else "")
        + "".join(f" --layer-lr {v:g}" for v in args.layer_lr or []),
        "reader_config": config.__dict__,
        "fidelity_cosine": fidelity,
        "num_fit": len(fit_rows),
        "num_fit_states": len(np.unique(reader_in.token_index[fit_rows])),
        "num_validation": len(validation_rows),
        "num_families": len(rows[0]["families"]),
        "rows": rows,
    }
    # one results file per set of rows, so a run with other learning rates does not overwrite the default one's
    rates = sorted(set(args.layer_lr or [0.0, 3e-5]))
    name = "reader_top_layer" + (f"_{args.layers}" if args.layers != 1 else "")
    name += "" if rates == [0.0, 3e-5] else "_lr" + "_".join(f"{v:g}" for v in rates if v)
    path = write_result(name, result)
    replace_section(name, markdown(result))
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
