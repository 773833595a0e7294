"""Train the reading model (decide/reader.py) in torch on CPU, with the trained readout's loss and balance.

Batches are formed from examples whose states have similar token counts, so the padded token axis stays short;
every example carries its own copy of its state's token states (no sharing across a batch), which keeps each
example's forward pass exactly the one `ReaderReadout.logits` computes (tests/train pins the equality).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from jevserve.decide.lexical import BUCKETS, WordBags
from jevserve.decide.reader import QUERY_FEATURES, ReaderReadout, ReaderWeights, reader_features
from jevserve.decide.trained import EMBEDDING_DIM, KINDS, question_key
from jevserve.protocol import DecisionQuestion
from jevserve.train.dataset import EmbeddedExamples
from jevserve.train.head import (
    batch_features,
    batches_by,
    family_weights,
    fit_temperature,
    kind_temperatures,
    option_loss,
)
from jevserve.train.token_states import TokenStates


@dataclass(frozen=True)
class ReaderConfig:
    """Training settings, recorded in the manifest."""

    heads: int = 4
    rank: int = 128
    hidden: int = 128
    epochs: int = 4
    batch_size: int = 128
    learning_rate: float = 2e-3
    weight_decay: float = 1e-4
    rps_weight: float = 1.0
    dropout: float = 0.0  # on the perceptron's inputs, in training only
    direct_start: float = 10.0  # initial a_h (even heads) and b_h (odd heads); see ReaderNet
    attribute_questions: bool = True  # also train on train/attributes.py's questions (held-out phrasings apart)
    question_temperatures: bool = True  # a temperature per fixed question group (fit_question_temperatures)
    lexical_dim: int = 0  # width of the lexical channel over the state's hashed word bag (0: none; decide/lexical.py)
    # The table's learning rate, as a multiple of `learning_rate`. Adam moves each weight by about the learning
    # rate per step, and a term's weight in a unit-length bag of ~100 terms is ~0.1, so at the base rate a term's
    # row would need thousands of steps to matter (fastText trains its tables at rates near 0.1 for this reason).
    lexical_lr_scale: float = 30.0
    # Terms in fewer training states are left out of training (their rows stay zero, so serving ignores them too), as
    # the TF-IDF baseline's min_df: a bigram unique to one state would otherwise let the table memorise that state.
    lexical_min_df: int = 2
    # Each term of a training bag is dropped with this probability (the rest scaled up to keep the sum's expectation),
    # so the table cannot fit a state by the exact combination of its terms; serving reads every term.
    lexical_dropout: float = 0.0
    lexical_weight_decay: float = 1e-4  # AdamW's (decoupled) decay of the table
    # "perceptron": [ℓ, ℓ⊙looks_for] join the perceptron's inputs; "linear": ℓ·looks_for is added to the option's
    # logit (a bilinear term, as a logistic regression over the bag per question)
    lexical_mode: str = "perceptron"
    # (family prefix, factor): those families' examples weigh that much more in the loss (train/head.py
    # family_weights); the tuned recipe's first phase ignores it (its scaffold reader only shapes the layers)
    family_scale: tuple[tuple[str, float], ...] = ()
    seed: int = 0


# The recipe of jev-minilm-3 (`jevserve train --reader --lexical`): the defaults with the lexical channel on, its
# settings chosen on the train side (python benchmarks/decide/reader_validation.py --name reader_validation_lexical;
# docs/training.md). The defaults themselves are jev-minilm-2's, which every committed table's settings are relative to.
LEXICAL_READER = ReaderConfig(lexical_dim=32, lexical_lr_scale=3.0, lexical_dropout=0.5, lexical_weight_decay=5.0)


class ReaderNet(torch.nn.Module):
    """The torch form of `ReaderReadout.logits`, batched."""

    def __init__(self, config: ReaderConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.query_a = torch.nn.Linear(QUERY_FEATURES, config.rank, bias=False)
        self.query_b = torch.nn.Linear(config.rank, config.heads * EMBEDDING_DIM)
        # Even heads start by looking for the option's own words, odd heads for the question's: a scale of 10 on
        # unit vectors makes a token of cosine 0.9 outweigh a hundred unrelated ones from the first step, where a
        # zero start takes thousands of steps to grow (Adam moves a scalar by about the learning rate per step).
        direct = torch.zeros(config.heads, 2)
        direct[0::2, 0] = config.direct_start
        direct[1::2, 1] = config.direct_start
        self.query_direct = torch.nn.Parameter(direct)
        self.dropout = torch.nn.Dropout(config.dropout)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(reader_features(config.heads, perceptron_lexical_dim(config)), config.hidden),
            torch.nn.GELU(approximate="tanh"),
            torch.nn.Linear(config.hidden, 1),
        )
        self.lexical_dim = config.lexical_dim
        self.lexical_mode = config.lexical_mode
        if config.lexical_dim:  # made after the rest, so a reader without it starts from the same random draws
            self.lexical_table = torch.nn.EmbeddingBag(BUCKETS, config.lexical_dim, mode="sum")
            torch.nn.init.zeros_(self.lexical_table.weight)  # a row never trained on stays zero when served
            self.lexical_query = torch.nn.Linear(QUERY_FEATURES, config.lexical_dim)

    def forward(
        self,
        phi: torch.Tensor,
        queries_in: torch.Tensor,
        options: torch.Tensor,
        tokens: torch.Tensor,
        token_mask: torch.Tensor,
        bags: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """phi (B×O×2308), queries_in (B×O×Q), options (B×O×384), tokens (B×T×384 unit rows), token_mask (B×T);
        `bags` (indices, offsets, weights; `batch_bags`) when the reader has a lexical channel."""
        b, o, _ = phi.shape
        queries = self.query_b(self.query_a(queries_in)).view(b, o, self.heads, EMBEDDING_DIM)
        option, instructions = (
            queries_in[..., None, :EMBEDDING_DIM],
            queries_in[..., None, EMBEDDING_DIM : 2 * EMBEDDING_DIM],
        )
        queries = queries + self.query_direct[:, 0:1] * option + self.query_direct[:, 1:2] * instructions
        scores = torch.einsum("bohd,btd->boht", queries, tokens)
        scores = scores.masked_fill(~token_mask[:, None, None, :], -1e9)
        spread = torch.logsumexp(scores, dim=-1)
        reads = torch.einsum("boht,btd->bohd", torch.softmax(scores, dim=-1), tokens)
        read_features = torch.cat([reads, reads * options[:, :, None, :]], dim=-1).reshape(b, o, -1)
        parts, linear = [phi, read_features, spread], 0.0
        if self.lexical_dim:
            indices, offsets, weights = bags
            lexical = self.lexical_table(indices, offsets, per_sample_weights=weights)[:, None, :].expand(b, o, -1)
            looks_for = lexical * self.lexical_query(queries_in)
            if self.lexical_mode == "linear":
                linear = looks_for.sum(-1)
            else:
                parts += [lexical, looks_for]
        return self.mlp(self.dropout(torch.cat(parts, dim=-1))).squeeze(-1) + linear

    def weights(self, temperatures: dict[str, float]) -> ReaderWeights:
        """The numpy weights `ReaderReadout` serves."""
        first, second = self.mlp[0], self.mlp[2]
        return ReaderWeights(
            query_a=self.query_a.weight.detach().numpy().T.copy(),
            query_b=self.query_b.weight.detach().numpy().T.copy(),
            query_bias=self.query_b.bias.detach().numpy().copy(),
            query_direct=self.query_direct.detach().numpy().copy(),
            w1=first.weight.detach().numpy().T.copy(),
            b1=first.bias.detach().numpy().copy(),
            w2=second.weight.detach().numpy()[0].copy(),
            b2=float(second.bias.detach()[0]),
            temperatures=temperatures,
            **(
                {
                    "lexical_table": self.lexical_table.weight.detach().numpy().copy(),
                    "lexical_query": self.lexical_query.weight.detach().numpy().T.copy(),
                    "lexical_bias": self.lexical_query.bias.detach().numpy().copy(),
                    "lexical_mode": self.lexical_mode,
                }
                if self.lexical_dim
                else {}
            ),
        )


def perceptron_lexical_dim(config: ReaderConfig) -> int:
    """How many lexical numbers each of the perceptron's halves takes (0 in the linear mode)."""
    if config.lexical_mode not in ("perceptron", "linear"):
        raise ValueError(f"lexical_mode must be 'perceptron' or 'linear', not {config.lexical_mode!r}")
    return config.lexical_dim if config.lexical_mode == "perceptron" else 0


