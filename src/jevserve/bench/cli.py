"""`jevserve bench run | board | predict-lengths | list`: run JevServe-Bench, draw its board, export lengths."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import threading
import time
from pathlib import Path

from jevserve.argtypes import positive_int
from jevserve.argtypes import resamples as resamples_arg

DEFAULT_RESULTS = Path("results")
DEFAULT_CONCURRENCY = 32


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `bench` command and its sub-commands."""
    bench = subparsers.add_parser(
        "bench",
        help="JevServe-Bench: score a decision model on serving decisions from public data",
        description="JevServe-Bench asks a System One endpoint fixed questions about public data (fetched with "
        "`jevserve data fetch`), turns the answers into serving decisions, and scores each decision against today's "
        "default rule (0) on the range from chance to an oracle, with 95% bootstrap intervals. docs/bench.md "
        "describes every task.",
    )
    bench.set_defaults(func=lambda _args: bench.print_help() or 2)
    commands = bench.add_subparsers(dest="bench_command", metavar="SUBCOMMAND")
    from jevserve.bench.cli_board import add_board
    from jevserve.bench.cli_everyday import add_export_everyday, add_export_tool_calls, add_validate
    from jevserve.bench.cli_more import add_rebase, add_spread

    _add_run(commands)
    add_board(commands)
    _add_predict_lengths(commands)
    _add_list(commands)
    add_spread(commands)
    add_rebase(commands)
    add_export_everyday(commands)
    add_export_tool_calls(commands)
    add_validate(commands)


def answers_label(text: str) -> str:
    """An `--answers-version` label: it names the answers file, so it needs a letter or digit (`...` crashed after
    the data had loaded, and an empty one was ignored)."""
    from jevserve.bench.answers_cache import safe_name

    try:
        safe_name(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--answers-version {text!r}: expected a label with letters or digits, "
                                         "e.g. v1.2 or a weights digest") from None
    return text


