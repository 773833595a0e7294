"""The embedded default backend: all-MiniLM-L6-v2 embeddings (shipped weights, onnxruntime) and a readout.

Per batch, every distinct text (states, instructions, options) is embedded once; repeated instruction and option
texts come from the embedder's cache, so a request mostly pays for its state. The readout then reads each item on
its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType

import numpy as np

from jevserve.decide.base import DecisionBackend, DecisionItem, ModelCard
from jevserve.decide.embedder import DEFAULT_MAX_TOKENS, QUESTION_TEXT, Embedder
from jevserve.decide.onnx_build import Precision
from jevserve.decide.readout import Readout, ZeroShotParams, ZeroShotReadout

PARAMS_DIR = Path(__file__).parent / "params"
# Each embedded model is served under a name that says what it is, and answers to its earlier name too (the
# committed results, answers caches and board rows are filed under the earlier names).
ZERO_SHOT_PARAMS = PARAMS_DIR / "zeroshot-minilm.json"
ZERO_SHOT_NAME = "minilm-zero-shot"
TRAINED_HEAD = PARAMS_DIR / "minilm-head.npz"
TRAINED_NAME = "minilm-pooled-head"
RELEASE_DATE = "2026-11-29"
READER_WEIGHTS = PARAMS_DIR / "minilm-reader.npz"
READER_NAME = "minilm-reader"
READER_RELEASE_DATE = "2026-12-01"
# the reading model with the lexical channel over the state's hashed words (decide/lexical.py), served beside the
# default: docs/training.md says why it is not the default
LEXICAL_READER_WEIGHTS = PARAMS_DIR / "minilm-reader-lexical.npz"
LEXICAL_READER_NAME = "minilm-reader-words"
EARLIER_NAMES = MappingProxyType(
    {
        ZERO_SHOT_NAME: "jev-minilm-zs",
        TRAINED_NAME: "jev-minilm-1",
        READER_NAME: "jev-minilm-2",
        LEXICAL_READER_NAME: "jev-minilm-3",
    }
)


def zero_shot_params() -> ZeroShotParams:
    """The committed calibration of the zero-shot readout, or defaults when it has not been fitted."""
    return ZeroShotParams.load(ZERO_SHOT_PARAMS) if ZERO_SHOT_PARAMS.exists() else ZeroShotParams()


class EncoderBackend(DecisionBackend):
    """Decisions from sentence embeddings of the state and of each option, read by a `Readout`."""

    def __init__(
        self,
        readout: Readout,
        *,
        card: ModelCard,
        embedder: Embedder | None = None,
        precision: Precision = "int8",
        max_state_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        self.readout = readout
        self.card = card
        self.embedder = embedder or Embedder(precision, max_tokens=max_state_tokens)

    def check(self, items: Sequence[DecisionItem]) -> None:
        """Refuse states and question texts over the token limit before they are queued (refused inside a batch,
        one request's text would fail every request batched with it)."""
        for state in {item.state for item in items}:
            self.embedder.check(state)
        for text in {text for item in items for text in self.readout.texts(item.question)}:
            self.embedder.check(text, QUESTION_TEXT)

    def question_texts(self, items: Sequence[DecisionItem]) -> list[str]:
        """The distinct texts of the items' questions the readout embeds, in order."""
        return list(dict.fromkeys(text for item in items for text in self.readout.texts(item.question)))

    def text_chars(self, items: Sequence[DecisionItem]) -> int:
        """Characters of the distinct states and question texts the items have embedded (batcher: whether to
        `prepare` them); a subclass that embeds fewer question texts counts them all, a bound cheap to take."""
        states = {item.state for item in items}
        return sum(map(len, states)) + sum(len(t) for t in EncoderBackend.question_texts(self, items))

    def prepare(self, items: Sequence[DecisionItem], budget_s: float) -> bool:
        """Embed the items' states and question texts for about `budget_s` seconds (Embedder.warm); True once all
        are cached."""
        states = list(dict.fromkeys(item.state for item in items))
        return self.embedder.warm([*states, *self.question_texts(items)], budget_s)

    def decide(self, items: Sequence[DecisionItem]) -> list[np.ndarray]:
        """Embed each distinct text of the batch once, then read every item independently."""
        item_texts = [self.readout.texts(item.question) for item in items]
        distinct: dict[str, int] = {}
        for item, texts in zip(items, item_texts, strict=True):
            for text in (item.state, *texts):
                distinct.setdefault(text, len(distinct))
        vectors = self.embedder.embed(list(distinct))
        results = []
        for item, texts in zip(items, item_texts, strict=True):
            state_vec = vectors[distinct[item.state]]
            text_vecs = vectors[[distinct[t] for t in texts]] if texts else np.empty((0, vectors.shape[1]), np.float32)
            results.append(np.asarray(self.readout.probabilities(state_vec, text_vecs, item.question), np.float64))
        return results

    def count_tokens(self, items: Sequence[DecisionItem]) -> int:
        """Word pieces the encoder read: each distinct state once, plus every text the readout embedded."""
        texts = {item.state for item in items}
        for item in items:
            texts.update(self.readout.texts(item.question))
        return sum(self.embedder.num_tokens(t) for t in texts)


def zero_shot_backend(precision: Precision = "int8", *, embedder: Embedder | None = None) -> EncoderBackend:
    """The zero-shot readout over the embedded encoder, under its own model name."""
    card = ModelCard(
        name=served_name(ZERO_SHOT_NAME, precision),
        description=f"all-MiniLM-L6-v2 ({precision}, onnxruntime) with a calibrated zero-shot similarity readout",
        release_date=RELEASE_DATE,
        aliases=aliases_of(ZERO_SHOT_NAME, precision),
    )
    return EncoderBackend(ZeroShotReadout(zero_shot_params()), card=card, embedder=embedder, precision=precision)


def row_name(name: str) -> str:
    """The name a model's committed results, answers caches and board rows are filed under: its earlier name when it
    has one, so renaming a served model leaves every committed result where it is."""
    return EARLIER_NAMES.get(name, name)


def served_name(name: str, precision: Precision) -> str:
    """The name a model is served under at `precision`: int8 has no suffix, fp32 adds `-fp32`."""
    return name if precision == "int8" else f"{name}-{precision}"


def aliases_of(name: str, precision: Precision) -> tuple[str, ...]:
    """The model's earlier name at `precision` (none for a model that never had one)."""
    earlier = EARLIER_NAMES.get(name)
    return (served_name(earlier, precision),) if earlier else ()


def model_card(name: str, precision: Precision, what: str, release_date: str) -> ModelCard:
    """A trained embedded model's card: the precision suffixes the name (int8 has none) and heads the description."""
    description = f"all-MiniLM-L6-v2 ({precision}, onnxruntime) {what} (docs/training.md)"
    return ModelCard(
        name=served_name(name, precision),
        description=description,
        release_date=release_date,
        aliases=aliases_of(name, precision),
    )


def trained_backend(
    precision: Precision = "int8",
    *,
    embedder: Embedder | None = None,
    weights: Path = TRAINED_HEAD,
    name: str = TRAINED_NAME,
) -> EncoderBackend:
    """The trained readout (`jevserve train`) over the embedded encoder."""
    from jevserve.decide.trained import HeadWeights, TrainedReadout

    if not weights.exists():
        raise FileNotFoundError(f"no trained readout at {weights}; run `jevserve train` to create it")
    card = model_card(name, precision, "with a readout trained on JevServe-Bench train splits", RELEASE_DATE)
    return EncoderBackend(TrainedReadout(HeadWeights.load(weights)), card=card, embedder=embedder, precision=precision)


def trained_file_backend(kind: str, weights: Path) -> EncoderBackend:
    """A readout you trained, int8: `encoder:PATH.npz` for `jevserve train`'s pooled head, `reader:PATH.npz` for a
    `jevserve train --reader [--lexical]` reading model. Named by a digest of the file, so that it is never mistaken
    for the shipped model (answer caches and results are keyed by model name)."""
    import hashlib
    import zipfile

    if not weights.is_file():
        raise FileNotFoundError(f"no weights file at {weights}; `jevserve train` writes one under ./trained/")
    try:
        with np.load(weights) as data:
            is_reader = "query_a" in data.files
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{weights}: not a weights file written by `jevserve train` ({exc})") from None
    if kind == "encoder" and is_reader:
        raise ValueError(f"{weights} is a reading model (jevserve train --reader): serve it as reader:{weights}")
    if kind != "encoder" and not is_reader:
        raise ValueError(f"{weights} is a pooled-vector readout (jevserve train): serve it as encoder:{weights}")
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:8]
    if kind == "encoder":
        return trained_backend("int8", weights=weights, name=f"{TRAINED_NAME}-{digest}")
    return reader_backend("int8", weights=weights, name=f"{READER_NAME}-{digest}",
                          what=f"a reading model you trained ({weights.name})")


