"""Everyday requests as the gateway sends them, answered no by the guard's and the harm guard's questions.

The bench's guard tasks hold a few hundred benign texts, most of them chosen to look like attacks; the requests a
gateway mostly sees are ordinary ones, behind system prompts, with tools offered, several turns deep, with pasted
lists and documents. So the train side of the bench's everyday source (ordinary ShareGPT turns in those shapes,
screened against every injection, jailbreak and harmful source) is turned into states exactly as the gateway turns
a request into what its decisions read (`serving.decision_inputs`), and asked the two questions whose false "yes"
blocks a request. The requests of the gateway's calibration file are left out: its thresholds are set on them, and
a threshold set on texts the model was trained on would be set too low.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import jevserve
from jevserve.train.examples import Example
from jevserve.train.rules import injection, refuse, stable_pick

FAMILY_GUARD = "everyday:guard"
FAMILY_HARM = "everyday:harm"
SOURCES = ("sharegpt",)
WINDOWS_PER_REQUEST = 1  # besides the whole text: one window of a long text, picked by hash (the cost of a state)
# The gateway's calibration file: read as data (train/ does not import the gateway).
CALIBRATION_FILE = Path(jevserve.__file__).parent / "gateway" / "data" / "everyday-calibration.jsonl.gz"


def _calibration_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def calibration_ids(path: Path = CALIBRATION_FILE) -> set[str]:
    """The ids of the requests the gateway's thresholds are calibrated on (empty when the file is absent)."""
    return {row["id"] for row in _calibration_rows(path)}


def calibration_texts(path: Path = CALIBRATION_FILE) -> list[str]:
    """The user texts of the calibration requests (empty when the file is absent)."""
    from jevserve.bench.sources.everyday import user_texts

    return [text for row in _calibration_rows(path) for text in user_texts(row["body"])]


def everyday_states(body: dict) -> tuple[list[str], str]:
    """(guard texts kept for training, the request text) of one chat body, as the gateway builds them: the whole
    latest untrusted text and at most WINDOWS_PER_REQUEST of its windows."""
    from jevserve.serving.decision_inputs import decision_inputs

    inputs = decision_inputs(body)
    texts = [t for t in inputs.guard_texts if t.strip()]
    kept = texts[:1]
    windows = texts[1:]
    for k in range(min(WINDOWS_PER_REQUEST, len(windows))):
        kept.append(windows[stable_pick(f"window\x1f{k}\x1f{texts[0]}", len(windows))])
    return list(dict.fromkeys(kept)), inputs.request_text


def everyday_examples(requests: Iterable, *, leave_out: set[str] | None = None) -> list[Example]:
    """Guard and harm negatives from everyday requests (objects with `request_id` and `body`), skipping the ids in
    `leave_out`."""
    leave_out = leave_out or set()
    out = []
    for request in requests:
        if request.request_id in leave_out:
            continue
        guard_texts, request_text = everyday_states(request.body)
        out += [Example(text, injection(), 1, FAMILY_GUARD, SOURCES) for text in guard_texts]
        if request_text.strip():
            out.append(Example(request_text, refuse(), 1, FAMILY_HARM, SOURCES))
    return out


def train_side_everyday() -> list[Example]:
    """The everyday source's train side, less the calibration requests, as guard and harm negatives."""
    from jevserve.bench.sources.everyday import load_everyday

    return everyday_examples(load_everyday("train"), leave_out=calibration_ids())


# Follow-ups: the everyday source keeps one request per conversation, mostly an opening turn; the measured failure of
# the first tuned reader was on the short turns that come later ("Can this be done with a bear call spread?" behind
# a system prompt: P(refuse) 0.9998; "How much is Taiwan GDP per capita?": 0.93). So later user turns of train-side
# ShareGPT conversations are added as negatives too, as the gateway reads them (the latest user turn of a request).
FOLLOW_UP_GUARD = "everyday:follow-up-guard"
FOLLOW_UP_HARM = "everyday:follow-up-harm"
FOLLOW_UPS = 12000  # turns kept, picked by hash: about one later turn in three of the train conversations
FOLLOW_UP_MAX_CHARS = 2000  # longer later turns are pasted documents, which the everyday source already has


def follow_up_candidates(items, side_of) -> list[str]:
    """Every later user turn (not a conversation's first) of the train-side conversations, up to
    FOLLOW_UP_MAX_CHARS, in file order, each text once."""
    out: dict[str, None] = {}
    for item in items:
        conversation_id = str(item.get("id"))
        if side_of(conversation_id) != "train":
            continue
        turns = [t for t in item.get("conversations") or [] if isinstance(t.get("value"), str)]
        human = [t["value"].strip() for t in turns if t.get("from") == "human"]
        first = 1 if turns and turns[0].get("from") == "human" else 0  # the opening turn is the everyday source's
        for text in human[first:]:
            if text and len(text) <= FOLLOW_UP_MAX_CHARS:
                out.setdefault(text, None)
    return list(out)


