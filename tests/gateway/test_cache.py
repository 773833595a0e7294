"""The response cache: exact repeats before any embedding, nearest neighbour per tenant and context, TTL and size."""

from __future__ import annotations

import asyncio

import pytest

from jevserve.gateway.cache import SemanticCache
from jevserve.gateway.cache_keys import request_keys
from tests.gateway.upstreams import char_embed


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def keys_of(text: str, system: str | None = None, **params):
    messages = ([{"role": "system", "content": system}] if system else []) + user(text)
    return request_keys(messages, None, params)


class CountingEmbed:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, texts):
        self.texts.extend(texts)
        return char_embed(texts)


def test_nearest_returns_the_most_similar_entry_above_the_bar():
    async def scenario():
        cache = SemanticCache(char_embed)
        await cache.put("t", "capital of france", {"a": 1}, ttl_s=60, max_entries=10)
        await cache.put("t", "zzz qqq", {"a": 2}, ttl_s=60, max_entries=10)
        hit, _ = await cache.lookup("t", keys_of("capital of France?"), "capital of France?", 0.5)
        miss, _ = await cache.lookup("t", keys_of("xyz"), "xyz", 0.99)
        other, _ = await cache.lookup("other-tenant", keys_of("capital of france"), "capital of france", 0.0)
        return hit, miss, other

    hit, miss, other = asyncio.run(scenario())
    assert hit.tier == "semantic" and hit.response == {"a": 1} and hit.similarity > 0.9
    assert miss is None and other is None


def test_an_exact_repeat_is_found_before_anything_is_embedded():
    embed = CountingEmbed()

    async def scenario():
        cache = SemanticCache(embed)
        await cache.put("t", "What is 2+2?", {"a": 4}, ttl_s=60, max_entries=10, keys=keys_of("What is 2+2?"))
        embedded_before = len(embed.texts)
        hit, vector = await cache.lookup("t", keys_of("What is 2+2?  "), "What is 2+2?", 0.99)
        return hit, vector, len(embed.texts) - embedded_before

    hit, vector, num_embedded = asyncio.run(scenario())
    assert hit.tier == "exact" and hit.response == {"a": 4} and vector is None and num_embedded == 0


@pytest.mark.parametrize(
    "other",
    [
        keys_of("What is 2+2?", temperature=0.0),  # other parameters
        keys_of("What is 2+2?", system="Answer in French."),  # another system prompt
        keys_of("what is 2+2?"),  # another text (case is kept)
    ],
)
def test_the_exact_tier_keys_on_conversation_system_prompt_and_parameters(other):
    async def scenario():
        cache = SemanticCache(char_embed)
        await cache.put("t", "What is 2+2?", {"a": 4}, ttl_s=60, max_entries=10, keys=keys_of("What is 2+2?"))
        return await cache.lookup("t", other, None, 0.0)

    hit, _ = asyncio.run(scenario())
    assert hit is None


def test_text_sent_as_text_parts_is_the_same_exact_key_as_the_joined_string_and_other_parts_still_differ():
    def user(content):
        return request_keys([{"role": "user", "content": content}]).exact

    text = [{"type": "text", "text": "Translate this:"}, {"type": "text", "text": "Guten Morgen "}]
    assert (
        user(text)
        == user("Translate this:\nGuten Morgen")
        == user([{"type": "text", "text": "Translate this:"}, {"type": "text", "text": "Guten Morgen"}])
    )
    assert user(text[:1]) == user("Translate this:")
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    other = {"type": "image_url", "image_url": {"url": "https://example.com/b.png"}}
    assert user([text[0], image]) != user("Translate this:")  # an image is part of the request
    assert user([text[0], image]) != user([text[0], other])
    assert user([{**text[0], "cache_control": {"type": "ephemeral"}}]) != user("Translate this:")  # another field


def test_a_near_repeat_is_only_compared_within_the_same_context():
    async def scenario():
        cache = SemanticCache(char_embed)
        keys = keys_of("How do I say hello?", system="Answer in French.")
        await cache.put("t", "How do I say hello?", {"a": "bonjour"}, ttl_s=60, max_entries=10, keys=keys)
        english = keys_of("How do I say hello ?", system="Answer in English.")
        french = keys_of("How do I say hello ?", system="Answer in French.")
        return [(await cache.lookup("t", k, "How do I say hello ?", 0.5))[0] for k in (english, french)]

    english, french = asyncio.run(scenario())
    assert english is None and french.tier == "semantic"


def test_entries_expire_after_their_ttl():
    clock = Clock()

    async def scenario():
        cache = SemanticCache(char_embed, clock=clock)
        await cache.put("t", "hello", {"a": 1}, ttl_s=10, max_entries=10)
        before = (await cache.lookup("t", keys_of("hello"), "hello", 0.5))[0]
        clock.now += 11
        after = (await cache.lookup("t", keys_of("hello"), "hello", 0.5))[0]
        return before, after

    before, after = asyncio.run(scenario())
    assert before is not None and before.tier == "exact" and after is None


