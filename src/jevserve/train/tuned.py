"""Train the encoder's top layers together with a reading model (torch, CPU): the first phase of the tuned reader.

Each step takes a batch of whole states (every example about a state in the same step), runs the copied top layers
over the hidden states entering them (train/layer_inputs.py), and reads the result as the served encoder gives it
(decide/tuned.py): the first 512 positions as unit rows for the options to read, their mean as the sentence vector
that the trained readout's features use. The loss, the family balance and the reader are train/reader.py's; the
layers get their own learning rate and weight decay. Training saves a checkpoint every few minutes and resumes from
it when run again with the same data and settings, ending with exactly the weights an uninterrupted run gives.
The second phase (train/tuned_run.py) trains the served reader on every example over the tuned graph's states.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from jevserve.decide.token_embedder import READ_TOKENS
from jevserve.decide.trained import EMBEDDING_DIM
from jevserve.train.dataset import EmbeddedExamples
from jevserve.train.head import batches_by, family_weights, option_loss
from jevserve.train.layer_inputs import LayerInputs
from jevserve.train.reader import ReaderConfig, ReaderNet, question_inputs

NUM_LAYERS = 6  # all-MiniLM-L6-v2
# φ's layout (decide/trained.py `features`): [s⊙o, s⊙q, o⊙q, s, q, o, kind, position], 384 numbers each
_S_O, _S_Q, _O_Q, _S, _Q, _O = (slice(k * EMBEDDING_DIM, (k + 1) * EMBEDDING_DIM) for k in range(6))


@dataclass(frozen=True)
class TunedConfig:
    """Training settings, recorded in the manifest."""

    reader: ReaderConfig = field(default_factory=ReaderConfig)  # the served reader's, trained in the second phase
    layers: int = 2  # top layers fine-tuned (the rest stay the shipped ones)
    # The first phase trains the layers (with a scaffold reader) on the families of the decisions a gateway acts on,
    # where the train-side study measured that tuned layers help; its examples of a capped family are the states
    # whose hash sorts first. Every state is in the second phase.
    layer_families: tuple[str, ...] = (
        "guard-", "agent-action-risk", "cache-", "everyday:", "rules:",
        "synthetic:cache-relation", "synthetic:agent-verdict", "synthetic:risk-area",
    )  # fmt: skip
    layer_state_caps: tuple[tuple[str, int], ...] = (
        ("everyday:guard", 2000), ("everyday:harm", 2400),
        ("everyday:follow-up-guard", 2500), ("everyday:follow-up-harm", 6000),
    )  # fmt: skip
    layer_epochs: int = 2
    layer_lr: float = 3e-5  # peak learning rate of the layers (one-cycle, like the reader's)
    layer_weight_decay: float = 0.01
    states_per_batch: int = 34  # ~128 examples a step at 3.7 examples per state
    checkpoint_s: float = 300.0  # wall time between checkpoints

    def layer_phase(self) -> TunedConfig:
        """The settings of the first phase: the scaffold reader runs `layer_epochs`."""
        return replace(self, reader=replace(self.reader, epochs=self.layer_epochs))

    def in_layer_phase(self, family: str) -> bool:
        """Whether the first phase trains on examples of `family` (a question variant counts as its family)."""
        return family.split("~")[0].startswith(self.layer_families)

    @property
    def first_layer(self) -> int:
        """Index of the first fine-tuned layer."""
        if not 1 <= self.layers <= NUM_LAYERS:
            raise ValueError(f"layers must be 1..{NUM_LAYERS}, not {self.layers}")
        return NUM_LAYERS - self.layers


class TopLayers(torch.nn.Module):
    """Copies of the encoder's layers from `first_layer` up, run on each window's incoming hidden states."""

    def __init__(self, bert, first_layer: int) -> None:
        super().__init__()
        self.first_layer = first_layer
        self.layers = torch.nn.ModuleList(copy.deepcopy(bert.encoder.layer[i]) for i in range(first_layer, NUM_LAYERS))
        self.eval()  # no dropout: the served encoder has none

    def forward(self, windows: list[torch.Tensor]) -> list[torch.Tensor]:
        """Each window's last-layer states (windows padded together; the mask keeps padding out of real ones)."""
        width = max(len(w) for w in windows)
        x = torch.zeros((len(windows), width, EMBEDDING_DIM))
        keep = torch.zeros((len(windows), width), dtype=torch.bool)
        for row, w in enumerate(windows):
            x[row, : len(w)] = w
            keep[row, : len(w)] = True
        additive = torch.zeros((len(windows), 1, 1, width)).masked_fill(~keep[:, None, None, :], -1e9)
        for layer in self.layers:
            x = layer(x, attention_mask=additive)
            x = x[0] if isinstance(x, tuple) else x
        return [x[row, : len(w)] for row, w in enumerate(windows)]

    def tuned_weights(self) -> dict[str, np.ndarray]:
        """The layers' weights under the shipped model's names (`encoder.layer.N.…`), float16, for the .layers.npz."""
        out = {}
        for name, value in self.state_dict().items():
            index, _, rest = name.removeprefix("layers.").partition(".")
            out[f"encoder.layer.{self.first_layer + int(index)}.{rest}"] = value.numpy().astype(np.float16)
        return out


