"""Resumable sweeps under Ctrl-C: the parent stops with where the finished cells are, the workers stay quiet."""

import argparse
import json
import os
import signal
import threading
import time
from dataclasses import dataclass

import pytest

from jevserve.sim.cli import guarded
from jevserve.sim.resumable import Interrupted, run_keyed


@dataclass(frozen=True)
class Cell:
    key: str


def ctrl_c_at_b(cell: Cell, parent_pid: int) -> dict:
    """Cell "b" plays a terminal's Ctrl-C, which reaches every process of the group: the parent and this worker.
    (The parent's pid comes as the context: a forkserver's worker is the server's child, not the parent's.)"""
    if cell.key == "b":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # both get it before either acts on it
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(parent_pid, signal.SIGINT)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        time.sleep(5)  # still running when the parent ends the pool
    return {"key": cell.key}


def test_ctrl_c_stops_the_sweep_saying_how_to_resume_and_no_worker_prints_a_traceback(tmp_path, capfd):
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps({"key": "a"}) + "\n")  # finished by an earlier run
    with pytest.raises(Interrupted, match=f"finished runs are kept in {path}; run the same command again"):
        run_keyed([Cell("a"), Cell("b"), Cell("c")], ctrl_c_at_b, os.getpid(), results_path=path, jobs=2)
    time.sleep(0.2)  # a worker's traceback, if any, reaches stderr after the pool is ended
    assert "KeyboardInterrupt" not in capfd.readouterr().err
    assert json.loads(path.read_text().splitlines()[0]) == {"key": "a"}


def sigint_handler(cell: Cell, _context: None) -> dict:
    return {"key": cell.key, "ignores_ctrl_c": signal.getsignal(signal.SIGINT) == signal.SIG_IGN}


def test_pool_workers_ignore_ctrl_c_and_leave_it_to_the_parent():
    rows = run_keyed([Cell("a"), Cell("b")], sigint_handler, None, jobs=2)
    assert [r["ignores_ctrl_c"] for r in rows] == [True, True]


_HELD_AT_START = threading.Lock()


def takes_the_lock(cell: Cell, _context: None) -> dict:
    got = _HELD_AT_START.acquire(timeout=2)
    if got:
        _HELD_AT_START.release()
    return {"key": cell.key, "got_the_lock": got}


def test_a_lock_some_thread_holds_while_the_pool_starts_is_free_in_the_workers():
    # a clean clone's two-process suite hung for good in a sweep test: the pool forked a process whose other
    # threads held locks, and a worker waited on its copy of one; started from a fresh server, a worker has none
    holder_ready, release = threading.Event(), threading.Event()

    def hold() -> None:
        with _HELD_AT_START:
            holder_ready.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    holder_ready.wait(5)
    try:
        rows = run_keyed([Cell("a"), Cell("b")], takes_the_lock, None, jobs=2)
    finally:
        release.set()
        holder.join()
    assert [r["got_the_lock"] for r in rows] == [True, True]


@pytest.mark.parametrize("raised, line", [
    (Interrupted("finished runs are kept in runs.jsonl; run the same command again to resume from them"),
     "jevserve sim: interrupted; finished runs are kept in runs.jsonl; run the same command again to resume"),
    (KeyboardInterrupt(), "jevserve sim: interrupted\n"),
])
def test_a_guarded_command_turns_ctrl_c_into_one_line_and_status_130(raised, line, capsys):
    def command(_args: argparse.Namespace) -> int:
        raise raised

    assert guarded(command)(argparse.Namespace()) == 130
    err = capsys.readouterr().err
    assert line in err and err.count("\n") == 1



def test_a_resumed_sweep_counts_the_cells_it_reuses_so_progress_starts_where_it_stopped(tmp_path):
    # an outside tester's resumed `sim cluster` sat at 0/24 with 16 runs already done, as if nothing was reused
    from jevserve.sim.resumable import count_reused

    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps({"key": k}) + "\n" for k in ("a", "c", "z")) + '{"key": "b", "ro')  # torn
    cells = [Cell(k) for k in "abcd"]
    assert count_reused(cells, path) == 2  # "z" is another sweep's cell; the torn "b" is run again
    ran = []
    run_keyed(cells, lambda cell, _context: ran.append(cell.key) or {"key": cell.key}, None, results_path=path,
              jobs=1)
    # found while writing this: the first row after a torn line was appended to it, unreadable, and run again on
    # the next resume; it starts a line of its own
    assert ran == ["b", "d"] and count_reused(cells, path) == 4
