"""`jevserve loadgen`: replay a workload against any OpenAI-compatible server; flags as `vllm bench serve` names them
where it has them (`--base-url`, `--backend`, `--endpoint`, `--model`, `--dataset-name`, `--num-prompts`,
`--request-rate`, `--burstiness`, `--max-concurrency`, `--seed`, `--goodput`, `--metric-percentiles`,
`--save-result`, `--result-dir`, `--result-filename`, `--ignore-eos`, `--disable-tqdm`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from jevserve import json_report
from jevserve.argtypes import (
    check_writable,
    connect_port,
    http_url,
    percentile_list,
    positive_float,
    positive_int,
)
from jevserve.argtypes import port as port_arg
from jevserve.argtypes import seed as seed_arg
from jevserve.sim.argtypes import arrivals_arg

if TYPE_CHECKING:  # imported where used, so `jevserve --help` stays fast
    from jevserve.loadgen.client import RequestResult
    from jevserve.loadgen.workload import PlannedRequest

BACKENDS = {"openai": "/v1/completions", "openai-chat": "/v1/chat/completions"}
NOTHING_COMPLETED = 1  # exit status when the server completed no request (down, every request refused or failed)
INTERRUPTED = 130  # exit status after Ctrl-C (the partial result is written)


def _base_url(text: str) -> str:
    """Refused here rather than failing every request of the run with an "invalid URL" reason."""
    try:
        parts = urlsplit(text.strip())
    except ValueError:  # an unclosed [IPv6] bracket
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.hostname or connect_port(text.strip()) is None:
        raise argparse.ArgumentTypeError(f"--base-url {text!r}: expected http://HOST[:PORT] or https://HOST[:PORT]")
    if parts.path.rstrip("/").endswith("/v1"):  # OpenAI clients' base URL; vLLM's --base-url is the server's root
        raise argparse.ArgumentTypeError(f"--base-url {text!r}: give the server's root without /v1 (as vLLM's "
                                         "benchmark does): --endpoint adds /v1/completions or /v1/chat/completions")
    return text.strip().rstrip("/")


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:
        raise argparse.ArgumentTypeError(f"--request-rate {text!r}: expected requests per second > 0, or inf")
    return value


def _goodput(text: str) -> tuple[str, float]:
    key, _, value = text.partition(":")
    if key not in ("ttft", "tpot", "e2el") or not value:
        raise argparse.ArgumentTypeError(f"--goodput {text!r}: expected ttft:MS, tpot:MS or e2el:MS")
    try:
        return key, positive_float("--goodput")(value)
    except argparse.ArgumentTypeError:  # the whole KEY:MS, not the number alone, so the flag's value is findable
        raise argparse.ArgumentTypeError(f"--goodput {text!r}: {key} needs milliseconds, a finite number > 0, "
                                         f"e.g. {key}:1000") from None


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `jevserve loadgen`."""
    p = subparsers.add_parser(
        "loadgen", help="replay a workload against an OpenAI-compatible server and report serving metrics",
        description="Send ShareGPT (or random) requests on a Poisson, Gamma or on-off schedule to any "
        "OpenAI-compatible server, stream the replies, and report TTFT, TPOT, ITL and E2E latency percentiles, SLO "
        "attainment and goodput with the simulator's definitions. Failed requests are counted by reason; Ctrl-C "
        "writes the partial result, with the requests not yet sent counted apart.",
        epilog=f"exit status: 0 when at least one request completed; {NOTHING_COMPLETED} when none did (the server "
        f"is down, or refused or failed every request); 2 for bad arguments or an unwritable --result-dir; "
        f"{INTERRUPTED} after Ctrl-C.")
    p.add_argument("--base-url", type=_base_url, default=None,
                   help="server URL, e.g. http://127.0.0.1:8000 (default: --host/--port)")
    p.add_argument("--host", default="127.0.0.1", help="server host (default: %(default)s)")
    p.add_argument("--port", type=port_arg("--port"), default=8000, help="server port (default: %(default)s)")
    p.add_argument("--backend", choices=tuple(BACKENDS), default="openai",
                   help="openai: /v1/completions; openai-chat: /v1/chat/completions (default: %(default)s)")
    p.add_argument("--endpoint", default=None, help="API path (default: the backend's)")
    p.add_argument("--model", default=None, help="model name to send (default: the first of /v1/models)")
    p.add_argument("--dataset-name", choices=("sharegpt", "random", "trace"), default="sharegpt",
                   help="sharegpt: the simulator's seeded ShareGPT sample; random: filler prompts; trace: the rows "
                        "of --dataset-path, a trace file as `jevserve sim run --workload` reads (default: sharegpt)")
    p.add_argument("--dataset-path", type=Path, default=None,
                   help="trace: a .jsonl or .csv file of request_id, prompt_tokens, output_tokens and, for "
                        "--arrival-process trace, arrival_s (docs/sim.md, Other workloads)")
    p.add_argument("--sharegpt-split", choices=("all", "train", "test"), default="test",
                   help="which ShareGPT conversations (default: test, as the simulator's experiments)")
    p.add_argument("--num-prompts", type=positive_int("--num-prompts"), default=1000,
                   help="requests to send (default: %(default)s)")
    p.add_argument("--random-input-len", type=positive_int("--random-input-len"), default=1024,
                   help="random: prompt words (default: %(default)s)")
    p.add_argument("--random-output-len", type=positive_int("--random-output-len"), default=128,
                   help="random: reply tokens (default: %(default)s)")
    p.add_argument("--request-rate", type=_rate, default=math.inf,
                   help="mean requests per second; inf sends all at once (default: inf)")
    p.add_argument("--burstiness", type=positive_float("--burstiness"), default=1.0,
                   help="Gamma shape of the gaps: 1 is Poisson, lower is burstier (default: 1)")
    p.add_argument("--arrival-process", type=arrivals_arg(allow_trace=True), default=None,
                   help="poisson, gamma:CV or an on-off process mmpp:BURST_RATIO:BURST_SHARE:MEAN_PHASE_GAPS "
                   "(trailing fields left out take 4, 0.2 and 100; not with --burstiness), or trace: the "
                   "arrival_s of --dataset-name trace's rows")
    p.add_argument("--max-concurrency", type=positive_int("--max-concurrency"), default=None,
                   help="at most this many requests in flight (default: no limit)")
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of the sample and the arrivals (default: 0)")
    p.add_argument("--goodput", type=_goodput, nargs="+", default=None, metavar="KEY:MS",
                   help="SLO for attainment and goodput, e.g. ttft:1000 tpot:50 (default: ttft:1000)")
    p.add_argument("--metric-percentiles", type=percentile_list("--metric-percentiles"), default=(),
                   help="extra percentiles to report, in [0, 100], e.g. 95,99.9")
    p.add_argument("--ignore-eos", action="store_true", help="send ignore_eos (vLLM's, for exact reply lengths)")
    p.add_argument("--timeout", type=positive_float("--timeout"), default=600.0,
                   help="seconds before a request counts as failed (wall time; default: %(default)s)")
    p.add_argument("--speedup", type=positive_float("--speedup"), default=1.0,
                   help="the server runs its clock this many times faster (jevserve engine --speedup): send times "
                   "are divided by it and latencies multiplied back (default: 1)")
    p.add_argument("--save-result", action="store_true",
                   help="write the JSON result and a markdown table (an interrupted run writes its partial result "
                        "either way, so that Ctrl-C loses nothing)")
    p.add_argument("--result-dir", type=Path, default=Path("."), help="folder of the result (default: .)")
    p.add_argument("--result-filename", default=None, help="result file name (default: loadgen-DATE.json)")
    p.add_argument("--disable-tqdm", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_loadgen, check_argv=_ignored_flags)