class ReadingBackend(EncoderBackend):
    """The reading model: the state's token states (one encoder pass per distinct state) are read by each option."""

    def __init__(self, readout, *, card: ModelCard, embedder=None, precision: Precision = "int8") -> None:
        from jevserve.decide.token_embedder import TokenEmbedder

        super().__init__(readout, card=card, embedder=embedder or TokenEmbedder(precision), precision=precision)

    def prepare(self, items: Sequence[DecisionItem], budget_s: float) -> bool:
        """EncoderBackend's, with the states' token states kept as `decide` reads them."""
        states = list(dict.fromkeys(item.state for item in items))
        return self.embedder.warm([*states, *self.question_texts(items)], budget_s, token_states_of=states)

    def decide(self, items: Sequence[DecisionItem]) -> list[np.ndarray]:
        """Encode each distinct state once (token states and pooled vector), embed question texts (cached), then
        read every item on its own."""
        from jevserve.decide.lexical import word_bag
        from jevserve.decide.reader import unit_rows

        tokens = {state: unit_rows(self.embedder.token_states(state)) for state in {item.state for item in items}}
        bags = {state: word_bag(state) for state in tokens} if self.readout.weights.lexical_dim else {}
        item_texts = [self.readout.texts(item.question) for item in items]
        distinct: dict[str, int] = {}
        for texts in item_texts:
            for text in texts:
                distinct.setdefault(text, len(distinct))
        vectors = self.embedder.embed(list(distinct))
        states = dict(zip(tokens, self.embedder.embed(list(tokens)), strict=True))
        results = []
        for item, texts in zip(items, item_texts, strict=True):
            text_vecs = vectors[[distinct[t] for t in texts]]
            probabilities = self.readout.probabilities(
                tokens[item.state], states[item.state], text_vecs, item.question, bags.get(item.state)
            )
            results.append(np.asarray(probabilities, np.float64))
        return results


