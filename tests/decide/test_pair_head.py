"""The pair analyzer: a cache state's two texts are found in every form the gateway and the bench write, its terms
are what the two texts do not share (whichever is the cached one), and a pair head answers as scikit-learn's fitted
pipeline does and survives its file."""

from __future__ import annotations

import numpy as np
import pytest

from jevserve.decide.lexical_head import load_heads, pair_cosine, pair_terms, pair_texts, save_heads, terms
from jevserve.decide.trained import question_key
from jevserve.train.examples import Example, decision_of
from jevserve.train.lexical_head import fit_head, pair_vectorizer

REUSE = decision_of({"type": "noul", "instructions": "Does the cached answer also answer the new question?"})
SAME = [
    ("How do I reset my password?", "how do i reset my password"),
    ("What time does the pharmacy open?", "When does the pharmacy open?"),
    ("Can I bring my dog on the train?", "Are dogs allowed on the train?"),
    ("How much is 10 euros in dollars?", "10 euros in dollars, how much is that?"),
    ("Is the museum free on Sundays?", "Is the museum free on Sundays??"),
    ("Where do I find my invoices?", "Where can I find my invoices?"),
]
DIFFERENT = [
    ("Is the clinic open on Sundays?", "Is the clinic closed on Sundays?"),
    ("How do I turn on dark mode?", "How do I turn off dark mode?"),
    ("How much is 10 euros in dollars?", "How much is 20 euros in dollars?"),
    ("Fly from Paris to Rome", "Fly from Rome to Paris"),
    ("Can cats eat grapes?", "Can dogs eat grapes?"),
    ("Should I water the plant daily?", "Should I not water the plant daily?"),
]


def state(cached: str, new: str) -> str:
    from jevserve.gateway.questions import cache_pair_state

    return cache_pair_state(cached, new)


def test_the_two_texts_are_found_in_every_form_a_cache_state_is_written_in():
    from types import SimpleNamespace

    from jevserve.bench.tasks.cache_chats import chats_state
    from jevserve.bench.tasks.cache_pairs import pair_state

    assert pair_texts(state("Is it open?", "Is it shut?")) == (" Is it open?", " Is it shut?")
    assert pair_texts(pair_state("A line\nand another", "B")) == (" A line\nand another", " B")
    cached = [SimpleNamespace(role="user", content="hi"), SimpleNamespace(role="assistant", content="Hello!")]
    new = [SimpleNamespace(role="user", content="hi\n\nthere")]
    assert pair_texts(chats_state(cached, new)) == ("user: hi\nassistant: Hello!", "user: hi\n\nthere")
    assert pair_texts("not a cache state") == ("not a cache state", "")


def test_the_terms_are_what_the_two_texts_do_not_share_in_either_order():
    found = pair_terms(state("Is the clinic open on Sundays?", "Is the clinic closed on Sundays?"))
    assert found == [
        "d:closed", "d:open", "b:clinic closed", "b:clinic open", "b:closed on", "b:open on", "swap", "n:2",
    ]  # fmt: skip
    for cached, new in SAME + DIFFERENT:
        for order, same_words in ((False, False), (True, False), (True, True)):
            found = pair_terms(state(cached, new), order=order, same_words=same_words)
            assert found == pair_terms(state(new, cached), order=order, same_words=same_words)
    assert pair_terms(state("Fly from Paris to Rome", "fly from rome to paris")) == [
        "o:from paris", "o:from rome", "o:paris to", "o:rome to", "o:to paris", "o:to rome", "n:0",
    ]  # fmt: skip
    assert pair_terms(state("Same words.", "same WORDS")) == ["n:0"]
    assert "digits" in pair_terms(state("10 euros", "20 euros")) and "digits" not in pair_terms(state("a 10", "b 10"))
    assert "negation" in pair_terms(state("I can go", "I can't go"))
    assert "negation" not in pair_terms(state("I can't go", "I cannot go"))
    assert pair_terms(state("a b c d e f g", "h i j k l m n"))[-1] == "n:6"
    assert terms(state("x", "y"), "pair") == pair_terms(state("x", "y"))


