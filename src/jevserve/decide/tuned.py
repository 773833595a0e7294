"""The tuned reader: the reading model over an encoder whose top layers were fine-tuned with it.

The reading model (decide/reader.py) reads the frozen encoder's token states. Here the state is encoded by
all-MiniLM-L6-v2 with its top layers replaced by fine-tuned copies (`jevserve train --tuned`, train/tuned.py; the
weights file holds only those layers, the rest comes from the shipped package), built into its own int8 graph like
every embedded graph (decide/onnx_build.py). The question and option texts are still embedded by the shipped encoder
(the reading model's token graph, so they are cached and shared with it), exactly as in training.

One encoder pass per distinct state gives both what the options read and the sentence vector: the state's first
`READ_TOKENS` positions (the windows of the shipped encoder, [CLS]/[SEP] counted), their unit rows, and their mean
as the sentence vector. Positions past the first 512 are not read at all, so a long text costs at most two windows;
the gateway bounds what it asks about (head and tail of long texts) before it gets here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jevserve.decide.base import DecisionItem, ModelCard
from jevserve.decide.embedder import QUESTION_TEXT, WINDOW_TOKENS, LRUCache
from jevserve.decide.encoder import PARAMS_DIR, EncoderBackend, model_card
from jevserve.decide.lexical_head import LexicalHead, load_heads, pair_cosine
from jevserve.decide.onnx_build import Precision
from jevserve.decide.reader import ReaderReadout, ReaderWeights, unit_rows
from jevserve.decide.token_embedder import READ_TOKENS, TokenEmbedder, rows_within, unit_vector
from jevserve.decide.trained import question_key

TUNED_WEIGHTS = PARAMS_DIR / "minilm-tuned.npz"  # the readout (ReaderWeights)
TUNED_NAME = "minilm-tuned-reader"
TUNED_RELEASE_DATE = "2026-12-04"  # the weights whose guard question also reads a lexical head


def layers_file(weights: Path) -> Path:
    """The fine-tuned encoder layers that go with a tuned reader's readout file (`X.npz` → `X.layers.npz`)."""
    return weights.with_suffix(".layers.npz")


def lexical_file(weights: Path) -> Path:
    """The lexical heads that go with a tuned reader's readout file (`X.npz` → `X.lexical.npz`; optional)."""
    return weights.with_suffix(".lexical.npz")


def tuned_files(weights: Path) -> tuple[Path, Path, Path]:
    """Every file a tuned reader's answers depend on, the one list of them: its readout (`weights`), its fine-tuned
    layers and its lexical heads (the last optional). Names and answer caches are digests of these."""
    return weights, layers_file(weights), lexical_file(weights)


def read_windows(ids: Sequence[int], cls_id: int, sep_id: int, read_tokens: int = READ_TOKENS) -> list[list[int]]:
    """The encoder windows whose positions the reader reads: [CLS] + up to 254 word pieces + [SEP] each, until
    `read_tokens` positions are covered (the last window is run whole and its states cut afterwards)."""
    windows: list[list[int]] = []
    read = 0
    for start in range(0, max(len(ids), 1), WINDOW_TOKENS):
        if read >= read_tokens:
            break
        window = [cls_id, *ids[start : start + WINDOW_TOKENS], sep_id]
        windows.append(window)
        read += len(window)
    return windows


