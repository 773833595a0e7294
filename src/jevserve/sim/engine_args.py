"""The engine and SLO options of every command line that runs simulated engines (`jevserve sim run`, `sim cluster`,
`sim queue-order`, `plan ...`, `engine`), written once from `EngineConfig`'s fields.

Each option defaults to None, which keeps the value of the configuration the command starts from (vLLM's defaults,
or a scenario's settings); `engine_config_from_args` applies only the options given. A new `EngineConfig` field
needs a line in `HELP` (a test checks every field has one), and then every command takes it.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING

from jevserve.argtypes import nonnegative_int, positive_float, positive_int

if TYPE_CHECKING:  # imported where used, so `import jevserve.sim.cli` stays free of numpy
    from jevserve.serving.engine_config import EngineConfig
    from jevserve.sim.metrics import Slo

# One line of help per EngineConfig field; None: the field is a simulator setting, not an engine option.
HELP: dict[str, str | None] = {
    "max_num_seqs": "running-batch cap (vLLM's max_num_seqs)",
    "max_num_batched_tokens": "per-step token budget (chunked prefill)",
    "block_size": "tokens per KV block",
    "kv_admission": "admit a waiting request when its whole prompt fits in free KV blocks ('prompt') or only the "
                    "step's chunk ('chunk', vLLM v1)",
    "head_of_line_blocking": "stop admitting at the first waiting request that does not fit (vLLM); "
                             "--no-head-of-line-blocking skips it so a smaller one behind can start",
    "num_kv_blocks": "KV capacity in blocks (default: from the profile's memory figures)",
    "fast_forward": None,
    "prefix_caching": "vLLM v1's automatic prefix caching: a preempted request keeps its full KV blocks cached "
                      "until evicted and recomputes only the rest (the router's TTFT estimate does not model it)",
    "long_prefill_token_threshold": "at most this many prompt tokens per request per step (0: off)",
}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_engine_arguments(parser: argparse.ArgumentParser, base: EngineConfig | None = None,
                         title: str = "engine (vLLM v1 scheduler settings)", *, show_defaults: bool = True) -> None:
    """Add one option per engine setting; the help shows `base`'s value (the default) for each, unless the
    command starts from settings of its own (`show_defaults=False`, and the title says where they come from)."""
    from jevserve.serving.engine_config import KV_ADMISSION_MODES, EngineConfig

    vllm = EngineConfig()
    base = base or vllm
    group = parser.add_argument_group(title)
    for field in dataclasses.fields(EngineConfig):
        text = HELP[field.name]
        if text is None:
            continue
        default = getattr(base, field.name)
        if show_defaults and default != getattr(vllm, field.name):
            # a command starting from other settings says so where users look: checking `plan` (vLLM's defaults)
            # with `sim cluster` (256 sequences) changed the engine without a word
            text = f"{text}, not vLLM's {getattr(vllm, field.name)} as in `sim run` and `plan`"
        shown = f"{text} (default: {default})" if default is not None and show_defaults else text
        if field.type in (bool, "bool"):
            group.add_argument(_flag(field.name), dest=field.name, action=argparse.BooleanOptionalAction,
                               default=None, help=shown)
        elif field.name == "kv_admission":
            group.add_argument(_flag(field.name), dest=field.name, choices=KV_ADMISSION_MODES, default=None,
                               help=shown)
        else:
            # checked here, so a bad value names its flag (the settings' own check names the field: max_num_seqs=0)
            kind = nonnegative_int if field.name == "long_prefill_token_threshold" else positive_int
            group.add_argument(_flag(field.name), dest=field.name, type=kind(_flag(field.name)), default=None,
                               metavar="N", help=shown)
    # The short form older commands took, kept as a synonym.
    group.add_argument("--no-hol-blocking", dest="head_of_line_blocking", action="store_false",
                       help=argparse.SUPPRESS)


def engine_config_from_args(args: argparse.Namespace, base: EngineConfig | None = None) -> EngineConfig:
    """`base` (vLLM's defaults when None) with the engine options given on the command line."""
    from jevserve.serving.engine_config import EngineConfig

    base = base or EngineConfig()
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(EngineConfig)
             if getattr(args, f.name, None) is not None}
    return dataclasses.replace(base, **given)


def add_profile_argument(parser: argparse.ArgumentParser, default: str | None = "qwen3-8b-h200") -> None:
    """`--profile`: the step-time and memory profile of the simulated replicas."""
    shown = f"(default: {default})" if default else "(default: the scenario's)"
    parser.add_argument("--profile", default=default,
                        help=f"shipped profile name (see `jevserve sim profiles`) or a .toml path {shown}")


def add_replica_arguments(parser: argparse.ArgumentParser, base: EngineConfig | None = None) -> None:
    """The profile, engine and SLO options of a command that simulates replicas from vLLM's defaults (or `base`)."""
    add_profile_argument(parser)
    add_engine_arguments(parser, base)
    add_slo_arguments(parser)


def add_slo_arguments(parser: argparse.ArgumentParser) -> None:
    """The latency targets that SLO attainment and goodput count against."""
    group = parser.add_argument_group("service-level objective")
    group.add_argument("--slo-ttft-ms", type=positive_float("--slo-ttft-ms"), default=1000.0,
                       help="TTFT target (default: 1000)")
    group.add_argument("--slo-tpot-ms", type=positive_float("--slo-tpot-ms"), default=None,
                       help="TPOT target (default: none)")
    group.add_argument("--slo-e2el-ms", type=positive_float("--slo-e2el-ms"), default=None,
                       help="end-to-end latency target (default: none)")


def slo_from_args(args: argparse.Namespace) -> Slo:
    """The SLO the options set."""
    from jevserve.sim.metrics import Slo

    return Slo(args.slo_ttft_ms, args.slo_tpot_ms, args.slo_e2el_ms)