def test_the_order_terms_say_when_the_shared_words_come_in_another_order():
    swapped = state("Fly from Paris to Rome", "fly from Rome to Paris")
    assert "reordered" not in pair_terms(swapped)  # the first pair terms had no order term
    assert pair_terms(swapped, order=True)[-2:] == ["n:0", "reordered"]
    assert pair_terms(swapped, order=True, same_words=True)[-2:] == ["reordered", "reordered:same-words"]
    assert terms(swapped, "pair+order+same") == pair_terms(swapped, order=True, same_words=True)
    reworded = state("Fly from Paris to Rome", "Fly to Rome, from Paris, please")
    assert pair_terms(reworded, order=True, same_words=True)[-1] == "reordered"  # other words too: no conjunction
    kept = state("Is the gym open on Sundays?", "is the gym open on sundays")
    assert "reordered" not in pair_terms(kept, order=True, same_words=True)
    repeated = state("from A to B, leaving from A", "from A to B leaving from A!")  # a repeat reads at its first place
    assert "reordered" not in pair_terms(repeated, order=True)


def test_words_of_any_script_are_words():
    # an ASCII-only pattern read these as no words at all, the same pair as two identical texts ("n:0")
    chinese = pair_terms(state("如何重置我的密码？", "如何删除我的账户？"))
    assert chinese[:2] == ["d:如何删除我的账户", "d:如何重置我的密码"] and "n:0" not in chinese
    russian = pair_terms(state("Клиника открыта в воскресенье?", "Клиника закрыта в воскресенье?"))
    assert russian[:2] == ["d:закрыта", "d:открыта"] and "swap" in russian
    assert pair_terms(state("Ist es geöffnet?", "Ist es geschlossen?"))[:2] == ["d:geschlossen", "d:geöffnet"]
    assert "negation" in pair_terms(state("I don\u2019t like it", "I do like it"))  # a typographic apostrophe
    assert pair_terms(state("如何重置我的密码？", "如何重置我的密码?")) == ["n:0"]  # only the punctuation differs


def test_a_pair_that_differs_only_in_its_symbols_is_two_questions():
    from jevserve.decide.lexical_head import only_symbols_differ

    for cached, new in (("3+3=?", "3*3=?"), ("😀", "😢"), ("Fee: $5", "Fee: €5"), ("x < y", "x > y")):
        assert pair_terms(state(cached, new)) == ["n:0"]  # the terms alone read one text repeated
        assert only_symbols_differ(state(cached, new))
    for cached, new in (("ok", "OK!"), ("?", "!"), ("50%", "50 %"), ("3+3", "4+4"), ("same", "same")):
        assert not only_symbols_differ(state(cached, new))
    head = fit_head(REUSE, examples(), analyzer="pair", c=10.0)
    assert head.probability(state("Same words.", "same WORDS")) > 0.5  # one text repeated, as it learnt
    assert head.probability(state("3+3=?", "3*3=?")) == 0.0
    assert fit_head(REUSE, examples()).probability(state("3+3=?", "3*3=?")) > 0.0  # a words head reads it as before


def examples() -> list[Example]:
    return [Example(state(a, b), REUSE, 0, "toy", ("toy",)) for a, b in SAME] + [
        Example(state(a, b), REUSE, 1, "toy", ("toy",)) for a, b in DIFFERENT
    ]


def test_the_numpy_pair_head_answers_as_the_fitted_scikit_learn_pipeline(tmp_path):
    from jevserve.bench.supervised import TfidfClassifier

    train = examples()
    head = fit_head(REUSE, train, analyzer="pair", c=10.0)
    assert (head.analyzer, head.combine) == ("pair", "mean")
    model = TfidfClassifier(c=10.0, vectorizer=pair_vectorizer).fit(
        [e.state for e in train], np.array([e.answer == 0 for e in train])
    )
    probes = [e.state for e in train] + [state("Is the shop open today?", "Is the shop closed today?"), "", "x"]
    found = np.array([head.probability(t) for t in probes])
    np.testing.assert_allclose(found, model.predict_proba(probes), atol=1e-9)
    assert found[: len(SAME)].min() > found[len(SAME) : len(train)].max()  # it learnt its own examples
    save_heads(tmp_path / "p.npz", [head])
    loaded = load_heads(tmp_path / "p.npz")[question_key(REUSE)]
    assert loaded.analyzer == "pair"
    assert loaded.probability(probes[-3]) == pytest.approx(head.probability(probes[-3]), abs=1e-6)


