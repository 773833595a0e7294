"""`jevserve extproc`: the gateway's decisions as an Envoy External Processing (ext_proc) gRPC server."""

from __future__ import annotations

import argparse
import math
import sys

from jevserve.argtypes import file_path, http_url, nonnegative_float, positive_float

DESCRIPTION = """\
Run the gateway's decisions (the same config file as `jevserve gateway`: its routes, policies, decider, cache,
store and decision log) as an Envoy ext_proc server. Envoy sends each request to it over gRPC; a block, a
clarifying question or a cached answer comes back as Envoy's reply to the client, anything else goes on upstream
with the chosen model in `x-gateway-model-name` (for Envoy's routes), the body rewritten and, for routes with an
`inference` block, the llm-d / Gateway API Inference Extension headers. Tool calls in the reply are gated and
cacheable replies stored. See docs/deploy.md.

  jevserve extproc --config gw.yaml --port 9002
  jevserve extproc --config gw.yaml --print-envoy > envoy.yaml && envoy -c envoy.yaml
"""

MODES = ("BUFFERED", "FULL_DUPLEX_STREAMED")



# How often the grpc.health.v1 answer for `jevserve.decider` is brought up to date with the decider's state (what
# /healthz reads at once): at the recheck interval it lagged /healthz by up to 5 s after the decider failed.
DECIDER_HEALTH_POLL_S = 0.5


async def watch_decider(decider, report, poll_s: float = DECIDER_HEALTH_POLL_S) -> None:
    """Report the decider's problem (None: it answers) through `report` whenever it changes, polling every `poll_s`.
    A remote decider that failed is asked again every DECIDER_RECHECK_S without waiting for a request, as in
    `jevserve gateway` (`recheck_decider` keeps to that interval however often it is called)."""
    import asyncio

    from jevserve.gateway.decider import recheck_decider

    reported: object = object()  # nothing reported yet
    while True:
        problem = await recheck_decider(decider)
        if problem != reported:
            await report(problem)
            reported = problem
        await asyncio.sleep(poll_s)

