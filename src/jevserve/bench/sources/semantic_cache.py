"""Semantic-cache reuse sources from fow-cache: question pairs and conversation pairs, each labelled whether one
cached answer serves both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jevserve.bench.sources.base import ChatMessage, unique_records
from jevserve.bench.sources.errors import SourceFormatError
from jevserve.bench.sources.packages import FOW_CACHE
from jevserve.bench.sources.readers import field_of, read_jsonl
from jevserve.bench.sources.records import ChatPair, TextPair
from jevserve.bench.sources.spec import SourceSpec

PAIRS_FILE = "fow_cache/data/pairs.jsonl"
CHAT_DIRS = ("fow_cache/data/conv-parts", "fow_cache/data/conv-long")


def load_pairs(root: Path) -> tuple[TextPair, ...]:
    """Question pairs: paraphrases and near repeats that share an answer, and one-edit traps that do not."""
    path = root / PAIRS_FILE
    records = []
    for number, row in read_jsonl(path):
        where = f"{path}:{number}"
        records.append(
            TextPair(
                a=field_of(row, "a", str, where),
                b=field_of(row, "b", str, where),
                same=field_of(row, "same_answer", bool, where),
                category=field_of(row, "category", str, where),
                origin=f"fow-cache-pairs:{field_of(row, 'id', str, where)}",
                ambiguous=str(row.get("ambiguous") or ""),
            )
        )
    return unique_records(records)


def _chat(messages: Any, where: str) -> tuple[ChatMessage, ...]:
    if not isinstance(messages, list) or not messages:
        raise SourceFormatError(f"{where}: a conversation must be a non-empty list of messages")
    chat = tuple(
        ChatMessage(role=field_of(m, "role", str, where), content=field_of(m, "content", str, where)) for m in messages
    )
    if chat[-1].role != "user":
        raise SourceFormatError(f"{where}: a conversation must end with a user message, got {chat[-1].role!r}")
    return chat


def load_chats(root: Path) -> tuple[ChatPair, ...]:
    """Conversation pairs (3 to 70 messages) whose last user messages match or nearly match; only the history
    tells whether the cached answer fits."""
    records = []
    for folder in CHAT_DIRS:
        paths = sorted((root / folder).glob("*.jsonl"))
        if not paths:
            raise SourceFormatError(f"{root / folder} has no .jsonl files")
        for path in paths:
            for number, row in read_jsonl(path):
                where = f"{path}:{number}"
                records.append(
                    ChatPair(
                        a=_chat(row.get("a"), f"{where} a"),
                        b=_chat(row.get("b"), f"{where} b"),
                        same=field_of(row, "same_answer", bool, where),
                        category=field_of(row, "subtype", str, where),
                        origin=f"fow-cache-chats:{field_of(row, 'id', str, where)}",
                        note=str(row.get("note") or ""),
                        ambiguous=str(row.get("ambiguous") or ""),
                    )
                )
    return unique_records(records)


SOURCES = (
    SourceSpec(
        name="fow-cache-pairs",
        family="cache",
        archive=FOW_CACHE,
        files=(PAIRS_FILE,),
        loader=load_pairs,
        record_kind="TextPair",
        description="question pairs: same answer (paraphrase, repeat) vs. one-edit traps",
    ),
    SourceSpec(
        name="fow-cache-chats",
        family="cache",
        archive=FOW_CACHE,
        files=tuple(f"{folder}/*.jsonl" for folder in CHAT_DIRS),
        loader=load_chats,
        record_kind="ChatPair",
        description="conversation pairs whose last message matches but whose history may not",
    ),
)
