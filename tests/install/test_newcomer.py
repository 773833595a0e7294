"""A newcomer following only the README's gateway quick start reaches a gateway that answers the openai client.

The commands, the config and the client are read from the README, not written here, and run as written with two
substitutions: the upstream URL becomes a stub OpenAI server's (there is no vLLM in CI) and the port a free one.
The first command, `make install && source .venv/bin/activate`, is the install `make test` itself runs on CI's
fresh clone before this suite; the test checks that the README says exactly that and runs the next two commands
with the environment that install made (its bin/ first on PATH, as `source .venv/bin/activate` puts it).

Slow (starts the gateway with the embedded decision model): marked like the lean install test.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.install.stubs import STUB_REPLY, stub_server
from tests.processes import free_port, wait_ready

pytestmark = pytest.mark.install

REPO = Path(__file__).resolve().parents[2]
SECTION = "## Quick start: a gateway"
README_UPSTREAM = "http://127.0.0.1:8000/v1"
README_PORT = "8796"
INSTALL = "make install && source .venv/bin/activate"


def quick_start() -> dict[str, list[str]]:
    """The fenced blocks of the README's gateway quick start, by language (yaml, bash, python), in order."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    section = section[: section.index("\n## ", len(SECTION))]
    blocks: dict[str, list[str]] = {}
    for language, body in re.findall(r"```(\w+)\n(.*?)```", section, re.S):
        blocks.setdefault(language, []).append(body)
    return blocks


def commands(bash: str) -> list[str]:
    """The shell commands of a block, comments dropped."""
    lines = (line.split("  #")[0].strip() for line in bash.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def test_the_quick_start_is_three_commands_and_the_first_is_the_install_make_test_runs():
    bash = quick_start()["bash"]
    assert len(bash) == 1, "one shell block in the gateway quick start"
    steps = commands(bash[0])
    assert len(steps) <= 3 and steps[0] == INSTALL, steps
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^test: install\b", makefile, re.M), "`make test` installs exactly as `make install` does"


def test_following_the_readme_a_gateway_answers_the_openai_client(tmp_path, started):
    blocks = quick_start()
    (config,), (bash,), (client,) = blocks["yaml"], blocks["bash"], blocks["python"]
    _, serve, ask = commands(bash)
    assert README_UPSTREAM in config and README_PORT in client and "--port" not in serve
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # what `activate` does
    port = free_port()
    with stub_server() as (stub_url, hits):
        (tmp_path / "gw.yaml").write_text(config.replace(README_UPSTREAM, f"{stub_url}/v1"))
        (tmp_path / "client.py").write_text(client.replace(README_PORT, str(port)))
        started.append(subprocess.Popen([*shlex.split(serve), "--port", str(port)], cwd=tmp_path, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        wait_ready(f"http://127.0.0.1:{port}/v1/models", started[-1], timeout_s=300)
        reply = subprocess.run(shlex.split(ask), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert reply.returncode == 0, reply.stderr
    assert reply.stdout.strip() == STUB_REPLY
    assert hits["/v1/chat/completions"] == 1
