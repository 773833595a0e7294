"""`jevserve gateway check CONFIG` (validate offline, print the operating points) and `jevserve gateway calibrate`."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from jevserve.argtypes import file_path


def register(sub: argparse._SubParsersAction) -> None:
    """Add `check` and `calibrate` under `jevserve gateway`."""
    c = sub.add_parser(
        "check",
        help="validate a gateway config offline and print each decision's operating point",
        description="Validate a gateway config (unknown fields get a 'did you mean'), then print the threshold each "
        "decision will use: set by hand, or computed from max_false_action_rate on the calibration requests. Rates "
        "are resolved from the scores cached for the decider (packaged for the embedded default); --score scores "
        "the ones missing.",
    )
    c.add_argument("config", type=file_path("CONFIG"), metavar="CONFIG", nargs="?", help="the YAML config to check")
    # as `jevserve gateway --config` and `gateway replay --config` take it: `check --config X` was refused
    c.add_argument("--config", dest="config_flag", type=file_path("--config"), metavar="CONFIG",
                   help="the same, as the other commands take it")
    c.add_argument("--decider", metavar="SPEC", help="decision backend to resolve rates for (default: the config's)")
    c.add_argument("--score", action="store_true", help="score calibration requests that no cache holds yet")
    c.set_defaults(func=run_check)
    k = sub.add_parser(
        "calibrate",
        help="score the calibration requests for a config's rate-based decisions (cached for later starts)",
        description="Score every calibration request for each decision configured with max_false_action_rate, "
        "cache the scores on disk ($JEVSERVE_CACHE/operating-points) and print the resolved thresholds. The shipped "
        "models' scores for the default config come with jevserve; another decider, question, bound or calibration "
        "file is scored once: the embedded model took 596 s for guard, harm and clarify on 2 loaded cores; a run "
        "scoring only the tool gate's 2,382 ordinary calls took 19 s, loading included.",
    )
    k.add_argument("--config", type=file_path("--config"), metavar="YAML", help="config (default: the built-in one)")
    k.add_argument("--decider", metavar="SPEC", help="decision backend (default: the config's)")
    k.add_argument(
        "--package",
        action="store_true",
        help="also write the scores into jevserve's packaged operating points, in place of those packaged for the "
        "same model name",
    )
    k.set_defaults(func=run_calibrate)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _config_and_decider(path: str | None, spec: str | None):
    from jevserve.decide.registry import UnknownSpecError
    from jevserve.gateway.config import load_config
    from jevserve.gateway.decider import decider_for

    config = load_config(path)
    if spec:
        config = config.model_copy(update={"decider": spec})
    try:
        return config, decider_for(config)
    except (UnknownSpecError, ValueError) as exc:
        where = f"--decider {spec}" if spec else f"{path or 'the built-in config'}: decider: {config.decider}"
        raise SystemExit(_fail(f"{where}: {exc}")) from None


def _progress(message: str) -> None:
    print(f"  {message} ...", file=sys.stderr, flush=True)


def _log_line(path: str | None) -> str:
    """Where the decision log goes, and whether the gateway will have to make its folder."""
    if path is None:
        return "decision log: off (set log.path to keep one)"
    folder = Path(path).expanduser().resolve().parent
    if folder.is_dir():
        return f"decision log: {path}"
    return f"decision log: {path} (its folder {folder} does not exist yet: the gateway creates it at start)"


def run_check(args: argparse.Namespace) -> int:
    """Validate the config; print the resolved operating points (exit 2 on an invalid config)."""
    from jevserve.gateway.config import (
        objective_notes,
        unset_key_warnings,
        upstream_url_warnings,
        windows_in_context_notes,
    )
    from jevserve.gateway.errors import ConfigError
    from jevserve.gateway.operating_points import resolve_operating_points

    if (args.config is None) == (getattr(args, "config_flag", None) is None):
        return _fail("give the config to check once: `jevserve gateway check CONFIG` (or --config CONFIG)")
    args.config = args.config or args.config_flag
    try:
        config, decider = _config_and_decider(args.config, args.decider)
        # the operating points read the calibration files: a missing one fails here, before "valid" is printed
        _, points = resolve_operating_points(config, decider, progress=_progress, score_missing=args.score,
                                             rate_hand_thresholds=True)
    except ConfigError as exc:
        return _fail(str(exc))
    if any(r.cache is not None and r.cache.enabled for r in config.routes):
        from jevserve.gateway.cache import cache_install_problem

        problem = cache_install_problem()  # the gateway would fail at start: the check says so now
        if problem is not None:
            return _fail(problem)
    from jevserve.gateway.log import unwritable_problem

    if config.log.path is not None and (problem := unwritable_problem(config.log.path)):
        # the start would fail on it after announcing the port: refused here, as the start refuses it
        return _fail(f"{args.config or 'the built-in config'}: log.path {config.log.path}: {problem}")
    routes, upstreams = len(config.routes), len(config.upstreams)
    print(f"{args.config}: valid ({routes} route{'s' if routes != 1 else ''}, "
          f"{upstreams} upstream{'s' if upstreams != 1 else ''})")
    print(_log_line(config.log.path))
    if not config.routes:
        print("warning: no routes, so every request gets 404 (model not found); add one under `routes:` "
              "(docs/gateway.md, Config reference)", file=sys.stderr)
    notes = windows_in_context_notes(config, decider.reads_windows_in_context, decider.name)
    for line in upstream_url_warnings(config) + unset_key_warnings(config) + objective_notes(config) + notes:
        print(line, file=sys.stderr)
    if points:
        print(f"operating points for decider {decider.name}:")
    else:  # said, not a heading over nothing
        print(f"operating points for decider {decider.name}: none (no route has a decision that acts at a threshold)")
    for point in points:
        print(f"  {point.describe()}")
    missing = [p for p in points if p.max_false_action_rate is not None and p.threshold != p.threshold]
    if missing:
        named = f" --decider {args.decider}" if args.decider else ""  # the same decider, or another is calibrated
        if getattr(decider, "identity_unknown", False):  # a remote never asked, not answering now: calibrate fails
            print(f"{len(missing)} rate(s) not known: the decider {decider.name} did not answer the question that "
                  "tells which model it serves, and was never asked before; once it answers, `jevserve gateway "
                  f"calibrate --config {args.config}{named}` scores them")
        else:
            print(f"{len(missing)} rate(s) not scored yet: `jevserve gateway calibrate --config {args.config}{named}` "
                  "scores them")
            from jevserve.gateway.operating_points import other_build_note

            if (note := other_build_note(decider)) is not None:
                print(f"note: {note}")
    return 0


def run_calibrate(args: argparse.Namespace) -> int:
    """Score, cache and print; with --package, write the scores into the package."""
    from jevserve.gateway.errors import ConfigError
    from jevserve.gateway.operating_points import ScoreCache, resolve_operating_points, write_packaged

    started = time.monotonic()
    try:
        config, decider = _config_and_decider(args.config, args.decider)
        cache = ScoreCache()
        _, points = resolve_operating_points(config, decider, scores=cache, progress=_progress)
    except ConfigError as exc:
        return _fail(str(exc))
    for point in points:
        print(f"  {point.describe()}")
    if args.package:
        keys = write_packaged(config, decider, cache)
        print(f"wrote {len(keys)} score sets into the packaged operating points")
    print(f"done in {time.monotonic() - started:.0f} s")
    return 0
