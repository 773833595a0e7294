"""Sentence embeddings from the embedded encoder, with a text cache and a window strategy for long texts.

Invariance: an embedding must not depend on which texts share its batch. The int8 graph quantises activations with
one scale per tensor, so a companion's outliers would change a text's embedding, and a padded fp32 batch moves the
last bits (about 1e-7): every window runs on its own, in both graphs, so a text's vector is the same to the bit
whatever else is read with it, and whether it is read at once or in turns (`warm`). On 2 CPU cores this costs
nothing (measured: batch 32 gives the same sequences/s as batch 1; docs/server.md).

Long texts: the encoder was trained on windows of at most 256 tokens. A longer text is split into consecutive
windows of up to 254 word pieces (+[CLS]/[SEP]); each window is mean-pooled and the windows are averaged weighted by
their token counts, which is the mean over all of the text's tokens. Nothing is cut. Texts over `max_tokens` are
refused (InputTooLongError, answered 413).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from jevserve.decide.base import InputTooLongError
from jevserve.decide.onnx_build import Output, Precision, graph_key, layers_digest, onnx_path, shipped_model_dir

WINDOW_TOKENS = 254  # word pieces per window; + [CLS] and [SEP] = the encoder's trained 256
DEFAULT_MAX_TOKENS = 32_768
EMBEDDING_DIM = 384


def default_num_threads() -> int:
    """onnxruntime intra-op threads when none are given: $JEVSERVE_INTRA_OP_THREADS, else every core."""
    configured = os.environ.get("JEVSERVE_INTRA_OP_THREADS", "").strip()
    if configured:
        if not configured.isdigit() or int(configured) < 1:
            raise ValueError(f"JEVSERVE_INTRA_OP_THREADS={configured!r}; expected a whole number >= 1")
        return int(configured)
    return max(1, os.cpu_count() or 1)


Spinning = Literal["off", "run", "on"]
SPINNING_VALUES = {"0": "off", "off": "off", "run": "run", "1": "on", "on": "on"}


def default_spinning() -> Spinning:
    """Whether onnxruntime's intra-op workers busy-wait between operators: $JEVSERVE_SPINNING=0 never, `run` only
    within a forward pass (they sleep once it ends), 1 also between passes (onnxruntime's own default); off by
    default."""
    configured = os.environ.get("JEVSERVE_SPINNING", "").strip().lower() or "0"
    if configured not in SPINNING_VALUES:
        raise ValueError(f"JEVSERVE_SPINNING={configured!r}; expected 0, run or 1")
    return SPINNING_VALUES[configured]  # type: ignore[return-value]


QUESTION_TEXT = "a question's instructions or option text"  # what `Embedder.check` names when it is not a state


COUNT_CHUNK_CHARS = 16_384  # characters tokenized at a time when a text is checked against the token limit


class LRUCache:
    """A thread-safe bounded mapping from text to a read-only embedding."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Any:
        """Return the cached value and mark it recently used, or None (counted as a miss)."""
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: str, value: np.ndarray | tuple[np.ndarray, ...]) -> None:
        """Store a value (an array or a tuple of arrays), evicting the least recently used entry when full."""
        if self.capacity <= 0:
            return
        for array in value if isinstance(value, tuple) else (value,):
            array.setflags(write=False)
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class Embedder:
    """Unit-length all-MiniLM-L6-v2 embeddings through onnxruntime; call `embed` from one thread at a time."""

    def __init__(
        self,
        precision: Precision = "int8",
        *,
        model_dir: Path | None = None,
        num_threads: int | None = None,
        spinning: Spinning | None = None,
        cache_size: int = 50_000,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        output: Output = "pooled",
        layers: Path | None = None,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model_dir = model_dir or shipped_model_dir()
        self.precision = precision
        self.max_tokens = max_tokens
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self._cls_id = self.tokenizer.token_to_id("[CLS]")
        self._sep_id = self.tokenizer.token_to_id("[SEP]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = num_threads or default_num_threads()
        options.inter_op_num_threads = 1
        # Spinning workers busy-wait for the next op: a little faster on idle cores, much slower when another
        # process wants them (benchmarks/decide/thread_settings.py, docs/server.md), so it is off by default.
        spin = default_spinning() if spinning is None else spinning
        options.add_session_config_entry("session.intra_op.allow_spinning", "0" if spin == "off" else "1")
        if spin == "run":  # spin between a pass's operators, sleep as soon as the pass returns
            options.add_session_config_entry("session.force_spinning_stop", "1")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(
            str(onnx_path(precision, model_dir, output=output, layers=layers)),
            options,
            providers=["CPUExecutionProvider"],
        )
        self.cache = LRUCache(cache_size)
        self._token_counts: dict[str, int] = {}
        self._identity_of = (model_dir, output, layers)
        self._identity: str | None = None
        self._warming = threading.local()  # per backend thread: the texts `warm` has half read

    @property
    def identity(self) -> str:
        """What this embedder's vectors depend on besides the texts (graph, precision, output, limits): the key of
        embeddings stored on disk between training runs (train/dataset.py). Computed when first asked: it hashes the
        encoder's weights file."""
        if self._identity is None:
            model_dir, output, layers = self._identity_of
            self._identity = "|".join([graph_key(model_dir), self.precision, output,
                                       layers_digest(layers) if layers else "-", str(self.max_tokens),
                                       type(self).__name__])
        return self._identity

    def num_tokens(self, text: str) -> int:
        """Word pieces in `text`, without special tokens (remembered for texts embedded recently)."""
        count = self._token_counts.get(text)
        if count is None:
            count = len(self.tokenizer.encode(text, add_special_tokens=False).ids)
        return count

    def check(self, text: str, what: str = "state") -> None:
        """Raise InputTooLongError when `text` (a state, or `what` it is) is over the token limit."""
        if len(text) > self.max_tokens and self.over_limit(text):
            raise InputTooLongError(
                f"{what} has more than {self.max_tokens} tokens, this model's limit; shorten or split it"
            )

    def over_limit(self, text: str) -> bool:
        """Whether `text` has more than `max_tokens` word pieces, tokenizing no more of it than it takes to tell.

        A text under the body limit can hold a million word pieces; tokenized whole only to be refused, it cost seconds
        and hundreds of MB. It is counted in pieces cut at a space instead, stopping once the sum is over the limit.
        The sum is exact: BERT's normaliser works character by character and its pre-tokenizer splits at every space,
        so no word piece spans a space (the cut is at a plain space only: a control character such as \\v is deleted
        by the normaliser, and joins the characters around it).
        """
        count = self._token_counts.get(text)
        if count is not None:
            return count > self.max_tokens
        total, start = 0, 0
        while start < len(text):
            end = start + COUNT_CHUNK_CHARS
            if end < len(text):
                space = text.find(" ", end)
                end = len(text) if space < 0 else space
            total += len(self.tokenizer.encode(text[start:end], add_special_tokens=False).ids)
            if total > self.max_tokens:
                return True
            start = end
        self._token_counts[text] = total
        return False

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an (n, 384) float32 array of unit-length embeddings, one row per text, using the cache."""
        out = np.empty((len(texts), EMBEDDING_DIM), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        for i, text in enumerate(texts):
            cached = self.cache.get(text)
            if cached is None:
                missing.setdefault(text, []).append(i)
            else:
                out[i] = cached
        if missing:
            fresh = self._embed_uncached(list(missing))
            for (text, rows), vector in zip(missing.items(), fresh, strict=True):
                self.cache.put(text, vector)
                out[rows] = vector
        return out

    def _embed_uncached(self, texts: list[str]) -> np.ndarray:
        windows: list[list[int]] = []
        owners: list[int] = []
        for i, text_windows in enumerate(self._windows(texts)):
            windows += text_windows
            owners += [i] * len(text_windows)
        return _combine(self._run_windows(windows), windows, owners, len(texts))

    def _windows(self, texts: list[str]) -> list[list[list[int]]]:
        """Each text's windows of word pieces, [CLS] and [SEP] added; InputTooLongError for one over `max_tokens`."""
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        if len(self._token_counts) > 4 * self.cache.capacity:
            self._token_counts.clear()
        out = []
        for text, enc in zip(texts, encodings, strict=True):
            ids = enc.ids
            self._token_counts[text] = len(ids)
            if len(ids) > self.max_tokens:
                raise InputTooLongError(f"text has {len(ids)} tokens; the limit is {self.max_tokens}")
            out.append([[self._cls_id, *ids[start : start + WINDOW_TOKENS], self._sep_id]
                        for start in range(0, max(len(ids), 1), WINDOW_TOKENS)])
        return out

    def warm(self, texts: Sequence[str], budget_s: float, *, token_states_of: Collection[str] = ()) -> bool:
        """Embed what of `texts` is not cached yet for about `budget_s` seconds (one window at least), keeping what
        is half done for the next call; True once every one is cached (with `token_states_of`, their token states
        too, where the embedder keeps them). A request whose texts take seconds to read (255 options of several
        pages each, a long pasted document) is read this way between other requests' batches, so that they need not
        wait for all of it (decide/batcher.py). Each window runs alone and a text's windows are combined as `embed`
        combines them, so a text warmed over several calls has exactly the vector `embed` gives it."""
        deadline = time.perf_counter() + budget_s
        partial: dict[tuple[str, bool], _Warming] = getattr(self._warming, "texts", {})
        request = tuple(dict.fromkeys(texts))
        if getattr(self._warming, "request", None) != request:  # another request's texts: none of them read yet
            self._warming.request, self._warming.read = request, set()
        # A text read in an earlier turn of the same request counts as read though the caches have let it go: a
        # request of more texts than they keep (a hundred tool results, the reader's 64 token states) was read in
        # turns for ever, each turn pushing out what the one before had read, and never answered. Its batches read
        # again what was let go.
        read: set[tuple[str, bool]] = self._warming.read
        wanted = [(text, text in token_states_of) for text in request]
        wanted = [key for key in wanted if key not in read and not self._is_warm(*key)]
        # what a request left half read (its client gone) is dropped when another request's texts are warmed
        self._warming.texts = partial = {key: partial[key] for key in wanted if key in partial}
        ran = False
        for key in wanted:
            entry = partial.get(key)
            if entry is None:  # tokenized once: a long text is read over many calls
                entry = partial[key] = _Warming(self._windows([key[0]])[0])
            while len(entry.pooled) < len(entry.windows):
                if ran and time.perf_counter() >= deadline:
                    return False
                entry.pooled.append(self._warm_window(entry, key[1]))
                ran = True
            self._put_warmed(key[0], entry, key[1])
            del partial[key]
            read.add(key)
        self._warming.request, self._warming.read = None, set()  # done: its texts are not held here
        return True

    def _is_warm(self, text: str, token_states: bool) -> bool:
        return self.cache.get(text) is not None

    def _warm_window(self, entry: _Warming, token_states: bool) -> np.ndarray:
        """The pooled row of the entry's next window."""
        return self._run_windows([entry.windows[len(entry.pooled)]])[0]

    def _put_warmed(self, text: str, entry: _Warming, token_states: bool) -> None:
        windows = entry.windows
        self.cache.put(text, _combine(np.stack(entry.pooled), windows, [0] * len(windows), 1)[0])

    def _run_windows(self, windows: list[list[int]]) -> np.ndarray:
        result = np.empty((len(windows), EMBEDDING_DIM), dtype=np.float32)
        for i, ids in enumerate(windows):  # each on its own (the module docstring says why)
            arr = np.asarray([ids], dtype=np.int64)
            result[i] = self.session.run(None, {"input_ids": arr, "attention_mask": np.ones_like(arr)})[0][0]
        return result


@dataclass
class _Warming:
    """A text `Embedder.warm` is reading: its windows, the pooled rows of those read, and (for an embedder that
    keeps them) the token states of its first windows."""

    windows: list[list[int]]
    pooled: list[np.ndarray] = field(default_factory=list)
    kept: list[np.ndarray] = field(default_factory=list)


def _combine(pooled: np.ndarray, windows: list[list[int]], owners: list[int], num_texts: int) -> np.ndarray:
    """Unit vectors of `num_texts` texts from their windows' pooled rows (`owners`: each window's text), each the mean
    over all of its word pieces: the windows' means weighted by their lengths, summed in window order."""
    weights = np.array([len(w) for w in windows], dtype=np.float32)
    sums = np.zeros((num_texts, EMBEDDING_DIM), dtype=np.float64)
    totals = np.zeros(num_texts, dtype=np.float64)
    np.add.at(sums, owners, pooled.astype(np.float64) * weights[:, None])
    np.add.at(totals, owners, weights)
    means = sums / totals[:, None]
    norms = np.linalg.norm(means, axis=1, keepdims=True)
    return (means / np.maximum(norms, 1e-12)).astype(np.float32)


_SHARED: dict[Precision, Embedder] = {}


def shared_embedder(precision: Precision = "int8") -> Embedder:
    """One Embedder per precision for this process, made on first use (callers that only need embeddings)."""
    if precision not in _SHARED:
        _SHARED[precision] = Embedder(precision)
    return _SHARED[precision]


def embed_texts(texts: Sequence[str]) -> np.ndarray:
    """Unit-length embeddings of `texts` by this process's shared int8 encoder (made on first use)."""
    return shared_embedder().embed(list(texts))


def embed_texts_fp32(texts: Sequence[str]) -> np.ndarray:
    """Unit-length embeddings of `texts` by this process's shared fp32 encoder: what the bench's cosine default rules
    read (cache-pairs, cache-chats). Their thresholds are tuned on the train side, where many thresholds score
    nearly alike: the int8 graph, which each onnxruntime release quantises and fuses its own way, moved the rule's
    threshold from 0.918 to 0.957 between releases and 19 of 177 test actions with it; the fp32 graph's answers
    differ between releases in the seventh decimal and left it in place (0.93633 under 1.29.0 and 1.32.0)."""
    return shared_embedder("fp32").embed(list(texts))
