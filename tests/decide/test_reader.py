"""The reading model's encoder and backend: token states that pool to the pooled graph's vector, windows kept in
order, and answers of the committed reader that do not depend on companions."""

import numpy as np
import pytest

from jevserve.decide.base import DecisionItem
from jevserve.decide.embedder import WINDOW_TOKENS
from jevserve.decide.encoder import READER_WEIGHTS, reader_backend
from jevserve.decide.token_embedder import TokenEmbedder
from tests.decide.test_encoder import TEXTS, decision, int8_embedder


@pytest.fixture(scope="module")
def token_embedder() -> TokenEmbedder:
    return TokenEmbedder("int8", read_tokens=600)


def test_token_states_pool_to_the_pooled_graphs_vector(token_embedder):
    long_text = " ".join(f"w{i}" for i in range(400))  # three windows
    texts = [*TEXTS, long_text]
    pooled = int8_embedder().embed(texts)
    fresh = TokenEmbedder("int8")  # nothing cached: the vectors come from the token states
    assert np.abs(fresh.embed(texts) - pooled).max() < 1e-6
    states = token_embedder.token_states(long_text)
    ids = token_embedder.tokenizer.encode(long_text, add_special_tokens=False).ids
    windows = -(-len(ids) // WINDOW_TOKENS)
    assert states.shape == (min(600, len(ids) + 2 * windows), 384)
    mean = states.astype(np.float64).mean(0)
    if len(states) == len(ids) + 2 * windows:  # every position read: their mean is the sentence vector
        assert np.allclose(mean / np.linalg.norm(mean), pooled[-1], atol=1e-5)


def test_read_tokens_caps_what_the_reader_attends_over():
    capped = TokenEmbedder("int8", read_tokens=50)
    text = " ".join(f"w{i}" for i in range(300))
    assert capped.token_states(text).shape == (50, 384)
    assert np.abs(capped.embed([text]) - int8_embedder().embed([text])).max() < 1e-6  # the vector reads it all


@pytest.mark.skipif(not READER_WEIGHTS.exists(), reason="no committed reading model")
def test_committed_reader_answers_alone_as_with_companions():
    backend = reader_backend()
    q = decision({"type": "noul", "instructions": "Is the customer asking for money back?"})
    other = decision({"type": "choice", "criteria": {"billing": None, "bug": "something is broken", "other": None}})
    state = "I was charged twice and want my money back."
    alone = backend.decide([DecisionItem(state, q)])[0]
    crowded = backend.decide([DecisionItem("another text entirely", other), DecisionItem(state, other),
                              DecisionItem(state, q)])[2]
    assert np.abs(alone - crowded).max() < 1e-6 and abs(alone.sum() - 1) < 1e-9


def test_a_reader_with_a_lexical_channel_is_served_with_each_states_word_bag(tmp_path, token_embedder):
    import torch

    from jevserve.decide.lexical import word_bag
    from jevserve.decide.reader import unit_rows
    from jevserve.train.reader import ReaderConfig, ReaderNet

    net = ReaderNet(ReaderConfig(heads=2, rank=8, hidden=16, lexical_dim=8))
    with torch.no_grad():
        net.lexical_table.weight.normal_(std=1.0)
    net.weights({"noul": 1.0, "choice": 1.0, "score": 1.0}).save(tmp_path / "lexical.npz")
    backend = reader_backend(weights=tmp_path / "lexical.npz", embedder=token_embedder)
    q = decision({"type": "noul", "instructions": "Is the customer asking for money back?"})
    states = ["I was charged twice and want my money back.", "I was charged twice and want my refund back."]
    served = backend.decide([DecisionItem(s, q) for s in states])
    texts = backend.embedder.embed(backend.readout.texts(q))
    for state, answer in zip(states, served, strict=True):
        tokens = unit_rows(token_embedder.token_states(state))
        vector = backend.embedder.embed([state])[0]
        direct = backend.readout.probabilities(tokens, vector, texts, q, word_bag(state))
        assert np.abs(answer - direct).max() < 1e-9


def test_the_lexical_reader_is_served_beside_the_default_and_by_its_own_spec():
    from jevserve.decide.embedded import embedded_backends
    from jevserve.decide.encoder import LEXICAL_READER_WEIGHTS
    from jevserve.decide.registry import load_backends

    if not LEXICAL_READER_WEIGHTS.exists():
        pytest.skip("no committed lexical reader: run `jevserve train --reader --lexical`")
    names = [backend.card.name for backend in embedded_backends()]
    # the default stays first; the tuned reader (committed too) is served beside it
    expected = ["minilm-reader", "minilm-reader-words", "minilm-tuned-reader", "minilm-pooled-head", "minilm-zero-shot"]
    assert names == expected
    backend = load_backends("reader-lexical")[0]
    assert backend.card.name == "minilm-reader-words" and backend.readout.weights.lexical_dim == 32
    assert backend.card.aliases == ("jev-minilm-3",)


def test_one_token_embedder_serves_two_threads_without_mixing_their_states():
    # The server's models share one embedder and answer in their own batcher threads: each thread's token states
    # must be its own text's, whatever the other thread encodes meanwhile.
    import threading

    shared = TokenEmbedder("int8", state_cache_size=1)
    texts = [f"Ticket {i}: my order {i} arrived late and the box was damaged." for i in range(40)]
    others = [" ".join(f"word{j}" for j in range(i % 7 + 2)) for i in range(400)]
    alone = TokenEmbedder("int8", state_cache_size=1)
    expected = [alone.token_states(t).copy() for t in texts]
    got: list[np.ndarray] = []
    stop = threading.Event()

    def meanwhile() -> None:
        for text in others:
            if stop.is_set():
                return
            shared.embed([text])  # runs windows of its own on the shared embedder

    thread = threading.Thread(target=meanwhile)
    thread.start()
    try:
        got = [shared.token_states(t).copy() for t in texts]
    finally:
        stop.set()
        thread.join()
    assert all(g.shape == e.shape and np.array_equal(g, e) for g, e in zip(got, expected, strict=True))
