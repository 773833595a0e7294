"""The one finder of a key repeated in a JSON object, shared by the request reader and the results reader."""

import json

from jevserve.protocol.json_keys import first_repeated_key


def test_the_first_repeat_is_named_and_an_object_without_one_gives_none():
    seen: list[str | None] = []

    def hook(pairs):
        seen.append(first_repeated_key(pairs))
        return dict(pairs)

    json.loads('{"a": 1, "b": {"x": 1, "y": 2, "x": 3}, "c": 2, "b": 0, "a": 5}', object_pairs_hook=hook)
    assert seen == ["x", "b"]  # the inner object is parsed first; of the outer's repeats, "b" comes back first
    assert first_repeated_key([]) is None
