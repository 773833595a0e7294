"""The playground store: migrations, idempotent answers, and rows that survive reopening."""

from __future__ import annotations

import sqlite3

import pytest

from jevserve.web.store import MIGRATIONS, ModelAnswer, Store, StoreError


def _round(store: Store, round_id: str = "r" * 22) -> str:
    store.create_round(round_id, "s" * 24, 7, "m", [("injection", "a"), ("cache", "b")])
    return round_id


def test_new_database_is_at_the_latest_schema_version_in_wal_mode(tmp_path):
    store = Store(tmp_path / "db.sqlite")
    assert store.schema_version() == len(MIGRATIONS)
    with sqlite3.connect(tmp_path / "db.sqlite") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reopening_keeps_rows_and_applies_no_migration_twice(tmp_path):
    round_id = _round(Store(tmp_path / "db.sqlite"))
    store = Store(tmp_path / "db.sqlite")
    assert store.get_round(round_id).items[1].item_id == "b"
    assert store.schema_version() == len(MIGRATIONS)


def test_database_newer_than_the_code_is_refused_with_a_message(tmp_path):
    Store(tmp_path / "db.sqlite")
    with sqlite3.connect(tmp_path / "db.sqlite") as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    with pytest.raises(StoreError, match=r"of a newer jevserve \(schema version 99"):  # before anything is written
        Store(tmp_path / "db.sqlite")


def test_second_answer_to_a_position_changes_nothing(tmp_path):
    store = Store(tmp_path / "db.sqlite")
    round_id = _round(store)
    assert store.record_answer(round_id, 0, "yes", "no", False, 1200.0)
    assert not store.record_answer(round_id, 0, "no", "no", True, 5.0)
    item = store.get_round(round_id).items[0]
    assert (item.choice, item.correct, item.time_ms) == ("yes", False, 1200.0)
    assert store.counts()["answers"] == 1


def test_shown_time_is_kept_from_the_first_showing(tmp_path):
    store = Store(tmp_path / "db.sqlite")
    round_id = _round(store)
    store.mark_shown(round_id, 0, now=100.0)
    store.mark_shown(round_id, 0, now=200.0)
    assert store.get_round(round_id).items[0].shown_at == 100.0


def test_next_position_is_the_first_unanswered(tmp_path):
    store = Store(tmp_path / "db.sqlite")
    round_id = _round(store)
    assert store.get_round(round_id).next_position == 0
    store.record_answer(round_id, 0, "yes", "yes", True, 1.0)
    assert store.get_round(round_id).next_position == 1
    store.record_answer(round_id, 1, "yes", "yes", True, 1.0)
    assert store.get_round(round_id).next_position is None


def test_answer_to_a_position_the_round_lacks_is_refused(tmp_path):
    store = Store(tmp_path / "db.sqlite")
    round_id = _round(store)
    with pytest.raises(sqlite3.IntegrityError):
        store.record_answer(round_id, 9, "yes", "yes", True, 1.0)
    assert store.counts()["answers"] == 0


def test_model_answer_is_stored_once_and_joined_to_the_person_answer(tmp_path):
    store = Store(tmp_path / "db.sqlite")
    round_id = _round(store)
    store.record_model_answer(round_id, 0, ModelAnswer("m", "yes", {"yes": 0.8, "no": 0.2}, 3.5))
    store.record_model_answer(round_id, 0, ModelAnswer("m", "no", {"yes": 0.1, "no": 0.9}, 9.0))
    store.record_answer(round_id, 0, "no", "no", True, 800.0)
    (row,) = store.answer_rows()
    assert (row["model_choice"], row["model_decision_ms"], row["model_probabilities"]) == ("yes", 3.5,
                                                                                          {"yes": 0.8, "no": 0.2})
    assert (row["decision"], row["item_id"], row["correct"]) == ("injection", "a", True)