def _endpoint_arguments(parser: argparse.ArgumentParser, required: bool, *, writes_results: bool = True) -> None:
    parser.add_argument("--endpoint", required=required, metavar="URL|embedded",
                        help="a System One server root (http://host:port) or 'embedded' (the shipped model, started "
                        "in this process)")
    names = "the results folder and the answers cache" if writes_results else "the answers cache"
    parser.add_argument("--model", default=None,
                        help=f"model name to ask for; names {names} (default for embedded: its default model, "
                        "jev-minilm-2; required with a URL)")
    parser.add_argument("--api-key-env", default=None, metavar="VAR",
                        help="environment variable holding the endpoint's API key (sent as a bearer token)")
    parser.add_argument("--concurrency", type=positive_int("--concurrency"), default=DEFAULT_CONCURRENCY,
                        help="requests in flight at once (default: %(default)s)")
    parser.add_argument("--answers-cache", type=Path, default=None, metavar="DIR",
                        help="where answers are cached, one JSONL file per model (default: "
                        "$JEVSERVE_CACHE/bench/answers or ~/.cache/jevserve/bench/answers)")
    parser.add_argument("--answers-version", default=None, metavar="LABEL", type=answers_label,
                        help="a URL endpoint only: name the version of its answers yourself (a release or weights "
                        "digest) instead of the bench's probes, for an endpoint whose answers vary from call to call; "
                        "answers cached under a label are reused by every run that gives it, so give a new one when "
                        "the weights change")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_run(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser(
        "run",
        help="ask an endpoint every task's questions and write results/<model>/<date>.json",
        description="Ask the endpoint the questions of every task (train and test items; train answers tune the "
        "thresholds), "
        "then score the test items. A task whose decision acts on traffic also asks the same question about the "
        "everyday requests, for its false-action rate on ordinary traffic: most of a full run's 48,407 requests "
        "(docs/bench.md), and most of a guard task's own. Answers are cached as they arrive, so an interrupted run "
        "resumes and a rerun sends nothing. A task whose data is missing is skipped with the command that fetches"
        " it. With --baselines, also (or only, without --endpoint) write the rows that need no endpoint: default "
        "rules, the supervised tfidf-lr baseline and the source-only baselines.",
    )
    _endpoint_arguments(run, required=False)
    run.add_argument("--tasks", default=None, metavar="A,B",
                     help="comma-separated task names (default: all; see `jevserve bench list`)")
    run.add_argument("--baselines", action="store_true",
                     help="write the default-rules, tfidf-lr, source-style and source-majority rows as well")
    run.add_argument("--peers", action="store_true",
                     help="write the offline peer detectors' rows on the guard tasks as well (securevector-guardian "
                     "and its own verdict; needs `pip install 'jevserve[peers]'`)")
    run.add_argument("--results", type=Path, default=DEFAULT_RESULTS, metavar="DIR",
                     help="results folder (default: %(default)s)")
    run.add_argument("--data-cache", default=None, metavar="DIR",
                     help="data cache of `jevserve data fetch` (default: its default)")
    run.add_argument("--split-salt", default=None, metavar="SALT",
                     help="split every task with this salt instead of the bench's (for measuring split variance; "
                     "results go to RESULTS/split-salts/SALT/, never onto the board; a trained model's test side is "
                     "only held out under the salt it was trained with)")
    run.add_argument("--metadata", action="append", default=[], metavar="KEY=VALUE", type=_key_value,
                     help="what the board says about the row (repeatable): parameters, runs, latency, licence "
                     "(the embedded models fill these in)")
    run.add_argument("--resamples", type=resamples_arg, default=10_000,
                     help="bootstrap resamples for intervals (default: %(default)s, what committed rows use; fewer "
                     "for a quick look)")
    run.set_defaults(func=run_command)


def _add_predict_lengths(commands: argparse._SubParsersAction) -> None:
    predict = commands.add_parser(
        "predict-lengths",
        help="predict reply tokens of every ShareGPT request the simulator uses (JSONL for --predictions)",
        description="Ask the reply-length questions about every valid ShareGPT request (train and test), fit the "
        "regression on the train side, and write one JSON line per request: request_id, predicted_tokens, split. "
        "The file is what `jevserve sim ... --predictions FILE` reads.",
    )
    _endpoint_arguments(predict, required=True, writes_results=False)  # it writes --out only
    predict.add_argument("--out", type=Path, required=True, metavar="FILE", help="JSONL file to write")
    predict.set_defaults(func=predict_lengths_command)


def _add_list(commands: argparse._SubParsersAction) -> None:
    listing = commands.add_parser(
        "list", help="show every task: category, data sources and their status, metric",
        description="Show every task with its category, its data sources (and whether they are here), its metric "
        "and what it decides.",
    )
    listing.add_argument("--data-cache", default=None, metavar="DIR", help="data cache to check")
    listing.add_argument("--markdown", action="store_true",
                         help="print every task's reference section (as in docs/bench.md); loads each task's data")
    listing.add_argument("--into", type=Path, default=None, metavar="FILE",
                         help="with --markdown: replace the generated block of FILE (docs/bench.md) instead of "
                         "printing")
    listing.add_argument("--results", type=Path, default=DEFAULT_RESULTS, metavar="DIR",
                         help="with --markdown: read default and source-only numbers from DIR/default-rules")
    listing.set_defaults(func=list_command)


def _command(args: argparse.Namespace, model: str | None = None) -> str:
    # The model is always named: `--endpoint embedded` alone serves whichever readout is the default at the time.
    parts = ["jevserve", "bench", "run"]
    if args.endpoint:
        parts += ["--endpoint", args.endpoint]
        if model or args.model:
            parts += ["--model", model or args.model]
        if getattr(args, "api_key_env", None):  # the variable's name, never its value: a keyed server needs it
            parts += ["--api-key-env", args.api_key_env]
        # the rate in the row's latency note depends on it
        if getattr(args, "concurrency", DEFAULT_CONCURRENCY) != DEFAULT_CONCURRENCY:
            parts += ["--concurrency", str(args.concurrency)]
        if getattr(args, "answers_version", None):  # which cached answers the row was scored on
            parts += ["--answers-version", args.answers_version]
    if args.tasks:
        parts += ["--tasks", args.tasks]
    if args.baselines:
        parts.append("--baselines")
    if args.split_salt:
        parts += ["--split-salt", args.split_salt]
    for key, value in getattr(args, "metadata", None) or ():  # what the row says about itself is part of the row
        parts.append(f"--metadata={key}={value}")  # one word: a key starting with "-" is no option on a replay
    return shlex.join(parts + _resamples_flag(args))


def _resamples_flag(args: argparse.Namespace) -> list[str]:
    """`--resamples N` when it is not the default: the intervals a results file holds depend on it."""
    from jevserve.bench.stats import NUM_RESAMPLES

    return [] if args.resamples == NUM_RESAMPLES else ["--resamples", str(args.resamples)]


def run_command(args: argparse.Namespace) -> int:
    """`jevserve bench run` (under `--split-salt` when given)."""
    from jevserve.bench.sources import DEFAULT_SALT, split_salt

    if args.split_salt is not None and not args.split_salt.strip():
        print(f"error: --split-salt {args.split_salt!r}: expected a non-empty string", file=sys.stderr)
        return 2
    salt = args.split_salt or DEFAULT_SALT
    if salt != DEFAULT_SALT:
        args.results = Path(args.results) / "split-salts" / salt
    stopped: list[signal.Signals] = []

    def on_term(signum: int, frame: object) -> None:  # SIGTERM while the data loads ended the run without a word
        stopped.append(signal.Signals(signum))
        raise KeyboardInterrupt

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_term) if main_thread else None
    try:
        with split_salt(salt):
            return _run(args)
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM outside the asking (which says how many answers it cached): one line, not a traceback,
        # and the shell's status for the signal
        signum = stopped[0] if stopped else signal.SIGINT
        said = "interrupted" if signum == signal.SIGINT else f"stopped by {signum.name}"
        print(f"error: {said}; every answer received is cached, so running the same command again resumes",
              file=sys.stderr)
        return 128 + signum
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace) -> int:
    from jevserve.bench.data import BenchData
    from jevserve.bench.pipeline import load_tasks, needed_requests, score_baselines, score_model
    from jevserve.bench.results import MAX_UNANSWERED_SHARE, unanswered_note, write_result
    from jevserve.bench.runner import AskFailed, ask_endpoint
    from jevserve.bench.sources import DataSourceError
    from jevserve.bench.tasks import UnknownTaskError, select_tasks

    started = time.perf_counter()  # wall time covers the whole command: data, server start, asking, scoring
    if not args.endpoint and not args.baselines and not args.peers:
        print("error: pass --endpoint URL|embedded (and --model for a URL), --baselines or --peers", file=sys.stderr)
        return 2
    try:
        tasks = select_tasks(args.tasks)
    except UnknownTaskError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from jevserve.bench.endpoint import EndpointError, EndpointUnreachable, check_endpoint_arguments
    from jevserve.bench.outputs import output_problem

    try:  # the arguments alone first, before the folder is tried
        if args.endpoint:
            check_endpoint_arguments(args.endpoint, args.model, args.api_key_env)
    except EndpointError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problem = output_problem(args.results, folder=True)
    if problem:
        print(f"error: --results {args.results}: {problem}", file=sys.stderr)
        return 2
    if args.endpoint and args.answers_cache is not None:
        problem = output_problem(args.answers_cache, folder=True)
        if problem:  # said now and naming the flag, not after the data has loaded
            print(f"error: --answers-cache {args.answers_cache}: {problem}", file=sys.stderr)
            return 2
    version = None
    if args.endpoint:  # before loading the data and the near-duplicate check (half a minute)
        try:
            version = early_version(args)
        except EndpointError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1 if isinstance(exc, EndpointUnreachable) else 2
        except AskFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.exit_code
    data = BenchData(args.data_cache, embed=args.embed_texts)
    try:
        loaded, skipped = load_tasks(tasks, data, log=lambda message: print(message, file=sys.stderr))
    except DataSourceError as exc:  # a damaged release in the data cache; its message says what to run
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not loaded:
        cache = f" --cache {args.data_cache}" if args.data_cache else ""  # where this run reads, not the default
        print(f"error: no task has its data here; run `jevserve data fetch{cache}`", file=sys.stderr)
        return 1
    if args.baselines:
        tasks = ["--tasks", args.tasks] if args.tasks else []
        salt = ["--split-salt", args.split_salt] if args.split_salt else []
        command = shlex.join(["jevserve", "bench", "run", "--baselines", *tasks, *salt, *_resamples_flag(args)])
        for document in score_baselines(loaded, data, command=command, skipped=skipped,
                                        num_resamples=args.resamples):
            if not document["tasks"]:  # a row that reads none of these tasks (the source probes need several sources)
                print(f"{document['model']}: reads none of these tasks; nothing written")
                continue
            print(f"{document['model']}: {_summary(document)} -> {write_result(args.results, document)}")
    if args.peers:
        code = _peer_rows(args, loaded, data)
        if code:
            return code
    if not args.endpoint:
        return 0
    try:
        asked = ask_endpoint(args.endpoint, args.model, args.api_key_env, args.answers_cache,
                             lambda model: needed_requests(model, loaded), concurrency=args.concurrency,
                             progress=not args.no_progress, serve_embedded=args.serve_embedded,
                             output_problem=lambda model: _results_problem(args.results, model), version=version)
    except AskFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    stats = asked.stats
    document = score_model(
        asked.model, loaded, data, asked.cache, command=_command(args, asked.model), skipped=skipped,
        num_resamples=args.resamples,
        endpoint=asked.label, ask_wall_s=stats.wall_s, num_decisions=stats.num_decisions,
        num_requests=stats.num_requests, num_sent=stats.num_sent, num_cached=stats.num_cached,
        num_refused=stats.num_refused,
    )
    document["metadata"] = _metadata(args, asked.label, asked.model, stats)
    document["wall_s"] = time.perf_counter() - started
    document["answers_version"] = asked.cache.version  # what the answers depend on beyond the name (bench.md)
    replaced = _answers_version_of(args.results, document)
    path = write_result(args.results, document)
    print(f"{asked.model}: {_summary(document)}; {stats.num_sent} requests sent, {stats.num_cached} cached, "
          f"{stats.wall_s:.0f} s asking -> {path}")
    warning = _replacement_warning(path, document, replaced)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    note = unanswered_note(document)
    if note:
        print(f"warning: {note}; `jevserve bench validate` refuses a row with over "
              f"{100 * MAX_UNANSWERED_SHARE:g}% of them (the endpoint's log says why it refused)", file=sys.stderr)
    return 0


