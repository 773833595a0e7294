"""The reading model: its torch training form equals its numpy serving form, and it learns what only reading finds."""

import numpy as np
import torch

from jevserve.decide.reader import ReaderReadout, ReaderWeights, unit_rows
from jevserve.decide.trained import TrainedReadout, question_texts
from jevserve.train.dataset import EmbeddedExamples
from jevserve.train.head import HeadConfig, train_head
from jevserve.train.reader import ReaderConfig, ReaderNet, batch_inputs, reader_logits, train_reader, unit_tokens
from jevserve.train.token_states import TokenStates
from tests.train.test_training import accuracy as head_accuracy
from tests.train.test_training import decision, unit


def needle_problem(n: int, seed: int, noise: float = 0.5) -> tuple[EmbeddedExamples, TokenStates, np.ndarray]:
    """Each state is 12–40 random token states, one of which is a noisy copy of the right option's vector; the
    pooled state vector is their mean, so it carries the needle only diluted among the others."""
    rng = np.random.default_rng(seed)
    vectors, state_rows, text_rows, questions, answers, token_parts = [], [], [], [], [], []
    for _ in range(n):
        k = int(rng.integers(2, 5))
        q = decision({"type": "choice", "instructions": "Which one?", "criteria": {f"o{j}": None for j in range(k)}})
        texts = unit(rng.normal(size=(k + 1, 384)))
        right = int(rng.integers(k))
        length = int(rng.integers(12, 41))
        tokens = unit(rng.normal(size=(length, 384)))
        tokens[int(rng.integers(length))] = unit(texts[1 + right] + noise * unit(rng.normal(size=384)))
        token_parts.append(tokens.astype(np.float16))
        base = len(vectors)
        vectors.append(unit(tokens.mean(0)))
        vectors.extend(texts)
        state_rows.append(base)
        text_rows.append(np.arange(base + 1, base + 2 + k))
        questions.append(q)
        answers.append(right)
    offsets = np.concatenate([[0], np.cumsum([len(t) for t in token_parts])]).astype(np.int64)
    data = EmbeddedExamples(
        np.stack(vectors), np.array(state_rows), text_rows, questions, np.array(answers), ["needle"] * n
    )
    return data, TokenStates(np.concatenate(token_parts), offsets), np.arange(n)


def test_torch_forward_equals_the_served_numpy_logits():
    data, tokens, index = needle_problem(24, 0)
    tokens = unit_tokens(tokens)
    net = ReaderNet(ReaderConfig(heads=2, rank=8, hidden=16, seed=0))
    with torch.no_grad():  # give the queries a scale where attention is far from uniform
        net.query_b.weight.mul_(40.0)
    idx = np.arange(24)
    phi, queries_in, options, token_rows, token_mask, option_mask = batch_inputs(data, tokens, index, idx)
    with torch.no_grad():
        batched = net(phi, queries_in, options, token_rows, token_mask).numpy()
    served = reader_logits(net.weights({}), data, tokens, index)
    for row, z in enumerate(served):
        assert np.allclose(batched[row, : len(z)], z, atol=1e-4)
        assert not option_mask[row, len(z) :].any()


def test_reader_finds_a_needle_the_pooled_vector_dilutes():
    train, train_tokens, train_index = needle_problem(1200, 1)
    test, test_tokens, test_index = needle_problem(300, 2)
    net = train_reader(
        train,
        unit_tokens(train_tokens),
        train_index,
        ReaderConfig(heads=2, rank=32, hidden=32, epochs=6),
        progress=False,
    )
    logits = reader_logits(net.weights({}), test, unit_tokens(test_tokens), test_index)
    accuracy = np.mean([z.argmax() == a for z, a in zip(logits, test.answers, strict=True)])
    assert accuracy > 0.9  # chance is about 0.36
    # the trained readout, same data and epochs, sees only the pooled vector (measured: 0.51)
    head = train_head(train, HeadConfig(hidden=32, epochs=6), progress=False)
    assert head_accuracy(TrainedReadout(head), test) < 0.75


