"""Engine profiles: step-time coefficients, GPU memory, GPU peaks and model shape, read from TOML data files.

Shipped profiles live in `jevserve/sim/profiles/*.toml`, each citing its sources. A profile is named either by
its shipped name (`qwen3-8b-h200`) or by a path to a `.toml` file. A profile that declares its GPU's peaks
(`[gpu]`) and its model's matmul parameters and query heads gets a roofline floor under its step times
(`jevserve.sim.roofline`); every shipped profile does, and `jevserve sim profiles --check` refuses one that
does not, or whose step times fall below the floor.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from jevserve.sim.errors import ProfileError
from jevserve.sim.roofline import Roofline
from jevserve.sim.step_time import COEFFICIENT_NAMES, StepTimeModel

GIB = 1 << 30
_MEMORY_FIELDS = ("gpu_memory_gib", "gpu_memory_utilization", "weights_gib", "non_kv_reserve_gib")
_SHAPE_FIELDS = ("num_layers", "num_kv_heads", "head_dim", "kv_dtype_bytes")
_ROOFLINE_SHAPE_FIELDS = ("num_query_heads", "num_matmul_parameters")
_GPU_FIELDS = ("peak_dense_bf16_tflops", "memory_bandwidth_tbps")
# The largest value each field may take: far past any GPU or model (a 10 s step term, a million GiB, ten exaFLOP/s),
# and small enough that what the simulator computes from them stays a finite float (1e300 GiB overflowed the KV
# block count, and a 1e308 us step term overflowed the step time into an AssertionError)
_MAXIMUM = {"step_time_us": 1e7, "memory": 1e6, "model_shape": 1e6, "num_matmul_parameters": 1e15, "gpu": 1e7}


@dataclass(frozen=True, slots=True)
class Profile:
    """One model on one GPU: how long steps take and how much KV cache fits."""

    name: str
    gpu: str
    model: str
    sources: tuple[str, ...]  # where each number came from
    step_time: StepTimeModel
    gpu_memory_gib: float
    gpu_memory_utilization: float  # vLLM's --gpu-memory-utilization
    weights_gib: float
    non_kv_reserve_gib: float  # activations, CUDA graphs: memory that is neither weights nor KV
    num_layers: int
    num_kv_heads: int
    head_dim: int
    kv_dtype_bytes: int
    # GPU peaks (datasheet) and the shape the roofline needs; None when the profile does not declare them.
    peak_dense_bf16_tflops: float | None = None
    memory_bandwidth_tbps: float | None = None  # TB/s (1e12 bytes/s)
    num_query_heads: int | None = None
    num_matmul_parameters: float | None = None  # parameters every computed token multiplies (not the embedding)

    @property
    def roofline(self) -> Roofline | None:
        """The step floor from the declared peaks and shape, or None when the profile lacks them."""
        if None in (self.peak_dense_bf16_tflops, self.memory_bandwidth_tbps, self.num_query_heads,
                    self.num_matmul_parameters):
            return None
        return Roofline(
            peak_flops=self.peak_dense_bf16_tflops * 1e12, memory_bandwidth=self.memory_bandwidth_tbps * 1e12,
            weight_bytes=self.weights_gib * GIB, flops_per_token=2.0 * self.num_matmul_parameters,
            kv_bytes_per_token=self.kv_bytes_per_token,
            attention_flops_per_pair=4.0 * self.num_query_heads * self.head_dim * self.num_layers,
        )

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes of K and V one token occupies across all layers."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.kv_dtype_bytes

    def num_kv_blocks(self, block_size: int = 16) -> int:
        """KV blocks that fit: (memory x utilization - weights - reserve) / (bytes per token x block size)."""
        free = (self.gpu_memory_gib * self.gpu_memory_utilization - self.weights_gib - self.non_kv_reserve_gib) * GIB
        return max(0, math.floor(free / (self.kv_bytes_per_token * block_size)))


def shipped_profile_names() -> list[str]:
    """Names of the profiles that ship with jevserve."""
    root = resources.files("jevserve.sim").joinpath("profiles")
    return sorted(p.name.removesuffix(".toml") for p in root.iterdir() if p.name.endswith(".toml"))


def load_profile(name_or_path: str | Path) -> Profile:
    """Load a shipped profile by name, or a profile file by path."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise ProfileError(f"profile file {str(path)!r} {'is a folder' if path.is_dir() else 'does not exist'}; "
                               "give a .toml path or one of: "
                               f"{', '.join(shipped_profile_names())}")
        text, origin = path.read_text(), str(path)
    else:
        resource = resources.files("jevserve.sim").joinpath("profiles", f"{name_or_path}.toml")
        if not resource.is_file():
            raise ProfileError(
                f"unknown profile {str(name_or_path)!r}; expected one of: {', '.join(shipped_profile_names())} "
                "or a path to a .toml file"
            )
        text, origin = resource.read_text(), f"{name_or_path}.toml"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"profile {origin}: not valid TOML ({exc})") from None
    return parse_profile(data, origin)