def early_version(args: argparse.Namespace) -> str | None:
    """Check an endpoint before a command's slow start: the arguments, `GET /v1/models`, and for a URL its answers
    version (`--answers-version`, else the probes asked twice), returned for the asking. Raises EndpointError or
    AskFailed (runner)."""
    from jevserve.bench.endpoint import EMBEDDED, EndpointError, probe_endpoint
    from jevserve.bench.runner import endpoint_version_now

    if args.endpoint == EMBEDDED and args.answers_version is not None:
        raise EndpointError("--answers-version is for a URL endpoint; the embedded models' answers are versioned by "
                            "their weights")
    probe_endpoint(args.endpoint, args.model, args.api_key_env,
                   check_embedded=getattr(args, "check_embedded_model", None))
    if args.endpoint == EMBEDDED:
        return None
    return endpoint_version_now(args.endpoint, args.model, args.api_key_env, args.answers_cache, args.answers_version)


def _results_problem(results_dir: Path, model: str) -> str | None:
    """Why the row's results folder under `--results` cannot be written, or None: asked before the asking, as
    `--results` itself is, so the scoring is not lost to a folder found unwritable at the end."""
    from jevserve.bench.outputs import output_problem
    from jevserve.bench.results import result_path

    folder = result_path(results_dir, model, "date").parent
    problem = output_problem(folder, folder=True)
    return f"--results {results_dir}: {problem}" if problem else None


