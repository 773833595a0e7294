"""The embedded encoder: windows for long texts, batch invariance of both graphs, the cache, the zero-shot readout."""

import numpy as np
import pytest

from jevserve.decide.base import DecisionItem
from jevserve.decide.embedder import WINDOW_TOKENS, Embedder
from jevserve.decide.readout import ZeroShotParams, ZeroShotReadout
from jevserve.protocol import SystemOneRequest, to_decision
from tests.helpers import embedded_backends, ticket_body

TEXTS = ["refund my double charge", "the kernel panics on boot", "écris un poème 🙂", "x"]


def int8_embedder() -> Embedder:
    """The pooled graph's embedder (the trained and zero-shot readouts share it)."""
    from jevserve.decide.encoder import TRAINED_NAME

    return next(b for b in embedded_backends() if b.card.name == TRAINED_NAME).embedder


def decision(question: dict):
    return to_decision(SystemOneRequest.model_validate(ticket_body(questions={"q": question})).questions["q"])


def test_long_text_is_the_token_weighted_mean_of_its_windows_not_a_cut():
    emb = int8_embedder()
    words = [f"w{i}" for i in range(400)]
    text = " ".join(words)
    ids = emb.tokenizer.encode(text, add_special_tokens=False).ids
    assert len(ids) > 2 * WINDOW_TOKENS
    windows = [[emb._cls_id, *ids[s : s + WINDOW_TOKENS], emb._sep_id] for s in range(0, len(ids), WINDOW_TOKENS)]
    pooled = emb._run_windows(windows).astype(np.float64)
    weights = np.array([len(w) for w in windows], dtype=np.float64)
    expected = (pooled * weights[:, None]).sum(0) / weights.sum()
    expected /= np.linalg.norm(expected)
    got = emb._embed_uncached([text])[0]
    assert np.allclose(got, expected, atol=1e-6)
    tail_only = emb._embed_uncached([emb.tokenizer.decode(ids[: 2 * WINDOW_TOKENS])])[0]
    assert not np.allclose(got, tail_only, atol=1e-3)  # the last window counts


def test_int8_embeddings_are_identical_alone_or_with_companions():
    emb = int8_embedder()
    alone = np.stack([emb._embed_uncached([t])[0] for t in TEXTS])
    together = emb._embed_uncached(TEXTS + ["a much longer companion sentence " * 20])[: len(TEXTS)]
    assert np.array_equal(alone, together)


@pytest.mark.slow
def test_fp32_embeddings_are_identical_alone_or_with_companions():
    # a padded fp32 batch moved the last bits (about 1e-7), so a long text read ahead in turns changed another
    # question's answer in the same request (an outside tester's fp32 model): every window runs on its own
    emb = Embedder("fp32")
    alone = np.stack([emb._embed_uncached([t])[0] for t in TEXTS])
    together = emb._embed_uncached(list(reversed(TEXTS)) + ["a much longer companion " * 30])[: len(TEXTS)][::-1]
    assert np.array_equal(alone, together)
    int8 = int8_embedder()._embed_uncached(TEXTS)
    assert ((alone * int8).sum(1) > 0.97).all()  # quantisation moves embeddings only a little


def test_cache_returns_what_recomputation_gives_and_counts_hits():
    emb = int8_embedder()
    text = "a sentence only this test embeds"
    first = emb.embed([text])[0].copy()
    hits = emb.cache.hits
    again = emb.embed([text, text])
    assert emb.cache.hits == hits + 2
    assert np.array_equal(again[0], first) and np.array_equal(first, emb._embed_uncached([text])[0])


@pytest.mark.parametrize("index", range(3), ids=["default", "second", "third"])
def test_backend_answers_255_options_and_every_score_size(index):
    backend = embedded_backends()[index]
    items = [
        DecisionItem(
            "a ticket about billing", decision({"type": "choice", "criteria": {f"team {i}": None for i in range(255)}})
        )
    ]
    items += [
        DecisionItem("calm text", decision({"type": "score", "criteria": [f"level {i}" for i in range(n)]}))
        for n in range(2, 11)
    ]
    for item, probs in zip(items, backend.decide(items), strict=True):
        assert probs.shape == (item.question.num_options,)
        assert np.isfinite(probs).all() and abs(probs.sum() - 1) < 1e-9


