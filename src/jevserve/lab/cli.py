"""The lab's commands, added under `jevserve sim`: the queue-order experiment and the cluster sweep."""

from __future__ import annotations

import argparse

from jevserve.argtypes import float_list, int_list
from jevserve.sim.cli import guarded, sim_subcommands
from jevserve.sim.engine_args import (
    add_engine_arguments,
    add_profile_argument,
    add_replica_arguments,
    add_slo_arguments,
    engine_config_from_args,
    slo_from_args,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `jevserve sim queue-order` and `jevserve sim cluster` (after `jevserve.sim.cli` registered `sim`)."""
    from jevserve.lab.cluster.cli import DEFAULT_MAX_NUM_SEQS, add_cluster_arguments
    from jevserve.lab.queue_order.cli import add_arguments

    sub = sim_subcommands(subparsers)
    qo = sub.add_parser("queue-order", help="the queue-order experiment (FCFS vs length-first, with aging)",
                        description="2,000 ShareGPT requests, rates 0.90-1.54 req/s (Poisson or --arrivals), four "
                        "queue orders and predicted length with three kinds of aging, in one or more scenarios; "
                        "steady-state goodput with a run-length check; writes results JSONL, plots and "
                        "docs/queue-order.md.")
    add_arguments(qo, float_list, int_list)
    add_profile_argument(qo, default=None)
    add_engine_arguments(qo, title="engine overrides (default: the scenario's settings)", show_defaults=False)
    add_slo_arguments(qo)
    qo.set_defaults(func=guarded(_cmd_queue_order))

    cl = sub.add_parser("cluster", help="replicas behind routers (rr, jsq, lot, latency) over a range of rates",
                        description="Route a workload over N simulated replicas with each router, at several "
                        "rates and arrival seeds; report SLO attainment, p90/p99 TTFT and TTFT-estimator quality.")
    add_cluster_arguments(cl, float_list, int_list)
    from jevserve.sim.engine_config import EngineConfig

    add_replica_arguments(cl, EngineConfig(max_num_seqs=DEFAULT_MAX_NUM_SEQS))
    cl.set_defaults(func=guarded(_cmd_cluster))


def _cmd_queue_order(args: argparse.Namespace) -> int:
    from jevserve.lab.queue_order.cli import run_queue_order

    return run_queue_order(args)


def _cmd_cluster(args: argparse.Namespace) -> int:
    from jevserve.lab.cluster.cli import DEFAULT_MAX_NUM_SEQS, run_cluster_command
    from jevserve.sim.engine_config import EngineConfig

    config = engine_config_from_args(args, EngineConfig(max_num_seqs=DEFAULT_MAX_NUM_SEQS))
    return run_cluster_command(args, config, slo_from_args(args))
