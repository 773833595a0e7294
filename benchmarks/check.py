"""Check a documented figure without rewriting the checkout: run one benchmark script in a throwaway worktree of
HEAD and print what it changed in the docs and results.

    python benchmarks/check.py benchmarks/sim/speed.py
    python benchmarks/check.py benchmarks/sim/route_overhead.py --samples 100

Every benchmark script writes its JSON under benchmarks/results/ and rewrites its section of a doc page, so run
where it is, it overwrites the figures it is checking. Here it runs in a detached `git worktree` of the committed
HEAD (uncommitted changes are not in it), with that worktree's `src` first on the import path, and the diff of what
it wrote is printed: the lines of the docs and results whose numbers moved. The worktree is removed afterwards
unless `--keep` is given; nothing in the checkout is touched. Exit status: the script's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="run a benchmark script in a throwaway worktree of HEAD and print what it changed",
        usage="python benchmarks/check.py [--keep] [--repo DIR] SCRIPT [SCRIPT_ARGS ...]")
    parser.add_argument("--keep", action="store_true", help="keep the worktree (its path is printed)")
    parser.add_argument("--repo", type=Path, default=ROOT,
                        help="the git checkout to take HEAD from (default: this one)")
    parser.add_argument("script", help="the benchmark script, as a path relative to the repository root")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="its arguments")
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    script = Path(args.script)
    relative = (script.resolve().relative_to(repo) if script.is_absolute() or script.resolve().is_relative_to(repo)
                else script)
    if not (repo / relative).is_file():
        parser.error(f"{args.script}: no such script in {repo}")
    # SIGTERM ends the check as Ctrl-C does: the script is stopped and the worktree removed (left to the default,
    # the worktree stayed registered and the script ran on)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    parent = Path(tempfile.mkdtemp(prefix="jevserve-check-"))
    where = parent / "tree"
    added = subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", "--quiet", str(where), "HEAD"],
                           capture_output=True, text=True)
    if added.returncode != 0:
        print(f"check: cannot make a worktree of {repo}: {added.stderr.strip()}", file=sys.stderr)
        return 2
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(where / "src"), str(where),
                                                                          os.environ.get("PYTHONPATH")]))}
        print(f"check: running {relative} in {where} (HEAD of {repo})", file=sys.stderr, flush=True)
        script_run = subprocess.Popen([sys.executable, str(relative), *args.script_args], cwd=where, env=env)
        try:
            status = script_run.wait()
        finally:
            if script_run.poll() is None:
                script_run.terminate()
                script_run.wait()
        changed = subprocess.run(["git", "-C", str(where), "status", "--porcelain"], capture_output=True,
                                 text=True).stdout
        if not changed.strip():
            print("check: the script changed nothing in the checkout's files")
        else:
            print("check: files the script wrote (M: changed, ??: new):\n" + changed.rstrip())
            diff = subprocess.run(["git", "-C", str(where), "diff", "--word-diff=plain", "--unified=0",
                                   "--", "docs", "README.md"], capture_output=True, text=True).stdout
            if diff.strip():
                print("check: what moved in the docs ([-before-]{+after+}):\n" + diff.rstrip())
        return status
    finally:
        if args.keep:
            print(f"check: the worktree is kept at {where} (remove it with `git worktree remove --force {where}`)",
                  file=sys.stderr)
        else:
            subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(where)],
                           capture_output=True)
            subprocess.run(["git", "-C", str(repo), "worktree", "prune"], capture_output=True)
            shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