# what --result-dir and --result-filename are refused with when --save-result is not given
NOT_SAVED = ("without --save-result a finished run writes nothing (an interrupted one writes its partial result in "
             "the current folder); add --save-result")


def _ignored_flags(argv: list[str]) -> None:
    from jevserve.argtypes import UsageError, flag_value, flags_given, refuse_ignored

    given = flags_given(argv)
    dataset = flag_value(argv, "--dataset-name", "sharegpt")
    trace_times = flag_value(argv, "--arrival-process", "") == "trace"
    if dataset == "trace" and "--dataset-path" not in given:
        raise UsageError("--dataset-name trace needs --dataset-path FILE (a .jsonl or .csv trace)")
    if trace_times and dataset != "trace":
        raise UsageError(f"--arrival-process trace sends the rows of --dataset-name trace at their arrival_s; "
                         f"--dataset-name {dataset} has no send times")
    refuse_ignored(argv, [
        ("--dataset-path", dataset == "trace", "it is the file of --dataset-name trace"),
        ("--num-prompts", dataset != "trace", "a trace file's rows are the requests; cut the file to send fewer"),
        ("--request-rate", not trace_times, "--arrival-process trace sends each row at its arrival_s"),
        ("--sharegpt-split", dataset == "sharegpt", "it picks the ShareGPT split of --dataset-name sharegpt"),
        ("--random-input-len", dataset == "random", "it sets the prompts of --dataset-name random"),
        ("--random-output-len", dataset == "random", "it sets the replies of --dataset-name random"),
        ("--host", "--base-url" not in given, "--base-url names the server"),
        ("--port", "--base-url" not in given, "--base-url names the server"),
        ("--result-dir", "--save-result" in given, NOT_SAVED),
        ("--result-filename", "--save-result" in given, NOT_SAVED),
        ("--burstiness", "--arrival-process" not in given, "--arrival-process sets the arrivals"),
    ])


