"""What a relayed stream is summarised to: the reply the cache stores and the ext_proc server gates."""

from __future__ import annotations

import json

from jevserve.gateway.shapes import completion_to_chunks, sse
from jevserve.gateway.streaming import summarise


def _events(deltas: list[tuple[int, dict]], finish: str) -> bytes:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    out = [sse({**chunk, "choices": [{"index": i, "delta": d, "finish_reason": None}]}) for i, d in deltas]
    out += [sse({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}), sse("[DONE]")]
    return b"".join(out)


def test_a_streamed_legacy_function_call_is_joined_from_its_pieces():
    pieces = [(0, {"role": "assistant", "content": None}), (0, {"function_call": {"name": "delete_files",
              "arguments": ""}}), (0, {"function_call": {"arguments": '{"path": '}}),
              (0, {"function_call": {"arguments": '"/"}'}})]  # fmt: skip
    completion = summarise(_events(pieces, "function_call")).completion("m")
    message = completion["choices"][0]["message"]
    assert message["function_call"] == {"name": "delete_files", "arguments": '{"path": "/"}'}
    assert completion["choices"][0]["finish_reason"] == "function_call"
    # replayed (a cache hit for a streaming client) it is one delta that a client joins back to the same call
    deltas = [c["choices"][0]["delta"] for c in completion_to_chunks(completion, include_usage=False)]
    assert [d["function_call"] for d in deltas if "function_call" in d] == [message["function_call"]]
    assert json.loads(message["function_call"]["arguments"]) == {"path": "/"}


def test_a_stream_without_a_function_call_has_none():
    message = summarise(_events([(0, {"content": "hi"})], "stop")).completion("m")["choices"][0]["message"]
    assert "function_call" not in message and message["content"] == "hi"
