"""Asking endpoints: resume after a killed run, free reruns, refused requests, failures that stop the run."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import httpx
import pytest

from jevserve.bench.answers_cache import AnswersCache
from jevserve.bench.runner import ask_missing, keyed
from jevserve.client import SystemOneAPIError
from tests.bench.builders import FakeClient, fake_answer

PROBE_POSTS = 6  # the three version probes, asked twice before anything else (versioning.probe_stable_version)


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


class ScriptedClient(FakeClient):
    """A FakeClient whose first replies are given (a dict, or an exception to raise); fake answers after them."""

    def __init__(self, replies: list) -> None:
        super().__init__()
        self.replies = list(replies)

    async def decide_raw(self, body):
        if not self.replies:
            return await super().decide_raw(body)
        self.sent.append(dict(body))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


@pytest.fixture
def no_backoff(monkeypatch):
    monkeypatch.setattr("jevserve.bench.replies.INVALID_BACKOFF_S", 0.0)


INVALID_REPLIES = {
    "missing answer": {"answers": {}},
    "no answers": {"model": "m"},
    "out of range": {"answers": {"bad": {"type": "noul", "noul": 7.5}}},
    "negative": {"answers": {"bad": {"type": "noul", "noul": -0.1}}},
    "nan": {"answers": {"bad": {"type": "noul", "noul": float("nan")}}},
    "wrong type": {"answers": {"bad": {"type": "noul", "noul": "banana"}}},
    "boolean": {"answers": {"bad": {"type": "noul", "noul": True}}},
    "other question type": {"answers": {"bad": {"type": "choice", "probabilities": {"a": 1.0}}}},
}


@pytest.mark.parametrize("reply", INVALID_REPLIES.values(), ids=INVALID_REPLIES)
def test_an_invalid_reply_is_asked_again_never_cached_and_then_stops_the_run(tmp_path, no_backoff, reply):
    from jevserve.bench.replies import INVALID_RETRIES, InvalidReply

    stubborn = ScriptedClient([reply] * (INVALID_RETRIES + 1))
    with pytest.raises(InvalidReply, match="invalid replies"):
        run(stubborn, make_requests(1), AnswersCache(tmp_path, "fake-model"), concurrency=1)
    assert len(stubborn.sent) == INVALID_RETRIES + 1
    assert AnswersCache(tmp_path, "fake-model").answers == {}  # nothing of it was written

    once = ScriptedClient([reply])  # a passing fault: the next try answers, and only that answer is cached
    stats = run(once, make_requests(1), AnswersCache(tmp_path, "fake-model"), concurrency=1)
    cached = AnswersCache(tmp_path, "fake-model").answers
    assert stats.num_sent == 1 and len(once.sent) == 2
    assert list(cached.values()) == [fake_answer(once.sent[1])["answers"]]


def test_a_reply_that_is_not_json_is_an_invalid_reply(tmp_path, no_backoff):
    from jevserve.bench.replies import InvalidReply

    not_json = json.JSONDecodeError("Expecting value", "{not json", 1)  # what the client raises for such a body
    with pytest.raises(InvalidReply, match="not JSON"):
        run(ScriptedClient([not_json] * 3), make_requests(1), AnswersCache(tmp_path, "fake-model"), concurrency=1)


def test_a_cached_reply_that_lacks_an_asked_answer_is_asked_again(tmp_path):
    requests = make_requests(3)
    old = AnswersCache(tmp_path, "fake-model")
    for key in requests:
        old.record(key, {})  # what an older run cached for `{"answers": {}}`
    old.close()
    again = FakeClient()
    stats = run(again, requests, AnswersCache(tmp_path, "fake-model"))
    assert stats.num_sent == 3 and stats.num_cached == 0
    assert all("bad" in a for a in AnswersCache(tmp_path, "fake-model").answers.values())


@pytest.mark.parametrize("status", [401, 403, 404, 429, 408])
def test_a_status_about_the_endpoint_stops_the_run_and_is_never_cached_as_a_refusal(tmp_path, status):
    failing = FakeClient(fail_after=0, error=SystemOneAPIError(status, "some_error", "not this request's fault"))
    with pytest.raises(SystemOneAPIError):
        run(failing, make_requests(2), AnswersCache(tmp_path, "fake-model"))
    assert AnswersCache(tmp_path, "fake-model").errors == {}


# ---- ask_endpoint against an HTTP endpoint simulated in process (httpx.MockTransport)


def mock_endpoint(monkeypatch, fault):
    """Route ask_endpoint's client to an in-process endpoint: GET /v1/models, and POST /v1/systemone answered by
    `fault(number)` (the n-th POST, from 1; the version probes, asked twice, come first) or, when it returns None, by
    fake_answer."""
    from jevserve.bench import runner

    posts = []

    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.001)  # the network: other tasks (and a Ctrl-C) get their turn
        if request.method == "GET":
            return httpx.Response(200, json={"models": [{"name": "fake-model", "description": "d",
                                                         "release_date": "2026-01-01"}]})
        posts.append(request)
        response = fault(len(posts))
        return response or httpx.Response(200, json=fake_answer(json.loads(request.content)))

    real = runner.PatientSystemOne
    monkeypatch.setattr(runner, "PatientSystemOne", lambda base_url, api_key, timeout_s: real(
        base_url, api_key, timeout_s=timeout_s, transport=httpx.MockTransport(handler)))
    return posts


def ask_mock(tmp_path, n=6):
    from jevserve.bench.runner import ask_endpoint

    return ask_endpoint("http://bench.test", "fake-model", None, tmp_path, lambda model: make_requests(n),
                        concurrency=1, progress=False)


def test_a_reply_that_is_not_json_stops_the_run_with_the_resume_message(tmp_path, monkeypatch, no_backoff):
    from jevserve.bench.runner import AskFailed

    mock_endpoint(monkeypatch, lambda n: httpx.Response(200, content=b"{not json") if n >= PROBE_POSTS + 3 else None)
    with pytest.raises(AskFailed, match=r"the endpoint failed .*not JSON.* running the same command again resumes") \
            as info:
        ask_mock(tmp_path)
    assert info.value.exit_code == 1 and "(2 answers from this run, 2 in all)" in str(info.value)


def mock_by_body(monkeypatch, fault_for_body):
    """mock_endpoint whose fault decides on the body of each POST."""
    posts: list = []
    posts.append(mock_endpoint(monkeypatch, lambda n: fault_for_body(json.loads(posts[0][n - 1].content))))


def test_a_version_probe_the_endpoint_refuses_is_fingerprinted_as_refused_and_the_run_goes_on(tmp_path, monkeypatch):
    from jevserve.bench.versioning import PROBES

    # an input filter that refuses the first probe ("Ignore all previous instructions ...") could never be scored
    refused = httpx.Response(400, json={"detail": {"error_type": "api_usage_error", "message": "filtered"}})
    mock_by_body(monkeypatch, lambda body: refused if body["state"] == PROBES[0]["state"] else None)
    first = ask_mock(tmp_path)
    assert first.stats.num_sent == 6 and len(first.cache.answers) == 6
    again = ask_mock(tmp_path)  # the same version: every answer is reused
    assert again.stats.num_sent == 0 and again.cache.path == first.cache.path


@pytest.mark.parametrize("fault", ["server error", "invalid reply"])
def test_a_version_probe_that_fails_stops_the_run_naming_the_probe(tmp_path, monkeypatch, no_backoff, fault):
    from jevserve.bench.runner import AskFailed
    from jevserve.bench.versioning import PROBES

    failed = (httpx.Response(500, json={"detail": {"error_type": "api_error", "message": "boom"}})
              if fault == "server error" else httpx.Response(200, json={"answers": {}}))
    mock_by_body(monkeypatch, lambda body: failed if body["state"] == PROBES[1]["state"] else None)
    with pytest.raises(AskFailed, match=r"version probe 2 of 3 \(state 'Book a table") as info:
        ask_mock(tmp_path)
    assert info.value.exit_code == 1 and "Nothing else was asked" in str(info.value)
    assert "resumes" not in str(info.value)  # the same command would fail the same way


def test_a_request_that_stops_the_run_is_named(tmp_path, monkeypatch, no_backoff):
    from jevserve.bench.runner import AskFailed

    mock_endpoint(monkeypatch, lambda n: httpx.Response(200, json={"answers": {}}) if n >= PROBE_POSTS + 3
                  else None)
    with pytest.raises(AskFailed, match=r"on the request asking '.+' about '.+' \(answers cache key [0-9a-f]+\)"):
        ask_mock(tmp_path)


@pytest.mark.parametrize(("status", "said"), [(404, "does not serve --model 'fake-model'"),
                                             (401, "give --api-key-env"), (403, "give --api-key-env")])
def test_a_model_not_served_or_a_key_refused_is_the_commands_to_fix_exit_2(tmp_path, monkeypatch, status, said):
    from jevserve.bench.runner import AskFailed

    error = {"detail": {"error_type": "not_found" if status == 404 else "authentication_error", "message": "no"}}
    mock_endpoint(monkeypatch, lambda n: httpx.Response(status, json=error))
    with pytest.raises(AskFailed, match=said) as info:
        ask_mock(tmp_path)
    assert info.value.exit_code == 2
    assert ("resumes" in str(info.value)) == (status != 404)  # nothing to resume from an unknown model


def test_a_429_is_asked_again_after_its_retry_after_past_the_sdk_retries(tmp_path, monkeypatch):
    def overloaded(n: int) -> httpx.Response | None:  # five 429s in a row: the SDK's rules give up after three
        return httpx.Response(429, headers={"Retry-After": "0"}, json={"detail": {"error_type": "overloaded_error",
                                                                                  "message": "busy"}}) \
            if PROBE_POSTS + 2 <= n < PROBE_POSTS + 7 else None

    posts = mock_endpoint(monkeypatch, overloaded)
    asked = ask_mock(tmp_path)
    assert asked.stats.num_sent == 6 and len(asked.cache.answers) == 6 and asked.stats.num_refused == 0
    assert len(posts) == PROBE_POSTS + 6 + 5


def test_a_429_whose_retry_after_is_past_the_budget_stops_the_run(tmp_path, monkeypatch):
    from jevserve.bench.runner import OVERLOAD_BUDGET_S, AskFailed

    wait = str(int(OVERLOAD_BUDGET_S) + 1)
    mock_endpoint(monkeypatch, lambda n: httpx.Response(429, headers={"Retry-After": wait}, json={})
                  if n > PROBE_POSTS else None)
    with pytest.raises(AskFailed, match="429") as info:
        ask_mock(tmp_path)
    assert info.value.exit_code == 1


@pytest.mark.parametrize(("signum", "said", "code"), [(signal.SIGINT, "interrupted", 130),
                                                       (signal.SIGTERM, "stopped by SIGTERM", 143)])
def test_ctrl_c_or_sigterm_while_asking_says_how_many_answers_are_cached_and_exits_with_the_signal(
    tmp_path, monkeypatch, signum, said, code
):
    # SIGTERM (what `timeout`, docker and systemd send) ended a run without a word
    from jevserve.bench.runner import AskFailed

    def interrupt(n: int) -> None:
        if n == PROBE_POSTS + 3:  # the signal while the third request is in flight
            os.kill(os.getpid(), signum)

    mock_endpoint(monkeypatch, interrupt)
    try:
        with pytest.raises(AskFailed, match=rf"^{said}; .* running the same command again resumes$") as info:
            ask_mock(tmp_path, n=20)
    except KeyboardInterrupt:  # not the test session's own Ctrl-C
        pytest.fail("ask_endpoint let KeyboardInterrupt through")
    assert info.value.exit_code == code and "\n" not in str(info.value)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Ctrl-C is Python's own again afterwards
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # and SIGTERM the default
    num_cached = len(next(tmp_path.glob("*.jsonl")).read_text().splitlines())
    assert 2 <= num_cached < 20 and f"({num_cached} answers from this run, {num_cached} in all)" in str(info.value)


def test_an_answers_file_or_results_folder_that_cannot_be_written_is_said_before_any_asking(tmp_path, monkeypatch):
    # an outside tester's unwritable cache file failed at the first answer, and an unwritable row folder under
    # --results after the asking and the scoring, each as "PATH: Operation not permitted", naming no flag
    from jevserve.bench.answers_cache import AnswersCache
    from jevserve.bench.runner import AskFailed, ask_endpoint

    monkeypatch.setattr("jevserve.bench.versioning.settle_version", lambda *args: "v1")
    posts = mock_endpoint(monkeypatch, lambda n: None)
    asked: list[str] = []

    def ask(**kwargs):
        return ask_endpoint("http://bench.test", "fake-model", None, tmp_path / "answers",
                            lambda model: asked.append(model) or make_requests(2), concurrency=1, progress=False,
                            **kwargs)

    answers_file = AnswersCache(tmp_path / "answers", "fake-model", "v1").path
    answers_file.mkdir(parents=True)  # a folder where the answers file goes: it cannot be opened to append to
    with pytest.raises(AskFailed, match=r"^--answers-cache .*answers: cannot read and write fake-model@v1.jsonl "
                                        r".*name a folder this user can write") as info:
        ask()
    assert info.value.exit_code == 2
    answers_file.rmdir()
    with pytest.raises(AskFailed, match=r"^--results R: R/fake-model is a file") as info:
        ask(output_problem=lambda model: f"--results R: R/{model} is a file")
    assert info.value.exit_code == 2
    from jevserve.bench.versioning import PROBES

    # neither asked a bench request: what reached the endpoint is the version probes
    assert asked == [] and {json.loads(p.content)["state"] for p in posts} <= {p["state"] for p in PROBES}


def test_an_endpoint_whose_answers_vary_is_told_to_name_its_version_and_then_resumes(tmp_path, monkeypatch):
    """A sampling model (±0.002 on each answer) got a new version on every run: an interrupted run of 48,000
    requests reused nothing, and the rerun warned that another model answered under the name."""
    import random

    from jevserve.bench.runner import AskFailed, ask_endpoint

    jitter = random.Random(0)
    step = [0.01]  # how far each asking moves the answers, alternately up and down (set small below)

    def varying(n: int) -> httpx.Response | None:
        return None  # answered by `noisy` below

    posts = mock_endpoint(monkeypatch, varying)
    import tests.bench.test_runner as here

    real_answer = here.fake_answer

    def noisy(body):
        answer = real_answer(body)
        step[0] = -step[0]
        for value in answer["answers"].values():
            if "noul" in value:
                value["noul"] = min(1.0, max(0.0, value["noul"] + step[0] + jitter.uniform(-1e-5, 1e-5)))
        return answer

    monkeypatch.setattr(here, "fake_answer", noisy)
    with pytest.raises(AskFailed, match=r"differently twice in a row .* --answers-version LABEL") as info:
        ask_mock(tmp_path)
    assert info.value.exit_code == 2 and len(posts) <= 6 and not list(tmp_path.glob("*.jsonl"))  # nothing asked

    def pinned(n=6):
        return ask_endpoint("http://bench.test", "fake-model", None, tmp_path, lambda model: make_requests(n),
                            concurrency=1, progress=False, version="my-release-1")

    first = pinned()
    assert first.stats.num_sent == 6 and first.cache.path.name == "fake-model@my-release-1.jsonl"
    again = pinned(8)  # a rerun with the same label reuses every answer: only the new requests are asked
    assert again.stats.num_sent == 2 and again.stats.num_cached == 6
    # noise of a deployment's floats (here ±1e-4, crossing the fourth decimal's rounding edges, where a digest of
    # rounded answers split one model in two for an outside re-tester) settles on the earlier run's version
    step[0] = 1e-4
    quiet = ask_mock(tmp_path)
    assert ask_mock(tmp_path, n=6).stats.num_sent == 0
    assert len(list(tmp_path.glob("fake-model@*.probes.json"))) == 1 and quiet.stats.num_sent == 6


def test_a_server_without_the_optional_models_route_is_versioned_by_its_answers(tmp_path, monkeypatch):
    from jevserve.bench import runner

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(404, json={"detail": "Not Found"})
        return httpx.Response(200, json=fake_answer(json.loads(request.content)))

    real = runner.PatientSystemOne
    monkeypatch.setattr(runner, "PatientSystemOne", lambda base_url, api_key, timeout_s: real(
        base_url, api_key, timeout_s=timeout_s, transport=httpx.MockTransport(handler)))
    asked = ask_mock(tmp_path)
    assert asked.stats.num_sent == 6 and len(asked.cache.answers) == 6
    assert ask_mock(tmp_path).stats.num_sent == 0  # the same version again


def test_a_request_answered_invalidly_the_same_way_each_time_is_said_to_stop_a_rerun_too(tmp_path, monkeypatch,
                                                                                        no_backoff):
    from jevserve.bench.runner import AskFailed

    bad = {"answers": {"bad": {"type": "noul", "noul": 1.5}}}
    mock_by_body(monkeypatch, lambda body: httpx.Response(200, json=bad) if body["state"] == "message 4 " else None)
    with pytest.raises(AskFailed, match=r"answered one request invalidly the same way each time .*noul 1\.5.* "
                                        r"will likely stop at this request again") as info:
        ask_mock(tmp_path)
    assert info.value.exit_code == 1 and "about 'message 4 '" in str(info.value)


def test_every_request_answered_invalidly_the_same_way_is_named_in_one_run(tmp_path, monkeypatch, no_backoff):
    """A run named one of several requests the model answered invalidly, so each rerun found the next (an outside
    tester's three bad requests took three runs): the others are still asked and every bad one is named."""
    from jevserve.bench.runner import AskFailed

    bad = {"answers": {"bad": {"type": "noul", "noul": 1.5}}}
    mock_by_body(monkeypatch, lambda body: httpx.Response(200, json=bad)
                 if body["state"] in ("message 1 ", "message 4 ") else None)
    with pytest.raises(AskFailed) as info:
        ask_mock(tmp_path)
    said = str(info.value)
    assert info.value.exit_code == 1
    assert "answered 2 requests invalidly the same way each time" in said
    assert "1. " in said and "2. " in said and "'message 1 '" in said and "'message 4 '" in said
    assert "every other request was asked" in said and "(4 answers from this run, 4 in all)" in said
    assert "will likely stop at these requests again" in said


def test_a_model_that_answers_everything_invalidly_is_not_asked_everything(tmp_path, monkeypatch, no_backoff):
    from jevserve.bench import runner
    from jevserve.bench.runner import AskFailed

    monkeypatch.setattr(runner, "MAX_NAMED_INVALID", 3)
    bad = {"answers": {"bad": {"type": "noul", "noul": 1.5}}}
    posts: list = []
    posts.append(mock_endpoint(monkeypatch, lambda n: httpx.Response(200, json=bad)
                               if json.loads(posts[0][n - 1].content)["state"].startswith("message") else None))
    with pytest.raises(AskFailed, match=r"answered 3 requests invalidly .*stopped asking once it had met 3 such "
                                        r"requests, so more may "
                                        r"follow") as info:
        ask_mock(tmp_path, n=12)
    asked = {json.loads(p.content)["state"] for p in posts[0] if json.loads(p.content)["state"].startswith("message")}
    assert len(asked) == 3 and info.value.exit_code == 1


def test_a_second_run_on_the_same_answers_file_waits_for_the_first_and_reuses_its_answers(tmp_path, monkeypatch,
                                                                                          capsys):
    """Two bench runs on one answers cache at once each asked every request (an outside tester's): the second waits
    for the first, saying so, and then asks only what the first did not get."""
    import threading

    from jevserve.bench import runner

    monkeypatch.setattr(runner, "LOCK_POLL_S", 0.01)
    posts = mock_endpoint(monkeypatch, lambda n: None)
    first = ask_mock(tmp_path)  # fixes the version (probe answers) and fills the cache with 6 answers
    assert first.stats.num_sent == 6
    holder = AnswersCache(tmp_path, "fake-model", first.cache.version)
    assert holder.try_lock()  # a run under way holds the file
    done: list = []
    waiting = threading.Thread(target=lambda: done.append(ask_mock(tmp_path, n=9)))
    waiting.start()
    waiting.join(timeout=1.0)
    assert waiting.is_alive()  # it waits
    before = len(posts)
    holder.record("k-from-the-other-run", {"bad": {"type": "noul", "noul": 0.5}})
    holder.close()  # the other run ends
    waiting.join(timeout=10)
    (second,) = done
    assert second.stats.num_sent == 3 and second.stats.num_cached == 6  # only what neither run had asked
    assert "another run is asking fake-model into" in capsys.readouterr().err
    assert "k-from-the-other-run" in second.cache.answers  # it read what the other run appended meanwhile
    assert len(posts) - before >= 3
