"""Opening endpoints: argument errors, and the embedded model answering a toy task end to end."""

from __future__ import annotations

import pytest

from jevserve.bench.answers_cache import AnswersCache
from jevserve.bench.endpoint import EndpointError, open_endpoint
from jevserve.bench.pipeline import ask, load_tasks, score_model
from jevserve.client import AsyncSystemOne
from jevserve.server.in_process import serve_embedded
from tests.bench.builders import KeywordTask


def test_a_url_endpoint_needs_a_model_name():
    with pytest.raises(EndpointError, match="--model is required"), open_endpoint("http://127.0.0.1:9", None):
        pass


def test_an_endpoint_that_is_neither_embedded_nor_a_url_is_named():
    with pytest.raises(EndpointError, match="expected 'embedded' or a URL"), open_endpoint("localhost:8795", "m"):
        pass


def test_a_missing_api_key_variable_is_named(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(EndpointError, match="NO_SUCH_KEY_VAR"), open_endpoint("http://h:1", "m", "NO_SUCH_KEY_VAR"):
        pass


def test_embedded_without_a_server_to_serve_it_says_what_to_pass():
    with pytest.raises(EndpointError, match=r"serve_embedded=jevserve\.server\.in_process\.serve_embedded"), \
            open_endpoint("embedded", None):
        pass


def test_an_unknown_embedded_model_is_an_endpoint_error_listing_the_served_ones():
    served = (r"expected one of: minilm-reader \(or jev-minilm-2\), minilm-reader-words \(or jev-minilm-3\), "
              r"minilm-tuned-reader, minilm-pooled-head \(or jev-minilm-1\), minilm-zero-shot \(or jev-minilm-zs\)")
    with pytest.raises(EndpointError, match=served), \
            open_endpoint("embedded", "jev-nope", serve_embedded=serve_embedded):
        pass


def test_the_embedded_model_answers_every_request_of_a_task(tmp_path):
    loaded, _ = load_tasks([KeywordTask(num_items=12)], data=None)
    with open_endpoint("embedded", None, serve_embedded=serve_embedded) as endpoint:
        assert endpoint.model == "jev-minilm-2"  # the embedded default (the reading model), under its results row
        cache = AnswersCache(tmp_path, endpoint.model)
        client = AsyncSystemOne(endpoint.base_url, timeout_s=60)
        stats = ask(client, endpoint.model, loaded, cache, concurrency=4, progress=False)
    assert stats.num_sent == 12 and stats.num_refused == 0
    document = score_model(endpoint.model, loaded, None, cache, command="test", num_resamples=100)
    result = document["tasks"]["toy-keyword"]
    assert 0.0 <= result["brier"] <= 1.0 and result["n_test"] == 6
