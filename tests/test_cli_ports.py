"""Every command that listens or connects checks its --port before it loads a model or reads data (`jevserve
web` checks its own: tests/web/test_cli.py)."""

from __future__ import annotations

import pytest

from jevserve.cli import main


@pytest.mark.parametrize(
    ("argv", "low"),
    [(["serve"], 1), (["gateway"], 1), (["engine"], 1), (["loadgen"], 1)],
)
@pytest.mark.parametrize("value", ["99999", "-5"])
def test_a_port_out_of_range_exits_2_before_anything_loads(argv, low, value, capsys):
    try:
        code = main([*argv, "--port", value])
    except SystemExit as exc:  # argparse refuses the value before the command runs
        code = int(exc.code)
    assert code == 2
    assert f"--port '{value}': expected a port from {low} to 65535" in capsys.readouterr().err
