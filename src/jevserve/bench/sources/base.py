"""Content ids shared by every record kind, and the split-key mixin.

A record's `record_id` is the sha1 of what a model would see (texts, turns, function documents), never of its label
or provenance. So the same prompt shipped by two packages gets the same id, lands in the same split and cannot leak
from a training set into a test set. Records that must stay together (the two halves of a matched pair, the answers
of several models to one problem) share a `group`, and splits use `split_key`, which is the group when there is one.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

_SPACE = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    """Text as hashed for ids: Unicode NFC, whitespace runs collapsed to one space, ends stripped (case is kept)."""
    return _SPACE.sub(" ", unicodedata.normalize("NFC", text)).strip()


def _normalise(value: Any) -> Any:
    if isinstance(value, str):
        return normalise_text(value)
    if isinstance(value, tuple | list):
        return [_normalise(v) for v in value]
    return value


def content_id(kind: str, *parts: Any) -> str:
    """The sha1 (hex) of a record kind and its normalised content parts (strings, numbers, nested sequences)."""
    payload = json.dumps([kind, *(_normalise(p) for p in parts)], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha1(payload.encode("utf-8")).hexdigest()


def assign_id(record: Any, kind: str, *parts: Any) -> None:
    """Set `record.record_id` on a frozen record from its content, once, in its `__post_init__`."""
    object.__setattr__(record, "record_id", content_id(kind, *parts))


class SplitKeyed:
    """Mixin giving a record its split key: the group when set, else the content id."""

    __slots__ = ()
    record_id: str
    group: str

    @property
    def split_key(self) -> str:
        """What `split_of` hashes: records with the same key always land in the same split."""
        return self.group or self.record_id


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a chat: its role ("system", "user", "assistant") and its text."""

    role: str
    content: str


K = TypeVar("K", bound=SplitKeyed)


def message_parts(messages: Sequence[ChatMessage]) -> list[list[str]]:
    """The content of chat messages as id parts: [[role, content], ...]."""
    return [[m.role, m.content] for m in messages]


def unique_records(records: Iterable[K], label_of: Callable[[K], Hashable] | None = None) -> tuple[K, ...]:
    """The records in order, keeping the first of each content id (upstream files repeat some rows).

    With `label_of`, an id that comes with two different labels is upstream label noise, and every record with
    that id is dropped rather than letting file order pick the label.
    """
    records = list(records)
    labels: dict[str, set[Hashable]] = {}
    if label_of is not None:
        for record in records:
            labels.setdefault(record.record_id, set()).add(label_of(record))
    seen: set[str] = set()
    kept = []
    for record in records:
        if record.record_id in seen or len(labels.get(record.record_id, ())) > 1:
            continue
        seen.add(record.record_id)
        kept.append(record)
    return tuple(kept)
