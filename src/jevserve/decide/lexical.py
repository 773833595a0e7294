"""Hashed word bags of a state: what the reading model's lexical channel reads (decide/reader.py).

A TF-IDF logistic regression fitted per task wins many of the bench's tasks against the frozen encoder:
where the answer sits in exact words (an injection phrase, a function's name, a number), MiniLM's pooled vector and
its token states blur them. So the reading model may also read the state's word unigrams and bigrams. They are
hashed into a fixed number of buckets with crc32 (stable across processes and machines, unlike Python's `hash`),
each weighted 1 + log(count) as sublinear TF-IDF is, the row scaled to unit length; there is no IDF, since the learned
table weighs each term. Indices are sorted, so a bag's sum runs in one order wherever it is computed.
"""

from __future__ import annotations

import itertools
import math
import re
import zlib
from collections import Counter
from dataclasses import dataclass

import numpy as np

BUCKETS = 1 << 16
MAX_WORDS = 2048  # words read from the start of a state: longer conversations add cost, not signal
_WORD = re.compile(r"\w+")


def word_bag(text: str, buckets: int = BUCKETS) -> tuple[np.ndarray, np.ndarray]:
    """(sorted bucket indices int64, unit-length weights float32) of `text`'s word unigrams and bigrams."""
    words = _WORD.findall(text.lower())[:MAX_WORDS]
    terms = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
    counts = Counter(zlib.crc32(term.encode("utf-8", "surrogatepass")) % buckets for term in terms)
    indices = np.array(sorted(counts), np.int64)
    values = np.array([1.0 + math.log(counts[i]) for i in indices], np.float64)
    if len(values):
        values /= np.linalg.norm(values)
    return indices, values.astype(np.float32)


def bag_vector(table: np.ndarray, indices: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The bag's weighted sum of table rows: (table columns,) float32."""
    return (values @ table[indices]).astype(np.float32) if len(indices) else np.zeros(table.shape[1], np.float32)


@dataclass
class WordBags:
    """Ragged word bags: indices/values[offsets[i]:offsets[i + 1]] are text i's bag."""

    indices: np.ndarray  # int64
    values: np.ndarray  # float32
    offsets: np.ndarray  # (num texts + 1,) int64

    def of(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Text i's (indices, values)."""
        span = slice(self.offsets[i], self.offsets[i + 1])
        return self.indices[span], self.values[span]


def word_bags(texts: list[str], buckets: int = BUCKETS) -> WordBags:
    """The word bags of `texts`, in order."""
    bags = [word_bag(text, buckets) for text in texts]
    offsets = np.concatenate([[0], np.cumsum([len(i) for i, _ in bags])]).astype(np.int64)
    indices = np.concatenate([i for i, _ in bags]) if bags else np.empty(0, np.int64)
    values = np.concatenate([v for _, v in bags]) if bags else np.empty(0, np.float32)
    return WordBags(indices.astype(np.int64), values.astype(np.float32), offsets)
