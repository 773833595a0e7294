"""Where a source's files live on this machine: the data cache (verified by hash) or an installed package.

Cache layout, one directory per pinned release:

    <cache>/<package>-<version>/manifest.json      package, version, archive, sha256, licence, files and their sha256
    <cache>/<package>-<version>/<path in wheel>    each data file, at its path inside the wheel

A release directory appears in one rename after its manifest is written (fetch.py), so a directory with a manifest
is complete, and an interrupted fetch leaves nothing that looks finished.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from jevserve.bench.sources.errors import SourceFormatError
from jevserve.bench.sources.spec import Archive, SourceSpec, covers
from jevserve.cache_root import cache_root, sha256_file

MANIFEST_NAME = "manifest.json"


def default_cache_dir() -> Path:
    """$JEVSERVE_CACHE/data when that variable is set, else ~/.cache/jevserve/data."""
    return cache_root() / "data"


def resolve_cache_dir(cache: str | Path | None) -> Path:
    """The data cache directory: `cache` when given (as --cache does), else the default."""
    return Path(cache).expanduser() if cache else default_cache_dir()


@dataclass(frozen=True)
class Manifest:
    """What a fetch extracted from one archive, written next to the files."""

    package: str
    version: str
    archive: str  # file name of the wheel or sdist the files came from
    sha256: str  # of that archive; one of the pinned hashes
    license: str
    files: tuple[tuple[str, str], ...]  # (path inside the wheel, sha256 of the extracted file), sorted by path
    fetched_at: str  # ISO 8601 UTC time of the fetch

    def to_json(self) -> dict[str, Any]:
        """The manifest as a JSON object."""
        return {
            "package": self.package,
            "version": self.version,
            "archive": self.archive,
            "sha256": self.sha256,
            "license": self.license,
            "files": dict(self.files),
            "fetched_at": self.fetched_at,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], where: Path) -> Manifest:
        """Parse a manifest object; `where` names the file in errors."""
        try:
            return cls(
                package=str(data["package"]),
                version=str(data["version"]),
                archive=str(data["archive"]),
                sha256=str(data["sha256"]),
                license=str(data["license"]),
                files=tuple(sorted((str(k), str(v)) for k, v in dict(data["files"]).items())),
                fetched_at=str(data["fetched_at"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SourceFormatError(f"{where} is not a valid manifest ({exc}); run `jevserve data fetch --force` to "
                                    "fetch its release again") from exc


def release_dir(cache_dir: Path, archive: Archive) -> Path:
    """The cache directory of one pinned release."""
    return cache_dir / archive.cache_name


def read_manifest(directory: Path) -> Manifest | None:
    """The manifest in `directory`, or None when there is none."""
    path = directory / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SourceFormatError(f"{path} is damaged, not JSON ({exc}); run `jevserve data fetch --force` to fetch "
                                "its release again") from exc
    if not isinstance(data, dict):
        raise SourceFormatError(f"{path} is damaged, not a JSON object; run `jevserve data fetch --force` to fetch "
                                "its release again")
    return Manifest.from_json(data, path)


def write_manifest(directory: Path, manifest: Manifest) -> None:
    """Write `manifest.json` into `directory`."""
    text = json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n"
    (directory / MANIFEST_NAME).write_text(text, encoding="utf-8")


@dataclass(frozen=True)
class Location:
    """Where a source's files were found: `root / <path in wheel>` is each file."""

    kind: Literal["cache", "installed"]
    root: Path
    manifest: Manifest | None  # None for an installed package (pip installed it; no hash of ours applies)


def cached_location(spec: SourceSpec, cache_dir: Path) -> Location | None:
    """The cache location of a source when its release is there, pinned and complete; else None."""
    directory = release_dir(cache_dir, spec.archive)
    manifest = read_manifest(directory)
    if manifest is None or manifest.version != spec.archive.version:
        return None
    if manifest.sha256 not in spec.archive.pinned_hashes:
        return None
    present = [path for path, _ in manifest.files if (directory / path).is_file()]
    if len(present) != len(manifest.files) or not covers(spec.files, present):
        return None
    return Location(kind="cache", root=directory, manifest=manifest)


def intact_location(spec: SourceSpec, cache_dir: Path) -> Location | None:
    """The cache location of a source when its release is there and every file still has the sha256 its manifest
    recorded; None when it is missing or damaged (a damaged manifest included), so that a fetch replaces it."""
    try:
        location = cached_location(spec, cache_dir)
    except SourceFormatError:
        return None
    if location is None or location.manifest is None:
        return location
    return None if changed_files(location) else location


def changed_files(location: Location) -> list[str]:
    """The files of a cached release whose bytes are no longer those its manifest recorded at the fetch (an
    installed package's: none, pip owns them). A file cut short at a line end still parses, so only this sees it."""
    if location.manifest is None:
        return []
    return [path for path, digest in location.manifest.files if sha256_file(location.root / path) != digest]


def installed_location(spec: SourceSpec) -> Location | None:
    """The site-packages location of a source when exactly its pinned version is installed with all files."""
    try:
        dist = metadata.distribution(spec.archive.package)
    except metadata.PackageNotFoundError:
        return None
    if dist.version != spec.archive.version:
        return None
    root = Path(str(dist.locate_file("")))
    present = [str(PurePosixPath(f)) for f in dist.files or ()]
    if not covers(spec.files, [p for p in present if (root / p).is_file()]):
        return None
    return Location(kind="installed", root=root, manifest=None)


def locate(spec: SourceSpec, cache_dir: Path, use_installed: bool = True) -> Location | None:
    """The cache location of a source, else (when allowed) its installed location, else None."""
    found = cached_location(spec, cache_dir)
    if found is None and use_installed:
        found = installed_location(spec)
    return found
