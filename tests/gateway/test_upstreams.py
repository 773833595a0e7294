"""Upstream handling: retries, fallback to the next upstream, circuit breaker, admission, bad input."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from jevserve.gateway.log import read_log
from tests.gateway.upstreams import CutStream, StubUpstream, client, completion, make_app, run

HI = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def post(app, body, **kwargs):
    async def go():
        async with client(app) as c:
            return await c.post("/v1/chat/completions", json=body, **kwargs)

    return run(go())


def failing(status_or_exc, then=None):
    calls = []

    def reply(body):
        calls.append(body)
        if then is not None and len(calls) > 1:
            return then
        if isinstance(status_or_exc, int):
            return httpx.Response(status_or_exc, json={"error": {"message": "busy"}})
        raise status_or_exc

    return StubUpstream(reply)


def test_retries_a_503_then_succeeds_on_the_same_upstream():
    stub = failing(503, then=httpx.Response(200, json=completion()))
    app, _, _ = make_app(upstreams={"u": stub})
    response = post(app, HI)
    assert response.status_code == 200
    assert len(stub.requests) == 2


def test_falls_back_to_the_next_upstream_after_connect_errors():
    down = failing(httpx.ConnectError("refused"))
    up = StubUpstream()
    app, _, _ = make_app(upstreams={"a": down, "b": up})
    response = post(app, HI)
    assert response.status_code == 200
    assert response.headers["x-jevserve-upstream"] == "b"
    assert len(down.requests) == 2  # one try + one retry (max_retries: 1)


def test_every_upstream_failing_is_a_502_naming_each_attempt_but_no_address(tmp_path, caplog):
    refused = httpx.ConnectError("Cannot connect to host 10.1.2.3:8000 [Connect call failed ('10.1.2.3', 8000)]")
    log = tmp_path / "log.jsonl"
    slow = httpx.ConnectTimeout("timed out connecting to 10.1.2.4:8000")
    app, _, _ = make_app(upstreams={"a": failing(slow), "b": failing(refused)}, config={"log": {"path": str(log)}})
    with caplog.at_level("WARNING", logger="jevserve.gateway"):
        response = post(app, HI)
    assert response.status_code == 502
    message = response.json()["error"]["message"]
    # one try + one retry each
    assert message == ("no upstream answered: a: no connection within its connect timeout (×2); "
                       "b: could not connect (×2)")
    assert "10.1.2.3" in caplog.text  # the operator's log keeps what the client is not told
    (line,) = read_log(log)
    assert line["status"] == 502 and any("10.1.2.3" in a for a in line["upstream"]["attempts"])


def test_an_upstream_still_refusing_for_load_after_the_retries_is_passed_on_with_its_retry_after():
    # a 429 reached clients as a 502 without Retry-After: the openai client retried it at once (9 upstream requests
    # for one call) and code catching RateLimitError missed it
    limited = StubUpstream(lambda body: httpx.Response(
        429, json={"error": {"message": "Rate limit reached", "type": "rate_limit_error"}},
        headers={"retry-after": "0", "x-ratelimit-remaining-requests": "0"}))
    app, _, _ = make_app(upstreams={"a": limited, "b": failing(httpx.ConnectError("refused"))})
    response = post(app, HI)
    assert response.status_code == 429 and response.json()["error"]["message"] == "Rate limit reached"
    assert response.headers["retry-after"] == "0" and response.headers["x-ratelimit-remaining-requests"] == "0"
    assert len(limited.requests) == 2  # one try + one retry, then the fallback, then the refusal passed on
    unavailable = StubUpstream(lambda body: httpx.Response(503, text="Service Unavailable"))
    app, _, _ = make_app(upstreams={"a": unavailable})
    response = post(app, HI)
    assert response.status_code == 503 and response.json()["error"]["code"] == "upstream_unavailable"
    assert "Service Unavailable" not in response.text  # a plain-text body is described, never quoted


def test_a_rate_limiting_upstream_keeps_its_circuit_closed_for_the_other_routes():
    # one model's 429s opened the circuit of the whole upstream: every route on that URL answered 503 for 30 s
    config = {"upstreams": [{"name": "a", "url": "http://a.test/v1", "max_retries": 0, "breaker_failures": 1}]}
    limited = StubUpstream(lambda body: httpx.Response(429, json={"error": {"message": "slow down"}}))
    app, _, _ = make_app(upstreams={"a": limited}, config=config)
    assert [post(app, HI).status_code for _ in range(3)] == [429, 429, 429]
    assert len(limited.requests) == 3  # each one tried: no circuit opened


def test_every_circuit_open_is_a_503_with_retry_after():
    config = {"upstreams": [{"name": "a", "url": "http://a.test/v1", "max_retries": 0, "breaker_failures": 1,
                             "breaker_reset_s": 30}]}  # fmt: skip
    app, _, _ = make_app(upstreams={"a": failing(httpx.ConnectError("refused"))}, config=config)
    assert post(app, HI).status_code == 502  # the failure that opens the circuit
    response = post(app, HI)
    assert response.status_code == 503 and 1 <= int(response.headers["retry-after"]) <= 30
    error = response.json()["error"]
    assert error["code"] == "upstream_unavailable" and "a: circuit open" in error["message"]


def test_an_upstream_that_began_answering_is_never_sent_the_request_again():
    crashed, other = failing(500), StubUpstream()
    app, _, _ = make_app(upstreams={"a": crashed, "b": other})
    response = post(app, HI)
    assert response.status_code == 500 and response.json() == {"error": {"message": "busy"}}  # its answer, passed on
    assert len(crashed.requests) == 1 and other.requests == []
    slow = failing(httpx.ReadTimeout("no byte in time"))
    app, _, _ = make_app(upstreams={"a": slow, "b": StubUpstream()})
    response = post(app, HI)
    assert response.status_code == 504 and response.json()["error"]["code"] == "upstream_timeout"
    assert len(slow.requests) == 1 and "not retried" in response.json()["error"]["message"]


def test_client_errors_from_the_upstream_are_passed_on_not_retried():
    stub = failing(400)
    app, _, _ = make_app(upstreams={"u": stub})
    assert post(app, HI).status_code == 400
    assert len(stub.requests) == 1


def test_circuit_opens_after_consecutive_failures_and_skips_the_upstream():
    bad = failing(503)
    good = StubUpstream()
    config = {
        "upstreams": [
            {"name": "a", "url": "http://a.test/v1", "max_retries": 0, "breaker_failures": 2},
            {"name": "b", "url": "http://b.test/v1"},
        ]
    }
    app, _, _ = make_app(upstreams={"a": bad, "b": good}, config=config)
    for _ in range(3):
        assert post(app, HI).status_code == 200
    assert len(bad.requests) == 2  # the third request skipped the open circuit
    health = run(_get(app, "/healthz")).json()
    assert health["upstreams"]["a"]["circuit"] == "open"


def test_a_request_and_its_retries_count_as_one_failure_towards_the_circuit():
    # an outside tester's upstream down for a moment: with the default 3 tries per request, counting each try
    # opened the circuit (5 failures) on the second request, and the route answered 503 for 30 s
    config = {"upstreams": [{"name": "a", "url": "http://a.test/v1", "max_retries": 2, "backoff_s": 0.001,
                             "breaker_failures": 3}]}  # fmt: skip
    down = failing(httpx.ConnectError("refused"))
    app, _, _ = make_app(upstreams={"a": down}, config=config)
    assert [post(app, HI).status_code for _ in range(4)] == [502, 502, 502, 503]
    assert len(down.requests) == 9  # three requests of three tries each; the fourth found the circuit open


def test_a_half_open_circuit_lets_one_trial_request_through_and_its_result_decides():
    """At the reset every request arriving passed to an upstream still down, each waiting on it (the docs said so);
    one trial at a time goes now, the rest fall over as while it was open."""
    tried: list[float] = []
    health = {"up": False}

    async def slow_a(request: httpx.Request) -> httpx.Response:
        tried.append(time.monotonic())
        await asyncio.sleep(0.2)  # the trial is still in flight when the rest of the burst arrives
        if health["up"]:
            return httpx.Response(200, json=completion(model="a"))
        raise httpx.ConnectError("refused")

    good = StubUpstream()
    config = {"upstreams": [{"name": "a", "url": "http://a.test/v1", "max_retries": 0, "breaker_failures": 1,
                             "breaker_reset_s": 1.0}, {"name": "b", "url": "http://b.test/v1"}]}  # fmt: skip
    app, _, _ = make_app(upstreams={"a": httpx.MockTransport(slow_a), "b": good}, config=config)

    async def scenario():
        async with client(app) as c:
            async def send():
                return await c.post("/v1/chat/completions", json=HI)

            first = await send()  # a fails: its circuit opens for 1 s; b answers
            await asyncio.sleep(1.2)
            down = await asyncio.gather(*[send() for _ in range(6)])  # one trial to a, which fails
            tried_down = len(tried)
            await asyncio.sleep(1.2)
            health["up"] = True
            healed = await asyncio.gather(*[send() for _ in range(6)])  # one trial to a, which answers
            tried_healed = len(tried)
            closed = await send()
            return [first, *down, *healed, closed], tried_down, tried_healed

    responses, tried_down, tried_healed = run(scenario())
    assert all(r.status_code == 200 for r in responses)
    assert (tried_down, tried_healed, len(tried)) == (2, 3, 4)  # one trial each time; then closed, a takes it
    assert responses[-1].headers["x-jevserve-upstream"] == "a"
    assert sum(r.headers["x-jevserve-upstream"] == "a" for r in responses[7:13]) == 1  # the trial's own answer


async def _get(app, path):
    async with client(app) as c:
        return await c.get(path)


def test_the_read_only_endpoints_answer_head_as_get():
    # load balancers' probes and uptime monitors send HEAD: a 405 reads as down
    app, _, _ = make_app({})

    async def heads():
        async with client(app) as c:
            return [(await c.head(path)).status_code for path in ("/healthz", "/metrics", "/v1/models",
                                                                    "/v1/models/m")]

    assert run(heads()) == [200, 200, 200, 200]


def test_admission_reject_answers_429_with_retry_after_when_the_queue_is_full(tmp_path):
    release = asyncio.Event()

    async def slow(request):
        await release.wait()
        return httpx.Response(200, json=completion())

    config = {"upstreams": [{"name": "u", "url": "http://u.test/v1", "max_concurrency": 1}]}
    route = {"admission": {"action": "reject", "max_queue": 0}}
    log = tmp_path / "log.jsonl"
    app, _, _ = make_app(route, config={**config, "log": {"path": str(log)}},
                         upstreams={"u": httpx.MockTransport(slow)})

    async def scenario():
        async with client(app) as c:
            first = asyncio.create_task(c.post("/v1/chat/completions", json=HI))
            await asyncio.sleep(0.2)
            second = await c.post("/v1/chat/completions", json=HI)
            release.set()
            metrics = (await c.get("/metrics")).text
            result = await first, second, metrics
        await app.state.gateway.aclose()
        return result

    first, second, metrics = run(scenario())
    assert first.status_code == 200
    assert second.status_code == 429
    assert int(second.headers["retry-after"]) >= 1
    assert second.json()["error"]["type"] == "rate_limit_error"
    # an outside tester saw thousands of these 429s and neither the metric nor the log said the queue was full
    assert 'jevserve_gateway_upstream_attempts_total{outcome="queue_full",upstream="u"} 1.0' in metrics
    refused = [r for r in map(json.loads, log.read_text().splitlines()) if r["status"] == 429]
    assert len(refused) == 1 and refused[0]["upstream"]["attempts"][0].startswith("u: queue full")


def test_admission_overflow_sends_to_the_next_upstream():
    release = asyncio.Event()

    async def slow(request):
        await release.wait()
        return httpx.Response(200, json=completion())

    config = {
        "upstreams": [
            {"name": "a", "url": "http://a.test/v1", "max_concurrency": 1},
            {"name": "b", "url": "http://b.test/v1"},
        ]
    }
    app, _, _ = make_app(
        {"admission": {"action": "overflow", "max_queue": 0}},
        upstreams={"a": httpx.MockTransport(slow), "b": StubUpstream()},
        config=config,
    )

    async def scenario():
        async with client(app) as c:
            first = asyncio.create_task(c.post("/v1/chat/completions", json=HI))
            await asyncio.sleep(0.2)
            second = await c.post("/v1/chat/completions", json=HI)
            release.set()
            return await first, second

    first, second = run(scenario())
    assert first.headers["x-jevserve-upstream"] == "a"
    assert second.headers["x-jevserve-upstream"] == "b"


def test_admission_defer_past_the_deadline_is_a_429_counting_decision_time():
    release = asyncio.Event()

    async def slow(request):
        await release.wait()
        return httpx.Response(200, json=completion())

    config = {"upstreams": [{"name": "u", "url": "http://u.test/v1", "max_concurrency": 1}]}
    app, _, _ = make_app(
        {"admission": {"action": "defer", "deadline_s": 0.5}}, config=config, upstreams={"u": httpx.MockTransport(slow)}
    )

    async def scenario():
        async with client(app) as c:
            first = asyncio.create_task(c.post("/v1/chat/completions", json=HI))
            await asyncio.sleep(0.1)
            second = await c.post("/v1/chat/completions", json=HI)
            release.set()
            return await first, second

    _, second = run(scenario())
    assert second.status_code == 429
    assert "deadline" in second.json()["error"]["message"]
    assert app.state.gateway.metrics.upstream_attempts.labels("u", "queue_timeout")._value.get() == 1


def test_rate_limit_per_key_is_a_429_with_retry_after():
    app, _, _ = make_app({"rate_limit": {"requests_per_s": 0.01, "burst": 2}})
    statuses = [post(app, HI, headers={"Authorization": "Bearer k1"}).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert post(app, HI, headers={"Authorization": "Bearer k2"}).status_code == 200


def test_stream_null_is_taken_as_not_given():
    # OpenAI's spec types it "boolean or null" and vLLM takes null; the gateway refused it 400
    app, _, _ = make_app({})

    async def scenario():
        async with client(app) as c:
            return await c.post("/v1/chat/completions", json={**HI, "stream": None})

    response = run(scenario())
    assert response.status_code == 200 and response.json()["object"] == "chat.completion"


def test_a_compressed_body_is_said_to_be_compressed():
    # it was "not valid JSON: 'utf-8' codec can't decode byte 0x8b in position 1", which names no cause
    import gzip
    import zlib

    app, _, _ = make_app({})

    async def scenario():
        async with client(app) as c:
            raw = json.dumps(HI).encode()
            return [await c.post("/v1/chat/completions", content=squeeze(raw),
                                 headers={"content-type": "application/json"}) for squeeze in (gzip.compress,
                                                                                              zlib.compress)]

    for response, kind in zip(run(scenario()), ("gzip", "deflate (zlib)"), strict=True):
        assert response.status_code == 400
        assert response.json()["error"]["message"].startswith(f"request body is {kind}-compressed")


def test_bad_input_gets_clear_4xx():
    app, _, _ = make_app(config={"max_body_bytes": 2048})

    async def scenario():
        async with client(app) as c:
            return [
                await c.post("/v1/chat/completions", content=b"{not json"),
                await c.post("/v1/chat/completions", content=b'"a string"'),
                await c.post("/v1/chat/completions", json={"model": "m", "messages": []}),
                await c.post("/v1/chat/completions", json={"model": "m", "messages": ["hi"]}),
                await c.post("/v1/chat/completions", json={**HI, "stream": "yes"}),
                await c.post(
                    "/v1/chat/completions", json={**HI, "messages": [{"role": "user", "content": "x" * 5000}]}
                ),
                await c.post("/v1/chat/completions", json={**HI, "model": "gpt-unknown"}),
                await c.post("/v1/completions", json={"model": "m", "prompt": 3}),
            ]

    responses = run(scenario())
    assert [r.status_code for r in responses] == [400, 400, 400, 400, 400, 413, 404, 400]
    assert responses[3].json()["error"]["param"] == "messages[0]"
    assert responses[4].json()["error"]["message"] == 'stream="yes"; expected true, false or null'  # as the engine
    for r in responses:
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}


@pytest.mark.parametrize("prompt", [[1, 2, 3], [[1, 2], [3]]])
def test_a_prompt_of_token_ids_is_refused_saying_the_decisions_read_text(prompt):
    app, _, _ = make_app({"guard": {}}, answers={"guard": 0.1})

    async def scenario():
        async with client(app) as c:
            return await c.post("/v1/completions", json={"model": "m", "prompt": prompt})

    response = run(scenario())
    assert response.status_code == 400 and response.json()["error"]["param"] == "prompt"
    message = response.json()["error"]["message"]
    assert "token ids" in message and "send the prompt as text" in message and "(guard)" in message
    # a route with no decisions reads nothing of the prompt: token ids go on, as vLLM takes them
    upstream = StubUpstream(lambda body: httpx.Response(200, json={
        "id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "text": "ok", "logprobs": None, "finish_reason": "stop"}], "usage": None}))
    app, _, _ = make_app({}, upstreams={"u": upstream})
    response = run(scenario())
    assert response.status_code == 200, response.text
    assert upstream.requests[0]["prompt"] == prompt


def test_decision_log_has_every_request_after_shutdown(tmp_path):
    path = tmp_path / "decisions.jsonl"
    app, _, _ = make_app({"guard": {}}, answers={"guard": 0.1}, config={"log": {"path": str(path)}})

    async def scenario():
        async with client(app) as c:
            await asyncio.gather(*(c.post("/v1/chat/completions", json=HI) for _ in range(20)))
            await c.post("/v1/chat/completions", json={**HI, "model": "nope"})
        await app.state.gateway.aclose()

    run(scenario())
    records = read_log(path)
    assert len(records) == 21
    ok = [r for r in records if r["status"] == 200]
    assert len(ok) == 20
    assert ok[0]["decisions"]["verdicts"][0]["decision"] == "guard"
    assert ok[0]["messages"] == HI["messages"]
    assert json.loads(path.read_text().splitlines()[-1])["status"] == 404


def test_metrics_count_requests_and_decisions_with_bounded_labels():
    app, _, _ = make_app({"guard": {}, "harm": {"mode": "shadow"}}, answers={"guard": 0.9, "harm": 0.9})
    post(app, HI)
    post(app, {**HI, "model": "a-model-name-the-client-made-up"})
    text = run(_get(app, "/metrics")).text
    decisions = "jevserve_gateway_decisions_total"
    assert f'{decisions}{{action="block",decision="guard",fell_back="false",mode="enforce"}} 1.0' in text
    assert f'{decisions}{{action="block",decision="harm",fell_back="false",mode="shadow"}} 1.0' in text
    assert 'jevserve_gateway_requests_total{endpoint="chat",model="m",status="400"} 1.0' in text
    assert 'model="(unknown)",status="404"' in text and "made-up" not in text
    assert "jevserve_gateway_decision_ms_count 1.0" in text


def test_metrics_have_upstream_latency_attempt_outcomes_circuits_and_queues():
    config = {"upstreams": [{"name": "a", "url": "http://a.test/v1", "max_retries": 0, "breaker_failures": 1},
                            {"name": "b", "url": "http://b.test/v1"}]}  # fmt: skip
    app, _, _ = make_app(upstreams={"a": failing(httpx.ConnectError("refused 10.0.0.5:8000")), "b": StubUpstream()},
                         config=config)  # fmt: skip
    assert post(app, HI).status_code == 200
    text = run(_get(app, "/metrics")).text
    assert 'jevserve_gateway_upstream_attempts_total{outcome="connect_error",upstream="a"} 1.0' in text
    assert 'jevserve_gateway_upstream_attempts_total{outcome="http_200",upstream="b"} 1.0' in text
    assert "10.0.0.5" not in text and "refused" not in text
    assert 'jevserve_gateway_upstream_ms_count{upstream="b"} 1.0' in text
    assert 'jevserve_gateway_circuit_open{upstream="a"} 1.0' in text
    assert 'jevserve_gateway_circuit_open{upstream="b"} 0.0' in text
    assert 'jevserve_gateway_queue_depth{upstream="b"} 0.0' in text


def test_an_unexpected_error_answers_500_in_the_openai_shape_with_its_reason():
    def broken(request):
        raise RuntimeError("handler bug")

    app, _, _ = make_app(upstreams={"u": httpx.MockTransport(broken)})

    async def scenario():
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app, raise_app_exceptions=False), base_url="http://gw"
        ) as c:
            return await c.post("/v1/chat/completions", json=HI)

    response = run(scenario())
    assert response.status_code == 500
    assert "RuntimeError: handler bug" in response.json()["error"]["message"]


def test_a_failing_decider_is_said_in_the_log_and_in_healthz_and_a_refused_key_stops_the_start(caplog):
    # an outside re-tester's keyed decider with a wrong key (thresholds set by hand): "ready", /healthz ok, and every
    # guard fell back open with no word anywhere but each request's header
    from jevserve.gateway.cli import check_decider
    from jevserve.gateway.config import parse_config
    from jevserve.gateway.decider import FixedDecider, RemoteDecider
    from jevserve.gateway.errors import ConfigError

    down = FixedDecider(fail=True)
    app, _, _ = make_app({"guard": {"threshold": 0.5}}, decider=down)
    with caplog.at_level("WARNING", logger="jevserve.gateway"):
        for _ in range(3):
            assert "guard=allow!fallback" in post(app, HI).headers["x-jevserve-decisions"]
    assert caplog.text.count("every decision takes its fallback until it answers") == 1  # once per interval
    health = run(_get(app, "/healthz")).json()
    assert health["status"] == "degraded" and "fixed decider set to fail" in health["decider_problem"]

    refusing = RemoteDecider("http://decider.test")
    refusing.backend._sync_transport = httpx.MockTransport(lambda request: httpx.Response(
        401, json={"detail": {"error_type": "authentication_error", "message": "invalid API key"}}))
    config = parse_config({"decider": "remote:http://decider.test", "decider_key_env": "DKEY"})
    with pytest.raises(ConfigError, match=r"refused the key: set decider_key_env \(DKEY\) to the key it takes"):
        check_decider(refusing, config)
    silent = RemoteDecider("http://127.0.0.1:9")  # nothing listens: warned of, not refused
    assert "does not answer" in check_decider(silent, parse_config({}))


def test_healthz_asks_a_failing_remote_decider_again_and_recovers_without_a_request(monkeypatch):
    # an outside re-tester's /healthz said ok from "ready" until the first request, and degraded until a request
    # went through, though the start had warned and the decider had come back
    from jevserve.gateway import decider as decider_module
    from jevserve.gateway.cli import check_decider
    from jevserve.gateway.config import parse_config
    from jevserve.gateway.decider import RemoteDecider

    answers = {"up": False}

    def decider_server(request: httpx.Request) -> httpx.Response:
        if not answers["up"]:
            raise httpx.ConnectError("refused")
        return httpx.Response(200, json={"model": "m", "answers": {"q0": {"type": "noul", "noul": 0.1}},
                                         "usage": {"input_tokens": 1, "output_tokens": 0}})

    decider = RemoteDecider("http://decider.test")
    decider.backend._sync_transport = httpx.MockTransport(decider_server)
    assert "does not answer" in check_decider(decider, parse_config({}))
    app, _, _ = make_app({"guard": {"threshold": 0.5}}, decider=decider)
    assert run(_get(app, "/healthz")).json()["status"] == "degraded"  # from the start, before any request
    answers["up"] = True
    monkeypatch.setattr(decider_module, "DECIDER_RECHECK_S", 0.0)

    async def checks():
        # the check starts the question in the background and says what is known (an outside re-tester's checks
        # of a hung decider took its 5 s timeout); the one after the answer says ok
        async with client(app) as c:
            first = (await c.get("/healthz")).json()["status"]
            for _ in range(100):
                if not decider.probing:
                    break
                await asyncio.sleep(0.02)
            return first, (await c.get("/healthz")).json()["status"]

    assert run(checks()) == ("degraded", "ok")


def test_healthz_never_waits_for_a_hung_failing_decider(monkeypatch):
    import threading

    from jevserve.gateway import decider as decider_module
    from jevserve.gateway.decider import RemoteDecider

    release = threading.Event()

    def hung(request: httpx.Request) -> httpx.Response:
        release.wait(10)
        raise httpx.ReadTimeout("no answer", request=request)

    decider = RemoteDecider("http://decider.test")
    decider.backend._sync_transport = httpx.MockTransport(hung)
    decider.failed_at, decider.failure = time.time(), "no call answered"
    monkeypatch.setattr(decider_module, "DECIDER_RECHECK_S", 0.0)
    app, _, _ = make_app({"guard": {"threshold": 0.5}}, decider=decider)

    async def checks():
        async with client(app) as c:
            started = time.perf_counter()
            statuses = [(await c.get("/healthz")).json()["status"] for _ in range(3)]
            took = time.perf_counter() - started
            release.set()
            return statuses, took

    statuses, took = run(checks())
    assert statuses == ["degraded"] * 3 and took < 1.0


def test_a_remote_decider_that_stops_answering_with_no_traffic_is_found_by_an_idle_probe(monkeypatch):
    # with no requests a hung decider was never found: /healthz kept saying what the last call said. One not heard
    # from for DECIDER_IDLE_PROBE_S is asked one question in the background; /healthz never waits for it
    import threading

    from jevserve.gateway import decider as decider_module
    from jevserve.gateway.decider import RemoteDecider

    state = {"up": True, "asked": 0}
    release = threading.Event()

    def decider_server(request: httpx.Request) -> httpx.Response:
        state["asked"] += 1
        if not state["up"]:
            release.wait(10)  # a server that accepts the request and answers nothing, until the test ends
            raise httpx.ReadTimeout("no answer", request=request)
        return httpx.Response(200, json={"model": "m", "answers": {"q0": {"type": "noul", "noul": 0.1}},
                                         "usage": {"input_tokens": 1, "output_tokens": 0}})

    decider = RemoteDecider("http://decider.test")
    decider.backend._sync_transport = httpx.MockTransport(decider_server)
    monkeypatch.setattr(decider_module, "DECIDER_IDLE_PROBE_S", 0.0)
    app, _, _ = make_app({"guard": {"threshold": 0.5}}, decider=decider)

    async def scenario():
        async with client(app) as c:
            first = (await c.get("/healthz")).json()["status"]  # starts a probe, which answers
            for _ in range(100):
                if not decider.probing:
                    break
                await asyncio.sleep(0.02)
            answered = state["asked"]
            state["up"] = False
            started = time.perf_counter()
            second = (await c.get("/healthz")).json()  # starts a probe that hangs: not waited for
            took = time.perf_counter() - started
            release.set()  # the hung call ends in its timeout
            for _ in range(100):
                if not decider.probing:
                    break
                await asyncio.sleep(0.02)
            third = (await c.get("/healthz")).json()
        return first, answered, second, took, third

    first, answered, second, took, third = run(scenario())
    assert first == "ok" and answered == 1
    assert second["status"] == "ok" and took < 1.0
    assert third["status"] == "degraded" and "asked while idle, it did not answer" in third["decider_problem"]


class _HangingUpstream(httpx.AsyncBaseTransport):
    """An upstream that takes its time; says whether the gateway's request to it was cancelled."""

    def __init__(self) -> None:
        import threading

        self.started, self.cancelled = threading.Event(), threading.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return httpx.Response(200, json=completion())


