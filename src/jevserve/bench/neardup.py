"""Near-duplicate leak checks: 5-word runs (shingles) of every text training may read, against each test item.

Exact content hashes miss a jailbreak with one word changed or a request wrapped in another template. A test item
is a near-duplicate of the training side when at least `THRESHOLD` of its 5-word runs occur in ONE text training
may read (containment, the measure of Broder 1997, "On the resemblance and containment of documents"). Texts with
fewer than `MIN_SHINGLES` runs (under 8 words) are left to the exact check.

Shingles are hashed by scikit-learn's HashingVectorizer (2^24 buckets) and compared by one sparse product, so
every pair is counted exactly (no MinHash sampling) up to hash collisions.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import HashingVectorizer

SHINGLE_WORDS = 5
THRESHOLD = 0.8
MIN_SHINGLES = 4
_WORD = re.compile(r"\w+")


def shingles(text: str) -> list[str]:
    """The text's runs of 5 consecutive words (lower case, punctuation dropped)."""
    words = _WORD.findall(text.lower())
    return [" ".join(words[i : i + SHINGLE_WORDS]) for i in range(len(words) - SHINGLE_WORDS + 1)]


_VECTORIZER = HashingVectorizer(
    analyzer=shingles, n_features=2**24, alternate_sign=False, norm=None, binary=True, dtype=np.float32
)


def _matrix(texts: Sequence[str]) -> sparse.csr_matrix:
    return _VECTORIZER.transform(texts).tocsr()


class ReferenceIndex:
    """The shingles of a fixed set of reference texts, hashed once, to test many texts against."""

    def __init__(self, reference_texts: Sequence[str]) -> None:
        self.size = len(reference_texts)
        self._by_text = _matrix(list(reference_texts)).T.tocsc() if reference_texts else None

    def containment(self, texts: Sequence[str], *, chunk: int = 512) -> np.ndarray:
        """Per text, the largest share of its shingles found in one reference text (0 for texts too short)."""
        out = np.zeros(len(texts))
        if self._by_text is None:
            return out
        for start in range(0, len(texts), chunk):
            block = _matrix(list(texts[start : start + chunk]))
            sizes = np.asarray(block.sum(axis=1)).ravel()
            shared = (block @ self._by_text).max(axis=1).toarray().ravel()
            with np.errstate(invalid="ignore", divide="ignore"):
                out[start : start + len(sizes)] = np.where(sizes >= MIN_SHINGLES, shared / sizes, 0.0)
        return out

    def near_duplicates(self, texts: Sequence[str]) -> np.ndarray:
        """True for each text that is a near-duplicate of some reference text."""
        return self.containment(texts) >= THRESHOLD


def record_texts(record: object) -> Iterable[str]:
    """Every string inside a bench.sources record (fields, messages, function docs), for the reference side."""
    if isinstance(record, str):
        yield record
    elif isinstance(record, tuple | list):
        for value in record:
            yield from record_texts(value)
    elif dataclasses.is_dataclass(record):
        for field in dataclasses.fields(record):
            if field.name not in ("record_id", "group", "origin", "label", "language"):
                yield from record_texts(getattr(record, field.name))
