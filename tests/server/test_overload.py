"""Back-pressure and disconnects over real HTTP (uvicorn in a thread, swapped-in fake backend)."""

import asyncio
import json
import socket
import threading
import time

import httpx

from jevserve.server.app import ServerSettings, create_app
from jevserve.server.background import running_server
from tests.helpers import FakeBackend, ticket_body


def wait_for(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.01)


def test_full_queue_answers_429_with_retry_after_and_recovers():
    backend = FakeBackend()
    app = create_app([backend], ServerSettings(max_queue=3, max_batch=64))
    with running_server(app) as url:
        backend.release.clear()

        async def scenario():
            async with httpx.AsyncClient(base_url=url, timeout=30) as c:
                blocker = asyncio.ensure_future(c.post("/v1/systemone", json=ticket_body(state="blocker")))
                while backend.num_started < 1:
                    await asyncio.sleep(0.01)
                queued = asyncio.ensure_future(c.post("/v1/systemone", json=ticket_body(state="queued")))
                while app.state.jevserve.models["fake-1"].batcher.queue_depth < 3:
                    await asyncio.sleep(0.01)
                rejected = await c.post("/v1/systemone", json=ticket_body(state="one too many"))
                # what the model is answering shows beside what waits (a tester read 0 while a model computed)
                busy = (await c.get("/healthz")).json()
                backend.release.set()
                return rejected, await blocker, await queued, await c.post("/v1/systemone", json=ticket_body()), busy

        rejected, blocker, queued, after, busy = asyncio.run(scenario())
    assert busy["running"] == {"fake-1": 3} and busy["queue_depth"] == {"fake-1": 3}
    assert rejected.status_code == 429
    assert int(rejected.headers["retry-after"]) >= 1
    assert rejected.json()["detail"]["error_type"] == "overloaded_error"
    assert (blocker.status_code, queued.status_code, after.status_code) == (200, 200, 200)