def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `extproc` command."""
    p = subparsers.add_parser(
        "extproc",
        help="run the gateway's decisions as an Envoy ext_proc (External Processing) gRPC server",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", type=file_path("--config"), metavar="YAML",
                   help="gateway config file (default: the built-in offline config)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=9002, help="gRPC port (default: 9002)")
    p.add_argument(
        "--decider",
        metavar="SPEC",
        help="decision backend: embedded | tuned | any `jevserve serve` model spec | causal:PATH | remote:URL",
    )
    p.add_argument("--store", metavar="URL", help="shared state: memory (default) or redis://host:port/db")
    p.add_argument("--log", metavar="PATH", help="decision log file (JSONL, rotated); overrides the config's")
    p.add_argument(
        "--deadline-ms",
        type=positive_float("--deadline-ms"),
        help="longest wait for one request's decisions before --failure applies "
        "(default: the config's decision_timeout_ms + 500; keep it under Envoy's message_timeout)",
    )
    p.add_argument(
        "--failure",
        choices=("open", "closed"),
        default="open",
        help="past the deadline or on an internal error: open = forward unchanged, closed = 503 (default: open)",
    )
    p.add_argument(
        "--body-mode",
        choices=MODES,
        default=None,
        help="the body mode assumed when Envoy does not say (Envoy 1.3x+ does, in protocol_config; default: "
        "BUFFERED), and the one --print-envoy's filter asks for (default there: FULL_DUPLEX_STREAMED)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="also serve Prometheus /metrics and /healthz over HTTP on this port (default: off)",
    )
    p.add_argument(
        "--drain-s",
        type=nonnegative_float("--drain-s"),
        default=None,
        help="after SIGTERM or Ctrl-C (and 2 s of reporting not ready), how long open streams may run on; keep it "
        "under the orchestrator's grace period, e.g. Kubernetes' terminationGracePeriodSeconds (default: 5)",
    )
    p.add_argument("--print-envoy", action="store_true", help="print an Envoy bootstrap for this config and exit")
    p.add_argument("--envoy-port", type=int, default=10000, help="the listener port of --print-envoy (default 10000)")
    p.add_argument("--envoy-host", default="0.0.0.0",
                   help="the listener address of --print-envoy (default 0.0.0.0: every interface; 127.0.0.1 for this "
                   "host only)")
    p.set_defaults(func=run_extproc)


def _progress(message: str) -> None:
    print(f"  {message} ...", file=sys.stderr, flush=True)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def run_extproc(args: argparse.Namespace) -> int:
    """Load the config and decider, print the banner and serve until interrupted (or print an Envoy config)."""
    from jevserve.gateway.cli import load_with_overrides
    from jevserve.gateway.errors import ConfigError

    ports = (("--port", args.port), ("--metrics-port", args.metrics_port), ("--envoy-port", args.envoy_port))
    for flag, port in ports:
        if port is not None and not 0 < port < 65536:
            return _fail(f"{flag} {port}: expected 1-65535")
    try:
        config = load_with_overrides(args.config, decider=args.decider, store=args.store, log=args.log)
    except ConfigError as exc:
        return _fail(f"--config: {exc}")
    if args.print_envoy:
        return _print_envoy(config, args)
    deadline_ms = args.deadline_ms if args.deadline_ms is not None else config.decision_timeout_ms + 500
    if not (math.isfinite(deadline_ms) and deadline_ms > 0):  # NaN would let every request past the decisions
        return _fail(f"--deadline-ms {deadline_ms}: expected a finite number > 0")
    return _serve(config, args, deadline_ms)


def _decider_source(args: argparse.Namespace, config) -> str:
    """Where the decider spec came from, for an error about it: the flag, or the config file."""
    if args.decider:
        return f"--decider {args.decider}"
    return f"{args.config or 'the built-in config'}: decider: {config.decider}"


def _short_deadline(deadline_ms: float, decision_timeout_ms: float, failure: str) -> str | None:
    """A warning when the server's deadline comes before the decision call's own timeout: a slow decider's requests
    then meet `--failure` (open: forwarded undecided) where the gateway would answer 429 and forward none."""
    if deadline_ms > decision_timeout_ms:
        return None
    then = "go on undecided (--failure open)" if failure == "open" else "get a 503 (--failure closed)"
    return (f"warning: --deadline-ms {deadline_ms:g} is not above the config's decision_timeout_ms "
            f"{decision_timeout_ms:g}: requests whose decisions are slow are cut off before the decision timeout "
            f"can answer them (a 429 where an enforced guard or harm could refuse them, else they {then}); leave "
            "--deadline-ms out (decision_timeout_ms + 500) or set it above")


class MetricsPortError(Exception):
    """The metrics port could not be bound (the cause says why)."""


def _serve(config, args: argparse.Namespace, deadline_ms: float) -> int:
    import asyncio

    from jevserve.decide.registry import UnknownSpecError
    from jevserve.gateway.cli import check_decider
    from jevserve.gateway.decider import DecisionUnavailable, decider_for
    from jevserve.gateway.extproc import wire
    from jevserve.gateway.extproc.binding import GatewayDecisions
    from jevserve.gateway.extproc.metrics_http import start_metrics
    from jevserve.gateway.extproc.server import serve_until_stopped
    from jevserve.gateway.extproc.stream import StreamSettings
    from jevserve.gateway.runtime import build_gateway
    from jevserve.gateway.store import store_state
    from jevserve.protocol.errors import BackendError

    try:
        decider = decider_for(config)
    except (UnknownSpecError, ValueError) as exc:
        return _fail(f"{_decider_source(args, config)}: {exc}")
    try:
        # rate-based operating points resolve to the same thresholds as in `jevserve gateway` (scored, then cached)
        gateway = build_gateway(config, decider, progress=_progress)
        warning = check_decider(decider, config)  # as `jevserve gateway` does before it says ready
    except (DecisionUnavailable, BackendError) as exc:  # scoring a rate-based operating point needs answers
        return _fail(f"{_decider_source(args, config)}: it did not answer while resolving operating points ({exc})")
    except (ValueError, ImportError) as exc:  # a bad value; a part the install lacks (the cache's encoder)
        return _fail(str(exc))
    mode = wire.BodyMode.Value(args.body_mode or "BUFFERED")
    settings = StreamSettings(
        request_body_mode=mode,
        response_body_mode=mode,
        failure=args.failure,
        deadline_s=deadline_ms / 1000,
        max_body_bytes=config.max_body_bytes,
    )
    banner = [
        f"jevserve extproc listening on {args.host}:{args.port} (gRPC: envoy.service.ext_proc.v3, grpc.health.v1)",
        f"  decider:   {decider.name} (decision timeout {config.decision_timeout_ms:.0f} ms, "
        f"deadline {deadline_ms:.0f} ms, fails {args.failure})",
        f"  models:    {', '.join(r.model for r in config.routes) or '(none)'}",
        f"  store:     {config.store}   log: {config.log.path or 'off'}",
        *(f"  {point.describe()}" for point in gateway.operating_points),
        *([f"  {warning}"] if warning else []),
        *([f"  {short}"] if (short := _short_deadline(deadline_ms, config.decision_timeout_ms, args.failure)) else []),
    ]
    if args.metrics_port is not None:
        banner.append(f"  metrics:   {http_url(args.host, args.metrics_port)}/metrics")

    async def started(server):
        await gateway.warm_up()  # the first streams are judged against warm timings (Gateway.warm_up)
        watcher = asyncio.create_task(watch_decider(decider, server.report_decider))
        runner = None
        if args.metrics_port is not None:
            try:
                runner = await start_metrics(gateway.metrics, lambda: server.ready, args.host, args.metrics_port,
                                             problem=lambda: decider.problem,
                                             details=lambda: {"decider": decider.name,
                                                              "store": store_state(gateway.store)})
            except OSError as exc:
                watcher.cancel()
                raise MetricsPortError() from exc

        async def stop() -> None:
            watcher.cancel()
            if runner is not None:
                await runner.cleanup()

        return stop

    address = f"{args.host}:{args.port}"
    try:
        drain = {} if args.drain_s is None else {"drain_s": args.drain_s}
        return asyncio.run(
            serve_until_stopped(GatewayDecisions(gateway), settings, address, banner, started=started, **drain)
        )
    except MetricsPortError as exc:
        return _fail(f"--host {args.host} --metrics-port {args.metrics_port}: cannot bind ({exc.__cause__})")
    except OSError as exc:  # a taken port, an address not of this host: one line, as for --metrics-port
        return _fail(f"--host {args.host} --port {args.port}: cannot bind ({exc})")


def _print_envoy(config, args: argparse.Namespace) -> int:
    """An Envoy bootstrap routing each model the config names to its upstream, jevserve's filter first; what it
    cannot express is a warning on stderr."""
    import yaml

    from jevserve.gateway.extproc.envoy_config import bootstrap_for_config

    deadline_s = (args.deadline_ms or config.decision_timeout_ms + 500) / 1000
    try:
        bootstrap, warnings = bootstrap_for_config(
            config,
            listen=(args.envoy_host, args.envoy_port),
            extproc=(args.host if args.host not in ("0.0.0.0", "::") else "127.0.0.1", args.port),
            message_timeout_s=max(2.0, round(deadline_s + 0.5, 1)),
            body_mode=args.body_mode or "FULL_DUPLEX_STREAMED",
        )
    except ValueError as exc:
        return _fail(f"--print-envoy: {exc}")
    for warning in warnings:
        print(f"warning: --print-envoy: {warning}", file=sys.stderr)
    print(yaml.safe_dump(bootstrap, sort_keys=False), end="")
    return 0