def _listed_model(url: str) -> dict:
    """The first model `url`/v1/models lists (a dict with at least `id`); SystemExit saying why when there is none."""
    import httpx

    def fail(reason: str) -> SystemExit:
        return SystemExit(f"jevserve loadgen: error: cannot read the model from {url}/v1/models ({reason}); "
                          "give --model")

    try:
        response = httpx.get(f"{url}/v1/models", timeout=10)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        # nothing there: "give --model" sent every request on to fail the same way
        raise SystemExit(f"jevserve loadgen: error: nothing answers at {url} ({str(exc) or type(exc).__name__}): "
                         "is the server running there? (check --base-url, --host and --port)") from None
    except httpx.HTTPError as exc:
        raise fail(str(exc) or type(exc).__name__) from None
    if response.status_code != 200:
        raise fail(f"HTTP {response.status_code}")  # its body (an HTML error page, say) is not the reason
    try:
        listed = response.json()["data"][0]
    except ValueError:
        raise fail("the answer is not JSON") from None
    except (KeyError, IndexError, TypeError):
        listed = None
    if not isinstance(listed, dict) or "id" not in listed:
        raise fail("no model listed under data[0].id")
    return listed


def _warn_on_other_speedup(listed: dict, speedup: float) -> float | None:
    """`jevserve engine` lists its clock's speedup with its model: a replay with another --speedup reports latencies
    off by their ratio, so say so (other servers list none, and nothing is said). Returns the server's speedup
    where it differs."""
    from jevserve.loadgen.server_metrics import speedup_error

    server = listed.get("speedup")
    if isinstance(server, int | float) and not isinstance(server, bool) and server > 0 and server != speedup:
        print(f"jevserve loadgen: warning: the server runs its clock {server:g} times faster than the wall clock "
              f"(`speedup` in /v1/models) and --speedup is {speedup:g}, so every latency reported is "
              f"{speedup_error(speedup, server)}; give --speedup {server:g}", file=sys.stderr)
        return float(server)
    return None


def _result_path(args: argparse.Namespace, date: str) -> Path:
    """Where the result goes, its folder created and tried with a file now: a folder that cannot be written fails
    before the run (an OSError naming it, which the CLI reports in one line) instead of losing the result after."""
    path = args.result_dir / (args.result_filename or f"loadgen-{date}.json")
    check_writable(path, "--result-dir")
    return path


def _requests(args: argparse.Namespace, max_model_len: int | None = None) -> tuple[list[PlannedRequest], str]:
    """The planned requests and the name of their arrival process."""
    from jevserve.loadgen.workload import (
        plan_requests,
        random_requests,
        send_times,
        sharegpt_requests,
        trace_requests,
    )

    if args.dataset_name == "sharegpt":
        items = sharegpt_requests(args.num_prompts, seed=args.seed, split=args.sharegpt_split)
    elif args.dataset_name == "trace":
        items, own_times = trace_requests(args.dataset_path, seed=args.seed,
                                          need_arrival=args.arrival_process == "trace", max_model_len=max_model_len)
        if args.arrival_process == "trace":
            return plan_requests(items, own_times), "trace"
        if own_times.size and own_times.max() > 0:
            print(f"note: the trace's own send times are replaced by {_arrivals_said(args)}; pass --arrival-process "
                  "trace to replay them", file=sys.stderr)
    else:
        items = random_requests(args.num_prompts, input_len=args.random_input_len,
                                output_len=args.random_output_len, seed=args.seed)
    process = args.arrival_process or ("poisson" if args.burstiness == 1.0 else "gamma")
    cv = 1.0 / math.sqrt(args.burstiness)
    return plan_requests(items, send_times(len(items), request_rate=args.request_rate, process=process,
                                           seed=args.seed, cv=cv)), process


