"""A bench run from items to result documents, with a toy task and a fake endpoint."""

from __future__ import annotations

import pytest

from jevserve.bench.answers_cache import AnswersCache
from jevserve.bench.pipeline import ask, load_tasks, score_baselines, score_model
from tests.bench.builders import FakeClient, KeywordTask


def test_a_task_whose_data_is_missing_is_skipped_with_the_command_that_fetches_it():
    messages = []
    loaded, skipped = load_tasks([KeywordTask(missing=True), KeywordTask()], data=None, log=messages.append)
    assert len(loaded) == 1
    assert skipped[0].command == "jevserve data fetch --source toy"
    assert "run `jevserve data fetch --source toy`" in messages[0]


def test_a_model_that_separates_the_labels_scores_one_hundred(tmp_path):
    loaded, _ = load_tasks([KeywordTask()], data=None)
    cache = AnswersCache(tmp_path, "fake-model")
    stats = ask(FakeClient(), "fake-model", loaded, cache, concurrency=3, progress=False)
    assert stats.num_sent == 40
    document = score_model("fake-model", loaded, None, cache, command="jevserve bench run ...")
    result = document["tasks"]["toy-keyword"]
    assert result["score"] == pytest.approx(100.0)
    assert result["n_train"] == 20 and result["n_test"] == 20
    assert result["metrics"]["model"]["value"] == pytest.approx(1.0)
    assert result["automation"]["share"] == pytest.approx(1.0)
    assert document["average"]["num_tasks"] == 1


def test_the_default_rules_row_scores_zero_with_a_zero_width_interval():
    loaded, _ = load_tasks([KeywordTask()], data=None)
    documents = {d["model"]: d for d in score_baselines(loaded, None, command="jevserve bench run --baselines")}
    result = documents["default-rules"]["tasks"]["toy-keyword"]
    assert result["score"] == 0.0 and result["score_interval"] == [0.0, 0.0]
    # the toy task does not pool sources: the surface probe reads it, the source's majority has nothing to know
    assert list(documents["source-style"]["tasks"]) == ["toy-keyword"]
    assert documents["source-majority"]["tasks"] == {}
