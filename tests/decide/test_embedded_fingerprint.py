"""The embedded models' fingerprint changes with anything their answers depend on."""

from jevserve.decide import embedded
from jevserve.decide.onnx_build import graph_key


def test_the_fingerprint_follows_the_encoder_graph_and_the_readout_files(tmp_path, monkeypatch):
    base = embedded.embedded_fingerprint()
    assert base == embedded.embedded_fingerprint()  # stable
    head = tmp_path / "head.npz"
    head.write_bytes(b"other weights")
    monkeypatch.setattr(embedded, "TRAINED_HEAD", head)
    changed_head = embedded.embedded_fingerprint()
    assert changed_head != base
    monkeypatch.setattr(embedded, "graph_key", lambda: graph_key() + "-another-recipe")
    assert embedded.embedded_fingerprint() not in (base, changed_head)
    assert embedded.encoder_fingerprint() != embedded.encoder_fingerprint("fp32")


def test_load_backend_embedded_gives_the_embedded_default_alone():
    from jevserve.decide.embedded import default_backend, embedded_backends
    from jevserve.decide.registry import load_backend

    alone = load_backend("embedded")
    assert alone.card == default_backend().card == embedded_backends()[0].card
