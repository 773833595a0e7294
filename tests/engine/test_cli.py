"""`jevserve engine` on a port that is taken: one line and exit 2, before anything is built or printed as served."""

from __future__ import annotations

import socket

from jevserve.cli import main


def test_a_port_in_use_is_one_line_and_exit_2(capsys):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        assert main(["engine", "--port", str(port), "--no-sharegpt-lengths"]) == 2
    finally:
        taken.close()
    captured = capsys.readouterr()
    assert f"cannot listen on 127.0.0.1:{port}" in captured.err and "Traceback" not in captured.err
    assert "/v1" not in captured.out  # never announced as serving
