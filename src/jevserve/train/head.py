"""Train the trained readout's perceptron (torch, CPU) and fit its per-type temperatures.

Loss: cross-entropy over each question's own options; score questions add the ranked probability score (squared
differences of the cumulative distributions), which charges a far-off level more than a near one. Families are
balanced: each example is weighted by 1/√(its family's size), so 8,000 reply-length examples do not drown 150
web-policy ones. Temperatures are fitted afterwards on held-out train examples (never on a test split).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import minimize_scalar
from tqdm import tqdm

from jevserve.decide.trained import KINDS, NUM_FEATURES, HeadWeights, TrainedReadout, features
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


def _feature_matrices(data: EmbeddedExamples) -> list[np.ndarray]:
    return [
        features(data.vectors[s], data.vectors[rows], q)
        for s, rows, q in zip(data.state_rows, data.text_rows, data.questions, strict=True)
    ]


def _batches(sizes: list[int], batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    # Group questions of similar option counts so padding stays small; shuffle the batches.
    order = np.argsort(np.array(sizes) + rng.random(len(sizes)), kind="stable")
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


def _pad(mats: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(m.shape[0] for m in mats)
    x = np.zeros((len(mats), width, NUM_FEATURES), np.float32)
    mask = np.zeros((len(mats), width), bool)
    for i, m in enumerate(mats):
        x[i, : m.shape[0]] = m
        mask[i, : m.shape[0]] = True
    return torch.from_numpy(x), torch.from_numpy(mask)


def train_head(data: EmbeddedExamples, config: HeadConfig = HeadConfig(), *, progress: bool = True) -> HeadWeights:
    """Fit the perceptron on `data`; temperatures are left at 1 (see `fit_temperatures`)."""
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    mats = _feature_matrices(data)
    counts = Counter(data.families)
    weights = torch.tensor([1.0 / math.sqrt(counts[f]) for f in data.families], dtype=torch.float32)
    weights *= len(weights) / weights.sum()
    is_score = torch.tensor([q.kind == "score" for q in data.questions])
    answers = torch.from_numpy(data.answers)
    model = torch.nn.Sequential(
        torch.nn.Linear(NUM_FEATURES, config.hidden),
        torch.nn.GELU(approximate="tanh"),
        torch.nn.Linear(config.hidden, 1),
    )
    optimiser = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    steps = config.epochs * math.ceil(len(mats) / config.batch_size)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=config.learning_rate, total_steps=steps)
    bar = tqdm(total=steps, desc="training head", unit="step", disable=not progress)
    for _ in range(config.epochs):
        for idx in _batches([m.shape[0] for m in mats], config.batch_size, rng):
            x, mask = _pad([mats[i] for i in idx])
            logits = model(x).squeeze(-1).masked_fill(~mask, -1e9)
            log_p = torch.log_softmax(logits, dim=-1)
            target = answers[idx]
            loss_each = -log_p.gather(1, target[:, None]).squeeze(1)
            scored = is_score[idx]
            if config.rps_weight and scored.any():
                p = log_p.exp()[scored]
                cdf = p.cumsum(-1)
                truth = (torch.arange(p.shape[1])[None, :] >= target[scored][:, None]).float()
                levels = mask[scored].sum(-1).clamp(min=2).float()
                rps = ((cdf - truth) ** 2 * mask[scored]).sum(-1) / (levels - 1)
                loss_each = loss_each.clone()
                loss_each[scored] += config.rps_weight * rps
            loss = (loss_each * weights[idx]).mean()
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
    temps = dict(weights.temperatures)
    for kind in KINDS:
        rows = [i for i, q in enumerate(data.questions) if q.kind == kind]
        if len(rows) < 20:
            continue
        logits = [
            readout.logits(data.vectors[data.state_rows[i]], data.vectors[data.text_rows[i]], data.questions[i])
            for i in rows
        ]
        answers = data.answers[rows]

        def nll(log_t: float, logits=logits, answers=answers) -> float:
            total = 0.0
            for z, a in zip(logits, answers, strict=True):
                z = z / math.exp(log_t)
                total += float(np.logaddexp.reduce(z) - z[a])
            return total / len(answers)

        temps[kind] = float(math.exp(minimize_scalar(nll, bounds=(-3, 3), method="bounded").x))
    return HeadWeights(weights.w1, weights.b1, weights.w2, weights.b2, temps)
