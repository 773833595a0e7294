"""fow-cache loaders: question pairs and conversation pairs for semantic-cache reuse."""

from __future__ import annotations

import pytest

from jevserve.bench.sources import ChatMessage, SourceFormatError
from jevserve.bench.sources.semantic_cache import CHAT_DIRS, PAIRS_FILE, load_chats, load_pairs
from tests.bench.sources_builders import jsonl, write_tree


def chat_row(row_id: str, last_a: str, last_b: str, same: bool) -> dict:
    """One conversation pair ending with a user message on each side."""
    history = [{"role": "user", "content": "My gym costs too much."}, {"role": "assistant", "content": "Cancel?"}]
    return {
        "id": row_id,
        "subtype": "context_swap",
        "same_answer": same,
        "a": [*history, {"role": "user", "content": last_a}],
        "b": [*history, {"role": "user", "content": last_b}],
        "note": "same membership",
    }


def test_pairs_keep_the_label_category_and_ambiguity(tmp_path):
    rows = [
        {"id": "negation-001", "category": "negation", "a": "Cancel it", "b": "Don't cancel it", "same_answer": False},
        {"id": "para-1", "category": "paraphrase", "a": "Lawful?", "b": "Illegal?", "same_answer": True,
         "ambiguous": "complementary"},
    ]  # fmt: skip
    trap, unsure = load_pairs(write_tree(tmp_path, {PAIRS_FILE: jsonl(rows)}))
    assert (trap.same, trap.category, trap.ambiguous) == (False, "negation", "")
    assert (unsure.same, unsure.ambiguous, unsure.origin) == (True, "complementary", "fow-cache-pairs:para-1")


def test_chats_read_both_folders_as_message_tuples(tmp_path):
    files = {
        f"{CHAT_DIRS[0]}/billing.jsonl": jsonl([chat_row("conv-billing-001", "Cancel it.", "cancel it", True)]),
        f"{CHAT_DIRS[1]}/retail.jsonl": jsonl([chat_row("conv-long-retail-001", "Yes", "Yes please", True)]),
    }
    short, long = load_chats(write_tree(tmp_path, files))
    assert short.a[-1] == ChatMessage("user", "Cancel it.")
    assert (short.category, short.note) == ("context_swap", "same membership")
    assert long.origin == "fow-cache-chats:conv-long-retail-001"


def test_chats_reject_a_conversation_that_does_not_end_with_the_user(tmp_path):
    row = chat_row("c-1", "Cancel it.", "Cancel it.", False)
    row["b"].append({"role": "assistant", "content": "Done."})
    files = {f"{CHAT_DIRS[0]}/billing.jsonl": jsonl([row]), f"{CHAT_DIRS[1]}/retail.jsonl": ""}
    with pytest.raises(SourceFormatError, match="must end with a user message, got 'assistant'"):
        load_chats(write_tree(tmp_path, files))
