"""The reading model: each question's options read the state's token states, then a perceptron scores them.

The trained readout (decide/trained.py) sees the state only as one pooled vector, computed before any question is
known, so it cannot look for what a new question asks about. Here every option k of a question forms queries from
its own text and the question's instructions,

    x_k = [o_k, q, o_k⊙q, kind one-hot, level position]      u_kh = a_h o_k + b_h q + (x_k A) B_h + c_h

(h = 1..heads). The scalars a_h, b_h give each head a full-rank way to look for the option's or the question's own
words; the low-rank term (A, B) learns what else to look for.

and each query attends over the state's (unit-length) token states t_1..t_T:

    α_kh = softmax_t(u_kh · t_t),   r_kh = Σ_t α_kh,t t_t,   m_kh = logsumexp_t(u_kh · t_t)

A learned key or value projection would add nothing: u·(W t) = (Wᵀu)·t, and W Σ α t = Σ α W t, so the query carries
the key projection and the perceptron the value projection. The option's score is a two-layer perceptron over

    [φ_k (the trained readout's 2,308 features), r_k1, r_k1⊙o_k, …, r_kH, r_kH⊙o_k, m_k1 … m_kH]

optionally followed by a lexical channel (`lexical_dim` > 0): the state's hashed word bag (decide/lexical.py) summed
over a learned table, ℓ = Σ_i w_i E_i, and what each option looks for in it, [ℓ, ℓ⊙(x_k L + c)] (or, in the "linear"
mode, ℓ·(x_k L + c) added to the option's score); then, as before, a softmax over the question's own options with a
temperature: one per fixed question the serving stack asks (the bench's questions, fitted on held-out train
examples), else one per type. The state's token states come from one encoder pass per state (shared by all of its
questions); an option's score depends only on the state, its question and itself, so the protocol's invariances hold
as they do for the trained readout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from jevserve.decide.lexical import bag_vector
from jevserve.decide.trained import (
    EMBEDDING_DIM,
    KINDS,
    NUM_FEATURES,
    _gelu,
    features,
    question_key,
    question_parts,
    question_texts,
    softmax_at,
)
from jevserve.protocol import DecisionQuestion

QUERY_FEATURES = 3 * EMBEDDING_DIM + len(KINDS) + 1
QUERY_CACHE_SIZE = 1024  # questions whose queries a readout keeps
LEXICAL_ARRAYS = ("lexical_table", "lexical_query", "lexical_bias")


def reader_features(num_heads: int, lexical_dim: int = 0) -> int:
    """Inputs of the reader's perceptron."""
    return NUM_FEATURES + num_heads * (2 * EMBEDDING_DIM + 1) + 2 * lexical_dim


def query_inputs(text_vectors: np.ndarray, question: DecisionQuestion) -> np.ndarray:
    """(options × QUERY_FEATURES) inputs of the option queries; `text_vectors` follows `question_texts`."""
    options, qq, kind, position = question_parts(text_vectors, question)
    return np.concatenate([options, qq, options * qq, kind, position], axis=1).astype(np.float32)


def unit_rows(tokens: np.ndarray) -> np.ndarray:
    """Token states scaled to unit length (float32)."""
    tokens = np.asarray(tokens, np.float32)
    return tokens / np.maximum(np.linalg.norm(tokens, axis=1, keepdims=True), 1e-12)


@dataclass(frozen=True)
class ReaderWeights:
    """The reader's parameters and its temperatures."""

    query_a: np.ndarray  # (QUERY_FEATURES, rank)
    query_b: np.ndarray  # (rank, heads * 384)
    query_bias: np.ndarray  # (heads * 384,)
    query_direct: np.ndarray  # (heads, 2): a_h and b_h, the weights of o_k and q themselves
    w1: np.ndarray  # (reader_features(heads), hidden)
    b1: np.ndarray  # (hidden,)
    w2: np.ndarray  # (hidden,)
    b2: float
    temperatures: dict[str, float]  # per question type
    # per fixed question (`question_key`), fitted on its group's held-out train examples; any other question takes
    # its type's temperature (train/reader.py `fit_question_temperatures`)
    question_temperatures: dict[str, float] = field(default_factory=dict)
    # the lexical channel (absent in models trained without it): word-bag table (buckets, d), the options' lexical
    # queries (QUERY_FEATURES, d) and their bias (d,)
    lexical_table: np.ndarray | None = None
    lexical_query: np.ndarray | None = None
    lexical_bias: np.ndarray | None = None
    lexical_mode: str = "perceptron"  # or "linear": ℓ·looks_for is added to the logit instead

    def temperature(self, question: DecisionQuestion) -> float:
        """The temperature this question's logits are divided by."""
        if self.question_temperatures:
            found = self.question_temperatures.get(question_key(question))
            if found is not None:
                return found
        return self.temperatures.get(question.kind, 1.0)

    @property
    def num_heads(self) -> int:
        """Attention heads (queries per option)."""
        return self.query_bias.shape[0] // EMBEDDING_DIM

    @property
    def lexical_dim(self) -> int:
        """Width of the lexical channel (0: none)."""
        return 0 if self.lexical_table is None else int(self.lexical_table.shape[1])

    @classmethod
    def load(cls, path: Path) -> ReaderWeights:
        """Read weights written by `save`."""
        with np.load(path) as data:
            arrays = {k: data[k] for k in ("query_a", "query_b", "query_bias", "query_direct", "w1", "b1", "w2")}
            per_question = json.loads(str(data["question_temperatures"])) if "question_temperatures" in data else {}
            lexical = {k: data[k] for k in LEXICAL_ARRAYS if k in data}
            if "lexical_mode" in data:
                lexical["lexical_mode"] = str(data["lexical_mode"])
            return cls(
                **arrays,
                **lexical,
                b2=float(data["b2"]),
                temperatures=json.loads(str(data["temperatures"])),
                question_temperatures=per_question,
            )

    def save(self, path: Path) -> None:
        """Write float32 arrays (compressed)."""
        names = ("query_a", "query_b", "query_bias", "query_direct")
        arrays = {k: np.asarray(getattr(self, k), np.float32) for k in names}
        arrays |= {k: np.asarray(getattr(self, k), np.float32) for k in ("w1", "b1", "w2")}
        arrays |= {k: np.asarray(getattr(self, k), np.float32) for k in LEXICAL_ARRAYS if getattr(self, k) is not None}
        extra = {}
        if self.lexical_table is not None:
            extra["lexical_mode"] = self.lexical_mode
        if self.question_temperatures:  # files without them load as before
            extra["question_temperatures"] = json.dumps(self.question_temperatures, sort_keys=True)
        np.savez_compressed(
            path, **arrays, b2=np.float32(self.b2), temperatures=json.dumps(self.temperatures), **extra
        )


