"""Ordinary tool calls for the gateway's tool gate: the packaged calibration file (train side) and the held-out test
side it is measured on.

The tool gate acts on the calls an upstream model makes; a call blocked for an ordinary request is a false action,
just as a guard block on an ordinary prompt is. BFCL (bfcl-eval, the `bfcl-relevance` source) ships real requests
with the calls that answer them (its possible answers): "Find the area of a triangle with base 10 and height 5" with
`calculate_triangle_area(base=10, height=5)`. Those are the ordinary calls. The file holds the train-side cases that
no readout was trained on (agent-tool-fit trains on at most 300 fitting cases, asked another question about another
state); the test side stays for measuring. Each record is a gateway calibration request with the calls the upstream
replied with: `{"id", "shape", "body": {"messages"}, "tool_calls": [OpenAI tool calls]}`; shapes `curated` (BFCL's
written categories) and `live` (its user-contributed ones), and `scoped`: BFCL's calls compute and look things up,
while the tool gate's false actions fall on calls that change something as asked (`read_file("report.txt")`,
deleting the `.log` files of `~/tmp`), so the file also holds the scoped calls of a third of the composed templates
(train/tool_calls_composed.py `scoped_calibration_records`, which no served head is fitted on).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jevserve.bench.everyday_export import calibration_bytes
from jevserve.bench.sources import split_of

TOOL_CALL_CALIBRATION_PATH = Path(__file__).resolve().parents[1] / "gateway" / "data" / "tool-call-calibration.jsonl.gz"
MAX_BYTES = 1_000_000


def shape_of(category: str) -> str:
    """`live` for BFCL's user-contributed categories (live_*), `curated` for its written ones."""
    return "live" if category.startswith("live") else "curated"


def first_acceptable(arguments_json: str) -> dict[str, Any]:
    """One concrete call from a BFCL possible answer: each parameter's first acceptable value (BFCL lists every value
    it accepts, "" meaning the parameter may be left out); a parameter whose first option is "" is left out."""
    arguments = json.loads(arguments_json)
    out = {}
    for name, accepted in arguments.items():
        if isinstance(accepted, list):
            if not accepted or accepted[0] == "":
                continue
            out[name] = accepted[0]
        else:
            out[name] = accepted
    return out


def openai_call(key: str, name: str, arguments: Mapping[str, Any], *, sort_keys: bool = False) -> dict:
    """One call of an OpenAI reply's `tool_calls`, its id fixed by `key`."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    function = {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False, sort_keys=sort_keys)}
    return {"id": f"call_{digest}", "type": "function", "function": function}


def openai_calls(case: Any) -> list[dict]:
    """A BFCL case's expected calls as an OpenAI reply's `tool_calls` (ids fixed by the case and position)."""
    return [
        openai_call(f"{case.record_id}\x1f{position}", call.name, first_acceptable(call.arguments_json), sort_keys=True)
        for position, call in enumerate(case.expected_calls)
    ]


def ordinary_call_cases(cases: Iterable[Any], side: str, trained_ids: set[str] = frozenset()) -> list[Any]:
    """The fitting BFCL cases of `side` that come with their calls, less the ids a readout was trained on."""
    return [
        c for c in cases
        if c.relevant and c.expected_calls and split_of(c.split_key) == side and c.record_id not in trained_ids
    ]  # fmt: skip


def tool_call_records(cases: Sequence[Any]) -> list[dict]:
    """Each case as a calibration request: its conversation, its shape and the calls that answer it, in id order."""
    records = [
        {
            "id": case.record_id,
            "shape": shape_of(case.category),
            "body": {"messages": [{"role": m.role, "content": m.content} for m in case.messages]},
            "tool_calls": openai_calls(case),
        }
        for case in cases
    ]
    return sorted(records, key=lambda r: r["id"])


def trained_tool_fit_ids(data: Any) -> set[str]:
    """The bfcl-relevance ids agent-tool-fit's train side holds (what every readout was trained on)."""
    from jevserve.bench.tasks import TASKS

    return {item.item_id for item in TASKS["agent-tool-fit"].load_items(data) if item.split == "train"}


def calibration_records_from(data: Any, scoped: Sequence[Mapping[str, Any]] = ()) -> list[dict]:
    """The packaged file's records: train-side ordinary calls no readout was trained on, and the `scoped` records
    (the composed templates' calibration calls, handed in: the bench does not import the training package), in id
    order."""
    bfcl = tool_call_records(ordinary_call_cases(data.source("bfcl-relevance"), "train", trained_tool_fit_ids(data)))
    return sorted([*bfcl, *scoped], key=lambda r: r["id"])


def held_out_records_from(data: Any) -> list[dict]:
    """The held-out ordinary calls (BFCL's test side), in the same form: what the operating point is measured on."""
    return tool_call_records(ordinary_call_cases(data.source("bfcl-relevance"), "test"))


def write_tool_calls(path: Path, records: Sequence[Mapping[str, Any]], max_bytes: int = MAX_BYTES) -> int:
    """Write the gzip-compressed JSON lines (the same records give the same bytes); refuse over `max_bytes`."""
    payload = calibration_bytes(records)
    if len(payload) > max_bytes:
        raise ValueError(f"the tool-call calibration file would be {len(payload):,} bytes, over {max_bytes:,}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    return len(payload)