def unit_tokens(tokens: TokenStates) -> TokenStates:
    """Token states scaled to unit rows, kept float16."""
    rows = tokens.rows.astype(np.float32)
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    return TokenStates(rows.astype(np.float16), tokens.offsets, tokens.bags)


def _bags(tokens: TokenStates) -> WordBags:
    if tokens.bags is None:
        raise ValueError("a reader with a lexical channel needs the states' word bags (TokenStates.bags)")
    return tokens.bags


def frequent_buckets(tokens: TokenStates, token_index: np.ndarray, min_df: int) -> np.ndarray:
    """Which buckets occur in at least `min_df` of the distinct states `token_index` names (bool per bucket)."""
    seen = [_bags(tokens).of(i)[0] for i in np.unique(token_index)]
    counts = np.bincount(np.concatenate(seen), minlength=BUCKETS) if seen else np.zeros(BUCKETS, np.int64)
    return counts >= min_df


def batch_bags(
    tokens: TokenStates,
    token_index: np.ndarray,
    idx: np.ndarray,
    keep: np.ndarray | None = None,
    *,
    dropout: float = 0.0,
    rng: np.random.Generator | None = None,
) -> tuple[torch.Tensor, ...]:
    """EmbeddingBag inputs (indices, offsets, weights) of examples `idx`'s state word bags; with `keep` (bool per
    bucket), only the kept buckets (the weights keep the whole bag's scale, as served); with `dropout` (training),
    each term dropped with that probability and the others scaled by 1 / (1 − dropout)."""
    parts = [_bags(tokens).of(token_index[i]) for i in idx]
    if keep is not None:
        parts = [(i[keep[i]], v[keep[i]]) for i, v in parts]
    if dropout:
        kept = [rng.random(len(i)) >= dropout for i, _ in parts]
        parts = [(i[k], v[k] / (1.0 - dropout)) for (i, v), k in zip(parts, kept, strict=True)]
    offsets = np.concatenate([[0], np.cumsum([len(i) for i, _ in parts])[:-1]]).astype(np.int64)
    indices = np.concatenate([i for i, _ in parts]).astype(np.int64)
    weights = np.concatenate([v for _, v in parts]).astype(np.float32)
    return torch.from_numpy(indices), torch.from_numpy(offsets), torch.from_numpy(weights)


