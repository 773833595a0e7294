from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from jevserve.decide.base import DecisionItem, InputTooLongError
from jevserve.decide.causal import CausalLMBackend, ItemPlan
from jevserve.decide.causal_load import ModelFilesNotFoundError
from jevserve.decide.causal_prompt import question_text, state_text
from jevserve.protocol import DecisionOption, DecisionQuestion
from tests.decide.tiny_causal_lm import save_tiny_causal_lm

TICKET = "Hi, I was charged twice for my March invoice and I want my money back."
WORDS = [
    *("charged", "twice", "invoice", "app", "crashes", "settings", "page"),
    *("money", "back", "team", "billing", "calm", "angry", "refund"),
]


# ---- builders ----


def choice(n: int, instructions: str = "Which team should handle this ticket?") -> DecisionQuestion:
    names = ["Billing", "Technical", "Sales", "Refunds", "Shipping"]
    options = tuple(
        DecisionOption(names[i] if i < len(names) else f"team {i} desk", "Payments and invoices" if i == 0 else "")
        for i in range(n)
    )
    return DecisionQuestion("choice", instructions, options)


def score(n: int) -> DecisionQuestion:
    levels = tuple(DecisionOption(f"anger level {i}", "") for i in range(n))
    return DecisionQuestion("score", "How frustrated is the customer?", levels)


def noul(instructions: str = "Does the customer want money back?", true: str = "", false: str = "") -> DecisionQuestion:
    return DecisionQuestion("noul", instructions, (DecisionOption("yes", true), DecisionOption("no", false)))


def random_items(rng: random.Random, count: int) -> list[DecisionItem]:
    """Mixed questions about a few random states; a seeded rng makes the companions the same every run."""
    states = [" ".join(rng.choices(WORDS, k=rng.randint(3, 40))) for _ in range(4)]
    makers = [lambda: choice(rng.randint(2, 30)), lambda: score(rng.randint(2, 10)), lambda: noul(true="refund")]
    return [DecisionItem(rng.choice(states), rng.choice(makers)()) for _ in range(count)]


def base_items() -> list[DecisionItem]:
    return [
        DecisionItem(TICKET, noul()),
        DecisionItem(TICKET, choice(3)),
        DecisionItem(TICKET, score(3)),
        DecisionItem(TICKET, choice(40)),
        DecisionItem("The app crashes every time I open the settings page.", choice(5)),
    ]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_causal_lm(tmp_path_factory.mktemp("tiny-causal"))


@pytest.fixture(scope="module")
def backend(model_dir: Path) -> CausalLMBackend:
    return CausalLMBackend(str(model_dir))


def assert_same_answers(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-4, rtol=0)
        assert int(np.argmax(g)) == int(np.argmax(w))


# ---- mechanics ----


def test_every_question_type_gets_a_finite_normalised_vector_of_its_option_count(backend: CausalLMBackend):
    questions = [
        *(choice(n) for n in (2, 3, 26, 27)),
        *(score(n) for n in range(2, 11)),
        noul(),
        noul(true="asks for a refund", false="anything else"),
        noul(instructions="", true="asks for a refund"),
    ]
    answers = backend.decide([DecisionItem(TICKET, q) for q in questions])
    for question, probs in zip(questions, answers, strict=True):
        assert probs.dtype == np.float64
        assert probs.shape == (question.num_options,)
        assert np.all(np.isfinite(probs)) and np.all(probs >= 0)
        assert probs.sum() == pytest.approx(1.0, abs=1e-9)


def test_readout_is_label_for_short_questions_and_name_beyond_26_options(backend: CausalLMBackend):
    def readout(q: DecisionQuestion) -> str:
        return backend.plan(DecisionItem(TICKET, q)).question.readout

    assert [readout(q) for q in (choice(2), choice(26), score(10), noul())] == ["label"] * 4
    assert readout(choice(27)) == "name"


def test_choice_with_255_options_separates_the_options(backend: CausalLMBackend):
    [probs] = backend.decide([DecisionItem(TICKET, choice(255))])
    assert probs.shape == (255,)
    assert probs.sum() == pytest.approx(1.0, abs=1e-9)
    assert np.ptp(probs) > 0.01  # the options are told apart, not read as one uniform blur


