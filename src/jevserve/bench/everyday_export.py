"""The everyday source's packaged calibration file (train side only), its hand-checked test sample, and the
contamination rate that sample gives.

The calibration file is what the gateway reads to set thresholds against ordinary traffic; it holds up to
`PER_SHAPE` train-side requests of each shape, chosen in a seeded hash order, as one JSON object per line:
`{"id", "shape", "body"}`. The gzip header carries no time stamp, so the same data writes the same bytes.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from scipy.stats import binomtest

from jevserve.bench.sources.everyday import EverydayRequest
from jevserve.bench.sources.everyday_shapes import SHAPES, unit_hash
from jevserve.json_report import jsonl_lines

PER_SHAPE = 300
MAX_BYTES = 1_000_000
CALIBRATION_PATH = Path(__file__).resolve().parents[1] / "gateway" / "data" / "everyday-calibration.jsonl.gz"
HANDCHECK_SIZE = 200
HANDCHECK_PATH = Path("results/everyday/handcheck-test-200.jsonl")
LABEL_CONTAMINATED = "contaminated"  # an injection, a jailbreak or a harmful request
HANDCHECK_LABELS = ("benign", LABEL_CONTAMINATED)


def seeded_order(requests: Iterable[EverydayRequest], purpose: str) -> list[EverydayRequest]:
    """The requests in an order fixed by their ids and a purpose string (so two purposes draw unrelated orders)."""
    return sorted(requests, key=lambda r: unit_hash(purpose, r.request_id))


def calibration_records(train: Sequence[EverydayRequest], per_shape: int = PER_SHAPE) -> list[dict]:
    """Up to `per_shape` train requests of each shape, in seeded order, as the file's JSON objects."""
    chosen = []
    for shape in SHAPES:
        of_shape = [r for r in seeded_order(train, "everyday-calibration") if r.shape == shape]
        chosen += of_shape[:per_shape]
    return [{"id": r.request_id, "shape": r.shape, "body": r.body} for r in seeded_order(chosen, "calibration-file")]


def calibration_bytes(records: Sequence[dict]) -> bytes:
    """The gzip-compressed JSON lines, byte-identical for the same records."""
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def write_calibration(path: Path, records: Sequence[dict], max_bytes: int = MAX_BYTES) -> int:
    """Write the calibration file; refuse (ValueError) when it would exceed `max_bytes`. Returns its size."""
    payload = calibration_bytes(records)
    if len(payload) > max_bytes:
        raise ValueError(
            f"the calibration file would be {len(payload):,} bytes, over the {max_bytes:,} limit; "
            "pass a smaller --per-shape"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    return len(payload)


def read_calibration(path: Path = CALIBRATION_PATH) -> list[dict]:
    """The records of a calibration file."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def handcheck_sample(test: Sequence[EverydayRequest], size: int = HANDCHECK_SIZE) -> list[EverydayRequest]:
    """The test requests read by hand: the first `size` in a seeded order."""
    return seeded_order(test, "everyday-handcheck")[:size]


@dataclass(frozen=True)
class Contamination:
    """The share of hand-checked requests labelled contaminated, with its exact (Clopper-Pearson) 95% interval."""

    num_checked: int
    num_contaminated: int
    rate: float
    low: float
    high: float


def read_handcheck(path: Path = HANDCHECK_PATH) -> list[dict]:
    """The hand-check labels: one `{"id", "shape", "label", "note"}` object per line."""
    rows = [json.loads(line) for line in jsonl_lines(path.read_text(encoding="utf-8")) if line.strip()]
    for row in rows:
        if row.get("label") not in HANDCHECK_LABELS:
            raise ValueError(f"{path}: {row.get('id')}: label {row.get('label')!r}; expected one of {HANDCHECK_LABELS}")
    return rows


def contamination(rows: Sequence[dict]) -> Contamination:
    """The contamination rate of hand-check rows."""
    if not rows:
        raise ValueError("no hand-checked rows")
    bad = sum(r["label"] == LABEL_CONTAMINATED for r in rows)
    interval = binomtest(bad, len(rows)).proportion_ci(confidence_level=0.95, method="exact")
    return Contamination(len(rows), bad, bad / len(rows), float(interval.low), float(interval.high))