def batch_inputs(
    data: EmbeddedExamples, tokens: TokenStates, token_index: np.ndarray, idx: np.ndarray
) -> tuple[torch.Tensor, ...]:
    """(phi, queries_in, options, tokens, token_mask, option_mask) for examples `idx`; `token_index[i]` is example
    i's state in `tokens`, whose rows are already unit length."""
    phi, queries_in, options, option_mask = question_inputs(data, idx)
    lengths = [int(tokens.offsets[token_index[i] + 1] - tokens.offsets[token_index[i]]) for i in idx]
    token_rows = np.zeros((len(idx), max(lengths), EMBEDDING_DIM), np.float32)
    token_mask = np.zeros((len(idx), max(lengths)), bool)
    for row, i in enumerate(idx):
        token_rows[row, : lengths[row]] = tokens.of(token_index[i])
        token_mask[row, : lengths[row]] = True
    return phi, queries_in, options, torch.from_numpy(token_rows), torch.from_numpy(token_mask), option_mask


def question_inputs(data: EmbeddedExamples, idx: np.ndarray) -> tuple[torch.Tensor, ...]:
    """(phi, queries_in, options, option_mask) for examples `idx`: everything of a batch but the token states."""
    phi, option_mask = batch_features(data, idx)
    width = phi.shape[1]
    vectors = torch.from_numpy(data.vectors)
    queries_in = torch.zeros((len(idx), width, QUERY_FEATURES))
    options = torch.zeros((len(idx), width, EMBEDDING_DIM))
    for row, i in enumerate(idx):
        rows, question = data.text_rows[i], data.questions[i]
        n = len(rows) - 1
        o = vectors[rows[1:]]
        q = vectors[rows[0]] if question.instructions else torch.zeros(EMBEDDING_DIM)
        options[row, :n] = o
        queries_in[row, :n, :EMBEDDING_DIM] = o
        queries_in[row, :n, EMBEDDING_DIM : 2 * EMBEDDING_DIM] = q
        queries_in[row, :n, 2 * EMBEDDING_DIM : 3 * EMBEDDING_DIM] = o * q
        queries_in[row, :n, 3 * EMBEDDING_DIM + KINDS.index(question.kind)] = 1.0
        if question.kind == "score" and n > 1:
            queries_in[row, :n, -1] = torch.arange(n) / (n - 1)
    return phi, queries_in, options, option_mask


