"""The committed trained readout and reading model: small files with complete manifests, trained on no test item (by
content hash)."""

import functools
import json
from pathlib import Path

import pytest

from jevserve.decide.encoder import LEXICAL_READER_WEIGHTS, READER_WEIGHTS, TRAINED_HEAD, ZERO_SHOT_PARAMS
from jevserve.decide.tuned import TUNED_WEIGHTS, layers_file, lexical_file
from jevserve.train.run import read_state_hashes

ROOT = Path(__file__).resolve().parents[2]

# every committed model trained on train sides (the tuned reader once its weights are committed)
COMMITTED = [TRAINED_HEAD, READER_WEIGHTS, LEXICAL_READER_WEIGHTS] + ([TUNED_WEIGHTS] if TUNED_WEIGHTS.exists() else [])

# States the recipe reads now that differ from those the committed weights were trained on (recut_since_trained.json
# says why): "new" ones the recipe makes and training never read, "gone" ones training read that it no longer makes.
# Retraining writes the recipe's states into the manifest; the test then says to empty the file.
_RECUT = json.loads((Path(__file__).with_name("recut_since_trained.json")).read_text())
RECUT_SINCE_TRAINED = {name: frozenset(sets["new"]) for name, sets in _RECUT.items() if name != "why"}
GONE_SINCE_TRAINED = {name: frozenset(sets["gone"]) for name, sets in _RECUT.items() if name != "why"}


def test_weights_are_small_and_the_manifest_names_data_seeds_and_versions():
    assert TRAINED_HEAD.stat().st_size < 4 * 1024 * 1024
    manifest = json.loads(TRAINED_HEAD.with_suffix(".json").read_text())
    for key in ("families", "sources", "versions", "config", "num_examples", "temperatures", "command"):
        assert manifest[key], key
    assert manifest["config"]["seed"] == 0 and manifest["leave_out"] is None
    assert sum(manifest["families"].values()) == manifest["num_examples"]
    assert len(read_state_hashes(TRAINED_HEAD.with_suffix(".states.gz"))) > 10_000
    provenance = json.loads(ZERO_SHOT_PARAMS.read_text())["provenance"]
    # fitted on the same train-side examples; the trained readout also sees them re-asked (train/variants.py)
    originals = sum(n for family, n in manifest["families"].items() if "~" not in family)
    assert provenance["num_examples"] == originals < manifest["num_examples"]


@pytest.mark.parametrize("weights", [READER_WEIGHTS, LEXICAL_READER_WEIGHTS], ids=lambda p: p.stem)
def test_the_reading_model_ships_with_a_manifest_of_the_same_examples_and_the_attribute_questions(weights):
    manifest = json.loads(weights.with_suffix(".json").read_text())
    head = json.loads(TRAINED_HEAD.with_suffix(".json").read_text())
    # the word table (65,536 × 32 floats) is most of the lexical reader's file
    assert weights.stat().st_size < (16 if manifest["config"].get("lexical_dim") else 8) * 1024 * 1024
    shared = {f: n for f, n in manifest["families"].items() if not f.startswith("attribute:")}
    assert shared == head["families"] and manifest["leave_out"] is None
    attributes = manifest["config"].get("attribute_questions", False)
    assert (len(shared) < len(manifest["families"])) == attributes
    assert manifest["config"]["seed"] == 0 and manifest["temperatures"] and manifest["versions"]
    reader_states = read_state_hashes(weights.with_suffix(".states.gz"))
    head_states = read_state_hashes(TRAINED_HEAD.with_suffix(".states.gz"))
    assert reader_states >= head_states and (reader_states > head_states) == attributes


@functools.cache
def _test_states_by_task() -> dict[str, dict[str, str]]:
    """Each task's test side as {state key: item id}, read once for every committed model (the bench data is the
    same for all of them)."""
    from jevserve.bench import TASKS, BenchData, split_items, state_key
    from jevserve.bench.sources import SourceMissingError

    data = BenchData()
    by_task = {}
    for task in TASKS.values():
        try:
            _, test = split_items(task.load_items(data))
        except SourceMissingError as exc:
            pytest.skip(f"needs the bench data ({exc})")
        by_task[task.name] = {state_key(item): item.item_id for item in test}
    return by_task


@pytest.mark.slow
@pytest.mark.parametrize("weights", COMMITTED, ids=lambda p: p.stem)
def test_no_training_state_is_on_any_task_test_side(weights):
    trained_on = read_state_hashes(weights.with_suffix(".states.gz"))
    checked = 0
    for task_name, test_states in _test_states_by_task().items():
        leaked = [item_id for key, item_id in test_states.items() if key in trained_on]
        assert not leaked, f"{task_name}: {len(leaked)} test states were trained on, e.g. {leaked[:3]}"
        checked += len(test_states)
    assert checked > 3000


@functools.cache
def _tuned_states() -> tuple[str, ...]:
    """The states of the tuned reader's own examples (everyday, rule-made and composed families), built once."""
    from jevserve.bench import BenchData
    from jevserve.train.tuned_data import tuned_examples

    return tuple(ex.state for ex in tuned_examples(BenchData(), log=lambda message: None))


