"""Load a Hugging Face causal LM for the `causal` backend, offline unless the network is allowed, and parse its spec."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}
# Config fields that bound the positions a model can read, across model families.
WINDOW_FIELDS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


class ModelFilesNotFoundError(FileNotFoundError):
    """The model or tokenizer files are not on this machine, and the network was not allowed."""


@dataclass(frozen=True, slots=True)
class LoadedModel:
    """A causal LM in eval mode on its device, with its tokenizer and what its model card says."""

    model: Any  # a transformers PreTrainedModel with a causal-LM head
    tokenizer: Any  # its PreTrainedTokenizer(Fast)
    device: torch.device
    dtype: torch.dtype
    name: str  # a local directory's name, or the hub id
    description: str
    release_date: str  # YYYY-MM-DD the model's config file was written on this machine


def parse_dtype(dtype: str) -> torch.dtype:
    """A dtype name as torch's dtype."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not supported; expected one of: {', '.join(DTYPES)}")
    return DTYPES[dtype]


def parse_device(device: str) -> torch.device:
    """A device string as a torch device that exists here."""
    try:
        parsed = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"device={device!r} is not a torch device; expected e.g. cpu, cuda, cuda:1 or mps") from exc
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but this torch build sees no CUDA device; use device=cpu")
    return parsed


def load_model(
    model: str, *, device: str, dtype: str, allow_network: bool, attn_implementation: str | None
) -> LoadedModel:
    """Load tokenizer and model from a local directory or the local hub cache (the hub itself only if allowed)."""
    torch_dtype, torch_device = parse_dtype(dtype), parse_device(device)
    if model.startswith(("/", "./", "../", "~")) and not Path(model).expanduser().is_dir():
        raise ModelFilesNotFoundError(
            f"causal model {model!r}: no such directory; give a directory written by save_pretrained (or, where "
            "downloads are allowed, a hub id with --allow-network or ?network=1)"
        )
    model = str(Path(model).expanduser()) if model.startswith("~") else model
    if Path(model).is_dir() and not (Path(model) / "config.json").is_file():
        raise ModelFilesNotFoundError(
            f"causal model {model!r}: the directory has no config.json, so it is not a model written by "
            "save_pretrained (which writes config.json, the weights and the tokenizer's files)"
        )
    from transformers import AutoModelForCausalLM, AutoTokenizer  # heavy; only when a causal backend is built

    try:
        tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=not allow_network)
        lm = AutoModelForCausalLM.from_pretrained(
            model, local_files_only=not allow_network, dtype=torch_dtype, attn_implementation=attn_implementation
        )
    except OSError as exc:
        if Path(model).is_dir():  # a local folder is what it is: the network would not complete it
            raise ModelFilesNotFoundError(
                f"causal model {model!r}: the directory lacks files save_pretrained writes (config.json, the weights, "
                f"the tokenizer's files). Cause: {exc}"
            ) from exc
        where = "locally or on the hub" if allow_network else "locally, and the network is not allowed"
        raise ModelFilesNotFoundError(
            f"causal model {model!r}: its files (config.json, weights, tokenizer) were not found {where}. Give a "
            "local directory written by save_pretrained, or allow downloads (`jevserve serve --allow-network`, the "
            f"spec causal:{model}?network=1, or allow_network=True in Python). Cause: {exc}"
        ) from exc
    except (ValueError, KeyError) as exc:  # files there, but not a tokenizer and causal LM transformers can build
        raise ModelFilesNotFoundError(
            f"causal model {model!r}: its files are there but do not load as a tokenizer and a causal LM (a "
            f"config.json without a known model_type, or no tokenizer files). Cause: {exc}"
        ) from exc
    if not tokenizer("Is this a question?", add_special_tokens=False)["input_ids"]:
        # transformers 5 builds an empty tokenizer from config.json alone when a folder has no tokenizer files; it
        # reads every text as no tokens, which broke later as a traceback far from the cause
        where = (f"the directory has no tokenizer files (tokenizer.json, or vocab and merges files) beside the model: "
                 f"write them with tokenizer.save_pretrained({model!r})" if Path(model).is_dir()
                 else "its tokenizer reads text as no tokens")
        raise ModelFilesNotFoundError(f"causal model {model!r}: {where}")
    rows = lm.get_input_embeddings().num_embeddings
    if len(tokenizer) > rows:
        # a token id past the embedding's rows ended the first request in an IndexError traceback; a model may
        # have more rows than tokens (padding), never fewer
        raise ModelFilesNotFoundError(
            f"causal model {model!r}: its tokenizer has {len(tokenizer):,} tokens but the model embeds {rows:,}: "
            "the tokenizer's files are another model's; save the model's own tokenizer beside it"
        )
    # Older transformers ignore the dtype keyword; moving explicitly makes the dtype hold on every version.
    lm = lm.to(device=torch_device, dtype=torch_dtype).eval()
    num_params = sum(p.numel() for p in lm.parameters())
    local = Path(model).is_dir()
    return LoadedModel(
        model=lm,
        tokenizer=tokenizer,
        device=torch_device,
        dtype=torch_dtype,
        name=Path(model).resolve().name if local else model,
        description=f"{lm.config.model_type} causal LM, {num_params / 1e6:.3g}M parameters, {dtype} on {torch_device}",
        release_date=_config_date(model, local),
    )


