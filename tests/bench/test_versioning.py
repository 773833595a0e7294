"""URL answers are cached under a version: the model's /v1/models entry and its answers to a fixed probe set."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from jevserve.bench.versioning import PROBES, ProbeFailed, endpoint_version, probe_version
from tests.bench.builders import fake_answer


class ProbedClient:
    """A fake endpoint whose weights are a number added to every probability."""

    def __init__(self, shift: float = 0.0, release: str = "2026-11-01") -> None:
        self.shift, self.release, self.sent = shift, release, []

    async def models(self) -> list[dict]:
        return [{"name": "m", "description": "d", "release_date": self.release}]

    async def decide_raw(self, body: Mapping[str, Any]) -> dict:
        self.sent.append(body)
        answer = fake_answer(body)
        for value in answer["answers"].values():
            if value["type"] == "noul":
                value["noul"] = min(1.0, value["noul"] + self.shift)
        return answer


def _version(client: ProbedClient) -> str:
    return asyncio.run(probe_version(client, "m"))


def test_the_same_weights_give_the_same_version_and_ask_every_probe():
    client = ProbedClient()
    assert _version(client) == _version(ProbedClient())
    assert len(client.sent) == len(PROBES) and all(body["model"] == "m" for body in client.sent)


def test_changed_weights_behind_the_same_name_change_the_version():
    assert _version(ProbedClient(shift=0.01)) != _version(ProbedClient())


def test_a_changed_models_entry_changes_the_version():
    assert _version(ProbedClient(release="2026-12-01")) != _version(ProbedClient())


def test_float_noise_below_the_rounding_keeps_the_version():
    answer = {"q": {"type": "noul", "noul": 0.123456}}
    noisy = {"q": {"type": "noul", "noul": 0.1234561}}
    assert endpoint_version({"name": "m"}, [answer]) == endpoint_version({"name": "m"}, [noisy])


def test_a_probe_reply_that_is_not_valid_stops_before_a_version_is_made(monkeypatch):
    import pytest

    from jevserve.bench.replies import InvalidReply

    monkeypatch.setattr("jevserve.bench.replies.INVALID_BACKOFF_S", 0.0)

    class Broken(ProbedClient):
        async def decide_raw(self, body: Mapping[str, Any]) -> dict:
            return {"answers": {}}

    class NoModels(ProbedClient):
        async def models(self) -> list[dict]:
            raise ValueError("Expecting value: line 1 column 1 (char 0)")  # a body that is not JSON

    with pytest.raises(ProbeFailed, match=r"version probe 1 of 3 .*no answer to question 'q'"):
        _version(Broken())
    with pytest.raises(InvalidReply, match="GET /v1/models"):
        _version(NoModels())


def test_probe_answers_within_the_tolerance_are_one_model_and_a_refusal_matches_any():
    from jevserve.bench.versioning import TOLERANCE, answers_close

    a = [{"q": {"type": "noul", "noul": 0.12345}}, {"refused": 400}]
    assert answers_close(a, [{"q": {"type": "noul", "noul": 0.12345 + TOLERANCE / 2}}, {"q": {"noul": 0.5}}])
    assert not answers_close(a, [{"q": {"type": "noul", "noul": 0.12345 + 2 * TOLERANCE}}, {"refused": 400}])
    assert not answers_close(a, [{"q": {"type": "choice", "noul": 0.12345}}, {"refused": 400}])  # another answer
    assert not answers_close(a, a[:1])


def test_settled_versions_are_recorded_and_matched_by_closeness(tmp_path):
    from jevserve.bench.versioning import settle_version

    entry = {"name": "m", "release_date": "2026-01-01"}
    first = settle_version(tmp_path, "m", entry, [{"q": {"noul": 0.10004}}])
    # 0.10006 rounds to 0.1001 where 0.10004 rounds to 0.1: the digests differ, the model does not
    assert settle_version(tmp_path, "m", entry, [{"q": {"noul": 0.10006}}]) == first
    other = settle_version(tmp_path, "m", entry, [{"q": {"noul": 0.2}}])  # other weights
    released = settle_version(tmp_path, "m", {**entry, "release_date": "2026-02-01"}, [{"q": {"noul": 0.10004}}])
    assert len({first, other, released}) == 3  # another models entry is another version, however close the answers
    assert sorted(p.name for p in tmp_path.glob("*.probes.json")) == sorted(
        f"m@{v}.probes.json" for v in (first, other, released))


def test_an_answers_label_needs_a_letter_or_digit(capsys):
    import pytest

    from jevserve.cli import main

    for label in ("...", ""):
        with pytest.raises(SystemExit) as refused:
            main(["bench", "run", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--answers-version", label])
        assert refused.value.code == 2 and "expected a label with letters or digits" in capsys.readouterr().err