def test_a_client_that_leaves_has_its_upstream_request_cancelled():
    # an outside tester's client gave up on a whole (not streamed) request through the gateway after 1 s, and the
    # engine behind it still generated all 8,000 tokens: the gateway waited on for nobody
    from tests.gateway.upstreams import LoopbackServer

    upstream = _HangingUpstream()
    app, _, _ = make_app({}, upstreams={"u": upstream}, config={"upstreams": [
        {"name": "u", "url": "http://u.test/v1", "max_retries": 0, "timeout_s": 60}]})
    with LoopbackServer(app) as server:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(server.base_url + "/chat/completions", json=HI, timeout=1.0)
        assert upstream.started.is_set()
        assert upstream.cancelled.wait(10)  # the client's close reached the upstream request
        metrics = httpx.get(server.base_url.removesuffix("/v1") + "/metrics").text
    assert 'jevserve_gateway_requests_total{endpoint="chat",model="m",status="499"} 1.0' in metrics


class _StallingStream(httpx.AsyncBaseTransport):
    """An upstream whose stream sends one event and then waits; says whether the gateway stopped reading it."""

    def __init__(self) -> None:
        import threading

        self.closed = threading.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        async def events():
            try:
                chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                         "choices": [{"index": 0, "delta": {"content": "Hello"}, "finish_reason": None}]}
                yield f"data: {json.dumps(chunk)}\n\n".encode()
                await asyncio.sleep(30)
                yield b"data: [DONE]\n\n"
            finally:
                self.closed.set()

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events())