def _config_date(model: str, local: bool) -> str:
    """The date the model's config.json was written here: the closest thing to a release date a checkpoint has."""
    path: Path | None = Path(model) / "config.json" if local else None
    if path is None:
        try:
            from transformers.utils import cached_file

            found = cached_file(model, "config.json", local_files_only=True)
            path = Path(found) if found else None
        except (OSError, ImportError):
            path = None
    if path is None or not path.exists():
        return dt.date.today().isoformat()
    return dt.datetime.fromtimestamp(path.stat().st_mtime, tz=dt.UTC).date().isoformat()


def context_window(config: Any, override: int | None = None) -> int:
    """Positions the model reads: its position limit, and its sliding window when one is on; `override` may lower it."""
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    limits = [v for key in WINDOW_FIELDS if isinstance(v := getattr(text_config, key, None), int) and v > 0]
    sliding = getattr(text_config, "sliding_window", None)
    # The tree mask replaces the model's own mask, so a sliding window would not be applied: stay inside it.
    if getattr(text_config, "use_sliding_window", True) and isinstance(sliding, int) and sliding > 0:
        limits.append(sliding)
    native = min(limits) if limits else None
    if override is None:
        if native is None:
            raise ValueError(
                f"the model config has none of {', '.join(WINDOW_FIELDS)}; pass max_context_tokens "
                "(spec option max_context=N) to say how many positions it reads"
            )
        return native
    if override < 1 or (native is not None and override > native):
        raise ValueError(f"max_context_tokens={override} must be between 1 and the model's window ({native})")
    return override


def _parse_bool(key: str, value: str) -> bool:
    lowered = value.lower()
    if lowered not in {"1", "0", "true", "false", "yes", "no"}:
        raise ValueError(f"causal spec option {key}={value!r} is not a boolean; expected 1/0, true/false or yes/no")
    return lowered in {"1", "true", "yes"}


def _parse_int(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"causal spec option {key}={value!r} is not an integer") from None


# Spec option → (constructor keyword, parser).
SPEC_OPTIONS = {
    "attn": ("attn_implementation", lambda k, v: v),
    "device": ("device", lambda k, v: v),
    "dtype": ("dtype", lambda k, v: v),
    "max_context": ("max_context_tokens", _parse_int),
    "max_pass_readout": ("max_pass_readout", _parse_int),
    "max_pass_tokens": ("max_pass_tokens", _parse_int),
    "name": ("name", lambda k, v: v),
    "network": ("allow_network", _parse_bool),
}


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """Split `causal:PATH_OR_HUB_ID[?key=value&...]` into the model and `CausalLMBackend` keyword arguments."""
    body = spec.removeprefix("causal:")
    model, _, query = body.partition("?")
    if not model:
        raise ValueError(f"backend spec {spec!r} names no model; expected causal:PATH_OR_HUB_ID[?key=value&...]")
    options: dict[str, Any] = {}
    for pair in filter(None, query.split("&")):
        key, sep, value = pair.partition("=")
        if key not in SPEC_OPTIONS or not sep:
            raise ValueError(
                f"causal spec option {pair!r} in {spec!r} is not key=value with a known key; "
                f"expected one of: {', '.join(SPEC_OPTIONS)}"
            )
        keyword, parse = SPEC_OPTIONS[key]
        options[keyword] = parse(key, value)
    return model, options
