"""The reading model's lexical channel: hashed word bags, the torch form equal to the served numpy form, and a word
the encoder's states do not carry learned from the bag alone."""

import zlib

import numpy as np
import pytest
import torch

from jevserve.decide.lexical import BUCKETS, word_bag, word_bags
from jevserve.decide.reader import ReaderReadout, ReaderWeights
from jevserve.train.dataset import EmbeddedExamples
from jevserve.train.reader import ReaderConfig, ReaderNet, batch_bags, batch_inputs, reader_logits, train_reader
from jevserve.train.token_states import TokenStates
from tests.train.test_reader import needle_problem
from tests.train.test_training import decision, unit


def test_word_bag_counts_unigrams_and_bigrams_case_free_sorted_and_unit_length():
    indices, values = word_bag("Refund my money, refund it NOW")
    assert list(indices) == sorted(indices) and abs(float(np.linalg.norm(values)) - 1.0) < 1e-6
    refund = zlib.crc32(b"refund") % BUCKETS
    refund_my = zlib.crc32(b"refund my") % BUCKETS
    weight = dict(zip(indices.tolist(), values.tolist(), strict=True))
    # "refund" occurs twice (1 + log 2), the bigram once (1): the ratio of their weights, whatever the norm
    assert abs(weight[refund] / weight[refund_my] - (1 + np.log(2))) < 1e-5
    assert np.array_equal(word_bag("refund MY money, Refund it now")[0], indices)  # case and order of words free
    empty_indices, empty_values = word_bag("  ,.; ")
    assert len(empty_indices) == 0 and len(empty_values) == 0
    bags = word_bags(["a b", "", "c"])
    assert [len(bags.of(i)[0]) for i in range(3)] == [3, 0, 1]


def word_problem(n: int, seed: int) -> tuple[EmbeddedExamples, TokenStates, np.ndarray]:
    """Yes/no: does the text contain the word "zebra"? The token states and pooled vector are noise, so only the
    word bag carries the answer."""
    rng = np.random.default_rng(seed)
    vocabulary = [f"w{i}" for i in range(300)]
    question = decision({"type": "noul", "instructions": "Is there a zebra?"})
    # the instructions and the two options: one question, so the same vectors in every problem drawn
    texts = unit(np.random.default_rng(0).normal(size=(3, 384)))
    vectors, states, parts, answers = [texts[0], texts[1], texts[2]], [], [], []
    for _ in range(n):
        words = list(rng.choice(vocabulary, size=int(rng.integers(8, 30))))
        yes = bool(rng.random() < 0.5)
        if yes:
            words.insert(int(rng.integers(len(words))), "zebra")
        states.append(" ".join(words))
        parts.append(unit(rng.normal(size=(len(words), 384))).astype(np.float16))
        vectors.append(unit(rng.normal(size=384)))
        answers.append(0 if yes else 1)  # option 0 is yes
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    data = EmbeddedExamples(
        np.stack(vectors),
        np.arange(3, 3 + n),
        [np.array([0, 1, 2])] * n,
        [question] * n,
        np.array(answers),
        ["zebra"] * n,
    )
    return data, TokenStates(np.concatenate(parts), offsets, word_bags(states)), np.arange(n)


@pytest.mark.parametrize("mode", ["perceptron", "linear"])
def test_torch_forward_with_the_lexical_channel_equals_the_served_numpy_logits(mode, tmp_path):
    data, tokens, index = needle_problem(20, 0)
    tokens.bags = word_bags([f"text {i} with words {i % 3} and {i % 5}" for i in range(20)])
    torch.manual_seed(0)  # the same draw whichever tests ran before
    net = ReaderNet(ReaderConfig(heads=2, rank=8, hidden=16, lexical_dim=8, lexical_mode=mode))
    with torch.no_grad():
        net.lexical_table.weight.normal_(std=5.0)  # it starts at zero; a scale at which the channel moves the logits
    idx = np.arange(20)
    phi, queries_in, options, token_rows, token_mask, _ = batch_inputs(data, tokens, index, idx)
    with torch.no_grad():
        batched = net(phi, queries_in, options, token_rows, token_mask, batch_bags(tokens, index, idx)).numpy()
    net.weights({}).save(tmp_path / "w.npz")
    weights = ReaderWeights.load(tmp_path / "w.npz")
    assert weights.lexical_mode == mode
    served = reader_logits(weights, data, tokens, index)
    for row, z in enumerate(served):
        assert np.allclose(batched[row, : len(z)], z, atol=1e-4)
    without = ReaderWeights(**{**weights.__dict__, "lexical_table": weights.lexical_table * 0})
    moved = [np.abs(a - b).max() for a, b in zip(reader_logits(without, data, tokens, index), served, strict=True)]
    # the channel is read: zeroing its table changes the logits (measured: 0.034 in the perceptron mode)
    assert max(moved) > 0.01


