"""Every part keeps its files under one folder: `$JEVSERVE_CACHE` (a leading `~` expanded), else ~/.cache/jevserve.

A variable set as `~/somewhere` by a systemd unit or a container's environment reaches the process unexpanded; each
part used to read it its own way, and four of them made a folder named `~` in the working directory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from jevserve.bench.answers_cache import default_answers_dir
from jevserve.bench.sources.cache import default_cache_dir
from jevserve.cache_root import cache_root
from jevserve.decide.onnx_build import cache_dir as built_graphs_dir
from jevserve.gateway.remote_identities import operating_points_dir
from jevserve.sim.workloads.tokens import cache_dir as token_counts_dir
from jevserve.train.dataset import embeddings_store
from jevserve.web.cli import default_db
from jevserve.web.site import default_board_cache

# every place a part keeps something, and where it lies under the root
PLACES: list[tuple[Callable[[], Path], tuple[str, ...]]] = [
    (default_cache_dir, ("data",)),
    (default_answers_dir, ("bench", "answers")),
    (built_graphs_dir, ()),
    (operating_points_dir, ("operating-points",)),
    (token_counts_dir, ()),
    (embeddings_store, ("train-embeddings",)),
    (default_db, ("web", "playground.sqlite")),
    (default_board_cache, ("web",)),
]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize(("place", "under"), PLACES, ids=[p.__module__ + "." + p.__name__ for p, _ in PLACES])
def test_a_tilde_in_the_variable_is_the_home_folder(
    home: Path, monkeypatch: pytest.MonkeyPatch, place: Callable[[], Path], under: tuple[str, ...]
) -> None:
    monkeypatch.setenv("JEVSERVE_CACHE", "~/jc")
    assert place() == home.joinpath("jc", *under)


@pytest.mark.parametrize(("place", "under"), PLACES, ids=[p.__module__ + "." + p.__name__ for p, _ in PLACES])
@pytest.mark.parametrize("value", [None, ""])
def test_unset_or_empty_is_the_default_folder(
    home: Path, monkeypatch: pytest.MonkeyPatch, place: Callable[[], Path], under: tuple[str, ...], value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("JEVSERVE_CACHE", raising=False)
    else:
        monkeypatch.setenv("JEVSERVE_CACHE", value)
    assert place() == home.joinpath(".cache", "jevserve", *under) == cache_root().joinpath(*under)
