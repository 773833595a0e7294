"""Protocol conformance of the ext_proc server, driven as Envoy drives it, in BUFFERED and FULL_DUPLEX_STREAMED mode.

The decisions behind the seam are scripted here (tests/gateway/extproc/scripted.py); the gateway's own decisions
are checked through the same client in test_binding.py.
"""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from grpc_health.v1 import health_pb2, health_pb2_grpc

from jevserve.gateway.extproc import ExtProcServer, ResponsePlan, StreamSettings, error_reply, wire
from jevserve.gateway.extproc.seam import Forward
from jevserve.gateway.extproc.server import DECIDER_SERVICE
from tests.gateway.extproc.envoy import (
    Delivered,
    EnvoyStream,
    Forwarded,
    Immediate,
    ProtocolViolation,
    header_map,
    request_headers,
)
from tests.gateway.extproc.scripted import Scripted, answer, serving

MODES = ["BUFFERED", "FULL_DUPLEX_STREAMED"]
CHAT = {"model": "jev-gateway", "messages": [{"role": "user", "content": "Summarise the attached notes, please."}]}


def body_of(payload: dict) -> bytes:
    return json.dumps(payload).encode()


def sse_chunks(words: list[str]) -> list[bytes]:
    events = [
        {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": w}}]}
        for w in words
    ]
    return [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]


def run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize("mode", MODES)
def test_headers_only_request_passes_with_an_empty_body(mode: str) -> None:
    script = Scripted()

    async def scenario():
        async with serving(script) as channel:
            stream = EnvoyStream(channel, mode)
            forwarded = await stream.request(None, method="GET", path="/v1/models")
            delivered = await stream.respond(200, {"content-type": "application/json"}, [b'{"data":[]}'])
            await stream.finish()
            return forwarded, delivered, await script.wait_for_ends(1)

    forwarded, delivered, ends = run(scenario())
    assert isinstance(forwarded, Forwarded) and forwarded.body == b"" and forwarded.answers == ["request_headers"]
    assert script.seen[0][0][":method"] == "GET" and script.seen[0][1] == b""
    assert delivered.body == b'{"data":[]}'
    assert ends[0].status == 200 and ends[0].complete and ends[0].response_body is None
    assert ends[0].timings_ms["decide"] >= 0  # the time spent in the decisions, reported to close()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("chunks", [1, 7])
def test_body_in_one_or_many_chunks_reaches_the_decisions_whole_and_is_rewritten(mode: str, chunks: int) -> None:
    script = Scripted()
    sent = body_of(CHAT)

    async def scenario():
        async with serving(script) as channel:
            stream = EnvoyStream(channel, mode)
            return await stream.request(sent, chunks=chunks, headers={"authorization": "Bearer sk-test"})

    forwarded = run(scenario())
    headers, seen_body = script.seen[0]
    assert seen_body == sent and headers["authorization"] == "Bearer sk-test"
    assert headers[":path"] == "/v1/chat/completions"
    assert isinstance(forwarded, Forwarded)
    assert json.loads(forwarded.body)["model"] == "small"
    assert forwarded.headers["x-gateway-model-name"] == "small"
    assert forwarded.route_cache_cleared
    if mode == "BUFFERED":
        assert forwarded.headers["content-length"] == str(len(forwarded.body))  # kept, and true
        assert forwarded.answers == ["request_headers", "request_body"]
    else:
        assert "content-length" not in forwarded.headers
        assert forwarded.answers[0] == "request_headers"  # headers answered before any body answer


def test_duplex_body_with_end_of_stream_on_its_last_data_chunk() -> None:
    script = Scripted()

    async def scenario():
        async with serving(script) as channel:
            stream = EnvoyStream(channel, "FULL_DUPLEX_STREAMED")
            return await stream.request(body_of(CHAT), chunks=3, eos_on_last_chunk=True)

    forwarded = run(scenario())
    assert json.loads(forwarded.body)["model"] == "small"


def test_request_trailers_in_buffered_mode_pass_and_in_full_duplex_mode_are_refused() -> None:
    # full duplex: Envoy 1.40 forwarded a body answered before the trailers twice (an outside tester's, over h2)
    script = Scripted()

    async def scenario(mode: str):
        async with serving(script) as channel:
            stream = EnvoyStream(channel, mode)
            return await stream.request(body_of(CHAT), chunks=4, trailers={"x-checksum": "abc"})

    forwarded = run(scenario("BUFFERED"))
    assert script.seen[0][1] == body_of(CHAT)
    assert json.loads(forwarded.body)["model"] == "small"
    assert forwarded.answers[-1] == "request_trailers"
    refused = run(scenario("FULL_DUPLEX_STREAMED"))
    assert isinstance(refused, Immediate) and refused.status == 400
    assert json.loads(refused.body)["error"]["code"] == "unsupported_trailers" and len(script.seen) == 1


@pytest.mark.parametrize("mode", MODES)
def test_large_rewritten_body_is_streamed_back_in_chunks_under_64_kib(mode: str) -> None:
    long_text = "word " * 60_000  # ~300 KB
    script = Scripted()
    payload = {**CHAT, "messages": [{"role": "user", "content": long_text}]}

    async def scenario():
        async with serving(script) as channel:
            return await EnvoyStream(channel, mode).request(body_of(payload), chunks=9)

    forwarded = run(scenario())
    assert json.loads(forwarded.body)["messages"][0]["content"] == long_text
    if mode == "FULL_DUPLEX_STREAMED":
        assert forwarded.answers.count("request_body") == -(-len(forwarded.body) // wire.MAX_STREAMED_CHUNK_BYTES)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stream", [False, True])
def test_immediate_response_answers_the_client_and_ends_the_request(mode: str, stream: bool) -> None:
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "jev-gateway",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Which file?"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    script = Scripted(decide=lambda h, b: answer(completion, stream=stream, headers={"x-jevserve-clarify": "1"}))

    async def scenario():
        async with serving(script) as channel:
            got = await EnvoyStream(channel, mode).request(body_of({**CHAT, "stream": stream}))
            return got, await script.wait_for_ends(1)

    got, ends = run(scenario())
    assert isinstance(got, Immediate) and got.status == 200 and got.headers["x-jevserve-clarify"] == "1"
    if stream:
        assert got.headers["content-type"] == "text/event-stream"
        events = [line[6:] for line in got.body.decode().split("\n\n") if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        text = "".join(
            c["choices"][0]["delta"].get("content", "") for c in map(json.loads, events[:-1]) if c["choices"]
        )
        assert text == "Which file?"
    else:
        assert json.loads(got.body)["choices"][0]["message"]["content"] == "Which file?"
    assert ends[0].immediate and ends[0].status == 200  # the status the client got, for close()'s count and log


@pytest.mark.parametrize("mode", MODES)
def test_malformed_body_gets_a_400_in_openai_shape_never_a_broken_stream(mode: str) -> None:
    script = Scripted()  # its decide answers 400 for a body that is not JSON, as the gateway's reader does

    async def scenario():
        async with serving(script) as channel:
            first = await EnvoyStream(channel, mode).request(b'{"model": "jev-gateway", "messages": [', chunks=2)
            second = await EnvoyStream(channel, mode).request(body_of(CHAT))  # the server still serves
            return first, second

    first, second = run(scenario())
    assert isinstance(first, Immediate) and first.status == 400
    assert first.headers["content-type"] == "application/json"
    assert json.loads(first.body)["error"]["type"] == "invalid_request_error"
    assert isinstance(second, Forwarded)


@pytest.mark.parametrize("mode", MODES)
def test_body_over_the_limit_gets_a_413(mode: str) -> None:
    script = Scripted()
    settings = StreamSettings(max_body_bytes=1024)

    async def scenario():
        async with serving(script, settings) as channel:
            return await EnvoyStream(channel, mode).request(b'{"pad": "' + b"x" * 5000 + b'"}', chunks=3)

    got = run(scenario())
    assert isinstance(got, Immediate) and got.status == 413
    assert json.loads(got.body)["error"]["code"] == "payload_too_large"
    assert script.seen == []  # never handed to the decisions


def test_a_buffered_body_far_over_the_limit_in_one_message_gets_a_413_not_a_grpc_error() -> None:
    settings = StreamSettings(max_body_bytes=1024)  # gRPC took messages of this plus framing, and refused larger ones

    async def scenario():
        async with serving(Scripted(), settings) as channel:
            return await EnvoyStream(channel, "BUFFERED").request(b'{"pad": "' + b"x" * 2_000_000 + b'"}')

    got = run(scenario())
    assert isinstance(got, Immediate) and got.status == 413


@pytest.mark.parametrize(
    ("mode", "response_mode", "lockstep"),
    [
        ("BUFFERED", "STREAMED", False),
        ("FULL_DUPLEX_STREAMED", "STREAMED", False),
        ("BUFFERED", "FULL_DUPLEX_STREAMED", True),  # each chunk echoed before the next is sent
        ("FULL_DUPLEX_STREAMED", "FULL_DUPLEX_STREAMED", True),
    ],
)
def test_streamed_reply_passes_through_unchanged_and_is_observed_whole(
    mode: str, response_mode: str, lockstep: bool
) -> None:
    script = Scripted()
    chunks = sse_chunks(["Hel", "lo", " there"])

    async def scenario():
        async with serving(script) as channel:
            stream = EnvoyStream(channel, mode, response_mode)
            await stream.request(body_of({**CHAT, "stream": True}))
            got = await stream.respond(200, {"content-type": "text/event-stream"}, chunks, lockstep=lockstep)
            await stream.finish()
            return got, await script.wait_for_ends(1)

    got, ends = run(scenario())
    assert isinstance(got, Delivered) and got.body == b"".join(chunks)
    assert got.headers["x-jevserve-decisions"] == "route=route" and got.headers["x-upstream-status"] == "200"
    assert ends[0].complete and ends[0].response_body == b"".join(chunks)  # OBSERVE: close() sees it whole


@pytest.mark.parametrize("request_mode", MODES)
@pytest.mark.parametrize("response_mode", ["BUFFERED", "STREAMED", "FULL_DUPLEX_STREAMED"])
def test_held_reply_with_tool_calls_is_replaced_whole(request_mode: str, response_mode: str) -> None:
    reply = {
        "id": "c2",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "t1", "type": "function", "function": {"name": "delete_repo", "arguments": "{}"}}
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
    }
    raw = body_of(reply)
    gated = body_of({**reply, "choices": [{"index": 0, "message": {"role": "assistant", "content": "[blocked]"}}]})

    def hold(headers, body):
        return Forward(response=ResponsePlan.HOLD)

    script = Scripted(decide=hold, replace_reply=lambda body: gated if b"delete_repo" in body else None)

    async def scenario():
        async with serving(script) as channel:
            stream = EnvoyStream(channel, request_mode, response_mode)
            await stream.request(body_of({**CHAT, "tools": [{"type": "function", "function": {"name": "x"}}]}))
            headers = {"content-type": "application/json", "content-length": str(len(raw))}
            got = await stream.respond(200, headers, [raw[:40], raw[40:90], raw[90:]])
            await stream.finish()
            return got, await script.wait_for_ends(1)

    got, ends = run(scenario())
    assert isinstance(got, Delivered) and got.body == gated
    assert "content-length" not in got.headers  # dropped: the replacement has another length
    # what reading the reply decided reaches the client's headers, except where they went out before the body
    assert got.headers.get("x-reply-read") == (None if response_mode == "STREAMED" else "1")
    assert script.replies == [raw]  # the decisions saw the reply whole, once
    assert ends[0].response_body == raw and ends[0].complete


@pytest.mark.parametrize("mode", ["STREAMED", "FULL_DUPLEX_STREAMED"])
def test_client_cancelling_mid_stream_closes_the_exchange_and_the_server_keeps_serving(mode: str) -> None:
    script = Scripted()

    async def scenario():
        async with serving(script) as channel:
            stream = EnvoyStream(channel, "FULL_DUPLEX_STREAMED", mode)
            await stream.request(body_of({**CHAT, "stream": True}))
            await stream._send(response_headers=pb.HttpHeaders(headers=_status_headers(200)))
            await stream._read()
            await stream._send(response_body=pb.HttpBody(body=sse_chunks(["par"])[0]))
            await asyncio.sleep(0.05)
            stream.cancel()
            ends = await script.wait_for_ends(1)
            again = await EnvoyStream(channel, "BUFFERED").request(body_of(CHAT))
            return ends, again

    ends, again = run(scenario())
    assert ends[0].error is not None and "the client went away" in ends[0].error and not ends[0].complete
    assert ends[0].status == 200 and ends[0].response_body is None  # a cut reply is never handed on as whole
    assert isinstance(again, Forwarded)


def _status_headers(status: int):
    return header_map({":status": str(status), "content-type": "text/event-stream"})


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("failure", ["open", "closed"])
@pytest.mark.parametrize("trouble", ["down", "slow"])
def test_decisions_down_or_slow_fail_open_or_closed(mode: str, failure: str, trouble: str) -> None:
    # a decision far slower than the deadline, so that the bound below has room for a slow first gRPC call (one
    # clean-clone run took 0.77 s against a decision of 0.5 s and a bound of 0.4 s)
    script = Scripted(fail=trouble == "down", delay_s=3.0 if trouble == "slow" else 0.0)
    settings = StreamSettings(failure=failure, deadline_s=0.1)

    async def scenario():
        async with serving(script, settings) as channel:
            started = asyncio.get_running_loop().time()
            stream = EnvoyStream(channel, mode)
            got = await stream.request(body_of(CHAT))
            return got, asyncio.get_running_loop().time() - started

    got, elapsed_s = run(scenario())
    assert elapsed_s < 1.5  # the deadline, not the slow decision, bounds the wait
    if failure == "open":
        assert isinstance(got, Forwarded) and got.body == body_of(CHAT)  # unchanged
        assert not got.route_cache_cleared
    else:
        assert isinstance(got, Immediate) and got.status == 503
        error = json.loads(got.body)["error"]
        assert error["code"] == "decisions_unavailable"
        assert ("over 100 ms" if trouble == "slow" else "decision backend is down") in error["message"]


@pytest.mark.parametrize("response_mode", ["BUFFERED", "FULL_DUPLEX_STREAMED"])
@pytest.mark.parametrize("failure", ["open", "closed"])
def test_reply_decisions_down_pass_the_held_reply_or_refuse_it_by_failure(response_mode: str, failure: str) -> None:
    # a held reply is one the decisions must read (tool calls): closed never lets it out unread
    script = Scripted(decide=lambda h, b: Forward(response=ResponsePlan.HOLD), reply_fail=True)
    raw = body_of({"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]})

    async def scenario():
        async with serving(script, StreamSettings(failure=failure)) as channel:
            stream = EnvoyStream(channel, "BUFFERED", response_mode)
            await stream.request(body_of(CHAT))
            got = await stream.respond(200, {"content-type": "application/json"}, [raw])
            await stream.finish()
            return got, await script.wait_for_ends(1)

    got, ends = run(scenario())
    if failure == "open":
        assert isinstance(got, Delivered) and got.body == raw
    else:
        assert isinstance(got, Immediate) and got.status == 503 and got.headers["retry-after"] == "1"
        error = json.loads(got.body)["error"]
        assert error["code"] == "decisions_unavailable" and "reading the reply failed" in error["message"]
        assert ends[0].status == 503


@pytest.mark.parametrize("mode", ["STREAMED", "NONE"])
def test_request_body_modes_that_cannot_carry_decisions_are_refused_with_the_fix(mode: str) -> None:
    script = Scripted()

    async def scenario():
        async with serving(script) as channel:
            stream = EnvoyStream(channel, mode)
            headers = header_map(request_headers("POST", "/v1/chat/completions", None, body_of(CHAT)))
            await stream._send(request_headers=pb.HttpHeaders(headers=headers, end_of_stream=False))
            await stream._read()
            return stream.immediate

    got = run(scenario())
    assert got is not None and got.status == 500
    message = json.loads(got.body)["error"]["message"]
    assert f"sends {mode}" in message and "BUFFERED or FULL_DUPLEX_STREAMED" in message


def test_body_before_headers_is_a_protocol_error_and_the_server_keeps_serving() -> None:
    script = Scripted()

    async def scenario():
        async with serving(script) as channel:
            stream = EnvoyStream(channel, "BUFFERED")
            await stream._send(request_body=pb.HttpBody(body=b"{}", end_of_stream=True))
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stream.call.read()
            again = await EnvoyStream(channel, "BUFFERED").request(body_of(CHAT))
            return caught.value.code(), again

    code, again = run(scenario())
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert isinstance(again, Forwarded)


def test_emulator_rejects_a_plain_body_answer_in_duplex_mode() -> None:
    """The client is strict where Envoy is: a BUFFERED-style answer in FULL_DUPLEX_STREAMED mode fails."""
    script = Scripted()

    async def scenario():
        async with serving(script, StreamSettings()) as channel:
            # the server believes BUFFERED (no protocol_config), the client runs FULL_DUPLEX_STREAMED
            stream = EnvoyStream(channel, "FULL_DUPLEX_STREAMED")
            stream._first = False
            with pytest.raises(ProtocolViolation):
                await stream.request(body_of(CHAT))

    run(scenario())


def test_health_reports_liveness_and_readiness_then_not_ready_when_stopping() -> None:
    async def scenario():
        server = ExtProcServer(Scripted())
        port = await server.start("127.0.0.1:0")
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            statuses = {}
            for service in ("", "liveness", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor"):
                answer = await stub.Check(health_pb2.HealthCheckRequest(service=service))
                statuses[service] = answer.status
            await server.health.set("readiness", health_pb2.HealthCheckResponse.NOT_SERVING)
            after = (await stub.Check(health_pb2.HealthCheckRequest(service="readiness"))).status
            decider = []  # the decider's own service follows what it is told, and readiness does not
            for problem in ("ConnectError: refused", None):
                await server.report_decider(problem)
                decider.append((await stub.Check(health_pb2.HealthCheckRequest(service=DECIDER_SERVICE))).status)
        await server.stop(grace_s=0.1)
        return statuses, after, decider

    statuses, after, decider = run(scenario())
    assert set(statuses.values()) == {health_pb2.HealthCheckResponse.SERVING}
    assert after == health_pb2.HealthCheckResponse.NOT_SERVING
    assert decider == [health_pb2.HealthCheckResponse.NOT_SERVING, health_pb2.HealthCheckResponse.SERVING]


def test_error_reply_is_openai_shaped() -> None:
    reply = error_reply(
        429, "slow down", code="rate_limit_exceeded", error_type="rate_limit_error", headers={"retry-after": "2"}
    )
    assert reply.status == 429 and reply.headers["retry-after"] == "2"
    assert json.loads(reply.body) == {
        "error": {"message": "slow down", "type": "rate_limit_error", "param": None, "code": "rate_limit_exceeded"}
    }


def test_observability_mode_gets_no_answers_but_the_decisions_still_run() -> None:
    script = Scripted()

    async def scenario():
        async with serving(script) as channel:
            stream = EnvoyStream(channel, "BUFFERED")
            sent = request_headers("POST", "/v1/chat/completions", None, body_of(CHAT))
            await stream._send(
                request_headers=pb.HttpHeaders(headers=header_map(sent)), observability_mode=True
            )
            await stream._send(
                request_body=pb.HttpBody(body=body_of(CHAT), end_of_stream=True), observability_mode=True
            )
            await stream.finish()
            ends = await script.wait_for_ends(1)
            await stream._reader  # every answer the server sent has been read
            return [stream._answers.get_nowait() for _ in range(stream._answers.qsize())], ends

    answers, ends = run(scenario())
    assert answers == [None]  # nothing but the stream's end
    assert script.seen and script.seen[0][1] == body_of(CHAT)
    assert ends[0].error is not None  # no reply was seen: the log says the stream ended early


def test_buffered_partial_is_read_like_buffered() -> None:
    script = Scripted()

    async def scenario():
        async with serving(script) as channel:
            return await EnvoyStream(channel, "BUFFERED_PARTIAL").request(body_of(CHAT))

    forwarded = run(scenario())
    assert json.loads(forwarded.body)["model"] == "small"


def test_buffered_partial_with_a_body_cut_at_the_buffer_is_refused_413_not_judged_as_bad_json() -> None:
    # past the listener's buffer, Envoy sends what it holds with end_of_stream false and the rest upstream unread
    script = Scripted()

    async def scenario():
        async with serving(script) as channel:
            return await EnvoyStream(channel, "BUFFERED_PARTIAL").request(body_of(CHAT)[:40], trailers={})

    got = run(scenario())
    assert isinstance(got, Immediate) and got.status == 413
    error = json.loads(got.body)["error"]
    assert error["code"] == "payload_too_large" and "per_connection_buffer_limit_bytes" in error["message"]
    assert not script.seen  # nothing was judged


def test_reply_body_mode_none_settles_on_the_reply_headers() -> None:
    script = Scripted()

    async def scenario():
        async with serving(script) as channel:
            stream = EnvoyStream(channel, "BUFFERED", "NONE")
            await stream.request(body_of(CHAT))
            await stream._send(response_headers=pb.HttpHeaders(headers=_status_headers(200)))
            await stream._read()
            await stream.finish()
            return await script.wait_for_ends(1)

    ends = run(scenario())
    assert ends[0].error is None and ends[0].status == 200 and ends[0].response_body is None


def test_a_reply_that_must_be_read_is_refused_when_the_filter_sends_no_reply_body() -> None:
    script = Scripted(decide=lambda h, b: Forward(response=ResponsePlan.HOLD))

    async def scenario():
        async with serving(script) as channel:
            return await EnvoyStream(channel, "FULL_DUPLEX_STREAMED", "NONE").request(body_of(CHAT))

    got = run(scenario())
    assert isinstance(got, Immediate) and got.status == 500
    assert "response_body_mode" in json.loads(got.body)["error"]["message"]


def test_a_reply_nobody_reads_may_skip_the_server_when_the_filter_sends_no_reply_body() -> None:
    script = Scripted(decide=lambda h, b: Forward(response=ResponsePlan.PASS))

    async def scenario():
        async with serving(script) as channel:
            stream = EnvoyStream(channel, "FULL_DUPLEX_STREAMED", "NONE")
            got = await stream.request(body_of(CHAT))
            await stream._send(response_headers=pb.HttpHeaders(headers=_status_headers(200)))
            await stream._read()
            await stream.finish()
            return got, await script.wait_for_ends(1)

    got, ends = run(scenario())
    assert isinstance(got, Forwarded) and ends[0].error is None and ends[0].status == 200


def test_replies_in_streamed_mode_are_warned_about_once(caplog, monkeypatch) -> None:
    import jevserve.gateway.extproc.stream as stream_module

    monkeypatch.setattr(stream_module, "_warned_streamed_replies", False)
    script = Scripted()

    async def scenario():
        async with serving(script) as channel:
            for _ in range(2):
                await EnvoyStream(channel, "BUFFERED", "STREAMED").request(body_of(CHAT))

    with caplog.at_level("WARNING", logger="jevserve.extproc"):
        run(scenario())
    warned = [r for r in caplog.records if "sends replies in STREAMED mode" in r.getMessage()]
    assert len(warned) == 1 and "FULL_DUPLEX_STREAMED" in warned[0].getMessage()