def test_the_lexical_channel_learns_a_word_the_token_states_do_not_carry(tmp_path):
    train, train_tokens, train_index = word_problem(3000, 1)
    test, test_tokens, test_index = word_problem(300, 2)

    def accuracy(config: ReaderConfig) -> float:
        net = train_reader(train, train_tokens, train_index, config, progress=False)
        weights = net.weights({})
        logits = reader_logits(weights, test, test_tokens, test_index)
        return float(np.mean([z.argmax() == a for z, a in zip(logits, test.answers, strict=True)])), weights

    with_bag, weights = accuracy(ReaderConfig(heads=2, rank=8, hidden=16, epochs=6, lexical_dim=8))
    without, _ = accuracy(ReaderConfig(heads=2, rank=8, hidden=16, epochs=6))
    assert with_bag > 0.8 and without < 0.6  # chance is 0.5 (measured: 0.88 and 0.50)
    # saved and loaded, the channel serves the same answers; without the bag it says what is missing
    weights.save(tmp_path / "lexical.npz")
    loaded = ReaderWeights.load(tmp_path / "lexical.npz")
    assert loaded.lexical_dim == 8 and np.array_equal(loaded.lexical_table, weights.lexical_table)
    readout, i = ReaderReadout(loaded), 0
    args = (
        test_tokens.of(i).astype(np.float32),
        test.vectors[test.state_rows[i]],
        test.vectors[test.text_rows[i]],
        test.questions[i],
    )
    served = readout.logits(*args, test_tokens.bags.of(i))
    assert np.allclose(served, reader_logits(weights, test, test_tokens, test_index)[0])
    with pytest.raises(ValueError, match="word bag"):
        readout.logits(*args)


def test_training_bags_leave_out_rare_buckets_and_drop_terms_without_moving_the_sum():
    from jevserve.train.reader import frequent_buckets

    _, tokens, index = word_problem(200, 3)
    keep = frequent_buckets(tokens, index, min_df=2)
    assert keep[zlib.crc32(b"zebra") % BUCKETS]  # in about half the states
    indices, offsets, weights = batch_bags(tokens, index, np.arange(200), keep)
    assert keep[indices.numpy()].all() and len(offsets) == 200
    full = batch_bags(tokens, index, np.arange(200))[0]
    assert len(indices) < len(full)  # the unique bigrams are gone
    rng = np.random.default_rng(0)
    dropped = [batch_bags(tokens, index, np.arange(200), keep, dropout=0.5, rng=rng) for _ in range(200)]
    assert abs(np.mean([len(d[0]) for d in dropped]) / len(indices) - 0.5) < 0.02
    mean_total = np.mean([float(d[2].sum()) for d in dropped])
    assert abs(mean_total / float(weights.sum()) - 1.0) < 0.02  # scaled up: the expected sum is the whole bag's


def test_the_lexical_flag_trains_jev_minilm_3s_recipe_into_its_own_file():
    import argparse

    from jevserve.decide.encoder import LEXICAL_READER_WEIGHTS, READER_WEIGHTS
    from jevserve.train.cli import _config, _shipped, register
    from jevserve.train.reader import LEXICAL_READER

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    lexical = parser.parse_args(["train", "--reader", "--lexical"])
    assert _config(lexical) == LEXICAL_READER and _shipped(lexical) == LEXICAL_READER_WEIGHTS
    assert LEXICAL_READER.lexical_dim == 32 and LEXICAL_READER.lexical_weight_decay == 5.0
    plain = parser.parse_args(["train", "--reader"])
    # jev-minilm-2's recipe: the defaults every committed table's settings are relative to
    assert _config(plain) == ReaderConfig() and ReaderConfig().lexical_dim == 0
    assert _shipped(plain) == READER_WEIGHTS


def test_compare_weights_compares_the_lexical_mode_as_text(tmp_path):
    from jevserve.train.run import compare_weights

    weights = ReaderNet(ReaderConfig(heads=2, rank=8, hidden=16, lexical_dim=4)).weights({"noul": 1.0})
    weights.save(tmp_path / "a.npz")
    weights.save(tmp_path / "b.npz")
    assert compare_weights(tmp_path / "a.npz", tmp_path / "b.npz")["lexical_mode"] == 0.0
    ReaderWeights(**{**weights.__dict__, "lexical_mode": "linear"}).save(tmp_path / "c.npz")
    assert compare_weights(tmp_path / "a.npz", tmp_path / "c.npz")["lexical_mode"] == float("inf")
