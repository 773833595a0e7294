"""Builders for data-source tests: tiny fake wheels and sdists with a package's real internal layout."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from jevserve.bench.sources.spec import Archive, SourceSpec

Files = Mapping[str, str | bytes]


def _bytes(content: str | bytes) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else content


def write_wheel(path: Path, files: Files) -> Path:
    """A zip file (a wheel's format) holding `files` at their paths."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, content in files.items():
            zf.writestr(name, _bytes(content))
    return path


def write_sdist(path: Path, top: str, files: Files) -> Path:
    """A .tar.gz holding `files` below the folder `top`, as an sdist nests them."""
    with tarfile.open(path, "w:gz") as tf:
        for name, content in files.items():
            data = _bytes(content)
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def sha256_of(path: Path) -> str:
    """The sha256 of a file, computed independently of the code under test."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pinned_archive(wheel: Path, package: str = "fake-pkg", version: str = "1.0", sdist: Path | None = None) -> Archive:
    """An Archive that pins the given fake wheel (and sdist) by their real sha256."""
    return Archive(
        package=package,
        version=version,
        wheel_sha256=sha256_of(wheel),
        sdist_sha256=sha256_of(sdist) if sdist else "",
        license="MIT",
    )


def make_spec(
    name: str, archive: Archive, files: Iterable[str], loader: Callable[[Path], tuple[Any, ...]], kind: str = "Any"
) -> SourceSpec:
    """A SourceSpec over a fake archive."""
    return SourceSpec(
        name=name,
        family="test",
        archive=archive,
        files=tuple(files),
        loader=loader,
        record_kind=kind,
        description=f"test source {name}",
    )


def jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    """JSON-lines text of the rows."""
    return "".join(json.dumps(row) + "\n" for row in rows)


def bastion_row(row_id: str, text: str, label: str = "malicious", lang: str = "en") -> dict[str, Any]:
    """One bastioncorpus row with the fields the loader reads."""
    return {"id": row_id, "category": "direct_injection", "label": label, "lang": lang, "text": text}


def write_tree(root: Path, files: Files) -> Path:
    """Write `files` below `root` at their wheel paths (the layout loaders read) and return `root`."""
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_bytes(content))
    return root