EMBEDDED_METADATA = {
    "parameters": "all-MiniLM-L6-v2 encoder (22.7M, int8 ONNX) with the shipped readout",
    "runs": "CPU, ONNX Runtime, in process (jevserve serve / gateway)",
    "licence": "Apache-2.0 (jevserve and the MiniLM weights)",
}
# Embedded models whose weights are not the shipped encoder's with a readout on top.
EMBEDDED_PARAMETERS = {
    "minilm-tuned-reader": "all-MiniLM-L6-v2 (22.7M) with its top two layers fine-tuned (`jevserve train --tuned`), "
                           "int8 ONNX, and the tuned reader's readout",
}


def _metadata(args: argparse.Namespace, label: str, model: str, stats: object) -> dict[str, str]:
    from jevserve.bench.endpoint import EMBEDDED

    # a URL endpoint's address says nothing to a reader of the board (a loopback one least of all), and the row's
    # command keeps it: where the model runs is the submitter's to say
    metadata = {"runs": "its own server, asked over HTTP (--metadata runs=... says on what)"}
    if label == EMBEDDED:
        metadata = {**EMBEDDED_METADATA, "parameters": EMBEDDED_PARAMETERS.get(model, EMBEDDED_METADATA["parameters"])}
    sent, wall = getattr(stats, "num_sent", 0), getattr(stats, "wall_s", 0.0)
    if sent and wall:
        # says which requests it measured: a later run answered from the cache carries it on as it is
        metadata["latency"] = (f"{sent / wall:.0f} requests/s over the {sent:,} requests one bench run sent "
                               f"(concurrency {args.concurrency}, {os.cpu_count()} CPUs)")
    elif getattr(args, "results", None) is not None:
        # Every answer came from the cache: keep the rate measured by the run that asked them.
        latency = _previous_metadata(args.results, model).get("latency")
        if latency:
            metadata["latency"] = latency
    metadata.update(dict(args.metadata))
    return metadata