def test_a_client_that_leaves_a_stream_is_counted_as_499_not_as_an_upstream_failure():
    # an outside tester's client cut a streamed request after its first words; the gateway logged and counted it
    # as a 502, which reads as an upstream failure on a dashboard
    from tests.gateway.upstreams import LoopbackServer

    upstream = _StallingStream()
    app, _, _ = make_app({}, upstreams={"u": upstream}, config={"upstreams": [
        {"name": "u", "url": "http://u.test/v1", "max_retries": 0, "timeout_s": 60}]})
    with LoopbackServer(app) as server:
        with httpx.stream("POST", server.base_url + "/chat/completions", json={**HI, "stream": True},
                          timeout=10.0) as response:
            assert response.status_code == 200
            first = next(response.iter_lines())
            assert "Hello" in first
        assert upstream.closed.wait(10)  # the relay stopped reading the upstream's stream
        metrics = ""
        for _ in range(50):  # the relay's end runs just after the upstream stream is closed
            metrics = httpx.get(server.base_url.removesuffix("/v1") + "/metrics").text
            if 'status="499"' in metrics:
                break
            time.sleep(0.1)
    assert 'jevserve_gateway_requests_total{endpoint="chat",model="m",status="499"} 1.0' in metrics
    assert 'status="502"' not in metrics