def reader_backend(
    precision: Precision = "int8",
    *,
    embedder=None,
    weights: Path = READER_WEIGHTS,
    name: str = READER_NAME,
    what: str = "token states read by each option's queries, trained on JevServe-Bench train splits",
    train_command: str = "jevserve train --reader",
) -> ReadingBackend:
    """The reading model (`jevserve train --reader`) over the embedded encoder's token states."""
    from jevserve.decide.reader import ReaderReadout, ReaderWeights

    if not weights.exists():
        raise FileNotFoundError(f"no reading model at {weights}; run `{train_command}` to create it")
    card = model_card(name, precision, what, READER_RELEASE_DATE)
    return ReadingBackend(ReaderReadout(ReaderWeights.load(weights)), card=card, embedder=embedder, precision=precision)


def lexical_reader_backend(precision: Precision = "int8", *, embedder=None) -> ReadingBackend:
    """jev-minilm-3: the reading model that also reads the state's hashed words (`jevserve train --reader
    --lexical`)."""
    return reader_backend(
        precision,
        embedder=embedder,
        weights=LEXICAL_READER_WEIGHTS,
        name=LEXICAL_READER_NAME,
        what="token states read by each option's queries and the state's hashed words, trained on JevServe-Bench "
        "train splits",
        train_command="jevserve train --reader --lexical",
    )
