"""Training on synthetic embeddings whose answers are known: the head learns, the zero-shot fit recovers constants."""

import numpy as np
import pytest

from jevserve.decide.readout import ZeroShotParams, ZeroShotReadout
from jevserve.decide.trained import TrainedReadout, question_texts
from jevserve.protocol import SystemOneRequest, to_decision
from jevserve.train.dataset import EmbeddedExamples
from jevserve.train.examples import Example, answer_index, task_examples
from jevserve.train.head import HeadConfig, fit_temperatures, train_head
from jevserve.train.zeroshot import fit_zero_shot
from tests.helpers import ticket_body


def decision(question: dict):
    return to_decision(SystemOneRequest.model_validate(ticket_body(questions={"q": question})).questions["q"])


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def matching_problem(n: int, seed: int, readout_texts, noise: float = 0.6) -> EmbeddedExamples:
    """Each state is a noisy copy of its right option's embedding; 2–6 options per choice question."""
    rng = np.random.default_rng(seed)
    vectors, state_rows, text_rows, questions, answers = [], [], [], [], []
    for _ in range(n):
        k = int(rng.integers(2, 7))
        q = decision({"type": "choice", "instructions": "Which one?", "criteria": {f"o{i}": None for i in range(k)}})
        texts = unit(rng.normal(size=(len(readout_texts(q)), 384)))
        right = int(rng.integers(k))
        option_rows = texts[-k:]
        state = unit(option_rows[right] + noise * unit(rng.normal(size=384)))
        base = len(vectors)
        vectors.append(state)
        vectors.extend(texts)
        state_rows.append(base)
        text_rows.append(np.arange(base + 1, base + 1 + len(texts)))
        questions.append(q)
        answers.append(right)
    return EmbeddedExamples(
        np.stack(vectors), np.array(state_rows), text_rows, questions, np.array(answers), ["synthetic"] * n
    )


def accuracy(readout, data: EmbeddedExamples) -> float:
    hits = [
        readout.probabilities(data.vectors[s], data.vectors[rows], q).argmax() == a
        for s, rows, q, a in zip(data.state_rows, data.text_rows, data.questions, data.answers, strict=True)
    ]
    return float(np.mean(hits))


def test_head_learns_a_matching_rule_and_generalises_to_new_vectors():
    train = matching_problem(1500, 0, question_texts)
    test = matching_problem(300, 1, question_texts)
    weights = train_head(train, HeadConfig(hidden=32, epochs=6, seed=0), progress=False)
    weights = fit_temperatures(weights, matching_problem(300, 2, question_texts))
    assert accuracy(TrainedReadout(weights), test) > 0.9  # chance is about 0.27


def test_head_training_is_deterministic_for_a_seed():
    data = matching_problem(200, 3, question_texts)
    a = train_head(data, HeadConfig(hidden=8, epochs=1, seed=7), progress=False)
    b = train_head(data, HeadConfig(hidden=8, epochs=1, seed=7), progress=False)
    assert np.array_equal(a.w1, b.w1)


def test_zero_shot_fit_recovers_the_temperature_that_generated_the_answers():
    rng = np.random.default_rng(4)
    truth = ZeroShotReadout(ZeroShotParams(choice_temperature=0.08))
    data = matching_problem(1500, 5, ZeroShotReadout().texts, noise=6.0)  # weak signal: answers spread
    # Resample each answer from the true readout's own distribution, so maximum likelihood has a known target.
    resampled = [
        int(rng.choice(q.num_options, p=truth.probabilities(data.vectors[s], data.vectors[rows], q)))
        for s, rows, q in zip(data.state_rows, data.text_rows, data.questions, strict=True)
    ]
    data.answers = np.array(resampled)
    fitted = fit_zero_shot(data)
    assert abs(fitted.choice_temperature - 0.08) < 0.01


def test_answer_index_maps_each_supervision_kind():
    noul = decision({"type": "noul", "instructions": "?"})
    pick = decision({"type": "choice", "criteria": {"a": None, "b": None}})
    level = decision({"type": "score", "criteria": ["x", "y", "z"]})
    assert (answer_index(noul, True), answer_index(noul, False)) == (0, 1)
    assert answer_index(pick, "b") == 1 and answer_index(pick, "zz") is None
    assert answer_index(level, 2) == 2 and answer_index(level, 5) is None and answer_index(level, None) is None


def test_task_examples_come_only_from_train_items():
    from types import SimpleNamespace

    task = SimpleNamespace(
        name="t",
        sources=("s",),
        questions={"q": {"type": "noul", "instructions": "?"}},
        supervision=lambda item: {"q": item.label},
    )
    items = [
        SimpleNamespace(state=f"state {i}", label=i % 2 == 0, split="test" if i % 3 == 0 else "train")
        for i in range(30)
    ]
    examples = task_examples(task, items)
    assert len(examples) == 20
    assert all(isinstance(e, Example) and int(e.state.split()[1]) % 3 != 0 for e in examples)