def _arrivals_said(args: argparse.Namespace) -> str:
    """The generated arrivals, as a note names them."""
    if math.isinf(args.request_rate):
        return "sending every request at once (--request-rate inf)"
    return f"{args.arrival_process or 'poisson'} arrivals at {args.request_rate:g} req/s"


def _write_result(path: Path, data: dict, results: list[RequestResult], table: str, interrupted: bool) -> None:
    # each request's gaps between chunks too (vLLM's bench saves its `itls`), so ITL can be checked afterwards
    data["requests"] = [{"request_id": r.request_id, "ok": r.ok, "error": r.error, "send_s": r.send_s,
                         "ttft_s": r.ttft_s, "e2el_s": r.e2el_s, "num_output_tokens": r.num_output_tokens,
                         "itls_s": [round(gap, 6) for gap in r.itls_s]}
                        for r in results]
    # the summary is in engine time (wall times multiplied by --speedup); the entries above are as measured
    data["requests_time_unit"] = "wall seconds, not multiplied by speedup"
    path.write_text(json_report.dumps(data, indent=1, default=str) + "\n")
    path.with_suffix(".md").write_text(table)
    print(f"result: {path} and {path.with_suffix('.md')}" + (" (interrupted: partial)" if interrupted else ""),
          file=sys.stderr)


