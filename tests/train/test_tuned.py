"""The tuned reader: training's forward pass is the served graph's, a tiny recipe learns, and a run resumes exactly."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from jevserve.decide.onnx_build import load_bert, load_tuned_layers
from jevserve.decide.token_embedder import TokenEmbedder
from jevserve.decide.trained import features
from jevserve.decide.tuned import StateEncoder, layers_file, read_windows
from jevserve.train import tuned as tuned_module
from jevserve.train.examples import Example, decision_of
from jevserve.train.layer_inputs import layer_inputs
from jevserve.train.reader import ReaderConfig
from jevserve.train.tuned import TopLayers, TunedConfig, read_states, train_tuned, with_state
from jevserve.train.tuned_run import tuned_inputs

FRUIT = decision_of({"type": "noul", "instructions": "Does the text name a fruit?"})
FRUITS = ["apple", "pear", "plum", "mango", "cherry", "banana", "lemon", "peach"]
TOOLS = ["hammer", "wrench", "ladder", "shovel", "drill", "saw", "chisel", "rake"]
TEMPLATES = ["I bought a {} at the market today.", "Where did you put the {}?", "The {} was on the kitchen table.",
             "She asked me to bring the {} tomorrow morning."]


@pytest.fixture(scope="module")
def bert():
    return load_bert()


@pytest.fixture(scope="module")
def texts():
    return TokenEmbedder("int8")


def fruit_examples() -> list[Example]:
    out = []
    for template in TEMPLATES:
        for word in FRUITS + TOOLS:
            out.append(Example(template.format(word), FRUIT, 0 if word in FRUITS else 1, "fruit", ("toy",)))
    return out


def tiny_config(**layer_settings) -> TunedConfig:
    reader = ReaderConfig(heads=2, rank=8, hidden=16, epochs=3, learning_rate=3e-3, seed=0)
    return TunedConfig(reader=reader, **{"layers": 1, "layer_lr": 1e-3, "states_per_batch": 8, **layer_settings})


def test_read_windows_cover_the_first_positions_only():
    windows = read_windows(list(range(1000)), 101, 102, read_tokens=512)
    assert [len(w) for w in windows] == [256, 256]  # 512 positions: two full windows, the rest not run
    assert windows[0][0] == 101 and windows[0][-1] == 102 and windows[1][1] == 254
    assert read_windows([], 101, 102) == [[101, 102]]


def test_with_state_equals_the_served_features_for_that_state():
    rng = np.random.default_rng(0)
    text_vectors = rng.normal(size=(4, 384)).astype(np.float32)
    question = decision_of({"type": "choice", "instructions": "Pick one.", "criteria": {"a": "x", "b": "y", "c": None}})
    state = rng.normal(size=384).astype(np.float32)
    stale = features(np.zeros(384, np.float32), text_vectors, question)
    fresh = with_state(torch.from_numpy(stale)[None], torch.from_numpy(state)[None])[0].numpy()
    assert np.allclose(fresh, features(state, text_vectors, question), atol=1e-6)


def test_training_reads_states_as_the_served_graph_does(bert, texts, tmp_path):
    top = TopLayers(bert, 4)  # unchanged layers: the served graph is the shipped encoder's
    layers = tmp_path / "m.layers.npz"
    np.savez(layers, **top.tuned_weights())
    states = ["How do I reset my password? I tried twice and it failed.", "word " * 600]  # the long one: cut at 512
    lower = layer_inputs(states, texts.tokenizer, 4, directory=tmp_path / "store", progress=False)
    with torch.no_grad():
        tokens, vectors = read_states(top, lower, np.arange(2))
    served = StateEncoder("int8", layers=layers)
    for i, state in enumerate(states):
        served_tokens, served_vector = served.read(state)
        assert served_tokens.shape == tuple(tokens[i].shape) and served_tokens.shape[0] <= 512
        # the same int8 lower layers; the top two in torch fp32 here, int8 when served
        assert float(np.mean(np.sum(served_tokens * tokens[i].numpy(), axis=1))) > 0.98
        assert float(served_vector @ vectors[i].numpy()) > 0.99
    fp32_tokens, _ = StateEncoder("fp32", layers=layers).read(states[0])
    assert float(np.mean(np.sum(fp32_tokens * tokens[0].numpy(), axis=1))) > 0.98  # int8 lower layers vs fp32


def test_layer_inputs_are_stored_per_text_and_reused(bert, texts, tmp_path):
    store = tmp_path / "store"
    first = layer_inputs(["one text", "another text"], texts.tokenizer, 5, directory=store, progress=False)
    again = layer_inputs(["another text", "a third"], texts.tokenizer, 5, directory=store, progress=False)
    assert len(list(store.glob("*.npz"))) == 2  # the second call encoded only "a third"
    assert np.array_equal(again.windows_of(0)[0], first.windows_of(1)[0])


def test_a_tiny_recipe_learns_and_changes_only_the_tuned_layers(bert, texts, tmp_path):
    examples = fruit_examples()
    inputs = tuned_inputs(examples, texts, progress=False)
    lower = layer_inputs(inputs.states, texts.tokenizer, 5, directory=tmp_path / "store", progress=False)
    top = TopLayers(bert, 5)
    before = top.tuned_weights()
    net = train_tuned(inputs.embedded, inputs.token_index, top, lower, tiny_config(), progress=False)
    after = top.tuned_weights()
    assert set(after) == set(before) and all(k.startswith("encoder.layer.5.") for k in after)
    assert any(not np.array_equal(before[k], after[k]) for k in after)
    with torch.no_grad():
        tokens, vectors = read_states(top, lower, inputs.token_index)
    from jevserve.train.reader import question_inputs

    idx = np.arange(len(examples))
    phi, queries_in, options, _ = question_inputs(inputs.embedded, idx)
    padded = torch.nn.utils.rnn.pad_sequence(tokens, batch_first=True)
    mask = torch.arange(padded.shape[1])[None, :] < torch.tensor([len(t) for t in tokens])[:, None]
    with torch.no_grad():
        logits = net(with_state(phi, vectors), queries_in, options, padded, mask)
    right = (logits.argmax(-1).numpy() == inputs.embedded.answers).mean()
    assert right > 0.9  # fitted, on its own training states: the loop learns


def test_an_interrupted_run_resumes_to_the_same_weights(bert, texts, tmp_path, monkeypatch):
    examples = fruit_examples()
    inputs = tuned_inputs(examples, texts, progress=False)
    lower = layer_inputs(inputs.states, texts.tokenizer, 5, directory=tmp_path / "store", progress=False)
    config = replace(tiny_config(), checkpoint_s=0.0)
    whole_top = TopLayers(bert, 5)
    whole = train_tuned(inputs.embedded, inputs.token_index, whole_top, lower, config, progress=False)

    real_step, calls = tuned_module._train_step, []

    def step_then_stop(*args, **kwargs):
        if len(calls) == 7:
            raise KeyboardInterrupt
        calls.append(1)
        return real_step(*args, **kwargs)

    checkpoint = tmp_path / "checkpoints" / "run.pt"  # a folder that does not exist yet
    monkeypatch.setattr(tuned_module, "_train_step", step_then_stop)
    with pytest.raises(KeyboardInterrupt):
        train_tuned(inputs.embedded, inputs.token_index, TopLayers(bert, 5), lower, config, checkpoint=checkpoint,
                    progress=False)
    monkeypatch.setattr(tuned_module, "_train_step", real_step)
    said = []
    resumed_top = TopLayers(bert, 5)
    resumed = train_tuned(inputs.embedded, inputs.token_index, resumed_top, lower, config, checkpoint=checkpoint,
                          progress=False, log=said.append)
    assert said and said[0].startswith("resuming")
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    for k, v in whole_top.tuned_weights().items():
        assert np.array_equal(v, resumed_top.tuned_weights()[k]), k
    # the finished phase is kept: a run interrupted after it (in the phases that follow) reuses it, with no step
    assert tuned_module.checkpoint_state(checkpoint) == "finished"
    monkeypatch.setattr(tuned_module, "_train_step", lambda *a, **k: pytest.fail("trained a finished phase again"))
    said.clear()
    again_top = TopLayers(bert, 5)
    again = train_tuned(inputs.embedded, inputs.token_index, again_top, lower, config, checkpoint=checkpoint,
                        progress=False, log=said.append)
    assert "finished by an earlier run" in said[0]
    for (name, a), b in zip(whole.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    for k, v in whole_top.tuned_weights().items():
        assert np.array_equal(v, again_top.tuned_weights()[k]), k


def test_tuned_layers_with_unknown_names_are_refused(bert, tmp_path):
    path = tmp_path / "bad.layers.npz"
    np.savez(path, **{"encoder.layer.9.output.dense.weight": np.zeros((2, 2), np.float16)})
    with pytest.raises(ValueError, match=r"encoder\.layer\.9"):
        load_tuned_layers(bert, path)
    assert layers_file(tmp_path / "m.npz") == tmp_path / "m.layers.npz"


def test_train_tuned_model_writes_readout_layers_manifest_and_served_temperatures(tmp_path, monkeypatch):
    import json

    from jevserve.decide.base import DecisionItem
    from jevserve.decide.tuned import tuned_backend
    from jevserve.train import tuned_run

    examples = fruit_examples()
    monkeypatch.setattr(tuned_run, "collect_examples", lambda *a, **k: list(examples[:40]))
    monkeypatch.setattr(tuned_run, "layer_inputs", _store_in(tmp_path / "store"))
    monkeypatch.setattr(tuned_run, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(tuned_run, "is_validation", lambda state: len(state) % 2 == 0)  # enough to fit temperatures
    out = tmp_path / "model" / "toy.npz"
    extra = examples[40:]
    config = replace(tiny_config(), layer_families=("fruit",), layer_epochs=2)
    weights, manifest = tuned_run.train_tuned_model([], out=out, config=config, data=object(), extra=extra,
                                                    progress=False, log=lambda _m: None)
    assert manifest["num_examples"] == len(examples) and manifest["layers_file"] == "toy.layers.npz"
    # no example asks the guard's question, so the lexical heads file holds none and nothing is averaged
    assert manifest["lexical_heads_file"] == "toy.lexical.npz"
    assert json.loads(out.with_suffix(".json").read_text())["config"]["layers"] == 1
    assert not np.array_equal(  # the first phase moved the layer it tunes
        np.load(layers_file(out))["encoder.layer.5.output.dense.weight"],
        TopLayers(load_bert(), 5).tuned_weights()["encoder.layer.5.output.dense.weight"],
    )
    assert set(weights.temperatures) == {"noul", "choice", "score"} and weights.temperatures["noul"] != 1.0
    served = tuned_backend(weights=out)
    probabilities = served.decide([DecisionItem("I bought a mango at the market today.", FRUIT)])[0]
    assert probabilities.shape == (2,) and abs(probabilities.sum() - 1) < 1e-9
    assert served.heads == {}
    # what was trained can be served by its path, under a name of its own
    from jevserve.decide.registry import UnknownSpecError, load_backends

    by_spec = load_backends(f"tuned:{out}")[0]
    assert by_spec.card.name.startswith("minilm-tuned-reader-") and by_spec.card.name != served.card.name
    again = by_spec.decide([DecisionItem("I bought a mango at the market today.", FRUIT)])[0]
    assert np.array_equal(again, probabilities)
    with pytest.raises(UnknownSpecError, match="jevserve train --tuned --out"):
        load_backends(f"tuned:{tmp_path / 'missing.npz'}")


def test_a_soup_trains_the_reader_over_the_mean_of_given_layers_without_a_first_phase(tmp_path, monkeypatch):
    from jevserve.train import tuned_run

    shipped = TopLayers(load_bert(), 5).tuned_weights()
    a, b = tmp_path / "a.layers.npz", tmp_path / "b.layers.npz"
    np.savez(a, **{k: (v + 0.01).astype(np.float16) for k, v in shipped.items()})
    np.savez(b, **{k: (v - 0.03).astype(np.float16) for k, v in shipped.items()})
    examples = fruit_examples()
    monkeypatch.setattr(tuned_run, "collect_examples", lambda *a, **k: list(examples))
    monkeypatch.setattr(tuned_run, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(tuned_run, "is_validation", lambda state: len(state) % 2 == 0)

    def no_first_phase(*args, **kwargs):
        raise AssertionError("a soup must not train the layers")

    monkeypatch.setattr(tuned_run, "train_layers", no_first_phase)
    out = tmp_path / "soup" / "toy.npz"
    config = replace(tiny_config(), layer_families=("fruit",))
    _, manifest = tuned_run.train_tuned_model([], out=out, config=config, data=object(), average_layers=[a, b],
                                              progress=False, log=lambda _m: None)
    written = np.load(layers_file(out))
    name = "encoder.layer.5.output.dense.weight"
    expected = ((np.load(a)[name].astype(np.float32) + np.load(b)[name].astype(np.float32)) / 2).astype(np.float16)
    assert written[name].dtype == np.float16 and np.array_equal(written[name], expected)
    assert manifest["layers_averaged_from"] == [str(a), str(b)]
    np.savez(b, **{k: v for k, v in list(np.load(b).items())[1:]})  # one layer missing: not the same recipe
    with pytest.raises(ValueError, match="different layers"):
        tuned_run.write_mean_layers([a, b], tmp_path / "bad.layers.npz")


def _store_in(directory):
    def call(texts, tokenizer, first_layer, *, progress=True):
        return layer_inputs(texts, tokenizer, first_layer, directory=directory, progress=False)

    return call


def test_a_capped_family_keeps_its_first_states_by_hash_whatever_else_is_there():
    from jevserve.train.tuned import capped

    families = ["length", "length~bare", "length", "guard", "length"]
    states = ["a", "a", "b", "c", "d"]
    keep = capped(families, states, (("length", 2),))
    kept_states = {s for s, f, k in zip(states, families, keep, strict=True) if k and f.startswith("length")}
    assert keep[3] and len(kept_states) == 2  # one of the three length states dropped, the other family untouched
    assert keep[0] == keep[1]  # a state's examples go together
    alone = capped(families[:3] + families[4:], states[:3] + states[4:], (("length", 2),))
    assert list(alone) == [k for i, k in enumerate(keep) if i != 3]  # the guard example changes nothing


def test_a_run_into_another_path_never_resumes_this_ones_checkpoint(tmp_path):
    from jevserve.train.tuned_run import checkpoint_path

    committed = tmp_path / "params" / "minilm-tuned.npz"
    check = tmp_path / "tmp123" / "minilm-tuned.npz"  # what `jevserve train --check` trains into
    assert checkpoint_path(committed) == checkpoint_path(tmp_path / "params" / ".." / "params" / "minilm-tuned.npz")
    assert checkpoint_path(committed) != checkpoint_path(check)


def test_reading_the_served_states_keeps_what_it_read_at_ctrl_c_and_goes_on_from_it(tmp_path):
    # the phase after the layers read every state again from the first after an interrupt
    from jevserve.train.tuned_run import partial_states_path, read_states_resumably

    texts = [f"state {i}" for i in range(6)]
    calls: list[str] = []

    def read(text: str) -> tuple[np.ndarray, np.ndarray]:
        calls.append(text)
        if text == "state 4" and calls.count(text) == 1:
            raise KeyboardInterrupt
        n = 1 + int(text.split()[1])  # a token row per word piece: texts of different lengths
        return np.full((n, 384), n, np.float32), np.full(384, n, np.float32)

    path = tmp_path / "states.npz"
    with pytest.raises(KeyboardInterrupt):
        read_states_resumably(texts, read, path, progress=False)
    assert partial_states_path(path).exists() and not path.exists()
    tokens, vectors = read_states_resumably(texts, read, path, progress=False)
    assert calls == [*texts[:5], "state 4", "state 5"]  # the second call read only what was left
    assert path.exists() and not partial_states_path(path).exists()
    whole, whole_vectors = read_states_resumably(texts, read, tmp_path / "again.npz", progress=False)
    assert np.array_equal(tokens.rows, whole.rows) and np.array_equal(tokens.offsets, whole.offsets)
    assert np.array_equal(vectors, whole_vectors)
