"""With the real data (when fetched): the everyday test side never reaches training or the calibration file."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from jevserve.bench.everyday_export import (
    CALIBRATION_PATH,
    HANDCHECK_PATH,
    calibration_bytes,
    calibration_records,
    handcheck_sample,
    read_calibration,
    read_handcheck,
)
from jevserve.bench.neardup import MIN_SHINGLES, THRESHOLD, shingles
from jevserve.bench.sources import SourceMissingError, normalise_text
from jevserve.bench.sources.everyday import everyday_set, user_texts


@pytest.fixture(scope="module")
def everyday():
    try:
        return everyday_set()
    except SourceMissingError as exc:
        pytest.skip(f"needs the bench data: {exc}")


def _key(text: str) -> str:
    return normalise_text(text).casefold()


@pytest.mark.slow
def test_the_calibration_file_is_what_the_train_side_writes_and_holds_no_test_text(everyday):
    assert CALIBRATION_PATH.read_bytes() == calibration_bytes(calibration_records(everyday.train))
    test_ids = {r.request_id for r in everyday.test}
    test_texts = {_key(t) for r in everyday.test for t in user_texts(r.body)}
    for record in read_calibration():
        assert record["id"] not in test_ids
        assert not {_key(t) for t in user_texts(record["body"])} & test_texts


@pytest.mark.slow
def test_no_everyday_test_text_is_a_train_text_or_near_one(everyday, bench_tasks):
    """Exact shingle sets: no everyday test user text equals, or has ≥ 80% of its 5-word runs in, a train state of
    any task or a user text of the everyday train side."""
    _, loaded = bench_tasks
    train_texts = list(dict.fromkeys([i.state for e in loaded for i in e.train]
                                     + [t for r in everyday.train for t in user_texts(r.body)]))
    exact = {_key(t) for t in train_texts}
    postings: dict[str, list[int]] = defaultdict(list)
    for k, text in enumerate(train_texts):
        for run in set(shingles(text)):
            postings[run].append(k)
    crossing = []
    for request in everyday.test:
        for text in user_texts(request.body):
            runs = set(shingles(text))
            shared = Counter(k for run in runs for k in postings.get(run, ()))
            near = len(runs) >= MIN_SHINGLES and shared and max(shared.values()) >= THRESHOLD * len(runs)
            if _key(text) in exact or near:
                crossing.append(request.request_id)
    assert len(everyday.test) > 1000
    assert not crossing, f"{len(crossing)} everyday test requests reach training, e.g. {crossing[:3]}"


@pytest.mark.slow
def test_the_hand_check_labels_the_current_sample(everyday):
    assert [r["id"] for r in read_handcheck(HANDCHECK_PATH)] == [r.request_id for r in handcheck_sample(everyday.test)]