def train_reader(
    data: EmbeddedExamples,
    tokens: TokenStates,
    token_index: np.ndarray,
    config: ReaderConfig = ReaderConfig(),
    *,
    progress: bool = True,
    extra_loss: Callable[[torch.Tensor, torch.Tensor, np.ndarray], torch.Tensor] | None = None,
) -> ReaderNet:
    """Fit the reader on `data` (token states already unit rows); temperatures are fitted afterwards.

    `extra_loss(logits, option_mask, idx)`, when given, is added to each batch's loss (`idx`: the batch's example
    rows in `data`): how a benchmark tries another objective (benchmarks/decide/reader_ranking.py, commit
    828ecf92a7) in the same loop."""
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    weights = family_weights(data.families, config.family_scale)
    is_score = torch.tensor([q.kind == "score" for q in data.questions])
    answers = torch.from_numpy(data.answers)
    lengths = tokens.lengths()[token_index].astype(np.float64)
    model = ReaderNet(config)
    keep = frequent_buckets(tokens, token_index, config.lexical_min_df) if config.lexical_dim else None
    groups, rates = [{"params": [p for n, p in model.named_parameters() if not n.startswith("lexical_table")]}], [1.0]
    if config.lexical_dim:
        groups.append({"params": list(model.lexical_table.parameters()), "weight_decay": config.lexical_weight_decay})
        rates.append(config.lexical_lr_scale)
    max_lr = [config.learning_rate * rate for rate in rates]
    optimiser = torch.optim.AdamW(groups, lr=config.learning_rate, weight_decay=config.weight_decay)
    steps = config.epochs * math.ceil(len(lengths) / config.batch_size)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=max_lr, total_steps=steps)
    bar = tqdm(total=steps, desc="training reader", unit="step", disable=not progress)
    for _ in range(config.epochs):
        # examples of similar state lengths share a batch, so little of the token axis is padding
        for idx in batches_by(lengths * (1.0 + 0.3 * rng.random(len(lengths))), config.batch_size, rng):
            phi, queries_in, options, token_rows, token_mask, option_mask = batch_inputs(data, tokens, token_index, idx)
            bags = (
                batch_bags(tokens, token_index, idx, keep, dropout=config.lexical_dropout, rng=rng)
                if config.lexical_dim
                else None
            )
            logits = model(phi, queries_in, options, token_rows, token_mask, bags)
            loss = option_loss(logits, option_mask, answers[idx], is_score[idx], weights[idx], config.rps_weight)
            if extra_loss is not None:
                loss = loss + extra_loss(logits, option_mask, idx)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            bar.update(1)
    bar.close()
    return model


