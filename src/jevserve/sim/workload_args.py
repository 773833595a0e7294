"""Workload options shared by the commands that simulate a workload (`jevserve sim cluster`, `jevserve plan`):
which requests, and reply lengths scaled to stand in for longer (thinking-mode) replies."""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from jevserve.argtypes import context_length


def add_length_scaling_arguments(p: argparse.ArgumentParser) -> None:
    """`--output-scale` and `--max-model-len`, as `jevserve sim run` takes them."""
    p.add_argument("--output-scale", type=float, default=None,
                   help="multiply every reply length (capped at --max-model-len with the prompt), e.g. to stand in "
                   "for thinking-mode replies (default: keep them)")
    p.add_argument("--max-model-len", type=context_length("--max-model-len"), default=40960,
                   help="the engine's context: a reply is cut where it ends, a prompt that fills it is refused "
                   "(default: Qwen3-8B's 40960)")


def check_workload_name(workload: str) -> None:
    """Raise TraceError for a `--workload` that is neither a built-in name nor a file but close to a name (a typo
    read as a missing trace file said only "does not exist")."""
    from jevserve.sim.errors import TraceError

    near = difflib.get_close_matches(workload.lower(), ["sharegpt", "synthetic"], n=1, cutoff=0.75)
    if near and workload not in ("sharegpt", "synthetic") and not Path(workload).exists():
        raise TraceError(f"--workload {workload!r}: no such workload or trace file; did you mean {near[0]!r}? "
                         "(expected 'sharegpt', 'synthetic' or a .jsonl/.csv trace)")


def load_workload(args: argparse.Namespace, *, seed: int | None = None, split: str = "all",
                  whole_trace: bool = False, need_arrival: bool = False):
    """The requests of `--workload`, reply lengths scaled by `--output-scale` if given, fitted to
    `--max-model-len`. Sampled with `seed` (default: `--workload-seed`) from ShareGPT's `split`; a trace file is cut
    to `--num-requests` rows unless `whole_trace`, and must carry send times where `need_arrival`."""
    from jevserve.sim.workloads.lengths import fit_context, scale_output_lengths
    from jevserve.sim.workloads.sharegpt import sample_sharegpt
    from jevserve.sim.workloads.synthetic import synthetic_requests
    from jevserve.sim.workloads.trace import read_trace

    seed = args.workload_seed if seed is None else seed
    if args.workload == "sharegpt":
        requests = sample_sharegpt(args.num_requests, seed=seed, split=split)
    elif args.workload == "synthetic":
        requests = synthetic_requests(args.num_requests, args.prompt_dist, args.output_dist, seed=seed)
    else:
        check_workload_name(args.workload)
        requests = read_trace(Path(args.workload), need_arrival=need_arrival)
        requests = requests if whole_trace else requests[: args.num_requests]
    if args.output_scale is not None:
        requests = scale_output_lengths(requests, args.output_scale, max_model_len=args.max_model_len)
    return fit_context(requests, args.max_model_len)