def test_duplicate_items_are_answered_alike(backend: CausalLMBackend):
    first, second = backend.decide([DecisionItem(TICKET, choice(3)), DecisionItem(TICKET, choice(3))])
    np.testing.assert_array_equal(first, second)


def test_empty_batch_gets_no_answers(backend: CausalLMBackend):
    assert backend.decide([]) == []


# ---- invariance ----


def test_answers_do_not_depend_on_companions_order_or_batch_size(backend: CausalLMBackend, model_dir: Path):
    items = base_items()
    alone = [backend.decide([item])[0] for item in items]
    # The readouts are far from uniform and differ between items, so a batch leak would show.
    assert max(p.max() for p in alone) > 0.6
    assert not np.allclose(alone[1], alone[4][:3], atol=1e-3)

    companions = random_items(random.Random(7), 20)
    mixed = companions[:10] + items + companions[10:]
    assert_same_answers(backend.decide(mixed)[10:15], alone)
    assert_same_answers(backend.decide(items[::-1])[::-1], alone)
    shuffled = list(range(len(mixed)))
    random.Random(3).shuffle(shuffled)
    answers = backend.decide([mixed[i] for i in shuffled])
    assert_same_answers([answers[shuffled.index(10 + k)] for k in range(5)], alone)

    # Small budgets: many passes of few rows, and a state's questions split over rows.
    small = CausalLMBackend(str(model_dir), max_pass_tokens=600, max_pass_readout=40)
    assert_same_answers(small.decide(mixed)[10:15], alone)


def plain_probabilities(model: torch.nn.Module, plan: ItemPlan) -> np.ndarray:
    """The reference: each option's answer likelihood from an ordinary forward pass over its whole text."""
    prefix = [*plan.state_ids, *plan.question.prompt_ids]
    scores = []
    for answer in plan.question.answer_ids:
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([[*prefix, *answer[:-1]]])).logits[0]
        logprobs = logits.double().log_softmax(-1)
        scores.append(sum(float(logprobs[len(prefix) - 1 + k, tok]) for k, tok in enumerate(answer)))
    plain = np.exp(np.array(scores) - max(scores))
    return plain / plain.sum()