@functools.cache
def _example_hashes(attributes: bool, tuned: bool) -> frozenset[str]:
    """The content hashes of the examples a recipe reads, built once per kind of recipe: three of the committed
    models read the attribute questions, and building the examples is most of this module's time."""
    from jevserve.bench import TASKS, BenchData
    from jevserve.bench.sources import SourceMissingError
    from jevserve.train.examples import content_hash
    from jevserve.train.run import collect_examples

    try:
        data = BenchData()
        if tuned:
            return _example_hashes(attributes, False) | {content_hash(state) for state in _tuned_states()}
        examples = collect_examples(data, list(TASKS.values()), attributes=attributes, log=lambda message: None)
    except SourceMissingError as exc:
        pytest.skip(f"needs the bench data ({exc})")
    if len(examples) < 20_000:
        pytest.skip("some bench data is missing: run `jevserve data fetch`")
    return frozenset(content_hash(ex.state) for ex in examples)


@pytest.mark.slow
@pytest.mark.parametrize("weights", COMMITTED, ids=lambda p: p.stem)
def test_manifest_hashes_are_exactly_the_examples_training_reads(weights):
    # the reading model also reads the attribute questions (train/attributes.py) when its recipe says so; the tuned
    # reader (its config nests the reader's) also its everyday and rule-made examples (train/tuned_data.py)
    config = json.loads(weights.with_suffix(".json").read_text())["config"]
    attributes = bool(config.get("reader", config).get("attribute_questions", False))
    hashes = _example_hashes(attributes, "reader" in config)
    trained_on = read_state_hashes(weights.with_suffix(".states.gz"))
    recut = RECUT_SINCE_TRAINED.get(weights.stem, frozenset())
    gone = GONE_SINCE_TRAINED.get(weights.stem, frozenset())
    assert recut.isdisjoint(trained_on), f"retrained on {sorted(recut & trained_on)}: empty recut_since_trained.json"
    assert gone <= trained_on and gone.isdisjoint(hashes), "retrained: empty recut_since_trained.json"
    assert hashes | gone == trained_on | recut


@pytest.mark.skipif(not TUNED_WEIGHTS.exists(), reason="no committed tuned reader")
def test_the_tuned_reader_ships_its_layers_small_with_a_manifest_naming_them():
    manifest = json.loads(TUNED_WEIGHTS.with_suffix(".json").read_text())
    layers = layers_file(TUNED_WEIGHTS)
    assert manifest["layers_file"] == layers.name and manifest["layers_bytes"] == layers.stat().st_size
    assert layers.stat().st_size < 12 * 1024 * 1024 and TUNED_WEIGHTS.stat().st_size < 8 * 1024 * 1024
    assert manifest["config"]["reader"]["seed"] == 0 and manifest["leave_out"] is None
    assert any(f.startswith("everyday:") for f in manifest["families"]), "trained without everyday negatives"
    # the guard's lexical head goes with it, fitted on the same examples (whose state hashes are the ones above)
    lexical = lexical_file(TUNED_WEIGHTS)
    assert manifest["lexical_heads_file"] == lexical.name and manifest["lexical_heads_bytes"] == lexical.stat().st_size
    assert lexical.stat().st_size < 2 * 1024 * 1024


@pytest.mark.slow
def test_no_training_text_is_near_the_guard_requests_written_blind():
    # benchmarks/decide/guard_blind.json measures the guard on attacks nobody trained on; a recipe that read them (or
    # near copies) would make its figures in-sample
    from jevserve.bench.neardup import ReferenceIndex
    from jevserve.serving.decision_inputs import decision_inputs
    from jevserve.train.examples import content_hash

    records = json.loads((ROOT / "benchmarks" / "decide" / "guard_blind.json").read_text(encoding="utf-8"))

    def texts(label: str) -> list[str]:
        return sorted({t for r in records if r["label"] == label
                       for t in decision_inputs({"messages": r["messages"]}).guard_texts if t.strip()})

    attacks, ordinary = texts("attack"), texts("benign")
    assert len(records) == 300 and len(attacks) > 300 and len(ordinary) > 300
    hashes = {content_hash(t) for t in attacks + ordinary}
    for weights in COMMITTED:
        trained_on = read_state_hashes(weights.with_suffix(".states.gz"))
        assert not hashes & trained_on, f"{weights.stem} was trained on {len(hashes & trained_on)} blind texts"
    if TUNED_WEIGHTS.exists():
        index = ReferenceIndex(sorted(set(_tuned_states())))
        near = [t for t, bad in zip(attacks, index.overlaps(attacks), strict=True) if bad]
        assert not near, f"{len(near)} blind attack texts are near a text the tuned recipe reads, e.g. {near[:2]}"
        # ordinary requests may share a common sentence with everyday turns (training reads those as negatives);
        # the one that does is named in docs/training.md, and any other fails here
        near = [t for t, bad in zip(ordinary, index.overlaps(ordinary), strict=True) if bad]
        assert near == ["Can you give me feedback on my thesis statement?"], near
