"""`jevserve engine`: serve a simulated vLLM engine over HTTP (OpenAI-compatible; filler text, real scheduling)."""

from __future__ import annotations

import argparse
import logging
import socket
import sys

from jevserve.argtypes import context_length, http_url, positive_float, positive_int
from jevserve.argtypes import port as port_arg
from jevserve.argtypes import seed as seed_arg
from jevserve.serving.engine_config import EngineConfig
from jevserve.sim.engine_args import add_engine_arguments, add_profile_argument

DEFAULT_MAX_MODEL_LEN = 40960  # Qwen3-8B's

# Below this an engine step of a few ms would take minutes of wall time: a slip of the exponent, not a setting.
MIN_SPEEDUP = 0.01



def settings_said(num_kv_blocks: int, config: EngineConfig) -> str:
    """The scheduler settings a capacity plan depends on, for the start line: a plan made with vLLM's defaults and
    checked against an engine started with --max-num-seqs 4 gave 78% attainment where one replica was planned, and
    nothing an operator could see said why."""
    return (f"{num_kv_blocks} KV blocks, max_num_seqs {config.max_num_seqs}, max_num_batched_tokens "
            f"{config.max_num_batched_tokens}")

def _speedup(text: str) -> float:
    value = positive_float("--speedup")(text)
    if value < MIN_SPEEDUP:
        raise argparse.ArgumentTypeError(f"--speedup {text!r}: expected at least {MIN_SPEEDUP:g} (a step of 4 ms "
                                         f"would take {0.004 / value:.3g} s of wall time)")
    return value

