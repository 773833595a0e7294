"""Seeded, hash-based train/test splits: the one place that decides which side of a split a record is on.

A record's side depends only on its split key (content id or group) and a salt, never on the order or the number of
records loaded, so adding a source or a row never moves an existing record from test to train.

Use DEFAULT_SALT unless there is a reason not to: with one salt, a record is on the same side in every task that
uses it, so training on the train sides of all tasks never touches any task's test side. Two tasks with
different salts over one source would put some records in one task's train side and the other's test side.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

from jevserve.bench.sources.errors import SplitLeakError

Side = Literal["train", "test"]
DEFAULT_TEST_FRACTION = 0.3
DEFAULT_SALT = "jevserve-bench-v1"
# The salt `split_of` uses when none is passed: DEFAULT_SALT, or another one inside `split_salt(...)`, for measuring
# how much a fixed method's score moves with the split (`jevserve bench run --split-salt`).
_ACTIVE_SALT: ContextVar[str] = ContextVar("split_salt", default=DEFAULT_SALT)


def active_salt() -> str:
    """The salt splits use now (DEFAULT_SALT unless inside `split_salt`)."""
    return _ACTIVE_SALT.get()


@contextmanager
def split_salt(salt: str) -> Iterator[str]:
    """Within the block, every `split_of` without an explicit salt uses `salt` (and ShareGPT items are re-sided by
    it); results made this way are for measuring split variance only, never for training or the board."""
    if not isinstance(salt, str) or not salt:
        raise ValueError(f"salt must be a non-empty string, got {salt!r}")
    token = _ACTIVE_SALT.set(salt)
    try:
        yield salt
    finally:
        _ACTIVE_SALT.reset(token)


class HasSplitKey(Protocol):
    """Anything with a split key (every record kind of bench.sources)."""

    @property
    def split_key(self) -> str:
        """The key `split_of` hashes."""
        ...


R = TypeVar("R", bound=HasSplitKey)
T = TypeVar("T")


def split_of(record_id: str, salt: str | None = None, test_fraction: float = DEFAULT_TEST_FRACTION) -> Side:
    """"test" for about `test_fraction` of ids and "train" for the rest, fixed by sha256(salt, id); without a salt,
    the active one (DEFAULT_SALT unless inside `split_salt`)."""
    salt = active_salt() if salt is None else salt
    if not isinstance(salt, str) or not salt:
        raise ValueError(f"salt must be a non-empty string (e.g. the task name), got {salt!r}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be strictly between 0 and 1, got {test_fraction!r}")
    digest = hashlib.sha256(f"{salt}\x1f{record_id}".encode()).digest()
    # The first 8 bytes as a uniform number in [0, 1).
    position = int.from_bytes(digest[:8], "big") / 2**64
    return "test" if position < test_fraction else "train"


@dataclass(frozen=True)
class Split(Generic[T]):
    """The two sides of a split, each in the order the records were given."""

    train: tuple[T, ...]
    test: tuple[T, ...]


def split_records(
    records: Iterable[R], salt: str | None = None, test_fraction: float = DEFAULT_TEST_FRACTION
) -> Split[R]:
    """Split records by `split_of(record.split_key, salt)`; records sharing a key always share a side."""
    train: list[R] = []
    test: list[R] = []
    for record in records:
        (test if split_of(record.split_key, salt, test_fraction) == "test" else train).append(record)
    return Split(train=tuple(train), test=tuple(test))


def check_disjoint(train_ids: Iterable[str], test_ids: Iterable[str]) -> None:
    """Raise SplitLeakError when any content id is on both sides (e.g. a training manifest against a test split)."""
    shared = set(train_ids) & set(test_ids)
    if shared:
        sample: Sequence[str] = sorted(shared)[:5]
        raise SplitLeakError(
            f"{len(shared)} record id(s) are in both train and test, e.g. {', '.join(sample)}; "
            "build both sides with split_records and the same salt"
        )