def reader_logits(
    weights: ReaderWeights, data: EmbeddedExamples, tokens: TokenStates, token_index: np.ndarray
) -> list[np.ndarray]:
    """Every example's option logits as `ReaderReadout` serves them (numpy, one question at a time)."""
    readout = ReaderReadout(weights)
    out = []
    for i in range(len(data.answers)):
        state_tokens = tokens.of(token_index[i]).astype(np.float32)
        bag = _bags(tokens).of(token_index[i]) if weights.lexical_dim else None
        out.append(
            readout.logits(
                state_tokens, data.vectors[data.state_rows[i]], data.vectors[data.text_rows[i]], data.questions[i], bag
            )
        )
    return out


def fit_reader_temperatures(
    weights: ReaderWeights,
    data: EmbeddedExamples,
    tokens: TokenStates,
    token_index: np.ndarray,
    *,
    per_question: bool = True,
) -> ReaderWeights:
    """Per-type temperatures on held-out train examples and, with `per_question`, one per fixed question group."""
    logits = reader_logits(weights, data, tokens, token_index)
    temps = kind_temperatures(logits, [q.kind for q in data.questions], data.answers, dict.fromkeys(KINDS, 1.0))
    by_question = (
        fit_question_temperatures(logits, data.questions, data.families, data.answers)[0] if per_question else {}
    )
    return ReaderWeights(**{**weights.__dict__, "temperatures": temps, "question_temperatures": by_question})


GENERATED_FAMILIES = ("synthetic:", "attribute:")  # families whose questions are generated per record


def question_groups(questions: Sequence[DecisionQuestion], families: Sequence[str]) -> dict[str, list[int]]:
    """Examples grouped by the fixed questions they ask: a bench task's examples with its variants' (family
    "task~variant"), tasks that ask one same question joined (guard-harmful and guard-overrefusal share theirs).
    Families whose questions are generated per record are left out: their type's temperature serves them."""
    parent: dict[str, str] = {}

    def root(task: str) -> str:
        while parent.setdefault(task, task) != task:
            task = parent[task]
        return task

    asked_by: dict[DecisionQuestion, str] = {}
    tasks = [family.split("~")[0] for family in families]
    for question, task in zip(questions, tasks, strict=True):
        if task.startswith(GENERATED_FAMILIES):
            continue
        first = asked_by.setdefault(question, task)
        a, b = root(first), root(task)
        if a != b:
            parent[max(a, b)] = min(a, b)  # the name that sorts first names the group: independent of order
    groups: dict[str, list[int]] = {}
    for i, task in enumerate(tasks):
        if not task.startswith(GENERATED_FAMILIES):
            groups.setdefault(root(task), []).append(i)
    members: dict[str, set[str]] = {}
    for task in parent:
        members.setdefault(root(task), set()).add(task)
    return {"+".join(sorted(members.get(r, {r}))): rows for r, rows in sorted(groups.items())}


def fit_question_temperatures(
    logits: list[np.ndarray],
    questions: Sequence[DecisionQuestion],
    families: Sequence[str],
    answers: np.ndarray,
    minimum: int = 20,
) -> tuple[dict[str, float], dict[str, float]]:
    """One temperature per question group (`question_groups`) with at least `minimum` held-out examples, for every
    question the group asks: (question_key → temperature, group → temperature).

    Why: one temperature per type is fitted mostly on the examples the reader knows best (15,594 attribute
    questions among them), so the decisions it knows least come out over-confident; fitted per group on the train
    side's held-out states, they are not (docs/training.md). A question no group asks keeps its type's."""
    by_key, by_group = {}, {}
    for group, rows in question_groups(questions, families).items():
        if len(rows) < minimum:
            continue
        temperature = fit_temperature([logits[i] for i in rows], answers[rows])
        by_group[group] = temperature
        for question in {questions[i] for i in rows}:  # a group asks a handful of questions over many rows
            by_key[question_key(question)] = temperature
    return dict(sorted(by_key.items())), by_group


def group_temperatures(
    weights: ReaderWeights, questions: Sequence[DecisionQuestion], families: Sequence[str]
) -> dict[str, float]:
    """The weights' per-question temperatures by group name (for the manifest: keys are fingerprints)."""
    named = {}
    for group, rows in question_groups(questions, families).items():
        found = weights.question_temperatures.get(question_key(questions[rows[0]]))
        if found is not None:
            named[group] = found
    return named