def impossible_fit_warnings(profile: Profile, command: str) -> list[str]:
    """Warnings for a profile whose fitted step times are faster than its roofline floor, which `jevserve sim
    profiles --check` refuses: the floor then sets its steps, so its answers look sound though its fit cannot be (a
    fit made on another GPU, or coefficients in the wrong unit). The command prints them; nothing here does."""
    from jevserve.sim.roofline import check_fit

    if profile.roofline is None:
        return []
    return [f"warning: {command}: profile {profile.name}: {problem} (`jevserve sim profiles --check` refuses it; "
            "its steps are the roofline floor's, not its fit's)"
            for problem in check_fit(profile.step_time.fitted_step_s, profile.roofline).problems]


def _number(data: dict, section: str, key: str, origin: str, *, minimum: float = 0.0, maximum: float = math.inf,
            integer: bool = False) -> float:
    table = data.get(section)
    if not isinstance(table, dict) or key not in table:
        raise ProfileError(f"profile {origin}: missing field [{section}] {key}; add it (see qwen3-8b-h200.toml)")
    value = table[key]
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    # TOML reads `inf` and `nan` as floats: an infinite step time or memory is no profile (it failed deep in the
    # simulator with a traceback)
    if isinstance(value, bool) or not ok_type or not math.isfinite(value) or not minimum <= value <= maximum:
        kind = "integer" if integer else "number"
        bounds = f"of at least {minimum:g}" if maximum == math.inf else f"in [{minimum:g}, {maximum:g}]"
        raise ProfileError(f"profile {origin}: [{section}] {key} = {value!r}; expected a finite {kind} {bounds}")
    return value


def parse_profile(data: dict, origin: str = "<dict>") -> Profile:
    """Build and check a Profile from parsed TOML."""
    meta = data.get("profile")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        raise ProfileError(f"profile {origin}: missing field [profile] name; add a short name string")
    sources = meta.get("sources", [])
    if not isinstance(sources, list) or not sources or not all(isinstance(s, str) for s in sources):
        raise ProfileError(f"profile {origin}: [profile] sources = {sources!r}; expected a non-empty list of "
                           "strings saying where each number came from")
    coefficients = [_number(data, "step_time_us", k, origin, maximum=_MAXIMUM["step_time_us"])
                    for k in COEFFICIENT_NAMES]
    if coefficients[0] <= 0:
        raise ProfileError(f"profile {origin}: [step_time_us] constant = {coefficients[0]!r}; expected a number > 0 "
                           "(a step always costs something)")
    memory = {k: _number(data, "memory", k, origin, maximum=_MAXIMUM["memory"]) for k in _MEMORY_FIELDS}
    if not 0 < memory["gpu_memory_utilization"] <= 1:
        raise ProfileError(f"profile {origin}: [memory] gpu_memory_utilization = "
                           f"{memory['gpu_memory_utilization']!r}; expected a fraction in (0, 1]")
    shape = {k: int(_number(data, "model_shape", k, origin, minimum=1, maximum=_MAXIMUM["model_shape"], integer=True))
             for k in _SHAPE_FIELDS}
    peaks: dict[str, float | int] = {}
    if "gpu" in data:
        peaks = {k: _number(data, "gpu", k, origin, minimum=1e-9, maximum=_MAXIMUM["gpu"]) for k in _GPU_FIELDS}
        peaks["num_query_heads"] = int(_number(data, "model_shape", "num_query_heads", origin, minimum=1,
                                               maximum=_MAXIMUM["model_shape"], integer=True))
        peaks["num_matmul_parameters"] = _number(data, "model_shape", "num_matmul_parameters", origin, minimum=1,
                                                 maximum=_MAXIMUM["num_matmul_parameters"])
    profile = Profile(
        name=meta["name"], gpu=str(meta.get("gpu", "")), model=str(meta.get("model", "")), sources=tuple(sources),
        step_time=StepTimeModel(*coefficients), **memory, **shape, **peaks,
    )
    profile = dataclasses.replace(profile, step_time=StepTimeModel(*coefficients, roofline=profile.roofline))
    if profile.num_kv_blocks() < 1:
        raise ProfileError(
            f"profile {origin}: no KV cache fits: {memory['gpu_memory_gib']} GiB x "
            f"{memory['gpu_memory_utilization']} - weights {memory['weights_gib']} GiB - reserve "
            f"{memory['non_kv_reserve_gib']} GiB leaves nothing; raise gpu_memory_gib or utilization"
        )
    return profile


def profile_to_toml(profile: Profile) -> str:
    """The profile as TOML text that `load_profile` reads back."""

    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["[profile]", f"name = {q(profile.name)}", f"gpu = {q(profile.gpu)}", f"model = {q(profile.model)}",
             "sources = [", *(f"  {q(s)}," for s in profile.sources), "]", "", "[step_time_us]"]
    lines += [f"{k} = {float(v)!r}" for k, v in profile.step_time.as_dict().items()]
    lines += ["", "[memory]"] + [f"{k} = {float(getattr(profile, k))!r}" for k in _MEMORY_FIELDS]
    lines += ["", "[model_shape]"] + [f"{k} = {getattr(profile, k)}" for k in _SHAPE_FIELDS]
    if profile.roofline is not None:
        lines += [f"num_query_heads = {profile.num_query_heads}",
                  f"num_matmul_parameters = {float(profile.num_matmul_parameters)!r}"]
        lines += ["", "[gpu]"] + [f"{k} = {float(getattr(profile, k))!r}" for k in _GPU_FIELDS]
    return "\n".join(lines) + "\n"