def test_options_reordered_carry_their_probabilities_and_weights_round_trip(tmp_path):
    net = ReaderNet(ReaderConfig(heads=2, rank=8, hidden=16))
    weights = net.weights({"noul": 1.0, "choice": 0.7, "score": 1.0})
    weights.save(tmp_path / "r.npz")
    again = ReaderWeights.load(tmp_path / "r.npz")
    assert np.array_equal(again.query_b, weights.query_b) and again.temperatures == weights.temperatures
    readout = ReaderReadout(again)
    names = {"a": "alpha", "b": "beta", "c": None}
    q1 = decision({"type": "choice", "instructions": "Pick", "criteria": names})
    q2 = decision({"type": "choice", "instructions": "Pick", "criteria": dict(reversed(list(names.items())))})
    assert question_texts(q1) == readout.texts(q1)
    rng = np.random.default_rng(3)
    tokens, state, texts = (
        unit_rows(rng.normal(size=(9, 384))),
        unit(rng.normal(size=384)),
        unit(rng.normal(size=(4, 384))),
    )
    p1 = readout.probabilities(tokens, state, texts, q1)
    p2 = readout.probabilities(tokens, state, np.concatenate([texts[:1], texts[1:][::-1]]), q2)
    assert np.allclose(p1, p2[::-1], atol=1e-12) and abs(p1.sum() - 1) < 1e-12


def test_compare_weights_reports_the_largest_difference_per_array(tmp_path):
    from jevserve.train.run import compare_weights

    net = ReaderNet(ReaderConfig(heads=2, rank=8, hidden=16))
    weights = net.weights({"noul": 1.0})
    weights.save(tmp_path / "a.npz")
    weights.save(tmp_path / "b.npz")
    assert max(compare_weights(tmp_path / "a.npz", tmp_path / "b.npz").values()) == 0.0
    moved = ReaderWeights(**{**weights.__dict__, "b1": weights.b1 + np.float32(0.25)})
    moved.save(tmp_path / "c.npz")
    differences = compare_weights(tmp_path / "a.npz", tmp_path / "c.npz")
    assert abs(differences["b1"] - 0.25) < 1e-6 and differences["w1"] == 0.0 and differences["temperatures"] == 0.0
    ReaderWeights(**{**weights.__dict__, "temperatures": {"noul": 1.25}}).save(tmp_path / "d.npz")
    assert compare_weights(tmp_path / "a.npz", tmp_path / "d.npz")["temperatures"] == 0.25
    ReaderWeights(**{**weights.__dict__, "temperatures": {"score": 1.0}}).save(tmp_path / "e.npz")
    assert compare_weights(tmp_path / "a.npz", tmp_path / "e.npz")["temperatures"] == float("inf")
    for name, table in (("f", {"k1": 1.5}), ("g", {"k1": 1.75}), ("h", {"k2": 1.5})):
        ReaderWeights(**{**weights.__dict__, "question_temperatures": table}).save(tmp_path / f"{name}.npz")
    assert compare_weights(tmp_path / "f.npz", tmp_path / "g.npz")["question_temperatures"] == 0.25
    assert compare_weights(tmp_path / "f.npz", tmp_path / "h.npz")["question_temperatures"] == float("inf")


def test_question_groups_pool_variants_join_shared_questions_and_skip_generated_families():
    from jevserve.train.reader import question_groups

    shared, own, variant, other = (decision({"type": "noul", "instructions": text}) for text in "ABCD")
    questions = [shared, own, variant, shared, other, other]
    families = ["harmful", "harmful", "harmful~bare", "overrefusal", "synthetic:topic", "attribute:kind"]
    groups = question_groups(questions, families)
    assert groups == {"harmful+overrefusal": [0, 1, 2, 3]}
    # the grouping does not depend on the examples' order
    order = [3, 5, 2, 0, 4, 1]
    again = question_groups([questions[i] for i in order], [families[i] for i in order])
    assert {g: sorted(order[i] for i in rows) for g, rows in again.items()} == groups


