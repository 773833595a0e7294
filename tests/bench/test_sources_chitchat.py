"""Chit-chat loader: conversations with timestamps and stable sender ids, flattened to timed messages."""

from __future__ import annotations

import json

import pytest

from jevserve.bench.sources import SourceFormatError
from jevserve.bench.sources.chitchat import CHITCHAT_FILE, load_chitchat, parse_timestamp
from tests.bench.sources_builders import write_tree

ANN, BOB = "22578ac2-6317-44d5-8052-0a59076e0b96", "bebad07e-15df-48c3-a04f-67db828503e3"


def msg(text: str, at: str, sender: str) -> dict:
    """One chit-chat message."""
    return {"text": text, "timestamp": at, "sender": sender}


def test_parse_timestamp_reads_utc_and_treats_a_naive_time_as_utc():
    assert parse_timestamp("1970-01-01T00:01:00Z", "t") == 60.0
    assert parse_timestamp("1970-01-01T00:01:00", "t") == 60.0


def test_parse_timestamp_names_a_bad_value():
    with pytest.raises(SourceFormatError, match="row 3: timestamp 'yesterday' is not ISO 8601"):
        parse_timestamp("yesterday", "row 3")


def test_conversations_are_flattened_in_order_with_their_senders(tmp_path):
    data = {
        "b-conversation": {"messages": [[msg("Hello", "2018-04-19T19:57:51Z", ANN)]], "start": "", "prompt": "Hi?"},
        "a-conversation": {
            "messages": [
                [msg("Hello", "2018-04-19T19:57:51Z", ANN)],
                [msg("Hey", "2018-04-19T19:58:14Z", BOB), msg("How are you?", "2018-04-19T19:58:18Z", BOB)],
            ],
            "start": "2018-04-20T01:57:41Z",
        },
    }
    first, second = load_chitchat(write_tree(tmp_path, {CHITCHAT_FILE: json.dumps(data)}))
    assert first.origin == "chitchat:a-conversation"  # sorted by upstream id, not file order
    assert [m.text for m in first.messages] == ["Hello", "Hey", "How are you?"]
    assert first.sender_ids == (ANN, BOB)
    assert first.messages[2].sent_at_s - first.messages[0].sent_at_s == 27.0
    assert (second.topic, first.topic) == ("Hi?", "")