class StateEncoder(TokenEmbedder):
    """The tuned encoder: a state's first `read_tokens` token states and their mean, one window at a time (int8
    activations are quantised per tensor, so a window never shares a run with another)."""

    def __init__(self, precision: Precision = "int8", *, layers: Path, state_cache_size: int = 64, **kwargs) -> None:
        super().__init__(precision, layers=layers, state_cache_size=state_cache_size, **kwargs)
        # text -> (its pass's token states as the encoder gave them, each word piece's character span): what a
        # window read in context takes its rows from
        self.pass_cache = LRUCache(state_cache_size)

    def encoder_pass(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(the first `read_tokens` token states of `text` (positions × 384), the (start, end) characters of each of
        its word pieces) (cached, read-only)."""
        cached = self.pass_cache.get(text)
        if cached is not None:
            return cached
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        hidden = []
        for window in read_windows(encoding.ids, self._cls_id, self._sep_id, self.read_tokens):
            arr = np.asarray([window], dtype=np.int64)
            hidden.append(self.session.run(None, {"input_ids": arr, "attention_mask": np.ones_like(arr)})[0][0])
        spans = np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2)
        found = (np.concatenate(hidden)[: self.read_tokens], spans)
        self.pass_cache.put(text, found)
        return found

    def read(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(unit token rows (positions × 384), unit sentence vector (384,)) of `text` (cached, read-only)."""
        cached = self.state_cache.get(text)
        if cached is not None:
            return cached[:-1], cached[-1]
        states, _ = self.encoder_pass(text)
        both = np.concatenate([unit_rows(states), unit_vector(states)[None, :]])
        self.state_cache.put(text, both)
        return both[:-1], both[-1]

    def read_within(self, window: str, text: str) -> tuple[np.ndarray, np.ndarray]:
        """`read` for a window of `text`, from `text`'s pass: the rows of the window's word pieces (where it first
        occurs in `text`) and their mean. A window that is not in `text`, holds no whole word piece, or reaches past
        the positions read is read alone (`read`)."""
        rows = rows_within(*self.encoder_pass(text), window, text)
        if rows is None:
            return self.read(window)
        return unit_rows(rows), unit_vector(rows)


class TunedReadingBackend(EncoderBackend):
    """The reading model over the tuned encoder's states; question and option texts from the shipped encoder."""

    reads_windows_in_context = True

    def __init__(
        self,
        readout: ReaderReadout,
        *,
        card: ModelCard,
        states: StateEncoder,
        texts: TokenEmbedder,
        heads: dict[str, LexicalHead] | None = None,
        weights: Path | None = None,
    ) -> None:
        super().__init__(readout, card=card, embedder=texts)
        self.states = states
        # question key → lexical head: for those questions P(yes) is the mean of the readout's and the head's (the
        # gateway's guard and cache questions, the bench's own yes/no questions) or, for a head that answers alone,
        # the head's; decide/lexical_head.py says why
        self.heads = heads or {}
        self.weights = weights  # the readout file it was loaded from (its layers and heads sit beside it)

    @property
    def identity_parts(self) -> tuple[str, ...]:
        """The lexical heads' digest: they answer only their own questions, which the probes do not ask."""
        if not self.heads:
            return ()
        digest = hashlib.sha256()
        for key in sorted(self.heads):
            head = self.heads[key]
            digest.update(key.encode() + head.coef.tobytes() + head.idf.tobytes() + repr(head.intercept).encode())
            digest.update(f"{head.analyzer} {head.combine}".encode())
        return (f"lexical heads {digest.hexdigest()[:12]}",)

    def check(self, items: Sequence[DecisionItem]) -> None:
        """Refuse states and question texts over the token limit before they are queued."""
        for state in {item.state for item in items}:
            self.states.check(state)
        for text in {text for item in items for text in self.readout.texts(item.question)}:
            self.embedder.check(text, QUESTION_TEXT)

    def text_chars(self, items: Sequence[DecisionItem]) -> int:
        """Characters of the question texts (a state is read up to its first 512 positions only, in its batch)."""
        return sum(len(t) for t in EncoderBackend.question_texts(self, items))

    def prepare(self, items: Sequence[DecisionItem], budget_s: float) -> bool:
        """Embed the items' question texts for about `budget_s` seconds; True once all are cached."""
        return self.embedder.warm(self.question_texts(items), budget_s)

    def question_texts(self, items: Sequence[DecisionItem]) -> list[str]:
        """The distinct texts the readout embeds for the items' questions (none for one its head answers alone)."""
        alone = {q for q in {item.question for item in items}
                 if (head := self.heads.get(question_key(q))) is not None and head.combine == "alone"}
        return super().question_texts([item for item in items if item.question not in alone])

    def decide(self, items: Sequence[DecisionItem]) -> list[np.ndarray]:
        """Encode each distinct state once, embed question texts (cached), then read every item on its own; a question
        whose lexical head answers alone is read by that head only, with no encoder run."""
        keys = {q: question_key(q) for q in {item.question for item in items}} if self.heads else {}
        heads = [self.heads.get(keys.get(item.question, "")) for item in items]
        alone = [head is not None and head.combine == "alone" for head in heads]
        # a window read in context takes its rows from its text's pass, so that text is encoded first (and once)
        encoded = dict.fromkeys(it.within or it.state for it, a in zip(items, alone, strict=True) if not a)
        read = {state: self.states.read(state) for state in encoded}
        for item, by_head in zip(items, alone, strict=True):
            if item.within is not None and not by_head:
                read[(item.state, item.within)] = self.states.read_within(item.state, item.within)
        item_texts = [() if a else self.readout.texts(it.question) for it, a in zip(items, alone, strict=True)]
        distinct: dict[str, int] = {}
        for texts in item_texts:
            for text in texts:
                distinct.setdefault(text, len(distinct))
        vectors = self.embedder.embed(list(distinct)) if distinct else None
        results = []
        for item, texts, head, by_head in zip(items, item_texts, heads, alone, strict=True):
            # a head reading the two texts' cosine gets it from the text embedder (cached per text), as it was fitted
            cosine = pair_cosine(item.state, self.embedder.embed) if head is not None and head.needs_cosine else None
            if by_head:
                yes = head.probability(item.state, cosine)
                results.append(np.array([yes, 1.0 - yes]))
                continue
            tokens, state_vector = read[item.state if item.within is None else (item.state, item.within)]
            text_vectors = vectors[[distinct[t] for t in texts]]
            probabilities = np.asarray(
                self.readout.probabilities(tokens, state_vector, text_vectors, item.question), np.float64
            )
            if head is not None and len(probabilities) == 2:
                yes = 0.5 * (float(probabilities[0]) + head.probability(item.state, cosine))
                probabilities = np.array([yes, 1.0 - yes])
            results.append(probabilities)
        return results

    def count_tokens(self, items: Sequence[DecisionItem]) -> int:
        """Word pieces the encoders read: each distinct state (up to the positions read) and every question text."""
        texts = {text for item in items for text in self.readout.texts(item.question)}
        states = {item.state for item in items}
        return sum(min(self.states.num_tokens(s), self.states.read_tokens) for s in states) + sum(
            self.embedder.num_tokens(t) for t in texts
        )


def trained_tuned_backend(weights: Path) -> TunedReadingBackend:
    """A tuned reader trained into `weights` (with its `.layers.npz`), named by a digest of both files, so it is
    never mistaken for the shipped one (answer caches and results are keyed by model name)."""
    layers = layers_file(weights)
    if not weights.exists() or not layers.exists():
        raise FileNotFoundError(f"no tuned reader at {weights} (with {layers.name}); train one with "
                                f"`jevserve train --tuned --out {weights}`")
    # the heads are part of the name only where there are some: a run without them keeps its name
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in tuned_files(weights) if p.exists())).hexdigest()[:8]
    return tuned_backend("int8", weights=weights, name=f"{TUNED_NAME}-{digest}")


def tuned_backend(
    precision: Precision = "int8",
    *,
    texts: TokenEmbedder | None = None,
    weights: Path = TUNED_WEIGHTS,
    name: str = TUNED_NAME,
) -> TunedReadingBackend:
    """The tuned reader (`jevserve train --tuned`), with its lexical heads where `weights` has them; `texts`: the
    shipped token-graph embedder to share, if any."""
    layers = layers_file(weights)
    if not weights.exists() or not layers.exists():
        raise FileNotFoundError(
            f"no tuned reader at {weights} (with {layers.name}); run `jevserve train --tuned` to create it"
        )
    card = model_card(
        name,
        precision,
        "with its top layers fine-tuned together with a reading model on JevServe-Bench train splits and everyday "
        "requests",
        TUNED_RELEASE_DATE,
    )
    return TunedReadingBackend(
        ReaderReadout(ReaderWeights.load(weights)),
        card=card,
        states=StateEncoder(precision, layers=layers),
        texts=texts or TokenEmbedder(precision),
        heads=load_heads(lexical_file(weights)),
        weights=weights,
    )

