"""Near-duplicate leak checks: 5-word runs (shingles) of every text training may read, against each test item.

Exact content hashes miss a jailbreak with one word changed or a request wrapped in another template. A test item
is a near-duplicate of the training side when, for ONE text training may read, at least `THRESHOLD` of its 5-word
runs occur in that text (containment) or the two texts' sets of runs have a Jaccard similarity of at least
`JACCARD_THRESHOLD` (resemblance; both measures are Broder's, 1997, "On the resemblance and containment of
documents"). Containment catches a test text wrapped inside a longer train text; resemblance catches two versions
of one jailbreak that each add their own paragraphs. Texts with fewer than `MIN_SHINGLES` runs (under 8 words)
are left to the exact check.

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
JACCARD_THRESHOLD = 0.5
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
        matrix = _matrix(list(reference_texts)) if reference_texts else None
        self._by_text = matrix.T.tocsc() if matrix is not None else None
        self._sizes = np.asarray(matrix.sum(axis=1)).ravel() if matrix is not None else np.zeros(0)

    def _shared(self, texts: Sequence[str], chunk: int):
        """Per chunk of texts: (first index, the texts' shingle counts, a sparse matrix of shingles shared with each
        reference text, the text row of each stored pair)."""
        for start in range(0, len(texts), chunk):
            block = _matrix(list(texts[start : start + chunk]))
            sizes = np.asarray(block.sum(axis=1)).ravel()
            shared = (block @ self._by_text).tocsr()
            rows = np.repeat(np.arange(shared.shape[0]), np.diff(shared.indptr))
            yield start, sizes, shared, rows

    def similarity(self, texts: Sequence[str], *, chunk: int = 512) -> tuple[np.ndarray, np.ndarray]:
        """Per text, the largest containment (share of its shingles found in one reference text) and the largest
        Jaccard similarity to one reference text (both 0 for texts too short)."""
        contained, resembles = np.zeros(len(texts)), np.zeros(len(texts))
        if self._by_text is None:
            return contained, resembles
        for start, sizes, shared, rows in self._shared(texts, chunk):
            # Per stored pair: shared runs / (runs of the text + runs of the reference text − shared runs).
            jaccard = shared.copy()
            jaccard.data = shared.data / np.maximum(sizes[rows] + self._sizes[shared.indices] - shared.data, 1)
            best_shared = shared.max(axis=1).toarray().ravel()
            best_jaccard = jaccard.max(axis=1).toarray().ravel()
            long_enough = sizes >= MIN_SHINGLES
            span = slice(start, start + len(sizes))
            contained[span] = np.where(long_enough, best_shared / np.maximum(sizes, 1), 0.0)
            resembles[span] = np.where(long_enough, best_jaccard, 0.0)
        return contained, resembles

    def containment(self, texts: Sequence[str]) -> np.ndarray:
        """Per text, the largest share of its shingles found in one reference text (0 for texts too short)."""
        return self.similarity(texts)[0]

    def overlaps(self, texts: Sequence[str], *, chunk: int = 512) -> np.ndarray:
        """True for each text that some reference text is a near-duplicate of, or that is one of a reference text,
        in either direction: the text nearly contains a reference text, a reference text nearly contains it, or the
        two resemble (for screening new training texts against test texts: `near_duplicates` over an index of the
        training texts is what the leak tests ask, and the containment there runs the other way)."""
        found = np.zeros(len(texts), dtype=bool)
        if self._by_text is None:
            return found
        for start, sizes, shared, rows in self._shared(texts, chunk):
            ref_sizes = self._sizes[shared.indices]
            text_sizes = sizes[rows]
            near = (
                ((text_sizes >= MIN_SHINGLES) & (shared.data >= THRESHOLD * text_sizes))
                | ((ref_sizes >= MIN_SHINGLES) & (shared.data >= THRESHOLD * ref_sizes))
                | (shared.data >= JACCARD_THRESHOLD * np.maximum(text_sizes + ref_sizes - shared.data, 1))
            )
            found[start + np.unique(rows[near])] = True
        return found

    def near_duplicates(self, texts: Sequence[str]) -> np.ndarray:
        """True for each text that is a near-duplicate of some reference text (containment or resemblance)."""
        contained, resembles = self.similarity(texts)
        return (contained >= THRESHOLD) | (resembles >= JACCARD_THRESHOLD)


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
