"""The request path as stages: usable without HTTP, typed actions, shadow mode, and one path for streamed replies."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest

from jevserve.gateway.context import RequestContext
from jevserve.gateway.decider import FixedDecider
from jevserve.gateway.errors import BlockedError
from jevserve.gateway.policies import POLICIES, Policy, register_policy
from jevserve.gateway.stages import Answer, Forward, act, decide, limit, read_body, select_route
from jevserve.gateway.types import Action, ClarifyDetail, Phase
from tests.gateway.upstreams import StubUpstream, client, completion, make_app, run, sse_events

HI = {"model": "m", "messages": [{"role": "user", "content": "what is the capital of France?"}]}


def post(app, body, path="/v1/chat/completions"):
    async def go():
        async with client(app) as c:
            return await c.post(path, json=body)

    return run(go())


def run_request_stages(app, body: dict) -> tuple[RequestContext, Answer | Forward]:
    """read → route → limit → decide → act, as another front end (an ext_proc server) calls them."""
    gateway = app.state.gateway

    async def go():
        ctx = RequestContext("chat", tenant="t")
        ctx.body = read_body(json.dumps(body).encode(), ctx.endpoint)
        select_route(gateway, ctx)
        await limit(gateway, ctx)
        await decide(gateway, ctx)
        return ctx, act(ctx)

    return asyncio.run(go())


def test_the_request_stages_run_without_http_and_return_a_typed_plan():
    app, _, _ = make_app({"guard": {}, "route": {"targets": [{"model": "small", "cost": 0.1}, {"model": "big"}]}},
                         answers={"guard": 0.1, "route": 0.9})  # fmt: skip
    ctx, plan = run_request_stages(app, HI)
    assert isinstance(plan, Forward) and plan.body["model"] == "small"
    assert ctx.report.verdict("guard").action is Action.ALLOW
    assert ctx.report.verdict("route").action is Action.ROUTE


def test_the_act_stage_refuses_a_block_and_answers_a_clarification_itself():
    app, _, _ = make_app({"guard": {}}, answers={"guard": 0.9})
    with pytest.raises(BlockedError, match="guard decision on the user's message"):
        run_request_stages(app, HI)
    app, _, _ = make_app({"clarify": {"message": "Which city?"}}, answers={"clarify": 0.9})
    ctx, plan = run_request_stages(app, HI)
    assert isinstance(plan, Answer) and plan.completion["choices"][0]["message"]["content"] == "Which city?"
    assert isinstance(ctx.report.final.detail, ClarifyDetail)


def test_policies_are_registered_once_with_their_phase():
    assert list(POLICIES) == ["guard", "harm", "clarify", "cache", "route", "priority", "tool_gate"]
    assert [k for k, cls in POLICIES.items() if cls.phase is Phase.REPLY] == ["tool_gate"]

    class Guard(Policy):
        name = "guard"

    with pytest.raises(ValueError, match="'guard' is already registered"):
        register_policy(Guard)


def test_a_decision_in_shadow_mode_is_reported_and_logged_but_does_not_act(tmp_path):
    log = tmp_path / "log.jsonl"
    app, _, upstreams = make_app({"guard": {"mode": "shadow"}}, answers={"guard": 0.97},
                                 config={"log": {"path": str(log)}})  # fmt: skip
    response = post(app, HI)
    assert response.status_code == 200
    assert response.headers["x-jevserve-decisions"] == "guard=block~shadow"
    assert len(upstreams["u"].requests) == 1
    verdict = json.loads(log.read_text().splitlines()[0])["decisions"]["verdicts"][0]
    assert verdict["action"] == "block" and verdict["mode"] == "shadow"


def _stream_or_whole(body: dict) -> httpx.Response:
    # an upstream that answers a stream request with a stream, else with JSON; both cut short by max_tokens
    if body.get("stream"):
        events = sse_events(["Paris"]).replace(b'"finish_reason": "stop"', b'"finish_reason": "length"')
        return httpx.Response(200, content=events, headers={"content-type": "text/event-stream"})
    return httpx.Response(200, json=completion("Paris", finish_reason="length"))


@pytest.mark.parametrize("stream", [False, True])
def test_streamed_and_whole_replies_are_stored_on_the_same_condition(stream):
    stub = StubUpstream(_stream_or_whole)
    app, _, _ = make_app({"cache": {}}, upstreams={"u": stub})
    for _ in range(2):
        assert post(app, {**HI, "stream": stream}).status_code == 200
    assert len(stub.requests) == 2  # a reply cut short by length is never stored, streamed or not
    ok = StubUpstream()
    app, _, _ = make_app({"cache": {}}, upstreams={"u": ok})
    _, second = (post(app, {**HI, "stream": stream}) for _ in range(2))
    assert len(ok.requests) == 1 and second.headers["x-jevserve-cache"] == "hit"


@pytest.mark.parametrize("stream", [False, True])
def test_an_upstream_error_gets_the_same_body_whether_the_client_streams_or_not(stream):
    html = StubUpstream(lambda body: httpx.Response(400, text="<html>bad gateway config</html>"))
    app, _, _ = make_app({}, upstreams={"u": html})
    response = post(app, {**HI, "stream": stream})
    assert response.status_code == 502 and response.json()["error"]["code"] == "bad_upstream_answer"
    refused = StubUpstream(lambda body: httpx.Response(422, json={"error": {"message": "max_tokens too large"}}))
    app, _, _ = make_app({}, upstreams={"u": refused})
    response = post(app, {**HI, "stream": stream})
    assert response.status_code == 422 and response.json() == {"error": {"message": "max_tokens too large"}}


@pytest.mark.parametrize("stream", [False, True])
def test_a_2xx_page_that_is_not_json_is_a_502_whether_the_client_streams_or_not(stream):
    # a proxy's HTML page with 200: the gateway has its status and headers before it answers, so it can say 502
    page = StubUpstream(
        lambda body: httpx.Response(200, text="<html>login</html>", headers={"content-type": "text/html"})
    )
    app, _, _ = make_app({}, upstreams={"u": page})
    response = post(app, {**HI, "stream": stream})
    assert response.status_code == 502 and response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "bad_upstream_answer" and "an HTML or XML page" in error["message"]
    assert "login" not in response.text  # described, never quoted: an unjudged reply must not reach the client


def test_a_json_completion_sent_as_plain_text_to_a_stream_request_is_called_json_not_text():
    # a re-tester's upstream sent a whole completion as text/plain: the 502 called it "text that is not a JSON object"
    plain = StubUpstream(lambda body: httpx.Response(200, text=json.dumps(completion("Paris")),
                                                     headers={"content-type": "text/plain"}))
    app, _, _ = make_app({}, upstreams={"u": plain})
    response = post(app, {**HI, "stream": True})
    message = response.json()["error"]["message"]
    assert response.status_code == 502 and "without any event" in message and "not a JSON object" not in message


@pytest.mark.parametrize("usage", [False, True])
def test_a_hit_on_a_streamed_reply_carries_the_upstreams_id_and_model_and_only_its_usage(usage):
    def streams(body):
        events = sse_events(["Paris"], model="Qwen/Qwen3-8B", usage=usage)
        return httpx.Response(200, content=events, headers={"content-type": "text/event-stream"})

    app, _, _ = make_app({"cache": {}}, upstreams={"u": StubUpstream(streams)})
    assert post(app, {**HI, "stream": True}).status_code == 200
    hit = post(app, HI)
    assert hit.headers["x-jevserve-cache"] == "hit"
    reply = hit.json()
    assert reply["model"] == "Qwen/Qwen3-8B" and reply["id"] == "c"  # as the upstream's chunks named them
    assert reply["choices"][0]["message"]["content"] == "Paris"
    # the upstream's usage chunk when it sent one; none invented (no prompt count of 0) when it did not
    assert reply["usage"] == ({"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4} if usage else None)
    streamed = post(app, {**HI, "stream": True, "stream_options": {"include_usage": True}})
    chunks = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
    assert {c["model"] for c in chunks} == {"Qwen/Qwen3-8B"}
    # a stream asking for usage is served the stored usage, never a usage chunk of null: without one it is a miss
    assert streamed.headers.get("x-jevserve-cache") == ("hit" if usage else None)
    assert chunks[-1].get("usage") == reply["usage"]


REASONING_REPLY = {"reasoning_content": "Paris is the seat of government.", "content": "Paris"}
LOGPROBS = [{"token": "Paris", "logprob": -0.01, "top_logprobs": []}]


def _reasoning_upstream(body):
    # a reasoning model behind vLLM's reasoning parser, asked for logprobs: its stream or its whole reply
    if body.get("stream"):
        def chunk(delta, logprobs=None, finish=None):
            return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                    "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]}
        chunks = [chunk({"role": "assistant", "reasoning_content": "Paris is the seat "}),
                  chunk({"reasoning_content": "of government."}),
                  chunk({"content": "Paris"}, {"content": LOGPROBS}), chunk({}, None, "stop")]
        events = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
        return httpx.Response(200, content=events, headers={"content-type": "text/event-stream"})
    return httpx.Response(200, json={"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", **REASONING_REPLY}, "logprobs": {"content": LOGPROBS},
         "finish_reason": "stop"}], "usage": None})


@pytest.mark.parametrize("first_streams", [False, True])
@pytest.mark.parametrize("hit_streams", [False, True])
def test_a_hit_keeps_the_replys_reasoning_and_logprobs_in_either_form(first_streams, hit_streams):
    app, _, upstreams = make_app({"cache": {}}, upstreams={"u": StubUpstream(_reasoning_upstream)})
    assert post(app, {**HI, "stream": first_streams, "logprobs": True}).status_code == 200
    hit = post(app, {**HI, "stream": hit_streams, "logprobs": True})
    assert hit.headers["x-jevserve-cache"] == "hit" and len(upstreams["u"].requests) == 1
    if hit_streams:
        chunks = [json.loads(line[6:]) for line in hit.text.splitlines() if line.startswith("data: {")]
        deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
        reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
        content = "".join(d.get("content", "") for d in deltas)
        logprobs = [e for c in chunks for ch in c["choices"] for e in ((ch.get("logprobs") or {}).get("content") or [])]
    else:
        choice = hit.json()["choices"][0]
        reasoning, content = choice["message"]["reasoning_content"], choice["message"]["content"]
        logprobs = choice["logprobs"]["content"]
    assert (reasoning, content) == (REASONING_REPLY["reasoning_content"], "Paris")
    assert logprobs == LOGPROBS


def test_an_exact_repeat_is_served_from_the_cache_without_the_reuse_question():
    decider = FixedDecider({"cache": 0.0})  # the reuse question would say no
    app, _, upstreams = make_app({"cache": {}}, decider=decider)
    first = post(app, HI)
    again = post(app, {**HI, "messages": [{"role": "user", "content": "what is the capital of France?  "}]})
    assert first.headers.get("x-jevserve-cache") is None and again.headers["x-jevserve-cache"] == "hit"
    assert "cache=serve_cached" in again.headers["x-jevserve-decisions"]
    assert len(upstreams["u"].requests) == 1 and "cache" not in {q for call in decider.calls for q in call}
    other = post(app, {**HI, "temperature": 1.5})  # other parameters: not the same request
    assert other.headers.get("x-jevserve-cache") is None and len(upstreams["u"].requests) == 2


def test_a_negated_question_is_not_served_when_the_reuse_decision_says_no():
    decider = FixedDecider({"cache": 0.1})
    app, _, upstreams = make_app({"cache": {"min_similarity": 0.5}}, decider=decider)
    post(app, {**HI, "messages": [{"role": "user", "content": "Is Paris the capital of France?"}]})
    negated = post(app, {**HI, "messages": [{"role": "user", "content": "Is Paris not the capital of France?"}]})
    assert negated.headers.get("x-jevserve-cache") is None and len(upstreams["u"].requests) == 2
    assert "cache" in decider.calls[-1]  # it was a candidate, and the decision refused it


@pytest.mark.parametrize("stream", [False, True])
def test_completions_clients_get_text_completion_shapes_for_gateway_written_answers(stream):
    app, _, _ = make_app({"clarify": {"message": "Which file?"}}, answers={"clarify": 0.9})
    response = post(app, {"model": "m", "prompt": "delete it", "stream": stream}, path="/v1/completions")
    if stream:
        chunks = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
        assert {c["object"] for c in chunks} == {"text_completion"}
        assert "".join(c["choices"][0]["text"] for c in chunks) == "Which file?"
        assert response.text.rstrip().endswith("data: [DONE]")
    else:
        assert response.json()["object"] == "text_completion"
        assert response.json()["choices"][0]["text"] == "Which file?"


def test_completions_through_the_placeholder_upstream_are_text_completions_for_the_openai_client():
    from jevserve.gateway.app import create_app
    from jevserve.gateway.config import parse_config
    from tests.gateway.upstreams import LoopbackServer

    app = create_app(parse_config({"routes": [{"model": "m"}]}), decider=FixedDecider())
    with LoopbackServer(app) as server:
        api = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        reply = api.completions.create(model="m", prompt="hello")
        streamed = "".join(c.choices[0].text for c in api.completions.create(model="m", prompt="hi", stream=True))
    assert reply.object == "text_completion" and "placeholder reply" in reply.choices[0].text
    assert "placeholder reply" in streamed


def test_the_clients_request_id_and_trace_context_reach_the_upstream_and_come_back():
    # an outside tester's x-request-id was replaced and reached no upstream, so the gateway's log and vLLM's could
    # not be lined up
    seen = []

    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append(dict(request.headers))
        return httpx.Response(200, json=completion())

    app, _, _ = make_app({}, upstreams={"u": httpx.MockTransport(upstream)})
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    async def go(headers):
        async with client(app) as c:
            return await c.post("/v1/chat/completions", json=HI, headers=headers)

    kept = run(go({"x-request-id": "my-trace-123", "traceparent": trace}))
    assert kept.headers["x-request-id"] == "my-trace-123"
    # sent on unique (vLLM's engine needs it so), starting with the client's id so the logs line up
    assert seen[-1]["x-request-id"].startswith("my-trace-123-") and seen[-1]["traceparent"] == trace
    run(go({"x-request-id": "my-trace-123"}))
    assert seen[-1]["x-request-id"].startswith("my-trace-123-") and seen[-1]["x-request-id"] != seen[-2]["x-request-id"]
    replaced = run(go({"x-request-id": "x" * 200}))  # not a usable id: a new one, sent on too
    assert replaced.headers["x-request-id"] != "x" * 200
    assert seen[-1]["x-request-id"] == replaced.headers["x-request-id"]
    assert "traceparent" not in seen[-1]


def test_a_page_of_a_listed_origin_may_call_the_gateway_from_a_browser_and_others_may_not():
    app, _, _ = make_app({}, config={"cors_origins": ["https://app.example.com"]})

    async def go(method, origin, **kw):
        async with client(app) as c:
            return await c.request(method, "/v1/chat/completions", headers={"origin": origin, **kw.pop("h", {})},
                                   **kw)

    preflight = run(go("OPTIONS", "https://app.example.com", h={"access-control-request-method": "POST",
                                                                  "access-control-request-headers": "authorization"}))
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "https://app.example.com"
    answer = run(go("POST", "https://app.example.com", json=HI))
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == "https://app.example.com"
    assert "x-jevserve-decisions" in answer.headers["access-control-expose-headers"]
    other = run(go("OPTIONS", "https://evil.example", h={"access-control-request-method": "POST"}))
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    plain, _, _ = make_app({})  # off by default: no CORS headers, and a preflight is a 405
    async def preflight_plain():
        async with client(plain) as c:
            return await c.options("/v1/chat/completions", headers={"origin": "https://app.example.com",
                                                                    "access-control-request-method": "POST"})
    refused = run(preflight_plain())
    assert refused.status_code == 405 and "access-control-allow-origin" not in refused.headers
