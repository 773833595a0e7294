"""benchmarks/check.py: a benchmark script run in a throwaway worktree, its changes printed, the checkout untouched."""

import subprocess

from benchmarks.check import main

SCRIPT = """import pathlib, sys
pathlib.Path("docs/page.md").write_text("speed: 0.31 s\\n")
pathlib.Path("benchmarks/results").mkdir(parents=True, exist_ok=True)
pathlib.Path("benchmarks/results/speed.json").write_text('{"s": 0.31}\\n')
sys.exit(int(sys.argv[1]))
"""


def _repo(tmp_path):
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "benchmarks").mkdir()
    (repo / "docs" / "page.md").write_text("speed: 0.23 s\n")
    (repo / "benchmarks" / "speed.py").write_text(SCRIPT)
    for command in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(repo), *command], check=True)
    return repo


def test_a_checked_figure_is_shown_as_it_moved_and_the_checkout_is_left_as_it_was(tmp_path, capsys):
    # an outside tester could not check a documented figure without the script rewriting the repository's docs
    repo = _repo(tmp_path)
    assert main(["--repo", str(repo), "benchmarks/speed.py", "0"]) == 0
    out = capsys.readouterr().out
    assert "M docs/page.md" in out and "?? benchmarks/results/" in out
    assert "speed: [-0.23-]{+0.31+} s" in out
    assert (repo / "docs" / "page.md").read_text() == "speed: 0.23 s\n"  # untouched
    assert not (repo / "benchmarks" / "results").exists()
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True).stdout
    assert len(listed.strip().splitlines()) == 1  # the throwaway worktree is gone
    assert main(["--repo", str(repo), "benchmarks/speed.py", "3"]) == 3  # the script's exit status


def test_a_script_that_is_not_there_is_refused(tmp_path, capsys):
    import pytest

    repo = _repo(tmp_path)
    with pytest.raises(SystemExit):
        main(["--repo", str(repo), "benchmarks/nosuch.py"])
    assert "no such script" in capsys.readouterr().err


def test_a_check_stopped_by_sigterm_stops_its_script_and_removes_its_worktree(tmp_path):
    # SIGTERM left the worktree registered and the benchmark running on its own
    import signal
    import sys
    import time
    from pathlib import Path

    repo = _repo(tmp_path)
    pid_file = tmp_path / "slow.pid"
    (repo / "benchmarks" / "slow.py").write_text(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "y"],
                   check=True)
    check = Path(__file__).resolve().parents[2] / "benchmarks" / "check.py"
    run = subprocess.Popen([sys.executable, str(check), "--repo", str(repo), "benchmarks/slow.py"],
                           stderr=subprocess.PIPE, text=True)
    assert "check: running" in run.stderr.readline()
    for _ in range(100):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    run.send_signal(signal.SIGTERM)
    assert run.wait(20) == 143
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True).stdout
    assert len(listed.strip().splitlines()) == 1
    import os

    import pytest

    with pytest.raises(ProcessLookupError):  # the script was stopped with the check
        for _ in range(100):
            os.kill(int(pid_file.read_text()), 0)
            time.sleep(0.05)