def test_batched_training_features_equal_the_served_features():
    from jevserve.decide.trained import features
    from jevserve.train.head import batch_features

    data = matching_problem(12, 8, question_texts)
    data.questions[3] = decision({"type": "score", "criteria": ["a", "b", "c"]})
    data.questions[4] = decision(
        {"type": "choice", "criteria": {f"o{i}": None for i in range(len(data.text_rows[4]) - 1)}}
    )
    idx = np.arange(12)
    x, mask = batch_features(data, idx)
    for row, i in enumerate(idx):
        served = features(data.vectors[data.state_rows[i]], data.vectors[data.text_rows[i]], data.questions[i])
        n = served.shape[0]
        assert mask[row].sum() == n
        assert np.allclose(x[row, :n].numpy(), served, atol=1e-6)


def test_family_weights_balance_families_and_scale_the_ones_named():
    from jevserve.train.head import family_weights

    families = ["big"] * 16 + ["small"] * 4 + ["tool"] * 4 + ["tool~bare"] * 4
    plain = family_weights(families)
    assert np.isclose(float(plain.mean()), 1.0)
    # 1/√size: a small family's example weighs twice a big one's (16 against 4)
    assert np.isclose(float(plain[16] / plain[0]), 2.0)
    scaled = family_weights(families, (("tool", 8.0),))
    assert np.isclose(float(scaled.mean()), 1.0)
    # a question variant counts as its family; the others keep their ratio to each other
    assert np.isclose(float(scaled[20] / scaled[16]), 8.0) and np.isclose(float(scaled[24] / scaled[16]), 8.0)
    assert np.isclose(float(scaled[16] / scaled[0]), 2.0)
    assert family_weights(families, ()).tolist() == plain.tolist()


def test_a_rerun_reads_the_embeddings_a_run_stored_and_another_text_set_or_encoder_is_encoded_again(tmp_path):
    from jevserve.train.dataset import embed_examples

    class Counting:
        def __init__(self, identity):
            self.identity, self.texts = identity, []

        def embed(self, texts):
            self.texts += texts
            return np.stack([unit(np.full(384, float(len(t)))) for t in texts]).astype(np.float32)

    question = decision({"type": "noul", "instructions": "Is it about money?"})
    examples = [Example(s, question, 0, "fam", ()) for s in ("refund me", "hello there")]
    first = Counting("graph-a")
    stored = embed_examples(examples, question_texts, first, store=tmp_path, progress=False)
    assert first.texts and len(list(tmp_path.glob("*.npy"))) == 1
    again = Counting("graph-a")
    reread = embed_examples(examples, question_texts, again, store=tmp_path, progress=False)
    assert again.texts == [] and np.array_equal(reread.vectors, stored.vectors)  # read, not encoded
    other_encoder = Counting("graph-b")
    embed_examples(examples, question_texts, other_encoder, store=tmp_path, progress=False)
    more = Counting("graph-a")
    embed_examples([*examples, Example("new text", question, 0, "fam", ())], question_texts, more, store=tmp_path,
                   progress=False)  # fmt: skip
    assert other_encoder.texts and more.texts and len(list(tmp_path.glob("*.npy"))) == 3
    assert not list(tmp_path.glob("*.partial.npy"))


def test_an_embedding_pass_stopped_midway_goes_on_from_the_texts_it_had_embedded(tmp_path):
    # an outside tester's Ctrl-C after 17 of 76 batches kept nothing, and the same command started at batch 0
    from jevserve.train.dataset import embed_examples

    class Stopping:
        identity = "graph-a"

        def __init__(self, stop_after=None):
            self.stop_after, self.texts = stop_after, []

        def embed(self, texts):
            if self.stop_after is not None and len(self.texts) >= self.stop_after:
                raise KeyboardInterrupt
            self.texts += texts
            return np.stack([unit(np.full(384, float(len(t)))) for t in texts]).astype(np.float32)

    question = decision({"type": "noul", "instructions": "Is it about money?"})
    examples = [Example(f"text number {i}" + "x" * i, question, 0, "fam", ()) for i in range(10)]
    stopped = Stopping(stop_after=4)
    with pytest.raises(KeyboardInterrupt):
        embed_examples(examples, question_texts, stopped, store=tmp_path, progress=False, batch=2)
    assert len(stopped.texts) == 4 and len(list(tmp_path.glob("*.partial.npz"))) == 1
    rest = Stopping()
    resumed = embed_examples(examples, question_texts, rest, store=tmp_path, progress=False, batch=2)
    whole = embed_examples(examples, question_texts, Stopping(), store=tmp_path / "fresh", progress=False, batch=2)
    assert not set(rest.texts) & set(stopped.texts) and len(rest.texts) + 4 == len(whole.vectors)
    assert np.array_equal(resumed.vectors, whole.vectors)
    assert not list(tmp_path.glob("*.partial.npz")) and len(list(tmp_path.glob("*.npy"))) == 1
