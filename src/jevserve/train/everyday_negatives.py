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
import json
from collections.abc import Iterable
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


def calibration_ids(path: Path = CALIBRATION_FILE) -> set[str]:
    """The ids of the requests the gateway's thresholds are calibrated on (empty when the file is absent)."""
    if not path.exists():
        return set()
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return {json.loads(line)["id"] for line in fh if line.strip()}


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