@pytest.mark.parametrize(
    ("criteria", "instructions", "num_texts"),
    [
        (None, "Is it about money?", 1),
        ({"true": "about money", "false": "about code"}, None, 2),
        ({"false": "about code"}, None, 1),
        (None, None, 0),
    ],
)
def test_zero_shot_noul_reads_the_sides_it_has(criteria, instructions, num_texts):
    q = {"type": "noul"}
    if criteria:
        q["criteria"] = criteria
    if instructions:
        q["instructions"] = instructions
    question = decision(q)
    readout = ZeroShotReadout(ZeroShotParams())
    texts = readout.texts(question)
    assert len(texts) == num_texts
    state = np.zeros(384, np.float32)
    state[0] = 1.0
    vectors = np.zeros((len(texts), 384), np.float32)
    if num_texts:
        vectors[0, 0] = 0.9  # close to the first side
    p = readout.probabilities(state, vectors, question)
    assert p.shape == (2,) and abs(p.sum() - 1) < 1e-12
    if num_texts == 0:
        assert p[0] == 0.5
    elif "true" in (criteria or {}) or instructions:
        assert p[0] > 0.5
    else:
        assert p[0] < 0.5


def test_zero_shot_choice_prefers_the_most_similar_option_and_temperature_sharpens():
    question = decision({"type": "choice", "criteria": {"a": None, "b": None, "c": None}})
    state = np.array([1.0, 0.0, 0.0], np.float32)
    vectors = np.array([[0.2, 1, 0], [0.9, 0.1, 0], [0.5, 0.5, 0]], np.float32)
    soft = ZeroShotReadout(ZeroShotParams(choice_temperature=1.0)).probabilities(state, vectors, question)
    sharp = ZeroShotReadout(ZeroShotParams(choice_temperature=0.05)).probabilities(state, vectors, question)
    assert soft.argmax() == sharp.argmax() == 1
    assert sharp.max() > soft.max()


def test_a_huge_state_is_refused_after_tokenizing_a_bounded_prefix(monkeypatch):
    from jevserve.decide import embedder as embedder_module
    from jevserve.decide.embedder import COUNT_CHUNK_CHARS, InputTooLongError

    embedder = int8_embedder()
    seen: list[int] = []
    encode = embedder.tokenizer.encode

    class Spy:  # the Rust tokenizer's methods cannot be patched; wrap it
        def encode(self, text, **kwargs):
            seen.append(len(text))
            return encode(text, **kwargs)

    monkeypatch.setattr(embedder, "tokenizer", Spy())
    huge = "wN " * 1_300_000  # 3.9 MB, about 2.6 million word pieces
    with pytest.raises(InputTooLongError, match="more than 32768 tokens"):
        embedder.check(huge)
    # over the limit after a few chunks: what was tokenized is a small part of the text
    assert sum(seen) < 30 * COUNT_CHUNK_CHARS < len(huge) / 5
    # a long text within the limit is counted whole, chunk by chunk, and the count is exact
    monkeypatch.setattr(embedder_module, "COUNT_CHUNK_CHARS", 64)
    text = "Ünïcode naïve café, 漢字 and\ttabs\x0bcontrol " * 200
    exact = len(encode(text, add_special_tokens=False).ids)
    for limit, over in ((exact, False), (exact - 1, True)):
        monkeypatch.setattr(embedder, "max_tokens", limit)  # the embedder is shared: restored after the test
        embedder._token_counts.clear()
        assert embedder.over_limit(text) is over


@pytest.mark.parametrize(
    ("value", "expected"), [("", "off"), ("0", "off"), ("run", "run"), ("RUN", "run"), ("1", "on"), ("on", "on")]
)
def test_spinning_reads_its_environment_variable(monkeypatch, value, expected):
    from jevserve.decide.embedder import default_spinning

    monkeypatch.setenv("JEVSERVE_SPINNING", value)
    assert default_spinning() == expected


def test_a_spinning_value_it_does_not_know_is_refused_with_the_values_it_takes(monkeypatch):
    from jevserve.decide.embedder import default_spinning

    monkeypatch.setenv("JEVSERVE_SPINNING", "yes")
    with pytest.raises(ValueError, match="expected 0, run or 1"):
        default_spinning()


