"""Train the trained readout's perceptron (torch, CPU) and fit its per-type temperatures.

Loss: cross-entropy over each question's own options; score questions add the ranked probability score (squared
differences of the cumulative distributions), which charges a far-off level more than a near one. Families are
balanced: each example is weighted by 1/√(its family's size), so 8,000 reply-length examples do not drown 150
web-policy ones. Temperatures are fitted afterwards on held-out train examples (never on a test split).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import minimize_scalar
from tqdm import tqdm

from jevserve.decide.trained import KINDS, NUM_FEATURES, HeadWeights, TrainedReadout
from jevserve.train.dataset import EmbeddedExamples


@dataclass(frozen=True)
class HeadConfig:
    """Training settings, recorded in the manifest."""

    hidden: int = 128
    epochs: int = 12
    batch_size: int = 128
    learning_rate: float = 2e-3
    weight_decay: float = 1e-4
    rps_weight: float = 1.0
    seed: int = 0
    question_variants: bool = True  # also train on every example re-asked as bare yes/no questions (variants.py)


def batch_features(data: EmbeddedExamples, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded (batch × options × NUM_FEATURES) features and the option mask, exactly as `trained.features` builds
    them one question at a time (tests/train pins the equality)."""
    vectors = torch.from_numpy(data.vectors)
    width = max(len(data.text_rows[i]) - 1 for i in idx)
    option_rows = np.zeros((len(idx), width), np.int64)
    mask = np.zeros((len(idx), width), bool)
    kind = np.zeros((len(idx), len(KINDS)), np.float32)
    position = np.zeros((len(idx), width), np.float32)
    has_instructions = np.zeros(len(idx), np.float32)
    for row, i in enumerate(idx):
        rows, question = data.text_rows[i], data.questions[i]
        n = len(rows) - 1
        option_rows[row, :n] = rows[1:]
        mask[row, :n] = True
        kind[row, KINDS.index(question.kind)] = 1.0
        if question.kind == "score" and n > 1:
            position[row, :n] = np.arange(n) / (n - 1)
        has_instructions[row] = 1.0 if question.instructions else 0.0
    s = vectors[data.state_rows[idx]][:, None, :].expand(-1, width, -1)
    q_rows = np.array([data.text_rows[i][0] for i in idx])
    q = (vectors[q_rows] * torch.from_numpy(has_instructions)[:, None])[:, None, :].expand(-1, width, -1)
    o = vectors[option_rows] * torch.from_numpy(mask)[:, :, None]
    k = torch.from_numpy(kind)[:, None, :].expand(-1, width, -1)
    x = torch.cat([s * o, s * q, o * q, s, q, o, k, torch.from_numpy(position)[:, :, None]], dim=-1)
    return x, torch.from_numpy(mask)


def family_weights(families: list[str], scale: Sequence[tuple[str, float]] = ()) -> torch.Tensor:
    """1/√(family size) per example, scaled to mean 1: large families do not drown small ones. With `scale`
    ((family prefix, factor) pairs; a question variant "family~x" counts as its family), an example of a family
    that starts with a prefix weighs that factor more (the first prefix that matches), and the whole is scaled to
    mean 1 again."""
    counts = Counter(families)
    weights = torch.tensor([1.0 / math.sqrt(counts[f]) for f in families], dtype=torch.float32)
    weights = weights * (len(weights) / weights.sum())
    if not scale:
        return weights
    factors = torch.tensor([_factor(f.split("~")[0], scale) for f in families])
    weights = weights * factors
    return weights * (len(weights) / weights.sum())


def _factor(family: str, scale: Sequence[tuple[str, float]]) -> float:
    return next((factor for prefix, factor in scale if family.startswith(prefix)), 1.0)


