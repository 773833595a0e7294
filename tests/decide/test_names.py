"""The embedded models' names say what each is, and their earlier names keep answering and filing results."""

from __future__ import annotations

from jevserve.decide.encoder import (
    EARLIER_NAMES,
    LEXICAL_READER_NAME,
    READER_NAME,
    TRAINED_NAME,
    ZERO_SHOT_NAME,
    aliases_of,
    model_card,
    row_name,
    served_name,
)


def test_each_shipped_model_keeps_its_earlier_name_as_an_alias_and_results_row():
    earlier = {ZERO_SHOT_NAME: "jev-minilm-zs", TRAINED_NAME: "jev-minilm-1", READER_NAME: "jev-minilm-2",
               LEXICAL_READER_NAME: "jev-minilm-3"}
    assert dict(EARLIER_NAMES) == earlier
    for name, old in earlier.items():
        assert not name.startswith("jev-minilm")
        assert aliases_of(name, "int8") == (old,) and aliases_of(name, "fp32") == (f"{old}-fp32",)
        assert row_name(name) == old


def test_a_model_without_an_earlier_name_files_its_results_under_its_own():
    name = "minilm-something-new"
    assert aliases_of(name, "int8") == () and row_name(name) == name


def test_the_card_carries_the_precision_in_name_and_aliases():
    card = model_card(READER_NAME, "fp32", "a reader", "2026-12-01")
    assert card.name == served_name(READER_NAME, "fp32") == f"{READER_NAME}-fp32"
    assert card.aliases == ("jev-minilm-2-fp32",) and card.description.startswith("all-MiniLM-L6-v2 (fp32")