def _answers_version_of(results_dir: Path, document: dict) -> str | None:
    """The answers version recorded in the results file this document would replace (same row, same date), if any."""
    from jevserve.bench.results import ResultsFormatError, read_result, result_path

    path = result_path(results_dir, document["model"], document["date"])
    try:
        return read_result(path).get("answers_version") if path.exists() else None
    except ResultsFormatError:
        return None


def _replacement_warning(written: Path, document: dict, previous: str | None) -> str | None:
    """What to say when `written` replaced the row's results file of the day whose answers had another version
    (`previous`): another model answered under the same --model name, and its row is gone."""
    now = document.get("answers_version")
    if previous is None or previous == now or written.name != f"{document['date']}.json":
        return None
    return (f"{written} held today's results of {document['model']} from other answers (version {previous}, now "
            f"{now}): another model answered under the name; they are replaced, so give a new model a --model name "
            "of its own to keep both rows")


def _previous_metadata(results_dir: Path, model: str) -> dict:
    # The metadata of the row's newest readable results file under `results_dir` ({} when there is none).
    from jevserve.bench.results import ResultsFormatError, read_result, result_path

    for path in sorted(result_path(results_dir, model, "x").parent.glob("????-??-??.json"), reverse=True):
        try:
            metadata = read_result(path).get("metadata")
        except (OSError, ResultsFormatError):
            continue
        return metadata if isinstance(metadata, dict) else {}
    return {}


def _key_value(value: str) -> tuple[str, str]:
    key, sep, text = value.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{value!r}: expected KEY=VALUE, e.g. licence=Apache-2.0")
    return key.strip(), text.strip()