def test_client_that_disconnects_while_queued_is_never_computed_and_others_are_served():
    backend = FakeBackend()
    app = create_app([backend])
    with running_server(app) as url:
        host, port = url.removeprefix("http://").split(":")
        backend.release.clear()
        with httpx.Client(base_url=url, timeout=30) as c:
            results = {}
            blocker = threading.Thread(
                target=lambda: results.update(blocker=c.post("/v1/systemone", json=ticket_body(state="blocker")))
            )
            blocker.start()
            wait_for(lambda: backend.num_started == 1)
            body = json.dumps(ticket_body(state="I will hang up")).encode()
            sock = socket.create_connection((host, int(port)))
            sock.sendall(
                b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            wait_for(lambda: app.state.jevserve.models["fake-1"].batcher.queue_depth == 3)
            sock.close()
            metrics = app.state.jevserve.metrics
            wait_for(lambda: metrics.disconnects._value.get() == 1)
            backend.release.set()
            blocker.join()
            after = c.post("/v1/systemone", json=ticket_body(state="after"))
    assert results["blocker"].status_code == 200 and after.status_code == 200
    assert "I will hang up" not in backend.seen_states
    assert "after" in backend.seen_states


def test_state_over_the_token_limit_is_413_not_truncated():
    import copy

    from fastapi.testclient import TestClient

    from tests.helpers import embedded_backends

    shared = embedded_backends()[0]
    embedder = copy.copy(shared.embedder)  # the same loaded graph, a lower limit
    embedder.max_tokens = 50
    small = copy.copy(shared)  # the embedded default, whichever readout it has
    small.embedder = embedder

    with TestClient(create_app([small])) as c:
        ok = c.post("/v1/systemone", json=ticket_body(state="short text"))
        too_long = c.post("/v1/systemone", json=ticket_body(state="word " * 200))
    assert ok.status_code == 200
    assert too_long.status_code == 413 and "tokens" in too_long.json()["detail"]["message"]
    assert "--" not in too_long.json()["detail"]["message"]  # it named a flag that does not exist


def test_client_that_disconnects_mid_upload_is_a_counted_499_without_an_error_or_traceback(caplog):
    import logging

    app = create_app([FakeBackend()])
    metrics = app.state.jevserve.metrics
    with caplog.at_level(logging.INFO), running_server(app) as url:
        host, port = url.removeprefix("http://").split(":")
        for _ in range(3):
            sock = socket.create_connection((host, int(port)))
            sock.sendall(
                b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100000\r\n\r\n" + b'{"state": "half a bo'
            )
            time.sleep(0.05)
            sock.close()
        wait_for(lambda: metrics.disconnects._value.get() == 3)
        after = httpx.post(url + "/v1/systemone", json=ticket_body(), timeout=30)
        text = httpx.get(url + "/metrics").text
    assert after.status_code == 200
    assert 'jevserve_requests_total{route="/v1/systemone",status="499"} 3.0' in text
    assert "internal_error" not in text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert sum("499" in r.getMessage() for r in caplog.records) == 3


def test_question_text_over_the_token_limit_is_413_before_it_is_queued():
    import copy

    from fastapi.testclient import TestClient

    from tests.helpers import embedded_backends

    shared = embedded_backends()[0]
    embedder = copy.copy(shared.embedder)  # the same loaded graph, a lower limit
    embedder.max_tokens = 50
    small = copy.copy(shared)
    small.embedder = embedder
    long = "word " * 200
    bodies = [
        {"state": "x", "questions": {"a": {"type": "noul", "instructions": long}}},
        {"state": "x", "questions": {"a": {"type": "choice", "instructions": "?", "criteria": {"A": long, "B": None}}}},
        {"state": "x", "questions": {"a": {"type": "score", "instructions": "which?", "criteria": [long, "high"]}}},
    ]
    with TestClient(create_app([small])) as c:
        answers = [c.post("/v1/systemone", json=body) for body in bodies]
        ok = c.post("/v1/systemone", json=ticket_body(state="short text"))
    for answer in answers:
        assert answer.status_code == 413, answer.text
        assert "question's instructions or option text" in answer.json()["detail"]["message"]
    assert ok.status_code == 200


def test_a_body_that_stalls_gets_408_and_the_server_keeps_serving():
    app = create_app([FakeBackend()], ServerSettings(body_timeout_s=0.3))
    with running_server(app) as url:
        host, port = url.removeprefix("http://").split(":")
        sock = socket.create_connection((host, int(port)))
        sock.settimeout(10)
        sock.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n" + b'{"state": "half')  # fmt: skip
        started = time.monotonic()
        reply = sock.recv(4096)
        waited = time.monotonic() - started
        sock.close()
        after = httpx.post(url + "/v1/systemone", json=ticket_body(), timeout=30)
    assert reply.startswith(b"HTTP/1.1 408") and b"did not arrive within" in reply, reply[:300]
    assert waited < 5
    assert after.status_code == 200


def test_a_request_whose_answer_would_come_too_late_gets_429_with_retry_after_not_a_long_wait():
    backend = FakeBackend()
    app = create_app([backend], ServerSettings(answer_within_s=0.5))
    with running_server(app) as url:
        batcher = app.state.jevserve.models["fake-1"].batcher

        async def scenario():
            async with httpx.AsyncClient(base_url=url, timeout=30) as c:
                assert (await c.post("/v1/systemone", json=ticket_body(state="measured"))).status_code == 200
                backend.release.clear()
                blocker = asyncio.ensure_future(c.post("/v1/systemone", json=ticket_body(state="blocker")))
                while backend.num_started < 2:
                    await asyncio.sleep(0.01)
                batcher._seconds_per_unit = 1.0  # the running request's work now reads as about a second
                late = await c.post("/v1/systemone", json=ticket_body(state="late"))
                backend.release.set()
                return late, await blocker

        late, blocker = asyncio.run(scenario())
    assert late.status_code == 429 and blocker.status_code == 200
    assert late.json()["detail"]["error_type"] == "overloaded_error"
    assert "--answer-within-s" in late.json()["detail"]["message"]
    assert int(late.headers["retry-after"]) >= 1 and int(late.headers["retry-after-ms"]) >= 1000


def test_a_small_request_is_answered_while_another_requests_long_option_texts_are_still_being_read():
    # an outside tester's one question of 255 options, 1 MB of descriptions, held the model for 58 s, and a
    # one-question request sent half a second later waited all of it: the options are now read in turns
    from tests.helpers import embedded_backends

    backend = next(b for b in embedded_backends() if b.card.name == "minilm-reader")
    app = create_app([backend], ServerSettings())
    nonce = f"{time.time_ns() % 10**6}"  # texts no earlier test read (the backend's caches live for the session)
    page = " ".join(f"clause {nonce} section {i} applies" for i in range(60))  # 24 KB in all: about 40 windows
    long = {"model": "minilm-reader", "state": "Which clause applies to a late delivery?",
            "questions": {"q": {"type": "choice", "criteria": {f"c{k}": f"{k} {page}" for k in range(16)}}}}
    small = {"model": "minilm-reader", "state": f"Is this a greeting? {nonce}",
             "questions": {"q": {"type": "noul", "instructions": "Is it a greeting?"}}}
    with running_server(app) as url:
        batcher = app.state.jevserve.models["minilm-reader"].batcher

        async def scenario():
            async with httpx.AsyncClient(base_url=url, timeout=120) as c:
                ended: list[str] = []

                async def ask(name, body):
                    answer = await c.post("/v1/systemone", json=body)
                    ended.append(name)
                    return answer

                first = asyncio.ensure_future(ask("long", long))
                for _ in range(1000):  # queued (its option texts being read) or answered in a batch
                    if batcher.queue_depth + batcher.running >= 1:
                        break
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.2)
                answers = await asyncio.gather(first, ask("small", small))
                return ended, answers

        ended, answers = asyncio.run(scenario())
    assert [a.status_code for a in answers] == [200, 200]
    assert ended == ["small", "long"]