def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `jevserve engine`."""
    p = subparsers.add_parser(
        "engine", help="a simulated vLLM engine behind an OpenAI-compatible API (filler text, real scheduling)",
        description="Serve /v1/chat/completions, /v1/completions, /v1/models, /health and /metrics (vLLM's metric "
        "names) from the simulator's engine run against the wall clock: vLLM v1's scheduling, KV blocks and "
        "preemption, steps as long as the profile says (divided by --speedup), tokens streamed as steps complete. "
        "The text is filler; the timing is the point.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    p.add_argument("--port", type=port_arg("--port"), default=8000, help="port (default: %(default)s, vLLM's)")
    p.add_argument("--served-model-name", default=None,
                   help="model name clients send and /v1/models lists (default: the profile's model)")
    p.add_argument("--speedup", type=_speedup, default=1.0,
                   help="run the engine's clock this many times faster than the wall clock, from "
                   f"{MIN_SPEEDUP:g} (slower) up; latencies in /metrics stay in engine seconds (default: 1, real time)")
    p.add_argument("--scheduling-policy", choices=("fcfs", "priority"), default="fcfs",
                   help="vLLM's: first come first served, or by each request's `priority` field, lower first "
                   "(default: fcfs)")
    p.add_argument("--aging-s", type=positive_float("--aging-s"), default=None,
                   help="promote a request that has waited this many engine seconds (default: no aging)")
    p.add_argument("--max-model-len", type=context_length("--max-model-len"), default=DEFAULT_MAX_MODEL_LEN,
                   help="prompt plus reply tokens a request may have (default: %(default)s, Qwen3-8B's)")
    p.add_argument("--max-num-waiting", type=positive_int("--max-num-waiting"), default=10_000,
                   help="answer 429 (Retry-After) when this many requests wait (default: %(default)s)")
    p.add_argument("--stream-interval", type=positive_int("--stream-interval"), default=1,
                   help="send streamed tokens in chunks of this many (the first at once), as vLLM's flag: fewer "
                   "chunks for the host to write at a high --speedup (default: 1)")
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of the reply-length draw (default: 0)")
    p.add_argument("--no-sharegpt-lengths", action="store_true",
                   help="do not look up ShareGPT prompts' recorded reply lengths (saves ~2 s at start)")
    add_profile_argument(p)
    add_engine_arguments(p)
    p.set_defaults(func=_cmd_engine)


def _cmd_engine(args: argparse.Namespace) -> int:
    import uvicorn

    from jevserve.engine.app import create_app
    from jevserve.engine.core import LiveEngine
    from jevserve.engine.lengths import ReplyLengths
    from jevserve.serving.errors import ServingError
    from jevserve.serving.registry import make_queue_policy
    from jevserve.sim.engine_args import engine_config_from_args
    from jevserve.sim.errors import SimError
    from jevserve.sim.profile import impossible_fit_warnings, load_profile

    try:
        profile = load_profile(args.profile)
        for warning in impossible_fit_warnings(profile, "jevserve engine"):
            print(warning, file=sys.stderr)
        config = engine_config_from_args(args)
        policy = make_queue_policy(args.scheduling_policy, aging_s=args.aging_s)
    except (SimError, ServingError) as exc:
        print(f"jevserve engine: error: {exc}", file=sys.stderr)
        return 2
    engine = LiveEngine(profile, config, policy, speedup=args.speedup, stream_interval=args.stream_interval)
    if (held := engine.num_total_blocks * config.block_size) < args.max_model_len:
        # as vLLM refuses it at start-up: else a request within the context is refused for want of KV blocks, and
        # one without max_tokens for a reply length the client never asked for
        print(f"jevserve engine: error: the KV cache holds {held:,} tokens ({engine.num_total_blocks} blocks of "
              f"{config.block_size}), fewer than one request of --max-model-len {args.max_model_len:,}: give "
              f"--max-model-len {held} or less, or more --num-kv-blocks", file=sys.stderr)
        return 2
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:  # bound before anything is printed or built: a port in use is one line and exit 2, not uvicorn's error
        sock.bind((args.host, args.port))
    except (OSError, OverflowError) as exc:
        sock.close()
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"jevserve engine: error: cannot listen on {args.host}:{args.port} ({reason})", file=sys.stderr)
        return 2
    lengths = ReplyLengths(max_model_len=args.max_model_len, seed=args.seed,
                           sharegpt_prompts=not args.no_sharegpt_lengths)
    name = args.served_model_name or profile.model
    app = create_app(engine, lengths, model_name=name, max_num_waiting=args.max_num_waiting)
    print(f"jevserve engine: {name} on {profile.name} ({settings_said(engine.num_total_blocks, config)}, speedup "
          f"{args.speedup:g}, {args.scheduling_policy}); {http_url(args.host, sock.getsockname()[1])}/v1", flush=True)
    _quiet_garbage_collector()
    server_config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)  # sets its loggers up
    logging.getLogger("uvicorn.error").addFilter(_ShutdownCancelNote())
    server = uvicorn.Server(server_config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0


class _ShutdownCancelNote(logging.Filter):
    """uvicorn logs the end of its shutdown grace as an ERROR ("Cancel 2 running task(s), timeout graceful shutdown
    exceeded"); here that is the documented end of open requests (each gets a 503), so it is said as one note."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().endswith("timeout graceful shutdown exceeded"):
            print(f"jevserve engine: shutting down: {record.args[0] if record.args else 'the'} open request(s) "
                  "ended with a 503 after the 1 s grace", file=sys.stderr)
            return False
        return True


def _quiet_garbage_collector() -> None:
    """Keep full garbage collections from stalling the event loop (a setting of the whole process, so it is made
    here, where the server process starts, not in the app, which tests and benchmarks also build in process).

    Full collections were the slowest /health answers under 500 streams (180-210 ms: the loop stops while one walks
    every live object). What start-up built (the ShareGPT lookup, the tokenizer, the routes) lives as long as the
    server, so it leaves the collector's view (vLLM's API server does the same), and young collections run every
    50,000 allocations instead of 700, so the older generations are walked far less often.
    `benchmarks/sim/engine_load.py` measured the slowest probe at 24-127 ms with this (under 100 ms in 7 of 8),
    180-210 ms without.
    """
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
