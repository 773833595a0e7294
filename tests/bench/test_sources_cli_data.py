"""`jevserve data list` and `jevserve data fetch`, run through their own parser (no network)."""

from __future__ import annotations

import argparse
import json

import pytest

from jevserve.bench import cli_data
from jevserve.bench.sources import SOURCES
from tests.bench.sources_builders import write_wheel


def run(argv: list[str]) -> int:
    """Parse argv with a parser holding only the data commands, then run the chosen one."""
    parser = argparse.ArgumentParser(prog="jevserve")
    cli_data.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_list_shows_every_source_as_missing_with_the_command_to_fetch_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("jevserve.bench.sources.cache.metadata.distribution", _not_installed)
    assert run(["data", "list", "--cache", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name, spec in SOURCES.items():
        line = next(line for line in out.splitlines() if line.startswith(name + " "))
        assert "missing" in line and spec.archive.requirement in line
        assert line.endswith(f"jevserve data fetch --source {name} --cache {tmp_path}")  # the folder listed
    assert f"cache: {tmp_path}" in out


def test_list_json_gives_one_object_per_source(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("jevserve.bench.sources.cache.metadata.distribution", _not_installed)
    run(["data", "list", "--cache", str(tmp_path), "--json"])
    entries = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["source"] for e in entries] == list(SOURCES)
    assert entries[0]["status"] == "missing" and entries[0]["records"] is None
    assert entries[0]["fetch"] == f"jevserve data fetch --source {entries[0]['source']} --cache {tmp_path}"


def test_fetch_of_an_unknown_source_exits_2_and_lists_the_known_ones(tmp_path, capsys):
    assert run(["data", "fetch", "--source", "nope", "--cache", str(tmp_path)]) == 2
    assert "unknown data source 'nope'; expected one of: agent-action-guard" in capsys.readouterr().err


def test_fetch_of_an_archive_with_a_wrong_hash_exits_2_and_shows_the_pinned_hashes(tmp_path, capsys):
    wheel = write_wheel(tmp_path / "bastioncorpus-0.6.0-py3-none-any.whl", {"x.jsonl": ""})
    assert run(["data", "fetch", "--archive", str(wheel), "--cache", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err
    assert SOURCES["bastioncorpus"].archive.wheel_sha256 in err
    assert "refusing to use it" in err


def test_data_without_a_subcommand_prints_help_and_exits_2(capsys):
    assert run(["data"]) == 2
    assert "list" in capsys.readouterr().out


def _not_installed(name: str):
    # The real packages are not test dependencies, but a developer may have one installed.
    from importlib import metadata

    raise metadata.PackageNotFoundError(name)


@pytest.mark.parametrize("command", ["list", "fetch"])
def test_each_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as exited:
        run(["data", command, "--help"])
    assert exited.value.code == 0
    assert "--cache DIR" in capsys.readouterr().out


def test_list_shows_a_damaged_release_and_says_to_fetch_it_again(tmp_path, capsys, monkeypatch):
    from jevserve.bench.sources.cache import MANIFEST_NAME, release_dir

    monkeypatch.setattr("jevserve.bench.sources.cache.metadata.distribution", _not_installed)
    release = release_dir(tmp_path, SOURCES["bastioncorpus"].archive)
    release.mkdir(parents=True)
    (release / MANIFEST_NAME).write_bytes(b"\xff\x00garbage")
    assert run(["data", "list", "--no-rows", "--cache", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    line = next(line for line in captured.out.splitlines() if line.startswith("bastioncorpus "))
    # the command names the folder listed: without --cache it fetched into the default cache (an outside tester's)
    assert "damaged" in line and line.endswith(f"jevserve data fetch --source bastioncorpus --force --cache {tmp_path}")
    assert captured.err.startswith("error: bastioncorpus: ") and "`jevserve data fetch --force`" in captured.err


def test_list_on_an_install_without_an_optional_reader_notes_it_and_succeeds(tmp_path, capsys, monkeypatch):
    # an outside tester's base install: `data list` printed the table and exited 1 over a parquet source it could
    # not count without pyarrow, which is a package left out, not a fault of the data
    from types import SimpleNamespace

    from jevserve.bench import sources
    from jevserve.bench.sources.errors import SourceMissingError

    parquet = next(iter(SOURCES))

    def load(name, cache_dir):
        if name == parquet:
            raise SourceMissingError.needs_module(name, "pyarrow", "jevserve[parquet]")
        return [{}]

    monkeypatch.setattr(sources, "source_status",
                        lambda name, cache_dir: SimpleNamespace(state="cached", location=SimpleNamespace(manifest=None),
                                                                fetch_command=None))
    monkeypatch.setattr(sources, "load_source", load)
    assert run(["data", "list", "--cache", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert f"note: {parquet}: data source {parquet!r} needs the Python package 'pyarrow'" in err
    assert "pip install 'jevserve[parquet]'" in err and "error:" not in err


def test_a_cache_that_is_a_file_or_not_there_is_said_not_listed_as_empty(tmp_path, capsys):
    # a mistyped --cache listed every source as missing, with a 124 MB fetch to run, and exited 0
    a_file = tmp_path / "passwd"
    a_file.write_text("x")
    assert run(["data", "list", "--cache", str(a_file)]) == 2
    assert f"--cache {a_file}: a file, not a folder" in capsys.readouterr().err
    assert run(["data", "list", "--cache", str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert run(["data", "fetch", "--source", "bastioncorpus", "--cache", str(a_file)]) == 2
    assert "a file, not a folder" in capsys.readouterr().err


def test_a_source_named_twice_is_fetched_once(tmp_path, monkeypatch):
    asked = []

    def fetch_sources(sources, *_args, **_kwargs):
        asked.append(sources)
        return []

    monkeypatch.setattr("jevserve.bench.sources.fetch_sources", fetch_sources)
    assert run(["data", "fetch", "--source", "champ-steps", "--source", "champ-steps", "--cache", str(tmp_path)]) == 0
    assert asked == [["champ-steps"]]


def test_a_cache_variable_naming_a_file_and_the_caches_root_given_for_its_data_are_said(tmp_path, capsys, monkeypatch):
    a_file = tmp_path / "cachefile"
    a_file.write_text("x")
    monkeypatch.setenv("JEVSERVE_CACHE", str(a_file))
    assert run(["data", "list"]) == 2
    assert f"$JEVSERVE_CACHE {a_file}: a file, not a folder" in capsys.readouterr().err
    monkeypatch.delenv("JEVSERVE_CACHE")
    monkeypatch.setattr("jevserve.bench.sources.cache.metadata.distribution", _not_installed)
    (tmp_path / "root" / "data").mkdir(parents=True)
    assert run(["data", "list", "--cache", str(tmp_path / "root"), "--no-rows"]) == 0
    assert f"did you mean --cache {tmp_path / 'root' / 'data'}?" in capsys.readouterr().err


def test_a_fetch_command_quotes_a_cache_folder_with_a_space(tmp_path):
    # pasted unquoted, it fetched into the part of the path before the space (a re-tester's)
    from jevserve.bench.sources.registry import fetch_command

    folder = tmp_path / "sp ace"
    assert fetch_command("bastioncorpus", folder) == f"jevserve data fetch --source bastioncorpus --cache '{folder}'"