class _Slow:
    """A shared store's round trips: `inner`'s answers, each async one after a real wait (as Redis takes)."""

    def __init__(self, inner) -> None:
        self._inner = inner

    def __getattr__(self, name: str):
        method = getattr(self._inner, name)
        if not asyncio.iscoroutinefunction(method):
            return method

        async def slow(*args, **kwargs):
            await asyncio.sleep(0.05)
            return await method(*args, **kwargs)

        return slow


def test_a_stream_its_client_closes_at_done_is_still_logged_counted_stored_and_its_slot_given_back(tmp_path):
    # an outside tester's openai client closes the connection as soon as it reads [DONE]; with a store that awaits
    # (Redis), the relay's end was cancelled with it: no log line, no count, no cache entry, and the upstream's slot
    # not given back
    from jevserve.gateway.store import MemoryStore
    from tests.gateway.upstreams import LoopbackServer

    memory = MemoryStore()
    store = _Slow(memory)
    store.cache = _Slow(memory.cache)
    log = tmp_path / "decisions.jsonl"
    app, _, upstreams = make_app({"cache": {"min_similarity": 0.5}}, answers={"cache": 0.99}, store=store,
                                 config={"log": {"path": str(log)}})
    with LoopbackServer(app) as server:
        for _ in range(3):
            with httpx.stream("POST", server.base_url + "/chat/completions", json={**HI, "stream": True},
                              headers={"cache-control": "no-cache"}, timeout=10.0) as response:
                assert response.status_code == 200
                for line in response.iter_lines():
                    if line == "data: [DONE]":
                        break  # and close, as the openai client does
        metrics = ""
        for _ in range(50):
            metrics = httpx.get(server.base_url.removesuffix("/v1") + "/metrics").text
            if 'status="200"} 3.0' in metrics:
                break
            time.sleep(0.1)
        again = httpx.post(server.base_url + "/chat/completions", json=HI, timeout=10.0)
        in_flight = run(memory.in_flight("u"))
    assert 'jevserve_gateway_requests_total{endpoint="chat",model="m",status="200"} 3.0' in metrics
    assert [line["status"] for line in read_log(log)] == [200, 200, 200, 200]
    assert again.headers["x-jevserve-cache"] == "hit" and len(upstreams["u"].requests) == 3
    assert in_flight == 0