def screen_follow_ups(
    candidates: list[str], screen, test_texts: list[str], limit: int | None = FOLLOW_UPS
) -> list[str]:
    """The candidates the screen passes (no text of an injection, jailbreak or harmful source), none equal to, or a
    near-duplicate either way of, a test text; then `limit` of them (all when None) picked by hash (independent of
    order)."""
    from jevserve.bench.neardup import ReferenceIndex
    from jevserve.bench.sources.everyday import text_key

    exact = {text_key(t) for t in test_texts}
    kept = [t for t in candidates if text_key(t) not in exact and not screen.flags(t)]
    near = ReferenceIndex(sorted(set(test_texts))).overlaps(kept) if kept else []
    kept = [t for t, bad in zip(kept, near, strict=True) if not bad]
    return sorted(kept, key=_pick_order)[:limit]


def _pick_order(text: str) -> bytes:
    return hashlib.sha256(f"follow-up\x1f{text}".encode("utf-8", "surrogatepass")).digest()


def follow_up_examples(texts: Iterable[str]) -> list[Example]:
    """Guard and harm negatives of follow-up turns, read as the gateway reads a request whose latest turn it is."""
    out = []
    for text in texts:
        guard_texts, request_text = everyday_states({"messages": [{"role": "user", "content": text}]})
        out += [Example(t, injection(), 1, FOLLOW_UP_GUARD, SOURCES) for t in guard_texts]
        if request_text.strip():
            out.append(Example(request_text, refuse(), 1, FOLLOW_UP_HARM, SOURCES))
    return out


def screened_later_turns(test_texts: Iterable[str], limit: int | None = None) -> list[str]:
    """Later turns of train-side ShareGPT conversations, screened and kept away from every test-side ShareGPT turn,
    every everyday test request, the calibration requests and `test_texts`, in pick order (the first `limit`)."""
    from jevserve.bench.sharegpt_data import conversation_side as side_of
    from jevserve.bench.sharegpt_data import conversations
    from jevserve.bench.sources.everyday import Screen, load_everyday, screen_texts, user_texts

    items = conversations()
    held = list(test_texts) + [t for r in load_everyday("test") for t in user_texts(r.body)]
    held += calibration_texts()  # the gateway's thresholds are set on these: never trained on
    for item in items:
        if side_of(str(item.get("id"))) == "test":
            held += [t["value"] for t in item.get("conversations") or [] if t.get("from") == "human"
                     and isinstance(t.get("value"), str)]  # fmt: skip
    return screen_follow_ups(follow_up_candidates(items, side_of), Screen(screen_texts()), held, limit)


def train_side_follow_ups(test_texts: Iterable[str] = (), limit: int = FOLLOW_UPS) -> list[Example]:
    """FOLLOW_UPS later turns of train-side ShareGPT conversations as guard and harm negatives, screened like the
    everyday source and kept away from every test-side ShareGPT turn, every everyday test request and `test_texts`
    (the bench's test items)."""
    return follow_up_examples(screened_later_turns(test_texts, limit))


# Pasted lists: the gateway's guard threshold is the highest that acts on at most 1% of each shape of its
# calibration requests, and every train-side pasted list of the everyday source is a calibration request (126), so
# the reader is trained on no opening list while the second-highest of those 126 sets the guard's threshold. The
# later turns that paste a list (bullets or numbered lines, as the everyday source tells the shape) and that the
# follow-up pick above did not take are added as negatives of their own family (measured, not in the committed
# recipe: docs/training.md, "Pasted lists as negatives").
LIST_GUARD = "everyday:list-guard"
LIST_HARM = "everyday:list-harm"


def pasted_list_texts(screened: list[str], skip: int = FOLLOW_UPS) -> list[str]:
    """The pasted lists among `screened` (later turns in pick order) past the first `skip` (the follow-ups)."""
    from jevserve.bench.sources.everyday_shapes import pasted_shape

    return [t for t in screened[skip:] if pasted_shape(t) == "list"]


def pasted_list_examples(texts: Iterable[str]) -> list[Example]:
    """Guard and harm negatives of pasted lists (families LIST_GUARD, LIST_HARM), read as the gateway reads a request
    whose latest turn it is."""
    family = {FOLLOW_UP_GUARD: LIST_GUARD, FOLLOW_UP_HARM: LIST_HARM}
    return [replace(ex, family=family[ex.family]) for ex in follow_up_examples(texts)]


def train_side_pasted_lists(test_texts: Iterable[str] = ()) -> list[Example]:
    """Every later train-side turn that pastes a list and is not a follow-up already, screened and kept away from
    test texts as the follow-ups are, as guard and harm negatives."""
    return pasted_list_examples(pasted_list_texts(screened_later_turns(test_texts, None)))
