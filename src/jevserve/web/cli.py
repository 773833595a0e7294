"""`jevserve web`: serve the site; `jevserve web export-rounds OUT.jsonl`: write every stored answer as JSON lines."""

from __future__ import annotations

import argparse
import ipaddress
import json
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from jevserve.argtypes import http_url, nonnegative_int
from jevserve.cache_root import cache_root

DEFAULT_PORT = 8780
MAX_ROUNDS = 30  # the same default as jevserve.web.context.MAX_ROUNDS (not imported: it needs fastapi)
DEFAULT_RESULTS = Path("results")


def default_db() -> Path:
    """$JEVSERVE_CACHE/web/playground.sqlite, else ~/.cache/jevserve/web/playground.sqlite."""
    return cache_root() / "web" / "playground.sqlite"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `web` (and its `export-rounds`) to the command line."""
    web = subparsers.add_parser(
        "web", help="serve the leaderboard, task pages, playground and live decision demo",
        description=f"Serve the site on http://HOST:PORT (default port {DEFAULT_PORT}; the URL is printed once the "
        "port is bound). Pages read the committed bench results; playground rounds are stored in SQLite.",
    )
    web.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    web.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default: %(default)s; 0 picks a free one)")
    web.add_argument("--results", type=Path, default=DEFAULT_RESULTS, metavar="DIR",
                     help="bench results folder (default: %(default)s)")
    web.add_argument("--board", type=Path, default=None, metavar="FILE",
                     help="a board snapshot, the board.json `jevserve bench board --out DIR` writes: shown when it "
                     "was computed from the --results folder's results (else the board is computed from them), and "
                     "without a results folder in place of the board packaged with jevserve")
    web.add_argument("--db", type=Path, default=None, metavar="FILE",
                     help="playground SQLite file (default: ~/.cache/jevserve/web/playground.sqlite)")
    web.add_argument("--endpoint", default="embedded", metavar="URL|embedded",
                     help="the System One endpoint people play against (default: the embedded model, in process)")
    web.add_argument("--model", default=None, help="model name to ask for (default for embedded: its default)")
    web.add_argument("--api-key-env", default=None, metavar="VAR", help="environment variable holding the API key")
    web.add_argument("--answers-cache", type=Path, default=None, metavar="DIR",
                     help="bench answers caches, for reliability plots (default: bench's default)")
    web.add_argument("--gateway-config", type=Path, default=None, metavar="FILE",
                     help="gateway YAML config whose decisions the live demo runs (default: the gateway's default)")
    web.add_argument("--max-rounds", type=nonnegative_int("--max-rounds"), default=MAX_ROUNDS, metavar="N",
                     help="playground rounds one client address may start per 10 minutes; more get a 429 page "
                     "(default: %(default)s; 0: no limit)")
    web.add_argument("--forwarded-allow-ips", type=_proxy_addresses, default=None, metavar="ADDRS",
                     help="comma-separated addresses (or networks, 10.0.0.0/8) of reverse proxies whose "
                     "X-Forwarded-For names the client, or * for any "
                     "(the round limit then counts the client's address); by default the header is ignored, from "
                     "every address, loopback included, so no client can name itself another address")
    web.add_argument("--access-log", action="store_true",
                     help="print one line per request (uvicorn's access log: client, method, path, status); off by "
                     "default, when only warnings and errors are printed")
    web.set_defaults(func=serve_command)
    commands = web.add_subparsers(dest="web_command", metavar="SUBCOMMAND")
    export = commands.add_parser("export-rounds", help="write every stored playground answer as JSON lines",
                                 description="One JSON object per answer: round, position, decision, item, the "
                                 "answer, the truth, the time, and the served model's answer.")
    export.add_argument("out", type=Path, metavar="OUT.jsonl", help="file to write ('-' for standard output)")
    # SUPPRESS: `jevserve web --db X export-rounds OUT` keeps the X given before the sub-command
    export.add_argument("--db", type=Path, default=argparse.SUPPRESS, metavar="FILE", help="playground SQLite file")
    export.set_defaults(func=export_command)


def _bind(host: str, port: int) -> socket.socket:
    if not 0 <= port <= 65535:
        raise ValueError(f"--port {port}: expected 0–65535")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        # an address that does not resolve is the host's fault, a port in use the port's
        hint = "check --host" if isinstance(exc, socket.gaierror) else "try --port 0"
        raise ValueError(f"--host {host} --port {port}: cannot listen there ({exc.strerror}); {hint}") from exc
    return sock


def uvicorn_config(app: Any, forwarded_allow_ips: str | None, access_log: bool = False) -> Any:
    """The site's uvicorn settings. uvicorn trusts X-Forwarded-For from 127.0.0.1 by default, which let any client on
    the host name itself another address and pass the per-address round limit: here the header is read only from
    the proxies named. uvicorn's access lines are at INFO, so `access_log` lowers the level to it."""
    import uvicorn

    level = "info" if access_log else "warning"
    if not forwarded_allow_ips:
        return uvicorn.Config(app, log_level=level, access_log=access_log, proxy_headers=False)
    return uvicorn.Config(app, log_level=level, access_log=access_log, proxy_headers=True,
                          forwarded_allow_ips=forwarded_allow_ips)