class SlowStream(httpx.AsyncByteStream):
    """A streamed reply whose events come 0.1 s apart: an upstream generating."""

    def __init__(self, events: list[bytes]) -> None:
        self.events = events

    async def __aiter__(self):
        for i, event in enumerate(self.events):
            if i:
                await asyncio.sleep(0.1)
            yield event

    async def aclose(self) -> None:
        return None


def test_a_streams_overhead_is_the_gateways_time_not_the_upstreams_generation():
    # the metric took a stream's whole generation for overhead (196 ms against 9 ms in the header)
    from tests.gateway.upstreams import sse_events

    events = [event + b"\n\n" for event in sse_events(["a", "b", "c", "d"]).split(b"\n\n") if event]
    upstream = StubUpstream(lambda body: httpx.Response(200, stream=SlowStream(events),
                                                        headers={"content-type": "text/event-stream"}))
    app, _, _ = make_app(upstreams={"u": upstream})

    async def scenario():
        async with client(app) as c:
            started = time.monotonic()
            async with c.stream("POST", "/v1/chat/completions", json={**HI, "stream": True}) as response:
                header = float(response.headers["x-jevserve-overhead-ms"])
                body = b"".join([chunk async for chunk in response.aiter_bytes()])
            took_ms = (time.monotonic() - started) * 1000
            return header, body, took_ms, (await c.get("/metrics")).text

    header, body, took_ms, text = run(scenario())
    assert b"[DONE]" in body and took_ms >= 300  # the upstream generated for 0.3 s or more
    observed = float(next(line.split()[-1] for line in text.splitlines()
                          if line.startswith("jevserve_gateway_overhead_ms_sum")))
    assert observed == pytest.approx(header, abs=0.01) and observed < 200


