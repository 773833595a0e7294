import json
from pathlib import Path

import pytest

from jevserve.sim.errors import WorkloadError
from jevserve.sim.workloads.sharegpt import (
    TokenCounts,
    is_valid,
    iter_whole_items,
    read_counts_csv,
    sample_sharegpt,
    sharegpt_split,
    shipped_counts,
)


def test_iter_whole_items_keeps_whole_items_and_drops_a_truncated_tail():
    text = json.dumps([{"id": "a"}, {"id": "b"}, {"id": "c", "x": "long"}])[:-15]
    assert [item["id"] for item in iter_whole_items(text)] == ["a", "b"]


def test_iter_whole_items_needs_an_array():
    with pytest.raises(WorkloadError, match="no JSON array"):
        list(iter_whole_items('{"id": 1}'))


def test_split_is_stable_and_about_a_fifth_test():
    ids = [f"conv{i}_0" for i in range(5000)]
    splits = [sharegpt_split(i) for i in ids]
    assert splits == [sharegpt_split(i) for i in ids]
    assert set(splits) == {"train", "test"}
    assert splits.count("test") / len(ids) == pytest.approx(0.2, abs=0.02)


def test_vllm_filter_bounds():
    assert is_valid(TokenCounts("a", 4, 4)) and is_valid(TokenCounts("a", 1024, 1024))
    assert not is_valid(TokenCounts("a", 3, 100))
    assert not is_valid(TokenCounts("a", 100, 3))
    assert not is_valid(TokenCounts("a", 1025, 10))
    assert not is_valid(TokenCounts("a", 1000, 1049))


def test_shipped_counts_cover_every_whole_conversation_with_a_human_then_gpt_turn():
    counts = shipped_counts()
    assert len(counts) == 17_379
    assert len({c.request_id for c in counts}) == len(counts)
    assert sum(is_valid(c) for c in counts) == 15_396


def test_sample_is_deterministic_per_seed_valid_and_in_the_split():
    a = sample_sharegpt(50, seed=1, split="test")
    assert [r.request_id for r in a] == [r.request_id for r in sample_sharegpt(50, seed=1, split="test")]
    assert [r.request_id for r in a] != [r.request_id for r in sample_sharegpt(50, seed=2, split="test")]
    assert all(sharegpt_split(r.request_id) == "test" for r in a)
    assert all(4 <= r.num_prompt_tokens <= 1024 and r.num_prompt_tokens + r.num_output_tokens <= 2048 for r in a)


def test_sample_asks_for_a_possible_size():
    with pytest.raises(WorkloadError, match=r"the ShareGPT 'test' split has 3075 valid requests, so ask for 1 to 3075"):
        sample_sharegpt(5000, seed=0, split="test")
    with pytest.raises(WorkloadError, match="split='dev'; expected one of: all, train, test"):
        sample_sharegpt(5, seed=0, split="dev")


def test_counts_csv_errors_name_the_line(tmp_path: Path):
    path = tmp_path / "c.csv"
    path.write_text("request_id,prompt_tokens,output_tokens\na,1,x\n")
    with pytest.raises(WorkloadError, match="counts CSV line 2"):
        read_counts_csv(path)