def _proxy_addresses(text: str) -> str:
    """`--forwarded-allow-ips`: `*`, or IP addresses and networks; uvicorn would take a typo as a name that no
    connection's address ever matches, and the header would be ignored without a word."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    if items == ["*"]:
        return "*"
    if "*" in items:
        raise argparse.ArgumentTypeError("* trusts every address, so it stands alone: give * or a list of addresses")
    for item in items:
        try:
            ipaddress.ip_network(item) if "/" in item else ipaddress.ip_address(item)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item!r} is not an IP address or network (a network's host bits are zero: 10.0.0.0/8); expected "
                "e.g. 127.0.0.1,10.0.0.0/8, or * for any") from None
    if not items:
        raise argparse.ArgumentTypeError("expected IP addresses or networks, e.g. 127.0.0.1,10.0.0.0/8, or *")
    return ",".join(items)


def _bench_data_factory(embed: Any) -> Any:
    """BenchData with the embedder the top-level command line hands down (task pages show cosine default rules)."""

    def build() -> Any:
        from jevserve.bench import BenchData

        return BenchData(embed=embed)

    return build


def serve_command(args: argparse.Namespace) -> int:
    """Start the site (and the embedded model when asked) and serve until interrupted."""
    import uvicorn

    from jevserve.bench.answers_cache import default_answers_dir
    from jevserve.bench.board_snapshot import read_snapshot, results_key
    from jevserve.bench.endpoint import EndpointError, open_endpoint
    from jevserve.bench.results import latest_results
    from jevserve.gateway.config import load_config
    from jevserve.gateway.errors import ConfigError
    from jevserve.web.answering import SystemOneDecider
    from jevserve.web.app import WebSettings, create_app
    from jevserve.web.live import live_demo
    from jevserve.web.site import PACKAGED_BOARD, default_board_cache
    from jevserve.web.store import StoreError

    board_file = getattr(args, "board", None)
    if board_file is not None and read_snapshot(board_file) is None:
        what = "no such file" if not board_file.exists() else "not a board snapshot that can be read"
        print(f"jevserve web: --board {board_file}: {what}; pass the board.json that `jevserve bench board --out DIR` "
              "writes", file=sys.stderr)
        return 2
    results: Path | None = args.results
    if not args.results.is_dir():
        if args.results != DEFAULT_RESULTS or not (board_file or PACKAGED_BOARD).exists():
            what = "a file, not a folder" if args.results.exists() else "no such folder"
            print(f"jevserve web: --results {args.results}: {what}; run from the repository root or pass "
                  "--results DIR", file=sys.stderr)
            return 2
        results = None
    elif not (found := latest_results(args.results)).documents:  # an empty or mistyped folder: every page would fail
        ignored = found.ignored
        print(f"jevserve web: --results {args.results}: no bench results in it"
              + (f" that can be read ({'; '.join(ignored)})" if ignored else "")
              + "; pass the folder `jevserve bench run` writes to (default: results/)", file=sys.stderr)
        return 2
    elif board_file is not None and read_snapshot(board_file, results_key(args.results)) is None:
        print(f"jevserve web: note: --board {board_file} was computed from other results than {args.results}'s, so "
              "the board is computed from those results (minutes, once) instead", file=sys.stderr)
    if args.answers_cache is not None and not args.answers_cache.is_dir():
        what = "a file, not a folder" if args.answers_cache.exists() else "no such folder"
        print(f"jevserve web: --answers-cache {args.answers_cache}: {what}; pass the folder `jevserve bench "
              f"run --answers-cache` wrote, or leave it out (default: {default_answers_dir()})", file=sys.stderr)
        return 2
    try:
        warning = endpoint_warning(args.endpoint, args.model, args.api_key_env)
    except EndpointError as exc:
        print(f"jevserve web: {exc}", file=sys.stderr)
        return 2
    if warning:
        print(f"jevserve web: warning: {warning}", file=sys.stderr)
    try:
        try:
            gateway_config = load_config(args.gateway_config)  # checked before anything starts
        except ConfigError as exc:
            raise ConfigError(f"--gateway-config {exc}") from None
        sock = _bind(args.host, args.port)
    except (ValueError, ConfigError) as exc:
        print(f"jevserve web: {exc}", file=sys.stderr)
        return 2
    try:
        with open_endpoint(
            args.endpoint, args.model, args.api_key_env, serve_embedded=getattr(args, "serve_embedded", None)
        ) as endpoint:
            decider = SystemOneDecider(endpoint.base_url, endpoint.model, endpoint.api_key)
            settings = WebSettings(
                results_dir=results, db_path=args.db or default_db(), decider=decider,
                board_cache=default_board_cache(), board_file=board_file,
                answers_dir=args.answers_cache or default_answers_dir(), max_rounds=args.max_rounds,
                live=live_demo(endpoint, gateway_config),
                data_factory=_bench_data_factory(getattr(args, "embed_texts", None)),
                board_names=args.board_names() if hasattr(args, "board_names") else {},
            )
            app = create_app(settings)
            threading.Thread(target=app.state.context.warm, name="warm", daemon=True).start()
            if settings.live is not None:  # the live demo's thresholds, off the pages' path
                settings.live.start_preparing()
            if results is None:  # said once the arguments are known to be good, not before an error
                shown = f"--board {board_file}" if board_file else f"the one packaged with jevserve ({PACKAGED_BOARD})"
                print(f"jevserve web: no {DEFAULT_RESULTS}/ folder here, so the board is {shown}; the playground's "
                      "stored rows need a checkout's results (pass --results DIR)", file=sys.stderr)
            host, port = sock.getsockname()[:2]
            print(f"jevserve web: serving on {http_url(host, port)}/ (playground model {endpoint.model} at "
                  f"{endpoint.label}; rounds in {settings.db_path})", flush=True)
            server = uvicorn.Server(uvicorn_config(app, args.forwarded_allow_ips, args.access_log))
            server.run(sockets=[sock])
    except (EndpointError, StoreError) as exc:
        print(f"jevserve web: {exc}", file=sys.stderr)
        return 2
    finally:
        sock.close()
    return 0


def endpoint_warning(endpoint: str, model: str | None, api_key_env: str | None) -> str | None:
    """What to say of a URL endpoint nothing answers at now (the site starts all the same: the board needs no model,
    and the playground says the model did not answer until it does), or None; raises EndpointError for one that can
    never work (no System One server there, a refused key, a model it does not serve). A site started on an
    unreachable endpoint said nothing, and its live demo then timed a call that had failed."""
    from jevserve.bench.endpoint import EMBEDDED, EndpointUnreachable, check_endpoint_arguments, probe_endpoint

    if endpoint == EMBEDDED:
        return None
    check_endpoint_arguments(endpoint, model, api_key_env)
    try:
        probe_endpoint(endpoint, model, api_key_env, timeout_s=5.0)
    except EndpointUnreachable:
        return (f"--endpoint {endpoint}: nothing answers GET {endpoint.rstrip('/')}/v1/models now; the board and "
                "task pages work, and the playground and the live demo say the model gave no answer until it does")
    return None


def export_command(args: argparse.Namespace) -> int:
    """Write the stored answers as JSON lines."""
    from jevserve.web.store import Store, StoreError, pseudonym

    db = args.db or default_db()
    if not db.exists():
        print(f"jevserve web export-rounds: --db {db}: no such file; play a round first or pass --db FILE",
              file=sys.stderr)
        return 2
    try:
        rows = Store(db, reading_only=True).answer_rows()
    except StoreError as exc:
        print(f"jevserve web export-rounds: {exc}", file=sys.stderr)
        return 2
    if str(args.out) != "-" and args.out.is_dir():
        print(f"jevserve web export-rounds: OUT {args.out}: a folder; name a file in it (e.g. "
              f"{args.out / 'rounds.jsonl'})", file=sys.stderr)
        return 2
    if str(args.out) != "-" and not args.out.parent.is_dir():
        # a typo in the path must not create a directory tree (as root, anywhere)
        print(f"jevserve web export-rounds: {args.out.parent}: no such folder; create it first or pick another "
              "OUT", file=sys.stderr)
        return 2
    # the session id is the player's cookie: the export names each session by a one-way pseudonym instead
    rows = [{**row, "session_id": pseudonym(row["session_id"])} for row in rows]
    out = sys.stdout if str(args.out) == "-" else args.out.open("w", encoding="utf-8")
    try:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    if out is not sys.stdout:
        print(f"wrote {len(rows)} answers to {args.out}", file=sys.stderr)
    return 0