def test_an_upstream_reply_that_is_no_json_for_its_numbers_is_a_502_never_cached_and_a_streams_error_event():
    # a reply holding -1e400 was read as -inf: a 500 that the cache then served to every repeat, and a stream that
    # sent `-Infinity` (no JSON) on to the client
    whole = json.dumps(completion(model="m")).replace('"total_tokens": ', '"total_tokens": -1e400, "x": ')
    event = 'data: {"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": {"x": -1e400}}\n\n'

    def reply(body: dict) -> httpx.Response:
        if body.get("stream"):
            return httpx.Response(200, content=event.encode(), headers={"content-type": "text/event-stream"})
        return httpx.Response(200, content=whole.encode(), headers={"content-type": "application/json"})

    upstream = StubUpstream(reply)
    app, _, _ = make_app({"cache": {"threshold": 0.5}}, answers={"cache": 0.99}, upstreams={"u": upstream})
    first, again = post(app, HI), post(app, HI)
    assert first.status_code == again.status_code == 502, first.text
    assert first.json()["error"]["code"] == "bad_upstream_answer"
    assert len(upstream.requests) == 2  # nothing was stored for the repeat to be served

    async def stream():
        async with client(app) as c:
            return await c.post("/v1/chat/completions", json={**HI, "stream": True})

    streamed = run(stream())
    assert "Infinity" not in streamed.text and "malformed event" in streamed.text


def _streamed_through_the_gateway(raw: str) -> httpx.Response:
    """A stream request through a gateway whose upstream answers with the event-stream text `raw`."""

    def reply(body: dict) -> httpx.Response:
        return httpx.Response(200, content=raw.encode(), headers={"content-type": "text/event-stream"})

    app, _, _ = make_app(upstreams={"u": StubUpstream(reply)})

    async def stream():
        async with client(app) as c:
            return await c.post("/v1/chat/completions", json={**HI, "stream": True})

    return run(stream())


def test_a_stream_whose_text_holds_unicode_line_separators_is_relayed_whole():
    # U+2028, U+2029 and U+0085 are no line ends in an event stream, and vLLM writes them unescaped: split as
    # str.splitlines splits, a reply holding one was cut mid-event and the client's stream ended in an error
    text = "Line one.\u2028Line two.\u2029Para.\x85Next line."
    chunks = [{"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": 0, "delta": {"content": part}, "finish_reason": None}]}
              for part in (text[:12], text[12:])]
    raw = "".join(f"data: {json.dumps(c, ensure_ascii=False)}\r\n\r\n" for c in chunks) + "data: [DONE]\r\n\r\n"
    streamed = _streamed_through_the_gateway(raw)
    assert streamed.status_code == 200 and "error" not in streamed.text
    events = [json.loads(line[5:]) for line in streamed.text.split("\n") if line.startswith("data: {")]
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in events) == text
    assert streamed.text.rstrip().endswith("data: [DONE]")


def test_event_lines_split_at_cr_and_lf_only_across_chunks():
    from jevserve.gateway.streaming import stream_event_lines

    async def lines(chunks):
        async def source():
            for chunk in chunks:
                yield chunk
        return [line async for line in stream_event_lines(source())]

    assert run(lines(["a\u2028b\r", "\nc\rd\n", "e"])) == ["a\u2028b", "c", "d", "e"]
    assert run(lines(["x\r", "", "y\n"])) == ["x", "y"]


def test_an_absurd_upstream_retry_after_ends_the_tries_and_is_passed_on_bounded():
    # 99999999999 s was waited 5 s twice, then passed on as it was; -5 likewise, and then passed on as 0. -5 is no
    # Retry-After (RFC 9110's delay-seconds has no sign): the backoff is waited, and nothing is passed on. 0 was
    # taken at its word: every try went out within 70 ms, all refused; the backoff is the least waited
    for hint, passed in (("99999999999", "600"), ("-5", None), ("0", "0")):
        limited = StubUpstream(lambda body, hint=hint: httpx.Response(
            429, json={"error": {"message": "slow down"}}, headers={"retry-after": hint}))
        config = {"upstreams": [{"name": "a", "url": "http://a.test/v1", "max_retries": 1, "backoff_s": 0.3}]}
        app, _, _ = make_app(upstreams={"a": limited}, config=config)
        started = time.monotonic()
        response = post(app, HI)
        assert response.status_code == 429 and response.headers.get("retry-after") == passed
        tries = 1 if hint == "99999999999" else 2  # a long hint is not waited for; the others are, once
        assert len(limited.requests) == tries and time.monotonic() - started < 4
        if tries == 2:
            assert time.monotonic() - started >= 0.3  # the backoff


def test_an_upstream_answering_pages_instead_of_json_opens_its_circuit_and_the_route_falls_over():
    # a 200 holding a proxy's HTML page (the client's 502 bad_upstream_answer) counted as a success: such an upstream
    # kept its circuit closed and the route never reached its next upstream
    config = {"upstreams": [{"name": "a", "url": "http://a.test/v1", "max_retries": 0, "breaker_failures": 2},
                            {"name": "b", "url": "http://b.test/v1", "max_retries": 0}]}
    broken = StubUpstream(lambda body: httpx.Response(200, text="<html>maintenance</html>"))
    healthy = StubUpstream()
    app, _, _ = make_app(upstreams={"a": broken, "b": healthy}, config=config)
    statuses = [post(app, HI).status_code for _ in range(3)]
    assert statuses == [502, 502, 200]
    assert len(broken.requests) == 2 and len(healthy.requests) == 1