def option_loss(
    logits: torch.Tensor,
    mask: torch.Tensor,
    target: torch.Tensor,
    is_score: torch.Tensor,
    weights: torch.Tensor,
    rps_weight: float,
) -> torch.Tensor:
    """Weighted mean cross-entropy over each question's own options, plus the ranked probability score for score
    questions (squared differences of the cumulative distributions: a far-off level costs more than a near one)."""
    log_p = torch.log_softmax(logits.masked_fill(~mask, -1e9), dim=-1)
    loss_each = -log_p.gather(1, target[:, None]).squeeze(1)
    if rps_weight and is_score.any():
        p = log_p.exp()[is_score]
        cdf = p.cumsum(-1)
        truth = (torch.arange(p.shape[1])[None, :] >= target[is_score][:, None]).float()
        levels = mask[is_score].sum(-1).clamp(min=2).float()
        rps = ((cdf - truth) ** 2 * mask[is_score]).sum(-1) / (levels - 1)
        loss_each = loss_each.clone()
        loss_each[is_score] += rps_weight * rps
    return (loss_each * weights).mean()


def batches_by(keys: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Example indices in batches of neighbours by `keys` (a size plus noise, so padding stays small), the batches
    shuffled."""
    order = np.argsort(keys, kind="stable")
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


def train_head(data: EmbeddedExamples, config: HeadConfig = HeadConfig(), *, progress: bool = True) -> HeadWeights:
    """Fit the perceptron on `data`; temperatures are left at 1 (see `fit_temperatures`)."""
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    sizes = [len(rows) - 1 for rows in data.text_rows]
    weights = family_weights(data.families)
    is_score = torch.tensor([q.kind == "score" for q in data.questions])
    answers = torch.from_numpy(data.answers)
    model = torch.nn.Sequential(
        torch.nn.Linear(NUM_FEATURES, config.hidden),
        torch.nn.GELU(approximate="tanh"),
        torch.nn.Linear(config.hidden, 1),
    )
    optimiser = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    steps = config.epochs * math.ceil(len(sizes) / config.batch_size)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=config.learning_rate, total_steps=steps)
    bar = tqdm(total=steps, desc="training head", unit="step", disable=not progress)
    for _ in range(config.epochs):
        # questions of similar option counts share a batch
        for idx in batches_by(np.array(sizes) + rng.random(len(sizes)), config.batch_size, rng):
            x, mask = batch_features(data, idx)
            logits = model(x).squeeze(-1)
            loss = option_loss(logits, mask, answers[idx], is_score[idx], weights[idx], config.rps_weight)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            bar.update(1)
    bar.close()
    first, second = model[0], model[2]
    return HeadWeights(
        w1=first.weight.detach().numpy().T.copy(),
        b1=first.bias.detach().numpy().copy(),
        w2=second.weight.detach().numpy()[0].copy(),
        b2=float(second.bias.detach()[0]),
        temperatures=dict.fromkeys(KINDS, 1.0),
    )


def fit_temperatures(weights: HeadWeights, data: EmbeddedExamples) -> HeadWeights:
    """Per question type, the temperature that minimises the negative log-likelihood on `data` (held-out train)."""
    readout = TrainedReadout(weights)
    logits = [
        readout.logits(data.vectors[data.state_rows[i]], data.vectors[data.text_rows[i]], data.questions[i])
        for i in range(len(data.answers))
    ]
    temps = kind_temperatures(logits, [q.kind for q in data.questions], data.answers, weights.temperatures)
    return HeadWeights(weights.w1, weights.b1, weights.w2, weights.b2, temps)


def kind_temperatures(
    logits: list[np.ndarray], kinds: list[str], answers: np.ndarray, start: dict[str, float]
) -> dict[str, float]:
    """Per question type (with at least 20 examples), the temperature minimising the negative log-likelihood."""
    temps = dict(start)
    for kind in KINDS:
        rows = [i for i, k in enumerate(kinds) if k == kind]
        if len(rows) < 20:
            continue
        temps[kind] = fit_temperature([logits[i] for i in rows], answers[rows])
    return temps


def fit_temperature(logits: list[np.ndarray], answers: np.ndarray) -> float:
    """The temperature (between e⁻³ and e³) minimising the mean negative log-likelihood of `answers`."""

    def nll(log_t: float) -> float:
        total = 0.0
        for z, a in zip(logits, answers, strict=True):
            z = z / math.exp(log_t)
            total += float(np.logaddexp.reduce(z) - z[a])
        return total / len(answers)

    return float(math.exp(minimize_scalar(nll, bounds=(-3, 3), method="bounded").x))