def read_states(top: TopLayers, inputs: LayerInputs, states: np.ndarray) -> tuple[list[torch.Tensor], torch.Tensor]:
    """What the served tuned encoder gives each state: unit token rows of its first READ_TOKENS positions, and the
    unit mean of those positions (the sentence vector)."""
    windows, owner = [], []
    for k, s in enumerate(states):
        for w in inputs.windows_of(int(s)):
            windows.append(torch.from_numpy(w.astype(np.float32)))
            owner.append(k)
    outputs = top(windows)
    parts: list[list[torch.Tensor]] = [[] for _ in states]
    for k, out in zip(owner, outputs, strict=True):
        parts[k].append(out)
    raw = [torch.cat(p)[:READ_TOKENS] for p in parts]
    tokens = [torch.nn.functional.normalize(r, dim=-1) for r in raw]
    vectors = torch.nn.functional.normalize(torch.stack([r.mean(0) for r in raw]), dim=-1)
    return tokens, vectors


def with_state(phi: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """φ with its state parts (s⊙o, s⊙q, s) recomputed from `state` (batch × 384): the tuned sentence vector."""
    s = state[:, None, :].expand(-1, phi.shape[1], -1)
    q, o = phi[..., _Q], phi[..., _O]
    return torch.cat([s * o, s * q, phi[..., _O_Q], s, q, o, phi[..., _O.stop :]], dim=-1)


def data_digest(data: EmbeddedExamples, token_index: np.ndarray, extra: str = "") -> str:
    """A short digest of what a run trains on (examples, answers, states), for matching a checkpoint to its run."""
    digest = hashlib.sha256(extra.encode())
    for arr in (data.state_rows, data.answers, token_index):
        digest.update(np.ascontiguousarray(arr).tobytes())
    digest.update("\x1e".join(data.families).encode())
    return digest.hexdigest()[:16]


def _save_checkpoint(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)


def train_tuned(
    data: EmbeddedExamples,
    token_index: np.ndarray,
    top: TopLayers,
    inputs: LayerInputs,
    config: TunedConfig,
    *,
    checkpoint: Path | None = None,
    progress: bool = True,
    log=print,
) -> ReaderNet:
    """Fit the reader and `top` together on `data` (example i reads state token_index[i] of `inputs`); `top` is
    trained in place; `layer_lr` 0 keeps the layers frozen. With `checkpoint`, progress is saved there and a matching
    saved run is resumed."""
    reader = config.reader
    torch.manual_seed(reader.seed)
    weights = family_weights(data.families)
    is_score = torch.tensor([q.kind == "score" for q in data.questions])
    answers = torch.from_numpy(data.answers)
    states = np.unique(token_index)
    order = np.argsort(token_index, kind="stable")
    bounds = np.searchsorted(token_index[order], states)
    ends = np.append(bounds[1:], len(order))
    examples_of = {int(s): order[b:e] for s, b, e in zip(states, bounds, ends, strict=True)}
    lengths = np.array([inputs.num_positions(int(s)) for s in states], np.float64)
    model = ReaderNet(reader)
    groups = [{"params": list(model.parameters()), "lr": reader.learning_rate, "weight_decay": reader.weight_decay}]
    if config.layer_lr:
        decay = config.layer_weight_decay
        groups.append({"params": list(top.parameters()), "lr": config.layer_lr, "weight_decay": decay})
    else:
        top.requires_grad_(False)
    optimiser = torch.optim.AdamW(groups)
    per_epoch = math.ceil(len(states) / config.states_per_batch)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimiser, max_lr=[g["lr"] for g in groups], total_steps=reader.epochs * per_epoch
    )
    run_key = data_digest(data, token_index, json.dumps(asdict(config), sort_keys=True))
    rng = np.random.default_rng(reader.seed)
    start_epoch, done_in_epoch = 0, 0
    if checkpoint is not None and checkpoint.exists():
        saved = torch.load(checkpoint, weights_only=False)
        if saved["run"] == run_key and saved.get("finished"):
            model.load_state_dict(saved["model"])
            top.load_state_dict(saved["top"])
            log(f"this phase was finished by an earlier run with the same data and settings: reusing it "
                f"({checkpoint}; delete it to train the phase again)")
            return model
        if saved["run"] == run_key:
            model.load_state_dict(saved["model"])
            top.load_state_dict(saved["top"])
            optimiser.load_state_dict(saved["optimiser"])
            schedule.load_state_dict(saved["schedule"])
            rng.bit_generator.state = saved["rng"]
            start_epoch, done_in_epoch = saved["epoch"], saved["done_in_epoch"]
            log(f"resuming from {checkpoint}: epoch {start_epoch + 1}, step {done_in_epoch} of {per_epoch}")
        else:
            log(f"{checkpoint} is another run's checkpoint (data or settings differ): starting afresh")
    bar = tqdm(
        total=reader.epochs * per_epoch,
        initial=start_epoch * per_epoch + done_in_epoch,
        desc="layer phase" if config.layer_lr else "tuned reader",  # the first phase trains the layers
        unit="step",
        disable=not progress,
    )
    last_saved = time.monotonic()
    for epoch in range(start_epoch, reader.epochs):
        epoch_rng = rng.bit_generator.state  # the batches of an epoch are drawn from here: a resume redraws them
        batches = batches_by(lengths * (1.0 + 0.3 * rng.random(len(lengths))), config.states_per_batch, rng)
        for step, batch in enumerate(batches):
            if epoch == start_epoch and step < done_in_epoch:
                continue
            _train_step(
                model,
                top,
                optimiser,
                data,
                token_index,
                inputs,
                states[batch],
                examples_of,
                answers,
                is_score,
                weights,
                reader,
                grad=bool(config.layer_lr),
            )
            schedule.step()
            bar.update(1)
            if checkpoint is not None and time.monotonic() - last_saved > config.checkpoint_s:
                _save_checkpoint(
                    checkpoint,
                    {
                        "run": run_key,
                        "model": model.state_dict(),
                        "top": top.state_dict(),
                        "optimiser": optimiser.state_dict(),
                        "schedule": schedule.state_dict(),
                        "rng": epoch_rng,
                        "epoch": epoch,
                        "done_in_epoch": step + 1,
                    },
                )
                last_saved = time.monotonic()
    bar.close()
    if checkpoint is not None:
        # The finished phase is kept, so that a run interrupted in a later phase goes on from here when the same
        # command is run again. A checkpoint belongs to one output path (`checkpoint_path`): a reproduction check
        # trains into a temporary one and never picks it up.
        _save_checkpoint(checkpoint, {"run": run_key, "finished": True, "model": model.state_dict(),
                                      "top": top.state_dict()})
    return model


