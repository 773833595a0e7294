"""The `jevserve` command line when whoever reads its output goes away (`jevserve … | head -3`)."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys


def test_a_closed_pipe_ends_the_command_quietly_with_the_sigpipe_status():
    # the read end is closed before the command writes a line, so its first write fails with EPIPE every time
    process = subprocess.Popen(
        [sys.executable, "-m", "jevserve.cli", "data", "list"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 128 + signal.SIGPIPE
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr


def test_ctrl_c_while_the_commands_load_or_run_is_one_line_and_exit_130(monkeypatch, capsys):
    import jevserve.cli as cli

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    real_build_parser = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", interrupted)  # Ctrl-C while the commands' modules are imported
    assert cli.main(["data", "list"]) == 128 + signal.SIGINT
    assert capsys.readouterr().err == "jevserve data: interrupted\n"  # named by the command asked for

    class Parser:  # a command that leaves Ctrl-C to the entry point
        def parse_args(self, argv):
            return argparse.Namespace(**{**vars(real_build_parser().parse_args(argv)), "func": interrupted})

    monkeypatch.setattr(cli, "build_parser", Parser)
    assert cli.main(["data", "list"]) == 128 + signal.SIGINT
    assert capsys.readouterr().err == "jevserve data: interrupted\n"



def test_ctrl_c_during_a_fetch_says_a_rerun_fetches_the_rest(monkeypatch, capsys):
    # an outside tester's interrupted fetch printed only "interrupted", where its --help promises a rerun resumes
    import jevserve.bench.sources as sources
    from jevserve.cli import main

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sources, "fetch_sources", interrupted)
    assert main(["data", "fetch"]) == 128 + signal.SIGINT
    assert "running the same command again fetches the rest" in capsys.readouterr().err