def test_a_429_between_failures_neither_opens_nor_resets_the_circuit():
    # counted as a success, one 429 among failing 503s kept a failing upstream's circuit closed
    answers = iter([503, 429, 503])
    config = {"upstreams": [{"name": "a", "url": "http://a.test/v1", "max_retries": 0, "breaker_failures": 2}]}
    flaky = StubUpstream(lambda body: httpx.Response(next(answers), json={"error": {"message": "x"}}))
    app, _, _ = make_app(upstreams={"a": flaky}, config=config)
    assert [post(app, HI).status_code for _ in range(3)] == [503, 429, 503]
    last = post(app, HI)
    assert last.status_code == 503 and last.json()["error"]["code"] == "upstream_unavailable"
    assert len(flaky.requests) == 3  # the fourth found the circuit open


def test_an_unreadable_retry_after_ms_beside_a_retry_after_is_not_passed_on_made_up():
    from jevserve.gateway.stages.forward import passed_headers

    assert passed_headers(httpx.Headers({"retry-after": "3", "retry-after-ms": "abc"})) == {"retry-after": "3"}
    assert passed_headers(httpx.Headers({"retry-after": "3", "retry-after-ms": "1500"})) == {
        "retry-after": "2", "retry-after-ms": "1500"}


def test_a_browser_page_may_read_the_pacing_headers_passed_on():
    from jevserve.gateway.app import CLIENT_HEADERS
    from jevserve.gateway.stages.forward import PASSED_HEADERS

    assert {"retry-after", "retry-after-ms", "x-ratelimit-remaining-requests", *PASSED_HEADERS} <= set(CLIENT_HEADERS)


def test_a_payload_split_over_several_data_lines_is_relayed_as_one_event():
    # valid SSE, joined by the openai client: read line by line, the relay called each piece malformed
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "joined"}, "finish_reason": None}]}
    raw = "".join(f"data: {line}\n" for line in json.dumps(chunk, indent=1).split("\n")) + "\ndata: [DONE]\n\n"
    streamed = _streamed_through_the_gateway(raw)
    assert "error" not in streamed.text and '"content":"joined"' in streamed.text.replace(" ", "")


def test_a_2xx_reply_nested_past_the_parsers_depth_is_a_502_bad_upstream_answer_not_a_crash():
    # read by json.loads, a reply of 100,000 nested lists raised RecursionError out of the forward stage: a 500
    nested = "[" * 100_000 + "]" * 100_000
    deep = StubUpstream(lambda body: httpx.Response(200, text=nested, headers={"content-type": "application/json"}))
    app, _, _ = make_app(upstreams={"u": deep})
    response = post(app, HI)
    assert response.status_code == 502 and response.json()["error"]["code"] == "bad_upstream_answer"


def _chunk_event(text: str) -> str:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
             "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return f"data: {json.dumps(chunk)}\n\n"


def test_streams_that_break_off_count_against_the_circuit_and_the_route_falls_over():
    # a stream's health was counted when its 2xx headers came: an upstream whose every stream broke off before
    # [DONE] kept its circuit closed, and the route never reached its next upstream
    config = {"upstreams": [{"name": "a", "url": "http://a.test/v1", "max_retries": 0, "breaker_failures": 2},
                            {"name": "b", "url": "http://b.test/v1", "max_retries": 0}]}
    cut = StubUpstream(lambda body: httpx.Response(200, content=_chunk_event("Hel").encode(),
                                                   headers={"content-type": "text/event-stream"}))
    whole = StubUpstream(lambda body: httpx.Response(
        200, content=(_chunk_event("Hello") + "data: [DONE]\n\n").encode(),
        headers={"content-type": "text/event-stream"}))
    app, _, _ = make_app(upstreams={"a": cut, "b": whole}, config=config)

    async def streams(count: int) -> list[str]:
        async with client(app) as c:
            return [(await c.post("/v1/chat/completions", json={**HI, "stream": True})).text for _ in range(count)]

    texts = run(streams(3))
    assert all("closed the stream before [DONE]" in text for text in texts[:2])
    assert "Hello" in texts[2] and texts[2].rstrip().endswith("data: [DONE]")
    assert len(cut.requests) == 2 and len(whole.requests) == 1
    health = run(_get(app, "/healthz")).json()
    assert health["upstreams"]["a"]["circuit"] == "open"


def test_a_stream_that_ends_with_the_models_error_event_is_no_failure_of_the_upstream():
    # an error event is the model's answer about this request, as a 500 is: counted, one client's prompt that the
    # model fails on would open the circuit for everyone
    error_event = 'data: {"error": {"message": "prompt too long", "code": 400}}\n\n'
    failing_prompt = StubUpstream(lambda body: httpx.Response(200, content=error_event.encode(),
                                                              headers={"content-type": "text/event-stream"}))
    config = {"upstreams": [{"name": "a", "url": "http://a.test/v1", "max_retries": 0, "breaker_failures": 2}]}
    app, _, _ = make_app(upstreams={"a": failing_prompt}, config=config)

    async def streams(count: int) -> list[str]:
        async with client(app) as c:
            return [(await c.post("/v1/chat/completions", json={**HI, "stream": True})).text for _ in range(count)]

    assert all("prompt too long" in text for text in run(streams(3)))
    assert len(failing_prompt.requests) == 3
    assert run(_get(app, "/healthz")).json()["upstreams"]["a"]["circuit"] == "closed"


@pytest.mark.parametrize(("status", "content_type"), [(500, "application/json"), (502, "application/json"),
                                                      (200, "application/json"), (503, "text/plain")])
def test_a_whole_answer_to_a_stream_request_whose_body_breaks_is_a_502_and_gives_its_slot_back(status, content_type):
    # read unguarded, a body that broke off was the gateway's own 500 with the library's words, and the slot of a
    # 200, 500 or 502 was never given back: two of them held a `max_concurrency: 2` upstream for good
    config = {"upstreams": [{"name": "a", "url": "http://a.test/v1", "max_retries": 0, "max_concurrency": 2,
                             "breaker_failures": 3}]}
    cut = StubUpstream(lambda body: httpx.Response(status, stream=CutStream(b'{"error": {"mess'),
                                                   headers={"content-type": content_type}))
    app, _, _ = make_app(upstreams={"a": cut}, config=config)

    async def streams(count: int) -> list[httpx.Response]:
        async with client(app) as c:
            return [await c.post("/v1/chat/completions", json={**HI, "stream": True}) for _ in range(count)]

    answers = run(streams(3))
    if status == 503:  # a refusal for load whose body broke off is still that refusal, passed on
        assert [a.status_code for a in answers] == [503, 503, 503]
        assert all(a.json()["error"]["code"] == "upstream_unavailable" for a in answers)
    else:
        assert [a.status_code for a in answers] == [502, 502, 502]
        assert all(a.json()["error"]["message"] == "a: connection broken after the request was sent; not retried, "
                   "since the model may have run it" for a in answers)
    health = run(_get(app, "/healthz")).json()["upstreams"]["a"]
    assert health["in_flight"] == 0  # every slot given back
    assert health["circuit"] == "open" and len(cut.requests) == 3  # three broken answers in a row


