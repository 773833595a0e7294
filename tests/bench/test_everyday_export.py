"""The everyday calibration file and the hand-check: train side only, bounded, reproducible; the rate's interval."""

from __future__ import annotations

import gzip
import json

import pytest

from jevserve.bench.everyday_export import (
    CALIBRATION_PATH,
    HANDCHECK_PATH,
    HANDCHECK_SIZE,
    MAX_BYTES,
    calibration_bytes,
    calibration_records,
    contamination,
    read_calibration,
    read_handcheck,
    write_calibration,
)
from jevserve.bench.sources.everyday import EverydayRequest
from jevserve.bench.sources.everyday_shapes import SHAPES
from jevserve.sim.workloads.sharegpt import sharegpt_split


def request(k: int, shape: str) -> EverydayRequest:
    return EverydayRequest(f"everyday:c{k}_0", shape, {"messages": [{"role": "user", "content": f"q {k}"}]}, f"c{k}_0")


def test_calibration_records_take_at_most_n_per_shape_in_a_fixed_order():
    train = [request(k, SHAPES[k % 3]) for k in range(30)]
    records = calibration_records(train, per_shape=4)
    assert len(records) == 12
    assert records == calibration_records(list(reversed(train)), per_shape=4)
    assert {r["id"] for r in records} <= {r.request_id for r in train}


def test_the_file_bytes_are_reproducible_and_the_size_is_capped(tmp_path):
    records = calibration_records([request(k, "bare") for k in range(20)], per_shape=20)
    assert calibration_bytes(records) == calibration_bytes(records)
    path = tmp_path / "c.jsonl.gz"
    size = write_calibration(path, records)
    assert size == path.stat().st_size and read_calibration(path) == records
    with pytest.raises(ValueError, match="smaller --per-shape"):
        write_calibration(tmp_path / "big.jsonl.gz", records, max_bytes=100)


def test_contamination_interval_matches_the_closed_form_at_zero():
    rows = [{"id": str(k), "label": "benign"} for k in range(200)]
    result = contamination(rows)
    assert result.rate == 0 and result.low == 0
    assert result.high == pytest.approx(1 - 0.025 ** (1 / 200))


def test_the_packaged_calibration_file_is_train_side_everyday_traffic_under_1_mb():
    assert CALIBRATION_PATH.stat().st_size <= MAX_BYTES
    records = read_calibration()
    assert len({r["id"] for r in records}) == len(records) > 1000
    for record in records:
        conversation_id = record["id"].removeprefix("everyday:")
        assert sharegpt_split(conversation_id) == "train", record["id"]
        assert record["shape"] in SHAPES and record["body"]["messages"][-1]["role"] == "user"
    with gzip.open(CALIBRATION_PATH, "rt", encoding="utf-8") as handle:
        assert all(json.loads(line)["body"] for line in handle)


def test_the_committed_hand_check_is_200_test_side_requests():
    rows = read_handcheck(HANDCHECK_PATH)
    assert len(rows) == HANDCHECK_SIZE == len({r["id"] for r in rows})
    assert all(sharegpt_split(r["id"].removeprefix("everyday:")) == "test" for r in rows)
    assert all(r["note"] for r in rows if r["label"] != "benign")
