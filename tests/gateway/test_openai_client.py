"""The real `openai` client against the gateway, streaming and not, in process and over loopback HTTP."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.gateway.upstreams import CutStream, LoopbackServer, StubUpstream, make_app, run, sse_events


def async_openai(app) -> openai.AsyncOpenAI:
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://gw")
    return openai.AsyncOpenAI(base_url="http://gw/v1", api_key="sk-test", http_client=http, max_retries=0)


def test_openai_client_gets_a_chat_completion_through_the_gateway():
    app, _, upstreams = make_app()

    async def scenario():
        client = async_openai(app)
        raw = await client.chat.completions.with_raw_response.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
        return raw.parse(), raw.headers

    reply, headers = run(scenario())
    assert reply.choices[0].message.content == "hello from the stub"
    assert reply.usage.total_tokens == 7
    assert upstreams["u"].requests[0]["model"] == "m"
    assert "x-jevserve-overhead-ms" in headers and "x-jevserve-decisions" in headers


def test_openai_client_streams_with_usage():
    app, _, upstreams = make_app()

    async def scenario():
        client = async_openai(app)
        stream = await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        return [chunk async for chunk in stream]

    chunks = run(scenario())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "hello from the stub"
    assert chunks[-1].usage.completion_tokens == 3
    assert upstreams["u"].requests[0]["stream"] is True


def test_an_upstream_that_answers_a_stream_with_plain_json_gets_an_error_that_says_so():
    # some OpenAI-compatible servers ignore `stream: true`; the client must hear why its stream is empty
    from tests.gateway.upstreams import completion

    app, _, _ = make_app(upstreams={"u": StubUpstream(lambda body: httpx.Response(200, json=completion()))})

    async def scenario():
        stream = await async_openai(app).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        return [chunk async for chunk in stream]

    with pytest.raises(openai.APIError, match=r"without any event .*application/json.*stream: true"):
        run(scenario())


def test_openai_client_lists_the_configured_virtual_models():
    app, _, _ = make_app()

    async def scenario():
        return [m.id async for m in async_openai(app).models.list()]

    assert run(scenario()) == ["m"]

    async def retrieve(name):
        return await async_openai(app).models.retrieve(name)

    assert run(retrieve("m")).id == "m"  # models.retrieve: GET /v1/models/{id}
    with pytest.raises(openai.NotFoundError, match="unknown model 'nope'; this gateway serves: m"):
        run(retrieve("nope"))


def test_openai_client_legacy_completions():
    def reply(body):
        return httpx.Response(
            200,
            json={
                "id": "cmpl-1",
                "object": "text_completion",
                "created": 1,
                "model": "m",
                "choices": [{"index": 0, "text": "42", "finish_reason": "stop", "logprobs": None}],
            },
        )

    app, _, _ = make_app(upstreams={"u": StubUpstream(reply)})

    async def scenario():
        return await async_openai(app).completions.create(model="m", prompt="6*7=")

    assert run(scenario()).choices[0].text == "42"


def test_unknown_model_is_a_404_the_openai_client_raises():
    app, _, _ = make_app()

    async def scenario():
        await async_openai(app).chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])

    with pytest.raises(openai.NotFoundError, match="this gateway serves: m"):
        run(scenario())


@pytest.mark.slow
def test_stream_cut_by_upstream_ends_with_an_error_event_over_loopback():
    def reply(body):
        first = sse_events(["partial"], usage=False, done=False).split(b"\n\n")[0] + b"\n\n"
        return httpx.Response(200, stream=CutStream(first), headers={"content-type": "text/event-stream"})

    app, _, _ = make_app(upstreams={"u": StubUpstream(reply)})
    with LoopbackServer(app) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, timeout=10)
        stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
        received = []
        with pytest.raises(openai.APIError, match="upstream stream failed"):
            for chunk in stream:
                received.append(chunk.choices[0].delta.content)
        assert received == ["partial"]


@pytest.mark.slow
def test_openai_sync_client_streams_over_loopback():
    app, _, _ = make_app()
    with LoopbackServer(app) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, timeout=10)
        stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert text == "hello from the stub"
    assert reply.choices[0].message.content == "hello from the stub"


@pytest.mark.parametrize("stream", [False, True])
def test_the_openai_client_raises_when_a_call_its_request_forced_is_blocked(stream: bool):
    from tests.gateway.test_actions import TOOLS, _reasoning_call_reply, _tool_reply

    app, _, _ = make_app({"tool_gate": {"threshold": 0.5}}, answers={"tool_gate:0": 0.9},
                         upstreams={"u": StubUpstream(_reasoning_call_reply if stream else _tool_reply)})

    async def scenario():
        client = async_openai(app)
        reply = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "clean up"}], tools=TOOLS, tool_choice="required",
            stream=stream)
        return [chunk async for chunk in reply] if stream else reply

    with pytest.raises(openai.APIError, match="reply blocked by the tool_gate decision") as raised:
        run(scenario())
    if not stream:
        assert isinstance(raised.value, openai.BadRequestError)
