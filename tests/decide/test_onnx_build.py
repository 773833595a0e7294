"""The graph cache under processes that start together: one builds, the others wait and read its graph."""

from __future__ import annotations

import threading
import time

import pytest

from jevserve.decide.onnx_build import _atomic_build


def test_a_graph_being_built_is_waited_for_not_built_twice(tmp_path):
    target = tmp_path / "graph-int8.onnx"
    builds: list[str] = []
    started = threading.Event()

    def slow_build(tmp):
        builds.append(threading.current_thread().name)
        started.set()
        time.sleep(0.5)  # the second caller arrives while this one builds
        tmp.write_bytes(b"graph by " + threading.current_thread().name.encode())

    first = threading.Thread(target=_atomic_build, args=(target, slow_build), name="first")
    first.start()
    assert started.wait(5)
    second = threading.Thread(target=_atomic_build, args=(target, slow_build), name="second")
    second.start()
    first.join(10)
    second.join(10)
    assert builds == ["first"]
    assert target.read_bytes() == b"graph by first"
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".onnx"] == ["graph-int8.onnx"]  # no temporary left


def test_a_failed_build_leaves_no_graph_and_the_next_caller_builds(tmp_path):
    target = tmp_path / "graph-fp32.onnx"

    def broken(tmp):
        tmp.write_bytes(b"half")
        raise RuntimeError("export failed")

    with pytest.raises(RuntimeError, match="export failed"):
        _atomic_build(target, broken)
    assert not target.exists() and not [p for p in tmp_path.iterdir() if p.suffix == ".onnx"]
    _atomic_build(target, lambda tmp: tmp.write_bytes(b"whole"))
    assert target.read_bytes() == b"whole"