def _peer_rows(args: argparse.Namespace, loaded: list, data: object) -> int:
    from jevserve.bench.peers import PEERS, score_peer
    from jevserve.bench.results import write_result
    from jevserve.bench.sources import SourceMissingError

    tasks = ["--tasks", args.tasks] if args.tasks else []
    command = shlex.join(["jevserve", "bench", "run", "--peers", *tasks, *_resamples_flag(args)])
    for peer in PEERS.values():
        try:
            documents = score_peer(peer, loaded, data, command=command, num_resamples=args.resamples,
                                   progress=not args.no_progress)
        except SourceMissingError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        for document in documents:
            print(f"{document['model']}: {_summary(document)} -> {write_result(args.results, document)}")
    return 0


def _summary(document: dict) -> str:
    """The run's averages, named by the tasks they cover (a run of one task printed "headline average … over 1
    task"), with where their intervals come from: the board draws all of a row's tasks together, so the same answers
    get slightly other brackets there (an outside tester saw [3.6, 62.1] here and [2.1, 62.4] on the board)."""
    parts = []
    for key, kind in (("average", "headline "), ("average_all", "")):
        average = document.get(key)
        if average and average["num_tasks"]:
            low, high = average["interval"]
            tasks = f"the 1 {kind}task" if average["num_tasks"] == 1 else f"the {average['num_tasks']} {kind}tasks"
            parts.append(f"average over {tasks} run {average['score']:.1f} [{low:.1f}, {high:.1f}]")
    # a near-oracle task (its default rule all but the oracle) is in neither average: said, not left to guess
    averaged = set((document.get("average_all") or {}).get("tasks") or ())
    outside = sorted(set(document.get("tasks") or ()) - averaged) if averaged or parts else []
    if outside:
        parts.append(f"{', '.join(outside)} in neither (near-oracle: the default rule is all but the oracle there)")
    if not parts:
        return "no task scored"
    return "; ".join(parts) + " (95% intervals of this run's draws; the board's shared draws differ a little)"


def predict_lengths_command(args: argparse.Namespace) -> int:
    """`jevserve bench predict-lengths`."""
    from jevserve.bench.lengths_export import export_lengths

    return export_lengths(args)


def list_command(args: argparse.Namespace) -> int:
    """`jevserve bench list`."""
    from jevserve.bench.sources import SOURCES, DataSourceError, source_status
    from jevserve.bench.tasks import TASKS

    if args.markdown:
        return _markdown(args)
    for task in TASKS.values():
        states = []
        for name in task.sources:
            if name in SOURCES:
                try:
                    state = source_status(name, args.data_cache).state
                except DataSourceError:  # a damaged manifest; `jevserve data list` says what to run
                    state = "damaged"
                states.append(f"{name} ({state})")
            else:
                states.append(f"{name} (package)")
        print(f"{task.name:24s} {task.category:9s} {task.metric.name:18s} {task.summary}")
        print(f"{'':24s} data: {', '.join(states)}")
    return 0


def _markdown(args: argparse.Namespace) -> int:
    from jevserve.bench.data import BenchData
    from jevserve.bench.describe import replace_generated, tasks_markdown
    from jevserve.bench.pipeline import load_tasks
    from jevserve.bench.results import ResultsFormatError, latest_results
    from jevserve.bench.tasks import TASKS

    loaded, skipped = load_tasks(list(TASKS.values()), BenchData(args.data_cache, embed=args.embed_texts),
                                 log=lambda m: print(m, file=sys.stderr), everyday=False)
    baseline = None
    if (args.results / "default-rules").is_dir():
        try:
            baseline = next(d for d in latest_results(args.results).documents if d["model"] == "default-rules")
        except (StopIteration, ResultsFormatError):
            baseline = None
    generated = tasks_markdown(loaded, skipped, baseline, args.results)
    if args.into is None:
        print(generated)
        return 0
    try:
        args.into.write_text(replace_generated(args.into.read_text(encoding="utf-8"), generated), encoding="utf-8")
    except (OSError, ValueError) as exc:
        print(f"error: --into {args.into}: {exc}", file=sys.stderr)
        return 1
    print(f"wrote the task sections into {args.into}")
    return 0
