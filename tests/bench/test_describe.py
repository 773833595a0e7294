"""The generated task pages show the questions as sent and the item counts."""

from __future__ import annotations

import json

import pytest

from jevserve.bench.describe import BEGIN_MARK, END_MARK, replace_generated, task_markdown
from jevserve.bench.pipeline import load_tasks
from tests.bench.builders import KeywordTask


def test_a_task_page_shows_its_counts_questions_and_rules():
    (entry,), _ = load_tasks([KeywordTask()], data=None)
    page = task_markdown(entry, None)
    assert "40 items: 20 positive, 20 negative" in page
    assert "train 20 / test 20" in page
    assert json.dumps(dict(KeywordTask.questions), indent=2) in page
    assert "block when P(bad) >= t" in page


def test_replace_generated_keeps_the_hand_written_text_around_the_block():
    document = f"intro\n{BEGIN_MARK}\nold\n{END_MARK}\noutro\n"
    assert replace_generated(document, "new") == f"intro\n{BEGIN_MARK}\nnew\n{END_MARK}\noutro\n"
    with pytest.raises(ValueError, match="no generated block"):
        replace_generated("no marks here", "new")