@pytest.mark.parametrize("arch", ["llama", "gpt2", "mistral"])
def test_tree_pass_equals_a_plain_forward_over_each_full_text(arch: str, tmp_path: Path):
    """Sharing the state's and question's keys/values gives the numbers of reading state + question + answer whole."""
    model_dir = save_tiny_causal_lm(tmp_path, arch=arch)
    backend = CausalLMBackend(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    items = [DecisionItem(TICKET, choice(3)), DecisionItem(TICKET, choice(30)), DecisionItem(TICKET, score(4))]
    # A much longer companion state makes the ticket's row left-padded in the pass.
    companion = DecisionItem(" ".join(WORDS * 60), noul())
    assert backend.count_tokens([companion]) > backend.count_tokens(items)
    tree = backend.decide([companion, *items])[1:]
    for item, probs in zip(items, tree, strict=True):
        np.testing.assert_allclose(probs, plain_probabilities(model, backend.plan(item)), atol=1e-5, rtol=0)


# ---- limits and counts ----


def test_state_beyond_the_context_window_raises_input_too_long(tmp_path: Path):
    small = CausalLMBackend(str(save_tiny_causal_lm(tmp_path, max_positions=128)))
    fits = DecisionItem("money back", noul())
    too_long = DecisionItem(" ".join(WORDS * 10), noul())
    small.check([fits])
    with pytest.raises(InputTooLongError, match=r"state: \d+ tokens.*at most 128"):
        small.check([fits, too_long])
    with pytest.raises(InputTooLongError):
        small.decide([too_long])


def test_a_state_too_long_for_any_tokenization_is_refused_without_tokenizing_it(tmp_path: Path, monkeypatch):
    small = CausalLMBackend(str(save_tiny_causal_lm(tmp_path, max_positions=128)))
    monkeypatch.setattr(small, "_encode", lambda text: pytest.fail(f"tokenized {len(text)} characters"))
    huge = "x" * (128 * small._longest_token_chars + 1)
    with pytest.raises(InputTooLongError, match=r"state: \d+ characters, more than model .* 128 positions"):
        small.check([DecisionItem(huge, noul())])


def test_count_tokens_is_the_tokenizer_count_of_what_the_model_reads(backend: CausalLMBackend, model_dir: Path):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    state_tokens = len(tokenizer(state_text(TICKET))["input_ids"])  # with the BOS the tokenizer adds
    q1, q2 = noul(), choice(3)  # label readouts: the answer label is read, never fed
    q1_tokens, q2_tokens = (
        len(tokenizer.encode(question_text(q, "label"), add_special_tokens=False)) for q in (q1, q2)
    )
    assert backend.count_tokens([DecisionItem(TICKET, q1)]) == state_tokens + q1_tokens
    both = [DecisionItem(TICKET, q1), DecisionItem(TICKET, q2), DecisionItem(TICKET, q1)]
    assert backend.count_tokens(both) == state_tokens + q1_tokens + q2_tokens


def test_missing_model_directory_says_so_and_how_to_allow_the_network(tmp_path: Path):
    with pytest.raises(ModelFilesNotFoundError, match="no such directory"):
        CausalLMBackend(str(tmp_path / "absent"))
    with pytest.raises(ModelFilesNotFoundError, match=r"network=1"):
        CausalLMBackend("jevserve-tests/no-such-model")


def test_a_directory_that_is_no_saved_model_is_named_as_such_not_as_a_missing_tokenizer_package(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ModelFilesNotFoundError, match=r"has no config\.json, so it is not a model"):
        CausalLMBackend(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")  # a config transformers cannot build a model from
    with pytest.raises(ModelFilesNotFoundError, match="do not load as a tokenizer and a causal LM"):
        CausalLMBackend(str(tmp_path))


def test_a_saved_model_folder_without_its_weights_names_them_and_not_the_network(model_dir: Path, tmp_path: Path):
    import shutil

    partial = tmp_path / "partial"
    shutil.copytree(model_dir, partial)
    for weights in [*partial.glob("*.safetensors"), *partial.glob("*.bin")]:
        weights.unlink()
    with pytest.raises(ModelFilesNotFoundError, match="the directory lacks files save_pretrained writes") as refused:
        CausalLMBackend(str(partial))
    assert "network" not in str(refused.value)


def test_a_saved_model_folder_without_its_tokenizer_files_says_to_save_them(tmp_path: Path):
    # an outside tester's GPT-2 saved without tokenizer.save_pretrained: transformers built an empty tokenizer from
    # config.json, and serving it ended in an IndexError traceback from the tree layout
    bare = save_tiny_causal_lm(tmp_path / "no-tokenizer", arch="gpt2", max_positions=64)
    for written in bare.iterdir():
        if written.name.startswith(("tokenizer", "special_tokens", "vocab", "merges")):
            written.unlink()
    with pytest.raises(ModelFilesNotFoundError, match=r"has no tokenizer files .* tokenizer\.save_pretrained"):
        CausalLMBackend(str(bare))


def test_a_tokenizer_with_more_tokens_than_the_model_embeds_is_refused_at_load(tmp_path: Path):
    # an outside tester's 300-token tokenizer beside a GPT-2 of 50 rows: an IndexError traceback at the first pass
    from transformers import AutoModelForCausalLM

    from tests.decide.tiny_causal_lm import build_tokenizer, tiny_config

    tokenizer = build_tokenizer()
    small = AutoModelForCausalLM.from_config(tiny_config("gpt2", 50, 64))
    small.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    said = rf"tokenizer has {len(tokenizer):,} tokens but the model embeds 50"
    with pytest.raises(ModelFilesNotFoundError, match=said):
        CausalLMBackend(str(tmp_path))


def test_from_spec_builds_a_named_backend_with_options(model_dir: Path):
    backend = CausalLMBackend.from_spec(f"causal:{model_dir}?name=tiny&max_context=256&max_pass_tokens=2048")
    assert backend.card.name == "tiny"
    assert backend.context_window == 256
    assert backend.max_pass_tokens == 2048