def test_a_larger_c_is_a_weaker_penalty():
    weak, strong = (fit_head(REUSE, examples(), analyzer="pair", c=c) for c in (10.0, 1.0))
    assert np.abs(weak.coef).sum() > np.abs(strong.coef).sum()


def test_the_tuned_reader_answers_the_cache_question_with_its_pair_head_and_readout():
    from jevserve.decide.base import DecisionItem
    from jevserve.decide.tuned import TUNED_WEIGHTS, lexical_file, tuned_backend
    from jevserve.train.lexical_head import REUSE_ANALYZER
    from jevserve.train.rules import reuse

    if not lexical_file(TUNED_WEIGHTS).exists():
        pytest.skip("the committed tuned reader has no lexical heads")
    backend = tuned_backend()
    try:
        head = backend.heads[question_key(reuse())]
        assert (head.analyzer, head.combine) == (REUSE_ANALYZER, "mean")
        items = [DecisionItem(state(a, b), reuse()) for a, b in (*SAME[:2], *DIFFERENT[:3])]
        served = backend.decide(items)
        heads, backend.heads = backend.heads, {}
        readout = backend.decide(items)
        backend.heads = heads
        # the head reads the two texts' cosine by the reader's own text embedder, as it was fitted
        def cosine(text: str) -> float:
            return pair_cosine(text, backend.embedder.embed)

        for item, mixed, alone in zip(items, served, readout, strict=True):
            expected = 0.5 * (alone[0] + head.probability(item.state, cosine(item.state)))
            assert mixed[0] == pytest.approx(expected, abs=1e-12)
        # the same pair the other way round reads the same head answer (its terms, and the cosine, do not depend on
        # the order)
        swapped = DecisionItem(state(DIFFERENT[0][1], DIFFERENT[0][0]), reuse())
        assert head.probability(swapped.state, cosine(swapped.state)) == pytest.approx(
            head.probability(items[2].state, cosine(items[2].state)), abs=1e-12
        )
    finally:
        backend.close()


def test_the_symbols_rule_fires_on_none_of_the_measured_cache_pairs():
    """The docs say the rule moves no measured figure: it fires on no pair the cache's figures are read on."""
    import json
    from pathlib import Path

    from jevserve.bench.data import BenchData
    from jevserve.bench.sources.errors import SourceMissingError
    from jevserve.bench.tasks import TASKS
    from jevserve.decide.lexical_head import only_symbols_differ
    from jevserve.train.cache_rules import cache_rule_pairs

    root = Path(__file__).resolve().parents[2]
    try:
        data = BenchData()
        states = [i.state for task in ("cache-pairs", "cache-chats") for i in TASKS[task].load_items(data)]
    except SourceMissingError as exc:
        pytest.skip(f"needs the bench data ({exc}): run `jevserve data fetch`")
    states += [s for side in ("train", "test") for s, _, _ in cache_rule_pairs(side)]
    written = [root / "benchmarks" / "decide" / f"cache_pairs_blind{n}.jsonl" for n in ("", "2", "3")]
    for path in [*written, root / "benchmarks" / "gateway" / "cache_pairs.jsonl"]:
        states += [state(r["cached"], r["new"]) for r in map(json.loads, path.read_text().splitlines())]
    assert len(states) > 2_000 and not [s for s in states if only_symbols_differ(s)]


COS = "pair+order+same+cos:differ"


def test_the_cosine_enters_as_one_term_per_cut_reached_and_a_cos_analyzer_needs_it():
    from jevserve.decide.lexical_head import COSINE_CUTS, cosine_terms

    assert cosine_terms(0.1) == [] and cosine_terms(0.99) == [f"cos>={c}" for c in COSINE_CUTS]
    assert cosine_terms(0.86) == ["cos>=0.5", "cos>=0.6", "cos>=0.7", "cos>=0.8", "cos>=0.85"]
    pair = state(*SAME[1])
    with pytest.raises(ValueError, match="cosine"):
        terms(pair, COS)
    assert terms(pair, COS, 0.86) == terms(pair, "pair+order+same") + cosine_terms(0.86)
    assert terms(pair, "pair+order+same+cos", 0.86) == terms(pair, COS, 0.86)