def test_question_temperatures_undo_overconfidence_per_group_and_are_served(tmp_path):
    from jevserve.decide.trained import question_key
    from jevserve.train.reader import fit_question_temperatures, group_temperatures

    rng = np.random.default_rng(0)
    n = 4000
    calibrated = rng.normal(scale=1.5, size=n)  # log-odds of yes, and the answers drawn from them
    answers = (rng.random(n) >= 1 / (1 + np.exp(-calibrated))).astype(int)  # 0 = yes
    sure, plain, generated = (decision({"type": "noul", "instructions": t}) for t in ("Sure?", "Plain?", "Gen?"))
    questions = [sure] * 1000 + [plain] * 1000 + [generated] * 2000
    families = ["sure"] * 1000 + ["plain"] * 1000 + ["attribute:x"] * 2000
    scale = np.r_[np.full(1000, 3.0), np.full(1000, 1.0), np.full(2000, 3.0)]  # "sure" is 3× over-confident
    logits = [np.array([z * s, 0.0]) for z, s in zip(calibrated, scale, strict=True)]
    by_key, by_group = fit_question_temperatures(logits, questions, families, answers)
    assert set(by_group) == {"plain", "sure"}  # the generated family keeps its type's temperature
    assert abs(by_group["sure"] - 3.0) < 0.4 and abs(by_group["plain"] - 1.0) < 0.15
    assert by_key == {question_key(sure): by_group["sure"], question_key(plain): by_group["plain"]}
    weights = ReaderNet(ReaderConfig(heads=2, rank=8, hidden=16)).weights({"noul": 2.0})
    weights = ReaderWeights(**{**weights.__dict__, "question_temperatures": by_key})
    assert group_temperatures(weights, questions, families) == by_group  # the manifest's names
    weights.save(tmp_path / "q.npz")
    served = ReaderWeights.load(tmp_path / "q.npz")
    assert served.question_temperatures == by_key
    assert served.temperature(sure) == by_group["sure"] and served.temperature(generated) == 2.0
    # the key reads the question's text, not how it was built: an equal question built again shares it
    assert served.temperature(decision({"type": "noul", "instructions": "Sure?"})) == by_group["sure"]
    # a file written before per-question temperatures loads with none
    ReaderNet(ReaderConfig(heads=2, rank=8, hidden=16)).weights({"noul": 2.0}).save(tmp_path / "old.npz")
    assert ReaderWeights.load(tmp_path / "old.npz").question_temperatures == {}


def test_an_extra_loss_sees_each_batch_and_moves_training_only_when_it_is_nonzero():
    data, tokens, index = needle_problem(64, 4)
    tokens = unit_tokens(tokens)
    config = ReaderConfig(heads=2, rank=8, hidden=16, epochs=1, batch_size=16)
    seen = []

    def zero(logits, option_mask, idx):
        seen.extend(int(i) for i in idx)
        return logits.sum() * 0.0

    plain = train_reader(data, tokens, index, config, progress=False).weights({})
    with_zero = train_reader(data, tokens, index, config, progress=False, extra_loss=zero).weights({})
    assert sorted(seen) == list(range(64))  # every example once per epoch, by its row in `data`
    assert np.array_equal(plain.w1, with_zero.w1) and np.array_equal(plain.query_b, with_zero.query_b)

    def favour_first_option(logits, option_mask, idx):
        return -logits[:, 0].mean()

    pushed = train_reader(data, tokens, index, config, progress=False, extra_loss=favour_first_option)
    first = np.mean([z.argmax() == 0 for z in reader_logits(pushed.weights({}), data, tokens, index)])
    assert first > np.mean([z.argmax() == 0 for z in reader_logits(plain, data, tokens, index)])