class ReaderReadout:
    """Option scores from the state's token states and pooled vector, the instructions' and options' vectors."""

    def __init__(self, weights: ReaderWeights) -> None:
        self.weights = weights
        # question -> (the weights, its text vectors, query inputs, queries): what an option looks for depends on the
        # question alone, so a question asked again (the gateway asks the same few) reuses them, computed as before
        self._queries: dict[DecisionQuestion, tuple[ReaderWeights, np.ndarray, np.ndarray, np.ndarray]] = {}

    def _query_parts(self, text_vectors: np.ndarray, question: DecisionQuestion) -> tuple[np.ndarray, np.ndarray]:
        """(query inputs (options × QUERY_FEATURES), queries (options × heads × 384)) of a question."""
        cached = self._queries.get(question)
        w = self.weights
        if cached is not None and cached[0] is w and np.array_equal(cached[1], text_vectors):
            return cached[2], cached[3]
        n = question.num_options
        inputs = query_inputs(text_vectors, question)
        queries = ((inputs @ w.query_a) @ w.query_b + w.query_bias).reshape(n, w.num_heads, EMBEDDING_DIM)
        option, instructions = inputs[:, None, :EMBEDDING_DIM], inputs[:, None, EMBEDDING_DIM : 2 * EMBEDDING_DIM]
        queries = queries + w.query_direct[None, :, 0:1] * option + w.query_direct[None, :, 1:2] * instructions
        for array in (inputs, queries):
            array.setflags(write=False)
        if len(self._queries) >= QUERY_CACHE_SIZE:  # questions sent by clients are many; the gateway's are few
            self._queries.clear()
        self._queries[question] = (w, np.array(text_vectors, copy=True), inputs, queries)
        return inputs, queries

    def texts(self, question: DecisionQuestion) -> list[str]:
        """The instructions and the option texts (as the trained readout embeds them)."""
        return question_texts(question)

    def logits(
        self,
        tokens: np.ndarray,
        state: np.ndarray,
        text_vectors: np.ndarray,
        question: DecisionQuestion,
        bag: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """Unnormalised option scores before the temperature; `tokens` are unit rows (see `unit_rows`), `bag` the
        state's `lexical.word_bag` (needed when the weights have a lexical channel)."""
        w = self.weights
        n = question.num_options
        inputs, queries = self._query_parts(text_vectors, question)
        scores = queries @ tokens.T  # (n, heads, T)
        top = scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores - top)
        total = weights.sum(axis=-1, keepdims=True)
        reads = (weights / total) @ tokens  # (n, heads, 384)
        spread = (top + np.log(total))[..., 0]  # logsumexp over tokens, (n, heads)
        options = text_vectors[1:][:, None, :]
        read_features = np.concatenate([reads, reads * options], axis=-1).reshape(n, -1)
        parts, linear = [features(state, text_vectors, question), read_features, spread], 0.0
        if w.lexical_table is not None:
            if bag is None:
                raise ValueError("this reading model has a lexical channel: pass the state's word bag")
            lexical = bag_vector(w.lexical_table, *bag)
            looks_for = lexical * (inputs @ w.lexical_query + w.lexical_bias)
            if w.lexical_mode == "linear":
                linear = looks_for.sum(axis=1)
            else:
                parts += [np.broadcast_to(lexical, looks_for.shape), looks_for]
        x = np.concatenate(parts, axis=1)
        hidden = _gelu(x @ w.w1 + w.b1)
        return hidden @ w.w2 + w.b2 + linear

    def probabilities(
        self,
        tokens: np.ndarray,
        state: np.ndarray,
        text_vectors: np.ndarray,
        question: DecisionQuestion,
        bag: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """One probability per option."""
        logits = self.logits(tokens, state, text_vectors, question, bag)
        return softmax_at(logits, self.weights.temperature(question))
