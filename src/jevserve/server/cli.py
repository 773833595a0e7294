"""`jevserve serve`: run a System One decision server."""

from __future__ import annotations

import argparse
import logging
import os
import re
import socket
import sys

from jevserve.argtypes import http_url, nonnegative_float, positive_float, positive_int
from jevserve.argtypes import port as port_arg
from jevserve.decide.registry import SPEC_HELP
from jevserve.protocol import MAX_OPTIONS as MAX_CONTRACT_OPTIONS
from jevserve.protocol.body import BODY_TIMEOUT_S
from jevserve.server.defaults import (
    DEFAULT_ANSWER_WITHIN_S,
    DEFAULT_MAX_OPTIONS,
    DEFAULT_MAX_QUESTIONS,
    max_request_questions,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `serve` command."""
    p = subparsers.add_parser(
        "serve",
        help="serve a decision model behind POST /v1/systemone",
        description="Serve a System One decision model (drop-in for typesafe-sdk clients).\n\nMODEL specs:\n"
        + SPEC_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", nargs="?", default="embedded", help="model spec (default: embedded)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=port_arg("--port"), default=8795, help="port (default: 8795)")
    p.add_argument("--api-key-env", metavar="VAR", help="require 'Authorization: Bearer <key>', the key read from VAR")
    p.add_argument("--max-batch", type=positive_int("--max-batch"), default=64,
                   help="questions per forward batch (default: 64)")
    p.add_argument("--max-queue", type=positive_int("--max-queue"), default=2048,
                   help="a request is refused 429 when the questions that would run before it finishes, its own "
                   "included, are over this (an empty queue admits any request) (default: 2048)")
    p.add_argument(
        "--answer-within-s",
        type=nonnegative_float("--answer-within-s"),
        default=DEFAULT_ANSWER_WITHIN_S,
        help="refuse (429 with Retry-After) a request when work is queued before it and its answer would come "
        "later than this many seconds, by the measured time of that work, for clients that would rather be told at "
        "once than wait; 0: off, a request waits for as long as --max-queue admits (default: %(default)g; "
        "docs/server.md says why)",
    )
    p.add_argument(
        "--max-wait-ms",
        type=nonnegative_float("--max-wait-ms"),
        default=2.0,
        help="longest wait for already-arriving requests before a batch starts (default: 2)",
    )
    p.add_argument(
        "--max-chunk-ms",
        type=nonnegative_float("--max-chunk-ms"),
        default=25.0,
        help="cut batches to what the model answers in about this time, and read a request's long option texts in "
        "turns of about this time, so a large request yields to new ones quickly; 0 turns both off (default: 25)",
    )
    p.add_argument("--max-body-bytes", type=positive_int("--max-body-bytes"), default=4 * 1024 * 1024,
                   help="request size limit, bytes (413 above; default: %(default)s)")
    p.add_argument(
        "--body-timeout-s",
        type=positive_float("--body-timeout-s"),
        default=BODY_TIMEOUT_S,
        help=f"the whole request body must arrive within this many seconds (408 after; default {BODY_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--max-questions",
        type=positive_int("--max-questions"),
        default=DEFAULT_MAX_QUESTIONS,
        help="questions per request (413 above; at most half of --max-queue; default: %(default)s)",
    )
    p.add_argument(
        "--max-options",
        type=positive_int("--max-options"),
        default=DEFAULT_MAX_OPTIONS,
        help="options per request, summed over its questions (413 above; default: %(default)s)",
    )
    p.add_argument("--remote-key-env", metavar="VAR", help="remote backend: env var with the upstream's key")
    p.add_argument("--remote-model", default="jev-latest", help="remote backend: model name to ask upstream for")
    p.add_argument(
        "--remote-timeout-s",
        type=positive_float("--remote-timeout-s"),
        default=8.0,
        help="remote backend: one deadline per request, below the SDK's 10 s (default: 8)",
    )
    p.add_argument(
        "--remote-max-in-flight", type=positive_int("--remote-max-in-flight"), default=32,
        help="remote backend: upstream requests at once (default: 32)",
    )
    p.add_argument("--allow-network", action="store_true", help="causal backend: allow fetching a hub id")
    p.add_argument("--device", default="cpu", help="causal backend: torch device (default: cpu)")
    p.add_argument("--log-level", default="warning", choices=LOG_LEVELS, help="log level (default: warning)")
    p.set_defaults(func=run_serve, check_argv=_ignored_flags)


LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")  # uvicorn's; trace is below debug
VALUELESS_FLAGS = frozenset({"--allow-network", "-h", "--help"})
TRACE_LEVEL = 5  # the number uvicorn gives its trace level, for the server's own log lines


def _ignored_flags(argv: list[str]) -> None:
    """Refuse the options only one kind of backend reads when the model spec names another kind."""
    from jevserve.argtypes import refuse_ignored

    positional, tokens = [], iter(argv[1:])  # argv[0] is `serve`
    for token in tokens:
        if not token.startswith("-"):
            positional.append(token)
        elif "=" not in token and token not in VALUELESS_FLAGS:
            next(tokens, None)  # the flag's value
    spec = positional[0] if positional else "embedded"
    causal, remote = spec.startswith("causal:"), spec.startswith(("remote:", "http://", "https://"))
    not_causal = f"it applies to causal:PATH models only, not {spec!r}"
    not_remote = f"it applies to remote:URL models only, not {spec!r}"
    refuse_ignored(argv, [
        ("--device", causal, not_causal),
        ("--allow-network", causal, not_causal),
        ("--remote-key-env", remote, not_remote),
        ("--remote-model", remote, not_remote),
        ("--remote-timeout-s", remote, not_remote),
        ("--remote-max-in-flight", remote, not_remote),
    ])


def sdk_sendable(key: str) -> bool:
    """Whether the official SDK will send `key`: non-empty printable ASCII without whitespace (SYSTEMONE_API.md §2)."""
    return bool(re.fullmatch(r"[!-~]+", key))


def run_serve(args: argparse.Namespace) -> int:
    """Load the backend(s), build the app and run uvicorn until interrupted."""
    import uvicorn

    from jevserve.decide.registry import BackendOptions, UnknownSpecError, load_backends
    from jevserve.server.app import ServerSettings, create_app

    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            print(
                f"error: --api-key-env {args.api_key_env}: that environment variable is empty or unset", file=sys.stderr
            )
            return 2
        if not sdk_sendable(api_key):
            print(f"error: --api-key-env {args.api_key_env}: the key holds whitespace or characters other than "
                  "printable ASCII, which typesafe-sdk refuses to send, so no SDK client could reach this server; "
                  "choose a key of printable ASCII without spaces", file=sys.stderr)
            return 2
    options = BackendOptions(
        remote_key_env=args.remote_key_env,
        remote_model=args.remote_model,
        allow_network=args.allow_network,
        device=args.device,
        remote_timeout_s=args.remote_timeout_s,
        remote_max_in_flight=args.remote_max_in_flight,
    )
    # Bind before loading the model (seconds, or minutes for a large one) and before printing anything that says
    # "serving": a taken port is an error at once, not after the load, and not a banner and a traceback.
    # Bound, not listening: a client that connects while the model loads is refused rather than left waiting
    # (uvicorn listens once it starts).
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((args.host, args.port))
    except OSError as exc:
        sock.close()
        print(f"error: --host {args.host} --port {args.port}: cannot listen there ({exc.strerror})", file=sys.stderr)
        return 2
    print(f"loading model {args.model!r} ...", file=sys.stderr, flush=True)
    try:
        backends = load_backends(args.model, options)
    except (UnknownSpecError, ValueError, FileNotFoundError) as exc:
        sock.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # limits no request can pass: started as asked (a test may want it), but said, since every request gets a 413
    smallest = len(b'{"state":"x","questions":{"q":{"type":"noul","instructions":"?"}}}')
    if args.max_options < 2:
        print(f"note: --max-options {args.max_options} refuses every request (a yes/no question counts 2 options)",
              file=sys.stderr)
    elif args.max_options < MAX_CONTRACT_OPTIONS:  # the contract: a question of 2 to 255 options MUST be accepted
        print(f"note: --max-options {args.max_options} is under the contract's {MAX_CONTRACT_OPTIONS} options a "
              "question may have: a question of more is refused (413), and an SDK client may send one",
              file=sys.stderr)
    if args.max_body_bytes < smallest:
        print(f"note: --max-body-bytes {args.max_body_bytes} refuses every request (the smallest is {smallest} "
              "bytes)", file=sys.stderr)
    max_questions = args.max_questions
    if max_questions > max_request_questions(args.max_queue):
        # A request of n questions is admitted while what is queued ahead of it is at most --max-queue - n: one near
        # the queue's size was refused whenever a few small requests were queued, and told to retry again and again.
        # At most half the queue, it is refused only when the queue is over half full, as every request then is.
        cap = max_request_questions(args.max_queue)
        print(f"note: --max-questions {max_questions} is over half of --max-queue {args.max_queue}; requests are "
              f"limited to {cap} questions (raise --max-queue to accept more)", file=sys.stderr)
        max_questions = cap
    settings = ServerSettings(
        api_key=api_key,
        max_batch=args.max_batch,
        max_queue=args.max_queue,
        answer_within_s=args.answer_within_s or None,
        max_wait_ms=args.max_wait_ms,
        max_chunk_ms=args.max_chunk_ms or None,
        max_body_bytes=args.max_body_bytes,
        body_timeout_s=args.body_timeout_s,
        max_questions=max_questions,
        max_options=args.max_options,
    )
    app = create_app(backends, settings)
    base = http_url(args.host, sock.getsockname()[1])
    auth = f" -H 'Authorization: Bearer '\"${args.api_key_env}\"" if args.api_key_env else ""
    names = [b.card.name for b in backends]
    print(f"serving {', '.join(names)} on {base} (jev-latest answers as {names[0]})", file=sys.stderr)
    # the key's variable was set for this process (`MY_KEY=… jevserve serve`): the shell the line is pasted into needs
    # it too, or the key it sends is empty
    exported = f" (with {args.api_key_env} set in that shell)" if args.api_key_env else ""
    print(
        f"try{exported}:\n  curl -s " + base + "/v1/systemone -H 'Content-Type: application/json'" + auth + " -d '"
        '{"state": "Hi, I was charged twice for my March invoice and want my money back.", '
        '"questions": {"refund": {"type": "noul", "instructions": "Is the customer asking for money back?"}, '
        '"team": {"type": "choice", "instructions": "Which team should handle this ticket?", '
        '"criteria": {"Billing": "Payments, invoices, refunds", "Technical": null, "Sales": "Pricing"}}}}'
        "'",
        flush=True,
    )
    # The server's own log lines (499 disconnects, 500 causes) go to stderr at the chosen level.
    level = TRACE_LEVEL if args.log_level == "trace" else args.log_level.upper()
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    config = uvicorn.Config(app, log_level=args.log_level, access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
    return 0