def test_the_oldest_entries_go_beyond_max_entries():
    async def scenario():
        cache = SemanticCache(char_embed)
        for text in ("aaaa", "bbbb", "cccc"):
            await cache.put("t", text, {"text": text}, ttl_s=60, max_entries=2)
        return [e.key_text for e in (await cache.store.index("t")).entries]

    assert asyncio.run(scenario()) == ["bbbb", "cccc"]


def test_an_embedder_failure_is_a_miss_and_the_reply_is_kept_for_exact_repeats():
    def broken(texts):
        raise RuntimeError("text has 90000 tokens; the limit is 32768")

    async def scenario():
        cache = SemanticCache(broken)
        await cache.put("t", "long text", {"a": 1}, ttl_s=60, max_entries=10)
        near, vector = await cache.lookup("t", keys_of("long text!"), "long text!", 0.0)
        exact, _ = await cache.lookup("t", keys_of("long text"), "long text", 0.0)
        return near, vector, exact

    near, vector, exact = asyncio.run(scenario())
    assert near is None and vector is None and exact.tier == "exact"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # two speakers: the reuse question reads "What is my name?" twice and cannot tell them apart
        ({"role": "user", "name": "alice", "content": "What is my name?"},
         {"role": "user", "name": "bob", "content": "What is my name?"}),
        # two images under the same words
        ({"role": "user", "content": [{"type": "text", "text": "What is in this image?"},
                                      {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]},
         {"role": "user", "content": [{"type": "text", "text": "What is in this image?"},
                                      {"type": "image_url", "image_url": {"url": "https://example.com/dog.png"}}]}),
        # two tool results (a tool turn is not read by the reuse question)
        ({"role": "tool", "tool_call_id": "c1", "content": "status: delivered"},
         {"role": "tool", "tool_call_id": "c1", "content": "status: lost in transit"}),
    ],
)
def test_what_the_reuse_question_cannot_read_keeps_two_requests_apart_even_when_it_says_reuse(first, second):
    question = {"role": "user", "content": "Where is my parcel?"}

    def conversation(turn):
        return [question, turn] if turn["role"] == "tool" else [turn]

    async def scenario():
        cache = SemanticCache(char_embed)
        stored = request_keys(conversation(first))
        await cache.put("t", "What is my name?", {"a": "stored"}, ttl_s=60, max_entries=10, keys=stored)
        # a bar of 0.0: any entry of the same context would be served
        same = await cache.lookup("t", request_keys(conversation(first)), "What is my name?", 0.0)
        other = await cache.lookup("t", request_keys(conversation(second)), "What is my name?", 0.0)
        return same[0], other[0]

    same, other = asyncio.run(scenario())
    assert same is not None and other is None
    texts_only = [{"role": "user", "content": "What is my name?"}, {"role": "assistant", "content": "Alice."}]
    assert request_keys(texts_only).context == request_keys(texts_only[:1]).context  # texts stay comparable


def test_the_indent_of_pasted_code_is_part_of_the_exact_key_and_blank_lines_around_are_not():
    def exact(text):
        return request_keys([{"role": "user", "content": text}]).exact

    question = "print('a')\nwhy is this an IndentationError?"
    assert exact("    " + question) != exact(question)
    assert exact("\n\n  print('a')\nwhy?  \n") == exact("  print('a')\nwhy?")


def test_a_reply_made_for_one_end_user_is_never_served_to_another_sent_through_the_same_key():
    # one support backend, one key, its customers told apart by OpenAI's `user` field
    question = [{"role": "user", "content": "What is the email address you have on file for me?"}]
    first = request_keys(question, params={"model": "m", "user": "customer-1"})
    again = request_keys(question, params={"model": "m", "user": "customer-1", "stream": True})
    other = request_keys(question, params={"model": "m", "user": "customer-2"})
    assert first == again  # streaming does not change the reply
    assert other.exact != first.exact and other.context != first.context  # neither tier serves it across users


def test_a_number_is_one_key_however_it_is_written_and_a_boolean_stays_apart():
    # an outside tester's `temperature: 1.0` missed the stored sample of `temperature: 1`: one JSON number, two keys
    question = [{"role": "user", "content": "Tell me a joke about cats."}]

    def keys(**params):
        return request_keys(question, [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"n": {"type": "integer", "minimum": params.pop("minimum", 1)}}}}}],
            params={"model": "m", **params})

    assert keys(temperature=1) == keys(temperature=1.0) and keys(n=2, seed=7) == keys(n=2.0, seed=7.0)
    assert keys(minimum=0) == keys(minimum=0.0) and keys(logit_bias={"50256": -100}) == keys(
        logit_bias={"50256": -100.0})
    assert keys(temperature=1) != keys(temperature=1.5) and keys(logprobs=True) != keys(logprobs=1)