def test_where_the_two_texts_hold_the_same_words_the_differ_analyzer_leaves_the_cosine_out():
    # a swapped direction's cosine is near 1, and only the order terms tell it from a repeat
    swapped = state("Fly from Paris to Rome", "Fly from Rome to Paris")
    assert not any(t.startswith("cos>=") for t in terms(swapped, COS, 0.99))
    assert "cos>=0.98" in terms(swapped, "pair+order+same+cos", 0.99)
    assert "cos>=0.98" in terms(state(*SAME[1]), COS, 0.99)  # "What time" against "When": the words differ


def test_a_cosine_head_is_fitted_and_served_on_the_cosines_of_the_readers_text_embedder(tmp_path):
    pytest.importorskip("onnxruntime")
    from functools import partial

    from jevserve.bench.supervised import TfidfClassifier
    from jevserve.decide.token_embedder import TokenEmbedder
    from jevserve.train.lexical_head import pair_cosines

    train = examples()
    head = fit_head(REUSE, train, analyzer=COS, c=10.0)
    assert head.needs_cosine and any(t.startswith("cos>=") for t in head.vocabulary)
    probes = [e.state for e in train] + [state("Is the shop open today?", "Is the shop closed today?")]
    embed = TokenEmbedder("int8").embed
    cosines = {p: pair_cosine(p, embed) for p in probes}
    assert cosines == pytest.approx(pair_cosines(probes))  # what fitting read is what serving reads
    assert cosines[state(*SAME[0])] > 0.95 > cosines[state(*DIFFERENT[4])]  # a repeat; another animal
    model = TfidfClassifier(c=10.0, vectorizer=partial(pair_vectorizer, COS, cosines)).fit(
        [e.state for e in train], np.array([e.answer == 0 for e in train])
    )
    found = np.array([head.probability(p, cosines[p]) for p in probes])
    np.testing.assert_allclose(found, model.predict_proba(probes), atol=1e-9)
    with pytest.raises(ValueError, match="cosine"):
        head.probability(probes[0])
    save_heads(tmp_path / "p.npz", [head])
    assert load_heads(tmp_path / "p.npz")[question_key(REUSE)].analyzer == COS


def test_the_tuned_reader_gives_a_cosine_head_the_cosine_of_its_text_embedder():
    from dataclasses import replace

    from jevserve.decide.base import DecisionItem
    from jevserve.decide.lexical_head import pair_cosine
    from jevserve.decide.tuned import TUNED_WEIGHTS, lexical_file, tuned_backend
    from jevserve.train.rules import reuse

    if not lexical_file(TUNED_WEIGHTS).exists():
        pytest.skip("the committed tuned reader has no lexical heads")
    head = replace(fit_head(REUSE, examples(), analyzer=COS, c=10.0), question=question_key(reuse()))
    backend = tuned_backend()
    try:
        backend.heads = {head.question: head}
        items = [DecisionItem(state(a, b), reuse()) for a, b in (SAME[1], DIFFERENT[3], DIFFERENT[4])]
        served = backend.decide(items)
        backend.heads = {}
        readout = backend.decide(items)
        for item, mixed, alone in zip(items, served, readout, strict=True):
            cosine = pair_cosine(item.state, backend.embedder.embed)
            assert mixed[0] == pytest.approx(0.5 * (alone[0] + head.probability(item.state, cosine)), abs=1e-12)
    finally:
        backend.close()


def test_a_run_of_words_moved_elsewhere_is_told_from_two_words_swapped():
    block = "pair+order+same+block+cos:differ"
    moved = state("How do I set up voicemail on my phone?", "On my phone, how do I set up voicemail?")
    swapped = state("Fly from Paris to Rome", "Fly from Rome to Paris")
    assert "moved-block" in terms(moved, block, 0.99) and "moved-block" not in terms(moved, COS, 0.99)
    assert "moved-block" not in terms(swapped, block, 0.99) and "reordered:same-words" in terms(swapped, block, 0.99)
    # either text may be the cached one; a text repeated, or other words, moved no block
    assert terms(state(*reversed(pair_texts(moved))), block, 0.99) == terms(moved, block, 0.99)
    for same in (state("a b c", "A b c!"), state(*DIFFERENT[0])):
        assert "moved-block" not in terms(same, block, 0.99)
    # one word moved next to its neighbour is a run of one word moved (a limit of the term: "usd eur" / "eur usd")
    assert "moved-block" in terms(state("convert usd eur now", "convert eur usd now"), block, 0.5)
