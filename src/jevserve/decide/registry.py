"""Model specs on the command line → decision backends.

embedded                 the embedded models, the default first (all-MiniLM-L6-v2 + trained readouts)
encoder[:PRECISION]      the trained readout over the pooled vector alone (minilm-pooled-head, was jev-minilm-1);
                         PRECISION is int8 (default) or fp32
encoder:PATH.npz         a readout you trained (`jevserve train`), int8, served as minilm-pooled-head-<digest>
encoder-zs[:PRECISION]   the zero-shot similarity readout (minilm-zero-shot, was jev-minilm-zs)
reader[:PRECISION]       the reading model alone (minilm-reader, was jev-minilm-2)
reader:PATH.npz          a reading model you trained (`jevserve train --reader [--lexical]`), int8, served as
                         minilm-reader-<digest>
reader-lexical[:PREC]    the reading model that also reads the state's hashed words (minilm-reader-words, was
                         jev-minilm-3)
tuned[:PRECISION]        the reading model over an encoder whose top layers were fine-tuned with it
                         (minilm-tuned-reader)
tuned:PATH.npz           a tuned reader you trained (`jevserve train --tuned --out PATH.npz`), int8, served as
                         minilm-tuned-reader-<digest of its files>
causal:PATH_OR_ID        any Hugging Face causal LM (a local path; a hub id only with --allow-network)
remote:URL               another System One endpoint (http or https); its key comes from --remote-key-env
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from jevserve.decide.base import DecisionBackend

SPEC_HELP = __doc__.split("\n\n", 1)[1]
def spec_of_name() -> dict[str, str]:
    """The spec that serves each embedded model's name (as /v1/models and the serving line give it) and earlier
    alias: a name passed as a spec was refused with the whole list above and no word of which line it is. Built from
    the names the backends are served under (imported here, on the error path, not at start)."""
    from jevserve.decide.encoder import EARLIER_NAMES, LEXICAL_READER_NAME, READER_NAME, TRAINED_NAME, ZERO_SHOT_NAME
    from jevserve.decide.tuned import TUNED_NAME

    specs = {TRAINED_NAME: "encoder", ZERO_SHOT_NAME: "encoder-zs", READER_NAME: "reader",
             LEXICAL_READER_NAME: "reader-lexical", TUNED_NAME: "tuned"}
    aliases = {EARLIER_NAMES[name]: spec for name, spec in specs.items() if name in EARLIER_NAMES}
    return {"jev-latest": "embedded", **specs, **aliases}


@dataclass(frozen=True)
class BackendOptions:
    """Options that only some backends read."""

    remote_key_env: str | None = None  # env var holding the remote endpoint's key
    remote_model: str = "jev-latest"  # model name to ask the remote endpoint for
    allow_network: bool = False  # let the causal backend fetch a hub id
    device: str = "cpu"  # causal backend device
    remote_timeout_s: float | None = None  # remote: one deadline per request (None: the backend's default, 8 s)
    remote_max_in_flight: int | None = None  # remote: upstream requests at once (None: the default, 32)


class UnknownSpecError(ValueError):
    """A model spec that names no known backend."""


def load_backend(spec: str, options: BackendOptions | None = None) -> DecisionBackend:
    """The one backend a spec answers `jev-latest` with; for `embedded`, only the default is loaded (the gateway
    asks nothing else, and the reading model's encoder session would cost its start-up and memory for nothing)."""
    if spec == "embedded":
        from jevserve.decide.embedded import default_backend

        return default_backend()
    return load_backends(spec, options)[0]


def _check_precision_or_file(kind: str, arg: str, spec: str) -> None:
    """After a kind of embedded model comes a precision or (most kinds) a weights file: `reader:./myreader` was told
    "unknown precision './myreader'" where its `.npz` was missing."""
    from jevserve.decide.onnx_build import PRECISIONS

    if kind not in ("encoder", "reader", "reader-lexical", "tuned", "encoder-zs"):
        return
    takes_file = kind != "encoder-zs"
    if not arg and spec.endswith(":"):  # `reader:` with its file left out (an unset variable) ran the default
        file = " or a weights file (.npz)" if takes_file else ""
        raise UnknownSpecError(f"model spec {spec!r}: nothing after {kind}: (write {kind} alone for the default "
                               f"precision, or a precision ({', '.join(PRECISIONS)}){file} after the colon)")
    if not arg or arg in PRECISIONS:
        return
    if takes_file and arg.endswith(".npz"):
        return
    what = f"a precision ({', '.join(PRECISIONS)})" + (" or a weights file ending in .npz" if takes_file else "")
    raise UnknownSpecError(f"model spec {spec!r}: after {kind}: comes {what}; got {arg!r}")


def load_backends(spec: str, options: BackendOptions | None = None) -> list[DecisionBackend]:
    """Build the backends a spec names; the first answers `jev-latest` (some specs serve several readouts)."""
    options = options or BackendOptions()
    kind, _, arg = spec.partition(":")
    if kind == "embedded":
        if arg:  # `embedded:nosuch` ran the default model without a word
            raise UnknownSpecError(f"unknown model spec {spec!r}: embedded takes nothing after it (the embedded "
                                   "models, the default first); name one model as reader, tuned, encoder, ...")
        from jevserve.decide.embedded import embedded_backends

        return embedded_backends()
    _check_precision_or_file(kind, arg, spec)
    if kind in ("encoder", "reader", "reader-lexical") and arg.endswith(".npz"):
        from jevserve.decide.encoder import trained_file_backend

        try:
            return [trained_file_backend("encoder" if kind == "encoder" else "reader", Path(arg))]
        except FileNotFoundError as exc:
            raise UnknownSpecError(str(exc)) from exc
    if kind == "encoder":
        from jevserve.decide.encoder import trained_backend

        try:
            return [trained_backend(arg or "int8")]
        except FileNotFoundError as exc:
            raise UnknownSpecError(str(exc)) from exc
    if kind in ("reader", "reader-lexical"):
        from jevserve.decide.encoder import lexical_reader_backend, reader_backend

        build = lexical_reader_backend if kind == "reader-lexical" else reader_backend
        try:
            return [build(arg or "int8")]
        except FileNotFoundError as exc:
            raise UnknownSpecError(str(exc)) from exc
    if kind == "tuned":
        from jevserve.decide.tuned import trained_tuned_backend, tuned_backend

        try:
            if arg.endswith(".npz"):
                return [trained_tuned_backend(Path(arg))]
            return [tuned_backend(arg or "int8")]
        except FileNotFoundError as exc:
            raise UnknownSpecError(str(exc)) from exc
    if kind == "encoder-zs":
        from jevserve.decide.encoder import zero_shot_backend

        return [zero_shot_backend(arg or "int8")]
    if kind == "causal":
        if not arg:
            raise UnknownSpecError("causal needs a model: causal:PATH_OR_HUB_ID")
        from jevserve.decide.causal import CausalLMBackend
        from jevserve.decide.causal_load import parse_spec

        model, causal_options = parse_spec(arg)
        causal_options.setdefault("allow_network", options.allow_network)
        causal_options.setdefault("device", options.device)
        try:
            return [CausalLMBackend(model, **causal_options)]
        except FileNotFoundError as exc:
            raise UnknownSpecError(str(exc)) from exc
    if kind in ("remote", "http", "https"):
        url = arg if kind == "remote" else spec
        if not url:
            raise UnknownSpecError("remote needs a URL: remote:http://host:port")
        from jevserve.decide.remote import RemoteBackend

        key = os.environ.get(options.remote_key_env) if options.remote_key_env else None
        if options.remote_key_env and key is None:
            raise UnknownSpecError(f"environment variable {options.remote_key_env} (--remote-key-env) is not set")
        tuning = {"timeout_s": options.remote_timeout_s, "max_in_flight": options.remote_max_in_flight}
        return [
            RemoteBackend(
                url, api_key=key, model=options.remote_model, **{k: v for k, v in tuning.items() if v is not None}
            )
        ]
    served = spec_of_name().get(spec)
    if served is not None:
        raise UnknownSpecError(f"{spec!r} is the name of a model the spec {served!r} serves: pass {served!r} (the "
                               f"specs are:\n{SPEC_HELP})")
    raise UnknownSpecError(f"unknown model spec {spec!r}; expected one of:\n{SPEC_HELP}")