def test_a_whole_answer_to_a_stream_request_whose_body_stalls_is_a_504():
    class Stalled(httpx.AsyncByteStream):
        async def __aiter__(self):
            yield b'{"choices": ['
            raise httpx.ReadTimeout("nothing within the timeout")

    stalled = StubUpstream(lambda body: httpx.Response(200, stream=Stalled(),
                                                       headers={"content-type": "application/json"}))
    app, _, _ = make_app(upstreams={"a": stalled})

    async def stream() -> httpx.Response:
        async with client(app) as c:
            return await c.post("/v1/chat/completions", json={**HI, "stream": True})

    answer = run(stream())
    assert answer.status_code == 504 and answer.json()["error"]["message"] == (
        "a: nothing within its timeout after the request was sent; not retried, since the model may have run it")
    assert run(_get(app, "/healthz")).json()["upstreams"]["a"]["in_flight"] == 0


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", [200, 500, 503])
def test_an_answer_labelled_gzip_that_is_not_is_a_502_counted_against_the_circuit(stream, status):
    # httpx's DecodingError is no TransportError: it was the gateway's own 500, in no metric, and the circuit never
    # opened, so the route never fell over to its next upstream
    config = {"upstreams": [{"name": "a", "url": "http://a.test/v1", "max_retries": 0, "breaker_failures": 2},
                            {"name": "b", "url": "http://b.test/v1", "max_retries": 0}]}
    class Plain(httpx.AsyncByteStream):  # read as it arrives, as from a socket (content= is decoded at once)
        async def __aiter__(self):
            yield b'{"choices": []}'

    mislabelled = StubUpstream(lambda body: httpx.Response(
        status, stream=Plain(), headers={"content-type": "application/json", "content-encoding": "gzip"}))
    app, _, _ = make_app(upstreams={"a": mislabelled, "b": StubUpstream()}, config=config)

    async def ask(count: int) -> list[httpx.Response]:
        async with client(app) as c:
            return [await c.post("/v1/chat/completions", json={**HI, "stream": stream}) for _ in range(count)]

    answers = run(ask(3))
    if status == 503:  # a refusal for load whose body cannot be read is still that refusal: the next
        assert [a.status_code for a in answers[:2]] == [200, 200]  # upstream takes the request
    else:
        assert [a.status_code for a in answers[:2]] == [502, 502]
        assert answers[0].json()["error"]["message"] == (
            "a: answer not readable by its Content-Encoding; not retried, since the model may have run it")
    assert answers[2].status_code == 200 and len(mislabelled.requests) == 2  # the circuit opened: b answered
    assert run(_get(app, "/healthz")).json()["upstreams"]["a"]["in_flight"] == 0


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", [429, 503])
def test_a_refusal_for_load_whose_body_breaks_or_stalls_is_that_refusal_streamed_or_not(status, stream):
    # without stream the body was read with the headers, so a 429 or 503 whose body broke off lost its status: a 502
    # (and a stalled one a 504) that clients retry at once, where the same answer to a stream request stayed the
    # refusal with its Retry-After
    class Stalled(httpx.AsyncByteStream):
        async def __aiter__(self):
            yield b'{"error": '
            raise httpx.ReadTimeout("nothing within the timeout")

    config = {"upstreams": [{"name": "a", "url": "http://a.test/v1", "max_retries": 0, "max_concurrency": 2}]}
    bodies = iter([CutStream(b'{"error": {"mess'), Stalled()])
    refusing = StubUpstream(lambda body: httpx.Response(
        status, stream=next(bodies), headers={"content-type": "application/json", "retry-after": "7"}))
    app, _, _ = make_app(upstreams={"a": refusing}, config=config)

    async def ask(count: int) -> list[httpx.Response]:
        async with client(app) as c:
            return [await c.post("/v1/chat/completions", json={**HI, "stream": stream}) for _ in range(count)]

    answers = run(ask(2))
    assert [a.status_code for a in answers] == [status, status]
    assert all(a.headers["retry-after"] == "7" for a in answers)
    code = "upstream_rate_limited" if status == 429 else "upstream_unavailable"
    assert all(a.json()["error"]["code"] == code for a in answers)
    assert run(_get(app, "/healthz")).json()["upstreams"]["a"]["in_flight"] == 0


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_that_leaves_while_an_answers_body_stalls_gives_the_connection_back(stream):
    # the gateway reads a whole answer itself: a client that leaves during the read gives its connection back
    closed: list[bool] = []

    class Stalled(httpx.AsyncByteStream):
        async def __aiter__(self):
            yield b'{"choices": '
            await asyncio.sleep(30)

        async def aclose(self) -> None:
            closed.append(True)

    slow = StubUpstream(lambda body: httpx.Response(500, stream=Stalled(),
                                                    headers={"content-type": "application/json"}))
    app, _, _ = make_app(upstreams={"a": slow})

    async def leave() -> None:
        async with client(app) as c:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(c.post("/v1/chat/completions", json={**HI, "stream": stream}), 0.3)

    run(leave())
    assert closed == [True]
    assert run(_get(app, "/healthz")).json()["upstreams"]["a"]["in_flight"] == 0


def test_a_client_that_leaves_while_a_refusals_body_stalls_gives_the_connection_back():
    # the 429/503 body read had no cleanup on cancellation: two such clients held a `max_concurrency: 2`
    # upstream's connections for good, and every later request failed to connect
    closed: list[bool] = []

    class Stalled(httpx.AsyncByteStream):
        async def __aiter__(self):
            yield b'{"error": '
            await asyncio.sleep(30)

        async def aclose(self) -> None:
            closed.append(True)

    busy = StubUpstream(lambda body: httpx.Response(503, stream=Stalled(),
                                                    headers={"content-type": "application/json"}))
    app, _, _ = make_app(upstreams={"a": busy})

    async def leave() -> None:
        async with client(app) as c:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(c.post("/v1/chat/completions", json={**HI, "stream": True}), 0.3)

    run(leave())
    assert closed == [True]


@pytest.mark.parametrize("status", [204, 304])
def test_an_answer_with_no_body_to_a_stream_request_is_a_502_not_a_stream_holding_an_error(status):
    # with no content type it was relayed as a stream: a 200 whose one event was an error
    app, _, _ = make_app(upstreams={"a": StubUpstream(lambda body: httpx.Response(status))})

    async def ask() -> httpx.Response:
        async with client(app) as c:
            return await c.post("/v1/chat/completions", json={**HI, "stream": True})

    answer = run(ask())
    assert answer.status_code == 502 and answer.headers["content-type"].startswith("application/json")
    assert answer.json()["error"]["message"] == "upstream sent a non-JSON answer: an empty body, 0 characters"