def checkpoint_state(checkpoint: Path) -> str:
    """What a checkpoint holds, for telling an interrupted user: "finished", "partial" or "none"."""
    if not checkpoint.exists():
        return "none"
    try:
        return "finished" if torch.load(checkpoint, weights_only=False).get("finished") else "partial"
    except (OSError, RuntimeError, EOFError, KeyError, AttributeError):
        return "none"


def _train_step(
    model,
    top,
    optimiser,
    data,
    token_index,
    inputs,
    batch_states,
    examples_of,
    answers,
    is_score,
    weights,
    reader: ReaderConfig,
    *,
    grad: bool,
) -> None:
    idx = np.concatenate([examples_of[int(s)] for s in batch_states])
    phi, queries_in, options, option_mask = question_inputs(data, idx)
    with torch.set_grad_enabled(grad):
        tokens, vectors = read_states(top, inputs, batch_states)
    where = {int(s): k for k, s in enumerate(batch_states)}
    pick = torch.tensor([where[int(s)] for s in token_index[idx]])
    padded = torch.nn.utils.rnn.pad_sequence(tokens, batch_first=True)
    mask = torch.arange(padded.shape[1])[None, :] < torch.tensor([len(t) for t in tokens])[:, None]
    logits = model(with_state(phi, vectors[pick]), queries_in, options, padded[pick], mask[pick])
    loss = option_loss(logits, option_mask, answers[idx], is_score[idx], weights[idx], reader.rps_weight)
    optimiser.zero_grad()
    loss.backward()
    optimiser.step()


def capped(families: list[str], states: list[str], caps: tuple[tuple[str, int], ...]) -> np.ndarray:
    """Which examples to keep: all but those about the states of a capped family past its cap (the states kept are
    the ones whose hash sorts first, so the choice never depends on the others)."""
    limit = dict(caps)
    keep = np.ones(len(families), bool)
    for family, cap in limit.items():
        rows = [i for i, f in enumerate(families) if f.split("~")[0] == family]
        distinct = sorted(
            {states[i] for i in rows}, key=lambda t: hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest()
        )
        dropped = set(distinct[cap:])
        for i in rows:
            if states[i] in dropped:
                keep[i] = False
    return keep
