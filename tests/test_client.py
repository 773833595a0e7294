"""Client retry rules (typesafe-sdk 0.7.x) against scripted transports; no sleeping for real."""

import asyncio
import random

import httpx
import pytest

import jevserve.client as client_module
from jevserve.client import AsyncSystemOne, RetryPolicy, SystemOne, SystemOneAPIError, SystemOneConnectionError
from tests.helpers import ticket_body

OK_BODY = {
    "model": "m",
    "answers": {"q": {"type": "noul", "noul": 0.25}},
    "usage": {"input_tokens": 5, "output_tokens": 0},
}


def scripted(responses):
    """A transport answering with the given (status, headers, body) triples in turn; records requests."""
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        status, headers, body = responses[min(len(calls), len(responses)) - 1]
        if status == "drop":
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(status, headers=headers, json=body)

    return handler, calls


@pytest.fixture
def sleeps(monkeypatch):
    waited = []
    monkeypatch.setattr(client_module.time, "sleep", waited.append)
    return waited


def make(handler, **kwargs) -> SystemOne:
    return SystemOne("http://upstream/v1/", api_key="k", transport=httpx.MockTransport(handler), seed=0, **kwargs)


def test_success_parses_answers_and_sends_bearer_key(sleeps):
    handler, calls = scripted([(200, {}, OK_BODY)])
    resp = make(handler).decide("state", {"q": {"type": "noul", "instructions": "?"}})
    assert resp.answers["q"].noul == 0.25
    assert calls[0].url == "http://upstream/v1/systemone"
    assert calls[0].headers["authorization"] == "Bearer k"
    assert sleeps == []


def test_429_then_success_honours_retry_after_ms_over_retry_after(sleeps):
    handler, calls = scripted(
        [(429, {"retry-after-ms": "1500", "Retry-After": "9"}, {"detail": {}}), (200, {}, OK_BODY)]
    )
    make(handler).decide("s", {"q": {"type": "noul"}})
    assert len(calls) == 2 and sleeps == [1.5]


def test_retry_after_seconds_is_honoured(sleeps):
    handler, _ = scripted([(503, {"Retry-After": "2"}, {}), (200, {}, OK_BODY)])
    make(handler).decide("s", {"q": {"type": "noul"}})
    assert sleeps == [2.0]


def test_5xx_is_retried_twice_with_jittered_doubling_backoff_then_raised(sleeps):
    handler, calls = scripted([(500, {}, {"detail": {"error_type": "internal_error", "message": "boom"}})])
    with pytest.raises(SystemOneAPIError) as info:
        make(handler).decide("s", {"q": {"type": "noul"}})
    assert len(calls) == 3 and info.value.error_type == "internal_error"
    assert 0.375 <= sleeps[0] <= 0.5 and 0.75 <= sleeps[1] <= 1.0


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 415, 422])
def test_client_errors_are_never_retried(sleeps, status):
    handler, calls = scripted(
        [(status, {}, {"detail": [{"loc": ["body", "questions"], "msg": "too short", "type": "x"}]})]
    )
    with pytest.raises(SystemOneAPIError) as info:
        make(handler).decide("s", {"q": {"type": "noul"}})
    assert len(calls) == 1 and info.value.status_code == status
    assert sleeps == []


def test_validation_error_message_names_the_field(sleeps):
    handler, _ = scripted([(422, {}, {"detail": [{"loc": ["body", "questions", "q"], "msg": "bad", "type": "x"}]})])
    with pytest.raises(SystemOneAPIError, match=r"questions\.q: bad"):
        make(handler).decide("s", {"q": {"type": "noul"}})


def test_connection_errors_are_retried_then_raised(sleeps):
    handler, calls = scripted([("drop", {}, None)])
    with pytest.raises(SystemOneConnectionError):
        make(handler).decide("s", {"q": {"type": "noul"}})
    assert len(calls) == 3


def test_retry_budget_stops_retrying_early(sleeps):
    handler, calls = scripted([(429, {"Retry-After": "40"}, {})])
    with pytest.raises(SystemOneAPIError):
        make(handler).decide("s", {"q": {"type": "noul"}})
    assert len(calls) == 1 and sleeps == []


def test_backoff_is_capped_and_jitter_only_subtracts():
    policy = RetryPolicy(max_retries=10)
    rng = random.Random(1)
    delays = [policy.delay_s(i, None, rng) for i in range(8)]
    assert all(0.75 * min(0.5 * 2**i, 5.0) <= d <= min(0.5 * 2**i, 5.0) for i, d in enumerate(delays))


def test_async_client_follows_the_same_rules(monkeypatch):
    waited = []

    async def fake_sleep(s):
        waited.append(s)

    monkeypatch.setattr(client_module.asyncio, "sleep", fake_sleep)
    handler, calls = scripted([(529, {"retry-after-ms": "10"}, {}), (200, {}, OK_BODY)])

    async def go():
        async with AsyncSystemOne("http://upstream", transport=httpx.MockTransport(handler), seed=0) as c:
            return await c.decide("s", {"q": {"type": "noul"}}, x_trace_id="t")

    resp = asyncio.run(go())
    assert resp.answers["q"].noul == 0.25 and waited == [0.01] and len(calls) == 2
    assert b'"x_trace_id"' in calls[0].content


def test_payload_accepts_protocol_models_and_keeps_extras():
    from jevserve.protocol import SystemOneRequest

    questions = SystemOneRequest.model_validate(ticket_body()).questions
    body = SystemOne.payload("s", questions, None, {"seed": 3})
    assert body["model"] == "jev-latest" and body["seed"] == 3
    assert body["questions"]["team"]["criteria"] == {
        "Billing": "Payments, invoices, refunds",
        "Technical": None,
        "Sales": "Pricing",
    }
