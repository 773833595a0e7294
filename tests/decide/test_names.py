"""The embedded models' names say what each is, and their earlier names keep answering and filing results."""

from __future__ import annotations

from jevserve.decide.encoder import (
    EARLIER_NAMES,
    LEXICAL_READER_NAME,
    READER_NAME,
    TRAINED_NAME,
    ZERO_SHOT_NAME,
    aliases_of,
    model_card,
    row_name,
    served_name,
)


def test_each_shipped_model_keeps_its_earlier_name_as_an_alias_and_results_row():
    earlier = {ZERO_SHOT_NAME: "jev-minilm-zs", TRAINED_NAME: "jev-minilm-1", READER_NAME: "jev-minilm-2",
               LEXICAL_READER_NAME: "jev-minilm-3"}
    assert dict(EARLIER_NAMES) == earlier
    for name, old in earlier.items():
        assert not name.startswith("jev-minilm")
        assert aliases_of(name, "int8") == (old,) and aliases_of(name, "fp32") == (f"{old}-fp32",)
        assert row_name(name) == old


def test_a_model_without_an_earlier_name_files_its_results_under_its_own():
    name = "minilm-something-new"
    assert aliases_of(name, "int8") == () and row_name(name) == name


def test_the_card_carries_the_precision_in_name_and_aliases():
    card = model_card(READER_NAME, "fp32", "a reader", "2026-12-01")
    assert card.name == served_name(READER_NAME, "fp32") == f"{READER_NAME}-fp32"
    assert card.aliases == ("jev-minilm-2-fp32",) and card.description.startswith("all-MiniLM-L6-v2 (fp32")


def test_a_readout_you_trained_is_served_from_its_file_under_a_name_of_its_own(tmp_path):
    import shutil

    import numpy as np
    import pytest

    from jevserve.decide.base import DecisionItem
    from jevserve.decide.encoder import READER_WEIGHTS, TRAINED_HEAD, trained_backend
    from jevserve.decide.registry import UnknownSpecError, load_backends
    from jevserve.protocol import SystemOneRequest, to_decision

    head, reader = tmp_path / "head.npz", tmp_path / "reader.npz"
    shutil.copy(TRAINED_HEAD, head)  # a file `jevserve train` wrote: the shipped one will do
    shutil.copy(READER_WEIGHTS, reader)
    (mine,) = load_backends(f"encoder:{head}")
    assert mine.card.name.startswith("minilm-pooled-head-") and mine.card.name != "minilm-pooled-head"
    assert mine.card.aliases == ()  # never answers under the shipped model's names
    question = SystemOneRequest.model_validate(
        {"state": "x", "questions": {"q": {"type": "noul", "instructions": "Is it about money?"}}}).questions["q"]
    item = DecisionItem("I was charged twice, refund me.", to_decision(question))
    np.testing.assert_array_equal(mine.decide([item])[0], trained_backend().decide([item])[0])  # the same weights
    (read,) = load_backends(f"reader:{reader}")
    assert read.card.name.startswith("minilm-reader-")
    with pytest.raises(ValueError, match=f"serve it as reader:{reader}"):
        load_backends(f"encoder:{reader}")
    with pytest.raises(ValueError, match=f"serve it as encoder:{head}"):
        load_backends(f"reader:{head}")
    with pytest.raises(UnknownSpecError, match="no weights file"):
        load_backends(f"encoder:{tmp_path / 'none.npz'}")
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(ValueError, match="not a weights file"):
        load_backends(f"encoder:{tmp_path / 'junk.npz'}")


def test_embedded_with_anything_after_it_is_refused_not_run_as_the_default():
    import pytest

    from jevserve.decide.registry import UnknownSpecError, load_backends

    with pytest.raises(UnknownSpecError, match="embedded takes nothing after it"):
        load_backends("embedded:nosuch")


def test_a_weights_path_without_npz_is_told_what_comes_after_the_kind_not_about_precisions():
    # `reader:./myreader` was "unknown precision './myreader'; expected one of: fp32, int8"
    import pytest

    from jevserve.decide.registry import UnknownSpecError, load_backends

    for spec in ("reader:./myreader", "encoder:/etc/passwd", "tuned:weights.bin", "reader-lexical:x"):
        with pytest.raises(UnknownSpecError, match=r"or a weights file ending in \.npz"):
            load_backends(spec)
    with pytest.raises(UnknownSpecError, match=r"a precision \(fp32, int8\); got 'int4'"):
        load_backends("encoder-zs:int4")


def test_a_kind_with_nothing_after_its_colon_is_refused_not_run_at_the_default_precision():
    # `reader:$WEIGHTS` with the variable unset started the packaged reader without a word
    import pytest

    from jevserve.decide.registry import UnknownSpecError, load_backends

    for kind in ("reader", "encoder", "reader-lexical", "tuned", "encoder-zs"):
        with pytest.raises(UnknownSpecError, match=rf"nothing after {kind}: \(write {kind} alone for the default"):
            load_backends(f"{kind}:")


def test_a_served_models_name_passed_as_a_spec_is_told_the_spec_that_serves_it():
    # an outside tester ran `jevserve serve minilm-pooled-head` (the name /v1/models gives) and got the whole spec
    # list with no word of which line it was
    import pytest

    from jevserve.decide.registry import UnknownSpecError, load_backends, spec_of_name
    from tests.helpers import embedded_backends

    served = embedded_backends()
    specs = spec_of_name()
    for backend in served:  # every embedded model's name and alias maps to a spec serving it under that name
        for name in (backend.card.name, *backend.card.aliases):
            spec = specs[name]
            assert spec == "embedded" or backend.card.name in [b.card.name for b in load_backends(spec)]
    names = {name for backend in served for name in (backend.card.name, *backend.card.aliases)}
    assert set(specs) == names | {"jev-latest"}
    with pytest.raises(UnknownSpecError, match="'minilm-pooled-head' is the name of a model the spec 'encoder' "
                                               "serves: pass 'encoder'"):
        load_backends("minilm-pooled-head")
