"""Asking endpoints: resume after a killed run, free reruns, refused requests, failures that stop the run."""

from __future__ import annotations

import asyncio

import pytest

from jevserve.bench.answers_cache import AnswersCache
from jevserve.bench.runner import ask_missing, keyed
from jevserve.client import SystemOneAPIError
from tests.bench.builders import FakeClient


def make_requests(n: int) -> dict:
    bodies = [{"state": f"message {i} {'bad' if i % 3 == 0 else ''}",
               "questions": {"bad": {"type": "noul", "instructions": "Is it bad?"}}} for i in range(n)]
    return keyed("fake-model", bodies)


def run(client, requests, cache, concurrency=4):
    return asyncio.run(ask_missing(client, "fake-model", requests, cache, concurrency=concurrency, progress=False))


def test_a_killed_run_keeps_every_answer_and_the_rerun_sends_only_the_rest(tmp_path):
    requests = make_requests(50)
    first = FakeClient(fail_after=20)
    with pytest.raises(RuntimeError, match="endpoint went away"):
        run(first, requests, AnswersCache(tmp_path, "fake-model"))
    kept = AnswersCache(tmp_path, "fake-model")
    assert len(kept.answers) == first.num_answered == 20  # every answer received was written

    second = FakeClient()
    stats = run(second, requests, kept)
    assert len(second.sent) == 30 and stats.num_sent == 30 and stats.num_cached == 20
    assert {b["state"] for b in second.sent}.isdisjoint({b["state"] for b in first.sent[: first.num_answered]})
    assert len(AnswersCache(tmp_path, "fake-model").answers) == 50


def test_a_rerun_of_a_finished_run_sends_nothing(tmp_path):
    requests = make_requests(12)
    run(FakeClient(), requests, AnswersCache(tmp_path, "fake-model"))
    again = FakeClient()
    stats = run(again, requests, AnswersCache(tmp_path, "fake-model"))
    assert again.sent == [] and stats.num_cached == 12 and stats.num_decisions == 12


def test_a_refused_request_is_recorded_and_not_asked_again(tmp_path):
    requests = make_requests(3)
    refusing = FakeClient(fail_after=0, error=SystemOneAPIError(413, "payload_too_large", "state too long"))
    stats = run(refusing, requests, AnswersCache(tmp_path, "fake-model"))
    assert stats.num_refused == 3
    again = FakeClient()
    run(again, requests, AnswersCache(tmp_path, "fake-model"))
    assert again.sent == []


def test_a_server_error_stops_the_run(tmp_path):
    failing = FakeClient(fail_after=0, error=SystemOneAPIError(503, "overloaded_error", "busy"))
    with pytest.raises(SystemOneAPIError, match="busy"):
        run(failing, make_requests(3), AnswersCache(tmp_path, "fake-model"))


def test_concurrency_below_one_is_refused(tmp_path):
    with pytest.raises(ValueError, match="concurrency=0"):
        run(FakeClient(), make_requests(1), AnswersCache(tmp_path, "fake-model"), concurrency=0)


def test_ask_endpoint_turns_bad_endpoint_arguments_into_exit_2(tmp_path):
    from jevserve.bench.runner import AskFailed, ask_endpoint

    with pytest.raises(AskFailed, match="--model is required") as info:
        ask_endpoint("http://127.0.0.1:9", None, None, tmp_path, lambda model: make_requests(2), concurrency=1,
                     progress=False)
    assert info.value.exit_code == 2


def test_ask_endpoint_names_the_cache_and_exit_1_when_the_endpoint_is_unreachable(tmp_path):
    from jevserve.bench.runner import AskFailed, ask_endpoint

    # Port 9 (discard) is closed on a test machine: the connection is refused, after the client's retries.
    with pytest.raises(AskFailed, match="resumes") as info:
        ask_endpoint("http://127.0.0.1:9", "fake-model", None, tmp_path, lambda model: make_requests(2), concurrency=1,
                     progress=False)
    assert info.value.exit_code == 1 and str(tmp_path) in str(info.value)
