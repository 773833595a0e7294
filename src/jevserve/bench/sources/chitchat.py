"""Conversation-return source: the BYU Chit-Chat Challenge conversations (chitchat-dataset), with per-message
timestamps and sender ids that are stable across conversations."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from jevserve.bench.sources.base import unique_records
from jevserve.bench.sources.errors import SourceFormatError
from jevserve.bench.sources.packages import CHITCHAT_DATASET
from jevserve.bench.sources.readers import field_of, read_json
from jevserve.bench.sources.records import Conversation, TimedMessage
from jevserve.bench.sources.spec import SourceSpec

CHITCHAT_FILE = "chitchat_dataset/dataset.json"


def parse_timestamp(value: str, where: str) -> float:
    """Seconds since the epoch of an ISO 8601 time; a time without a zone is taken as UTC."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise SourceFormatError(f"{where}: timestamp {value!r} is not ISO 8601") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _messages(turns: list, where: str) -> tuple[TimedMessage, ...]:
    # Upstream groups consecutive messages of one sender into a turn; records keep the flat message sequence.
    messages = []
    for turn in turns:
        if not isinstance(turn, list):
            raise SourceFormatError(f"{where}: each turn must be a list of messages")
        for message in turn:
            messages.append(
                TimedMessage(
                    text=field_of(message, "text", str, where),
                    sent_at_s=parse_timestamp(field_of(message, "timestamp", str, where), where),
                    sender_id=field_of(message, "sender", str, where),
                )
            )
    return tuple(messages)


def load_chitchat(root: Path) -> tuple[Conversation, ...]:
    """Every conversation as a flat, timed message sequence, in the order of the upstream conversation ids."""
    path = root / CHITCHAT_FILE
    data = read_json(path)
    if not isinstance(data, dict):
        raise SourceFormatError(f"{path}: expected a JSON object of conversation id -> conversation")
    records = []
    for conversation_id in sorted(data):
        conversation = data[conversation_id]
        where = f"{path} conversation {conversation_id}"
        if not isinstance(conversation, dict):
            raise SourceFormatError(f"{where}: expected a JSON object")
        records.append(
            Conversation(
                messages=_messages(field_of(conversation, "messages", list, where), where),
                origin=f"chitchat:{conversation_id}",
                topic=str(conversation.get("prompt") or ""),
            )
        )
    return unique_records(records)


SOURCES = (
    SourceSpec(
        name="chitchat",
        family="conversation-return",
        archive=CHITCHAT_DATASET,
        files=(CHITCHAT_FILE,),
        loader=load_chitchat,
        record_kind="Conversation",
        description="chit-chat conversations with timestamps and stable sender ids",
    ),
)
