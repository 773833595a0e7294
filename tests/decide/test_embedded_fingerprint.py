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


def test_the_built_graph_is_named_by_every_release_that_builds_it(monkeypatch):
    # a graph built under an older torch, transformers or onnx was read under the same name after an upgrade (only
    # onnxruntime's release named it), so a long-lived cache hid what a fresh install computes
    import importlib.metadata

    from jevserve.decide import onnx_build

    real = importlib.metadata.version
    base = onnx_build.graph_key()
    assert base == onnx_build.graph_key()
    for package in ("torch", "transformers", "onnx", "onnxruntime"):
        monkeypatch.setattr(importlib.metadata, "version", lambda name, p=package: "0.0.1" if name == p else real(name))
        assert onnx_build.graph_key() != base, package
    # torch's local label (+cpu, +cu126) names the same build of the graph
    monkeypatch.setattr(importlib.metadata, "version", lambda name: real(name).split("+")[0] + "+cu999"
                        if name == "torch" else real(name))
    assert onnx_build.graph_key() == base
