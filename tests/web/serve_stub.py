"""Run the site with the stub model on a free loopback port (for the killed-server test): prints the port."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import uvicorn

from tests.web.builders import make_app


def main(db_path: str) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    uvicorn.Server(uvicorn.Config(make_app(Path(db_path)), log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main(sys.argv[1])