def _cmd_loadgen(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from jevserve.loadgen.server_metrics import read_server_ttft
    from jevserve.sim.metrics import Slo

    keys = [key for key, _ in args.goodput or ()]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:  # the last one won, silently
        print(f"jevserve loadgen: error: --goodput names {', '.join(repeated)} more than once; give each target once",
              file=sys.stderr)
        return 2
    date = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    path = _result_path(args, date) if args.save_result else None
    url = args.base_url or http_url(args.host, args.port)
    if args.model:
        try:  # only to compare the server's clock with --speedup
            listed = _listed_model(url)
        except SystemExit:
            listed = {}
        model = args.model
    else:
        listed = _listed_model(url)
        model = listed["id"]
    other_speedup = _warn_on_other_speedup(listed, args.speedup)
    from jevserve.sim.errors import SimError

    try:
        limit = listed.get("max_model_len")  # vLLM and jevserve engine list it: a trace's replies fit it as sim's do
        requests, process = _requests(args, limit if isinstance(limit, int) and limit > 0 else None)
    except SimError as exc:  # a workload that cannot be built (e.g. more prompts than the split holds): bad input
        print(f"jevserve loadgen: error: {exc}", file=sys.stderr)
        return 2
    goals = dict(args.goodput or [("ttft", 1000.0)])
    slo = Slo(goals.get("ttft"), goals.get("tpot"), goals.get("e2el"))
    endpoint = args.endpoint or BACKENDS[args.backend]
    server_before = read_server_ttft(url)
    # the bar's rate is the wall clock's; the summary's is the engine's (times --speedup)
    desc = "loadgen" if args.speedup == 1 else "loadgen (wall-clock rate)"
    # None: drawn only on a terminal, not into a redirected log
    bar = tqdm(total=len(requests), unit="req", desc=desc, disable=True if args.disable_tqdm else None)
    with _sigint_stops_the_replay() as stop:
        results, interrupted = asyncio.run(_replay_until(stop, requests, url=url + endpoint, model=model,
                                                         chat=args.backend == "openai-chat",
                                                         max_concurrency=args.max_concurrency, speedup=args.speedup,
                                                         timeout_s=args.timeout, ignore_eos=args.ignore_eos,
                                                         on_done=lambda _: bar.update()))
        bar.close()
        status = _finish(args, results, interrupted, url=url, endpoint=endpoint, model=model, process=process,
                         goals=goals, slo=slo, path=path, date=date, server_before=server_before,
                         server_speedup=other_speedup)
    return INTERRUPTED if stop.pressed and status == 0 else status


class _Stop:
    """Ctrl-C while the replay runs: the first stops it; every press until the result is written is taken, not
    raised, so a second Ctrl-C (a wrapper passing the terminal's on) cannot lose the partial result."""

    def __init__(self) -> None:
        self.pressed = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self.event: asyncio.Event | None = None

    def __call__(self, signum: int, frame: object) -> None:
        self.pressed += 1
        if self.loop is not None and not self.loop.is_closed() and self.event is not None:
            self.loop.call_soon_threadsafe(self.event.set)


@contextlib.contextmanager
def _sigint_stops_the_replay():
    stop = _Stop()
    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


async def _replay_until(stop: _Stop, requests: list[PlannedRequest], **kwargs: Any) -> tuple[list, bool]:
    from jevserve.loadgen.run import replay

    stop.loop, stop.event = asyncio.get_running_loop(), asyncio.Event()
    if stop.pressed:
        stop.event.set()
    return await replay(requests, stop=stop.event, handle_sigint=False, **kwargs)


def _finish(args: argparse.Namespace, results, interrupted: bool, *, url: str, endpoint: str, model: str,
            process: str, goals: dict, slo, path: Path | None, date: str, server_before,
            server_speedup: float | None = None) -> int:
    """Report and save a replay (partial when `interrupted`); the exit status."""
    from jevserve.loadgen.report import build_report, clumped_itl_note, keeps_up_note, markdown, report_dict
    from jevserve.loadgen.server_metrics import disagreement, read_server_ttft, server_mean_ttft_ms

    timed = math.isfinite(args.request_rate) or process == "trace"  # sent over time, not all at once
    report = build_report(results, slo=slo, speedup=args.speedup, interrupted=interrupted,
                          percentiles=args.metric_percentiles, judge_steady=timed)
    server_after = read_server_ttft(url) if server_before is not None else None
    server_ms = server_mean_ttft_ms(server_before, server_after)
    settings = {"date": date, "base_url": url, "endpoint": endpoint,
                "backend": args.backend, "model": model, "dataset_name": args.dataset_name,
                **({"dataset_path": str(args.dataset_path)} if args.dataset_name == "trace" else {}),
                "request_rate": args.request_rate if math.isfinite(args.request_rate) else
                ("the trace's" if process == "trace" else "inf"),
                "arrival_process": process if timed else "all at once",
                "burstiness": args.burstiness, "max_concurrency": args.max_concurrency, "seed": args.seed,
                "speedup": args.speedup, "slo": goals, "server_mean_ttft_ms": server_ms}
    table = markdown(report, settings)
    print(table, end="")
    # what is said after the table is saved with it: a saved run at --speedup 10 read as 15.6 s of engine TTFT,
    # without the printed note that the server measured 9.7 ms and the time was the host's
    notes = [keeps_up_note(report, max_concurrency=args.max_concurrency, trace=args.dataset_name == "trace"),
             clumped_itl_note(report, args.speedup)]
    if report.summary is not None:
        note = disagreement(report.summary.ttft_ms.mean, server_ms, server_after.lag_s if server_after else None,
                            args.speedup, server_speedup=server_speedup)
        if server_before is None:  # a gateway or another proxy in front: nothing to tell the two latencies apart
            note = (f"note: {url}/metrics has no vLLM TTFT histogram (vllm:time_to_first_token_seconds), so the "
                    "TTFT measured here cannot be compared with the engine's; with a gateway or proxy in front, "
                    "its time is in every latency above")
        notes.append(note)
    notes = [said for said in notes if said]
    for said in notes:
        print(said, file=sys.stderr)
    if path is not None or interrupted:
        data = {**report_dict(report, settings), "notes": notes}
        saved_table = table + "".join(f"\n{said}\n" for said in notes)
        _write_result(path or _result_path(args, date), data, results, saved_table, interrupted)
    if interrupted:
        return INTERRUPTED
    if report.num_completed == 0:
        print(f"jevserve loadgen: error: none of the {report.num_sent} requests completed (see the failures above)",
              file=sys.stderr)
        return NOTHING_COMPLETED
    return 0