def test_spinning_within_a_pass_gives_the_same_embeddings():
    """Spinning changes how workers wait, never what they compute."""
    spun = Embedder("int8", spinning="run", cache_size=0)
    assert np.array_equal(spun.embed(TEXTS), int8_embedder()._embed_uncached(TEXTS))


@pytest.mark.parametrize("name", ["minilm-pooled-head", "minilm-reader"])
def test_texts_read_in_turns_get_exactly_the_vectors_read_at_once_and_the_same_answers(name):
    # the batcher has a request's long question texts read in turns between other requests' batches
    # (Embedder.warm): its answers must be those it would get read at once
    backend = next(b for b in embedded_backends() if b.card.name == name)
    emb = backend.embedder
    words = " ".join(f"option{i} wording {i * 7}" for i in range(300))  # several windows
    options = {f"o{k}": f"{k} {words}" for k in range(3)}
    item = DecisionItem("Which option fits the ticket?", decision({"type": "choice", "criteria": options}))
    texts = backend.question_texts([item])
    at_once = emb._embed_uncached(texts)
    turns = 0
    while not backend.prepare([item], 0.0):  # a budget of 0: one window a turn
        turns += 1
    assert turns >= 3 * 2 - 1  # each text has several windows
    assert np.array_equal(np.stack([emb.cache.get(t) for t in texts]), at_once)
    warmed = backend.decide([item])[0]
    for text in texts:
        emb.cache._items.pop(text)
    assert np.array_equal(warmed, backend.decide([item])[0])
    assert backend.text_chars([item]) == len(item.state) + sum(len(t) for t in texts) > 3 * len(words)


@pytest.mark.parametrize("name", ["minilm-pooled-head", "minilm-reader"])
def test_a_long_state_read_in_turns_gets_exactly_what_it_gets_read_at_once(name):
    # a pasted document of many windows is read ahead in turns too; the reading model keeps its token states
    backend = next(b for b in embedded_backends() if b.card.name == name)
    emb = backend.embedder
    state = " ".join(f"clause {i} of the contract says item {i * 13} ships late" for i in range(400))
    item = DecisionItem(state, decision({"type": "noul", "instructions": "Does the contract allow late delivery?"}))
    while not backend.prepare([item], 0.0):
        pass
    warmed_vector = emb.cache.get(state)
    warmed_states = emb.state_cache.get(state) if name == "minilm-reader" else None
    warmed = backend.decide([item])[0]
    emb.cache._items.pop(state)
    if warmed_states is not None:
        emb.state_cache._items.pop(state)
        assert np.array_equal(emb.token_states(state), warmed_states) and len(warmed_states) == 512
    assert np.array_equal(emb.embed([state])[0], warmed_vector)
    for cache in (emb.cache, getattr(emb, "state_cache", emb.cache)):
        cache._items.pop(state, None)
    assert np.array_equal(backend.decide([item])[0], warmed)


def test_a_request_of_more_texts_than_the_caches_keep_is_read_in_turns_once_not_for_ever():
    # a decision server's request of a hundred texts (and a gateway's agent step of a hundred tool results) was
    # never answered: every turn of reading pushed out of the reader's 64 token states what the turn before had
    # read, and the next turn read it again
    from jevserve.decide.encoder import ReadingBackend
    from jevserve.decide.token_embedder import TokenEmbedder

    reader = next(b for b in embedded_backends() if b.card.name == "minilm-reader")
    backend = ReadingBackend(reader.readout, card=reader.card, embedder=TokenEmbedder("int8", state_cache_size=3))
    question = decision({"type": "noul", "instructions": "Is this text about food?"})
    items = [DecisionItem(f"Text {i}: the market was busy and the weather mild today.", question) for i in range(8)]
    texts = 8 + len(backend.question_texts(items))  # one window each: one a turn
    turns = 1
    while not backend.prepare(items, 0.0):  # a budget of 0: one window a turn
        turns += 1
        assert turns <= texts, "the texts are read again and again"
    assert turns == texts
    read_in_turns = backend.decide(items)
    backend.embedder.cache._items.clear()
    backend.embedder.state_cache._items.clear()
    assert all(np.array_equal(a, b) for a, b in zip(read_in_turns, backend.decide(items), strict=True))
