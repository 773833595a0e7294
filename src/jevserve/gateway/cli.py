"""`jevserve gateway`: run the decision gateway; `jevserve gateway replay LOG`: re-decide a decision log."""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from jevserve.argtypes import file_path, http_url, positive_int
from jevserve.argtypes import port as port_arg

if TYPE_CHECKING:
    from jevserve.gateway.config import GatewayConfig

DESCRIPTION = """\
Run an OpenAI-compatible gateway that asks one System One decision call per request (guard, harm, clarify,
cache, route, queue priority, tool gate) and acts on the answers before and after calling the LLM.

With no --config it runs the built-in default config: the embedded decision model in process and, since no
upstream is declared, a placeholder upstream whose replies say they are placeholders. Point it at a real LLM
server with a config (see docs/gateway.md), for example:

  upstreams:
    - {name: vllm, url: http://127.0.0.1:8000/v1}
  routes:
    - {model: my-model, upstream_model: Qwen/Qwen3-8B, guard: {max_false_action_rate: 0.01}}

Check it with `jevserve gateway check gw.yaml`, then: OPENAI_BASE_URL=http://127.0.0.1:8796/v1 python your_app.py
"""


def threshold_list(text: str) -> tuple[float, ...]:
    """`--thresholds 0.98,0.99,0.995`: probabilities from 0 to 1, comma-separated."""
    values = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part.strip()!r} is not a number; write e.g. 0.98,0.99,0.995") from None
        if not 0 <= value <= 1:
            raise argparse.ArgumentTypeError(f"{value:g} is not a probability (0 to 1)")
        values.append(value)
    return tuple(values)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `gateway` command and its `replay`, `check` and `calibrate` sub-commands."""
    p = subparsers.add_parser(
        "gateway",
        help="run the OpenAI-compatible decision gateway (or replay its decision log)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", type=file_path("--config"), metavar="YAML",
                   help="gateway config file (default: the built-in offline config)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=port_arg("--port"), default=8796, help="port (default: 8796)")
    p.add_argument(
        "--decider",
        metavar="SPEC",
        help="decision backend: embedded | tuned (the fine-tuned reader) | any `jevserve serve` model spec | "
        "causal:PATH | remote:URL (default: the config's, which defaults to embedded)",
    )
    p.add_argument("--store", metavar="URL", help="shared state: memory (default) or redis://host:port/db")
    p.add_argument("--log", metavar="PATH", help="decision log file (JSONL, rotated); overrides the config's")
    p.add_argument("--print-config", action="store_true", help="print the built-in default config and exit")
    p.add_argument("--log-level", default="warning", help="uvicorn log level (default: warning)")
    p.set_defaults(func=run_gateway)
    sub = p.add_subparsers(dest="gateway_command", metavar="[SUBCOMMAND]")
    r = sub.add_parser(
        "replay",
        help="re-decide a decision log with another model or config and list the requests whose actions change",
        description="Re-run the decisions of every logged request in order, with another decision model (--decider) "
        "and/or config (--config), rebuilding the cache as the gateway built it; list each request whose action "
        "changes (id, text, old and new action with probability). Exits 2 on a missing, empty or corrupt log. "
        "--sweep adds, per decision, how many requests would be acted on at each threshold (recall and "
        "false-action rate where the log carries labels), as a table and a PNG.",
    )
    r.add_argument("log", metavar="LOG", nargs="+",
                   help="a decision log written by `jevserve gateway --log`; give the logs of replicas that share a "
                   "store (--store redis://) together: they are merged by time, as one cache served them")
    r.add_argument("--config", type=file_path("--config"), metavar="YAML",
                   help="config to re-decide with (default: the built-in one)")
    r.add_argument("--decider", "--model", dest="decider", metavar="SPEC", help="decision backend to re-decide with")
    r.add_argument("--limit", type=positive_int("--limit"), help="replay only the first N records")
    r.add_argument("--json", metavar="PATH", help="also write the report (every changed request) as JSON")
    r.add_argument("--sweep", action="store_true", help="also sweep each decision's threshold")
    r.add_argument("--thresholds", type=threshold_list, metavar="LIST",
                   help="with --sweep: the thresholds to sweep, comma-separated (default: 0.05 to 0.95 in steps of "
                   "0.05, then 0.96, 0.97, 0.98, 0.99, 0.995, 0.999; the one in force is always added)")
    r.add_argument("--png", metavar="PATH", default="replay-sweep.png", help="the sweep's plot (default: %(default)s)")
    r.add_argument("--max-listed", type=int, default=50, help="changed requests to print (default: %(default)s)")
    r.set_defaults(func=run_replay)
    from jevserve.gateway.cli_check import register as register_checks

    register_checks(sub)


def _progress(message: str) -> None:
    print(f"  {message} ...", file=sys.stderr, flush=True)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def load_with_overrides(
    path: str | None, *, decider: str | None = None, store: str | None = None, log: str | None = None
) -> GatewayConfig:
    """The config file (None: the built-in one) with the command line's --decider, --store and --log applied
    (shared by `jevserve gateway` and `jevserve extproc`); raises ConfigError."""
    from jevserve.gateway.config import load_config

    config = load_config(path)
    updates = {}
    if decider:
        updates["decider"] = decider
    if store:
        updates["store"] = store
    if log:
        updates["log"] = config.log.model_copy(update={"path": log})
    return config.model_copy(update=updates) if updates else config


def _load(args: argparse.Namespace):
    log = getattr(args, "log", None) if args.func is run_gateway else None  # replay's LOG is its input
    return load_with_overrides(
        args.config, decider=getattr(args, "decider", None), store=getattr(args, "store", None), log=log
    )


def run_gateway(args: argparse.Namespace) -> int:
    """Load the config and decider, bind the port, print the banner and serve until interrupted."""
    from jevserve.gateway.config import DEFAULT_CONFIG_YAML
    from jevserve.gateway.errors import ConfigError

    if args.print_config:
        print(DEFAULT_CONFIG_YAML, end="")
        return 0
    if not 0 < args.port < 65536:
        return _fail(f"--port {args.port}: expected 1-65535")
    try:
        config = _load(args)
        from jevserve.gateway.operating_points import check_calibration_sizes

        check_calibration_sizes(config)  # before the port is bound and "listening" is printed
    except ConfigError as exc:
        return _fail(f"--config: {exc}")
    from jevserve.gateway.config import unset_key_warnings

    unset = unset_key_warnings(config)
    if unset:  # requests would go out with no key and come back 401: refused, as an unset decider_key_env is
        return _fail("--config: " + "; ".join(line.removeprefix("warning: ") for line in unset))
    try:
        sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((args.host, args.port))  # a taken port fails here, at once
        # not listened on yet: until uvicorn listens (after the decider is loaded) a client is refused at once
        # rather than held in the backlog; from then on it answers, 503 until the gateway is built (starting.py)
    except OSError as exc:
        return _fail(f"--host {args.host} --port {args.port}: cannot listen there ({exc.strerror})")
    return _serve(config, sock, args)


def check_decider(decider, config) -> str | None:
    """Ask a remote decider one question before saying ready: a refused key stops the start (ConfigError, naming
    `decider_key_env`); for one that does not answer, the warning to print, since every decision falls back until
    it does."""
    from jevserve.decide.remote import KEY_REFUSED
    from jevserve.gateway.decider import startup_problem
    from jevserve.gateway.errors import ConfigError

    problem = startup_problem(decider)
    if problem is None:
        return None
    decider.failed_at, decider.failure = time.time(), problem  # /healthz says degraded from the start
    if KEY_REFUSED in problem:
        setting = f"decider_key_env ({config.decider_key_env})" if config.decider_key_env else "decider_key_env"
        raise ConfigError(f"decider {decider.name} refused the key: set {setting} to the key it takes ({problem})")
    return (f"WARNING: decider {decider.name} does not answer ({problem}); every decision takes its fallback until "
            "it does (a guard's default fallback lets requests through)")


def _serve(config, sock: socket.socket, args: argparse.Namespace) -> int:
    import uvicorn

    from jevserve.decide.registry import UnknownSpecError
    from jevserve.gateway.app import create_app
    from jevserve.gateway.config import objective_notes, upstream_url_warnings, windows_in_context_notes
    from jevserve.gateway.decider import decider_for
    from jevserve.gateway.starting import StartingApp
    from jevserve.gateway.upstream import unreachable_upstream_warnings

    try:
        decider = decider_for(config)
    except (UnknownSpecError, ValueError) as exc:
        where = f"--decider {args.decider}" if args.decider else f"{args.config or 'the built-in config'}: decider"
        return _fail(f"{where}: {exc}")
    from jevserve.gateway.log import unwritable_problem

    if config.log.path is not None and (problem := unwritable_problem(config.log.path)):
        # refused before "listening" is announced (a read-only folder failed the build after it, as `check` passed)
        return _fail(f"log {config.log.path}: {problem}")
    host, port = sock.getsockname()[:2]
    failed: list[Exception] = []

    def build(progress) -> object:
        def both(message: str) -> None:
            progress(message)
            _progress(message)

        app = create_app(config, decider=decider, progress=both)
        warning = check_decider(decider, config)
        if warning is not None:
            print(f"  {warning}", file=sys.stderr, flush=True)
        for line in unreachable_upstream_warnings(config):  # here, off the event loop: a connect may wait 1 s
            print(f"  {line}", file=sys.stderr, flush=True)
        return app

    def ready(app) -> None:
        gateway = app.state.gateway
        upstreams = ", ".join(f"{n} ({u.config.url})" for n, u in gateway.upstreams.items())
        print(f"  decider:   {decider.name} (decision timeout {config.decision_timeout_ms:.0f} ms)", flush=True)
        print(f"  models:    {', '.join(r.model for r in config.routes) or '(none)'}", flush=True)
        print(f"  upstreams: {upstreams}", flush=True)
        notes = windows_in_context_notes(config, decider.reads_windows_in_context, decider.name)
        for line in upstream_url_warnings(config) + objective_notes(config) + notes:
            print(f"  {line}", file=sys.stderr, flush=True)
        print(f"  store:     {config.store}   log: {config.log.path or 'off'}", flush=True)
        for point in gateway.operating_points:
            print(f"  {point.describe()}", flush=True)
        print("  ready", flush=True)

    def failure(exc: Exception) -> None:
        failed.append(exc)
        _fail(str(exc))
        server.should_exit = True

    # once uvicorn listens the port answers: 503 with Retry-After (and /healthz "starting") until the gateway is
    # built, which can take minutes for a decider whose calibration scores are not cached (starting.py)
    app = StartingApp(build, on_ready=ready, on_failure=failure)
    server = uvicorn.Server(uvicorn.Config(app, log_level=args.log_level, lifespan="on"))
    print(f"jevserve gateway listening on {http_url(host, port)}/v1 (503 until ready: GET /healthz)", flush=True)
    interrupted = False
    # a Ctrl-C that lands after uvicorn made its serve() coroutine and before asyncio ran it leaves that coroutine
    # unawaited, and Python warns about it on the way out: noise after "stopped before the gateway was ready"
    warnings.filterwarnings("ignore", message="coroutine 'Server.serve' was never awaited", category=RuntimeWarning)
    try:
        server.run(sockets=[sock])  # uvicorn raises an interrupt again once it has shut down
    except KeyboardInterrupt:
        interrupted = True
    if app.app is None and not failed:
        # stopped while the build thread still scores: nothing was built, so nothing needs closing, and leaving at
        # once spares the wait for the scoring (and the encoder runtime's abort when it is torn down mid-run)
        print("error: stopped before the gateway was ready", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(130)
    if failed:
        return 2
    return 130 if interrupted else 0  # an interrupt after a graceful shutdown (the log flushed): no traceback


def run_replay(args: argparse.Namespace) -> int:
    """Re-decide a log; print the changed requests (and the sweep); exit 2 on a log that cannot be replayed or when
    no record's model is a route of the config, 130 when interrupted (the part replayed is still reported)."""
    if args.thresholds and not args.sweep:
        return _fail("--thresholds sets the thresholds of --sweep: add --sweep")
    if args.json:  # before the replay, not after it: a big log's whole replay was lost to an unwritable path
        from jevserve.argtypes import check_writable

        try:
            check_writable(Path(args.json), "--json")
        except OSError as exc:
            return _fail(f"{exc.filename}: {exc.strerror}")
    try:  # the imports too: they take a second or two, in which Ctrl-C must not end in a traceback either
        from jevserve.gateway.errors import ConfigError
        from jevserve.gateway.replay import DeciderError, LogError, describe_skipped, format_report, replay_log

        try:
            config = _load(args)
            replay = replay_log(args.log, config, limit=args.limit)
        except LogError as exc:
            return _fail(f"LOG {exc}")
        except ConfigError as exc:
            return _fail(f"--config: {exc}")
        except DeciderError as exc:  # a typo in --decider ended in a traceback
            where = f"--decider {args.decider}" if args.decider else f"{args.config or 'the built-in config'}: decider"
            return _fail(f"{where}: {exc}")
    except KeyboardInterrupt:
        print("interrupted before any request was replayed; nothing reported or written", file=sys.stderr)
        return 130
    if replay.skipped_models and not replay.requests and not replay.interrupted:
        source = f"--config {args.config}" if args.config else "the built-in config (no --config given)"
        return _fail(
            f"no record of {' '.join(args.log)} could be replayed: {describe_skipped(replay)}; {source} has the routes "
            f"{[r.model for r in config.routes]}. Pass the --config the gateway ran with"
        )
    if replay.skipped_models:
        models = ", ".join(repr(m) for m in replay.skipped_models)
        print(
            f"warning: {sum(replay.skipped_models.values())} of {replay.num_seen} records skipped: no route of the "
            f"config serves {models} (is this the --config the gateway ran with?)",
            file=sys.stderr,
        )
    print(format_report(replay, max_listed=args.max_listed))
    if args.sweep and not replay.interrupted:
        from jevserve.gateway.sweep import format_sweep, plot_sweep, sweep

        rows = sweep(replay, args.thresholds) if args.thresholds else sweep(replay)
        print(format_sweep(rows))
        print(f"plot: {plot_sweep(rows, replay, args.png)}")
    if args.json:
        _write_json(args.json, replay)
    if replay.interrupted:
        written = f'; the partial report is in {args.json} ("partial": true)' if args.json else ""
        print(
            f"interrupted: {len(replay.requests)} request(s) replayed of {replay.num_logged}, the rest not"
            f"{' (no sweep)' if args.sweep else ''}{written}",
            file=sys.stderr,
        )
        return 130
    return 0


def _write_json(path: str, replay) -> None:
    import json
    from pathlib import Path

    Path(path).write_text(json.dumps(replay.to_dict(), indent=2) + "\n")
