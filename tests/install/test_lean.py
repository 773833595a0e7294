"""The base install (`pip install .`, no extras) in a fresh virtual environment: the gateway with a `remote:`
decider and the decision server's remote backend run there without torch, and the wheel holds only the default
weights.

Slow (a venv and the base dependencies from the registry, a minute or two): `pytest -m install` runs only this.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jevserve.cli import build_parser
from jevserve.decide.encoder import READER_WEIGHTS
from tests.install.stubs import STUB_REPLY, stub_server
from tests.processes import free_port, wait_ready

pytestmark = pytest.mark.install

REPO = Path(__file__).resolve().parents[2]
# What the base install must not hold: the embedded model's runtime and training stack, and the lab's libraries.
HEAVY = ("torch", "transformers", "onnx", "onnxruntime", "sklearn", "scipy", "matplotlib")
COMMANDS = """
import argparse, json
from jevserve.cli import build_parser
action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
print(json.dumps(sorted(action.choices)))
"""
PARAMS = """
import json, pathlib, jevserve
print(json.dumps(sorted(p.name for p in (pathlib.Path(jevserve.__file__).parent / "decide" / "params").iterdir())))
"""


def _copy_checkout(target: Path) -> Path:
    """What `pip install .` reads, copied so the build writes nothing into the checkout."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.onnx")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, target / name)
    shutil.copytree(REPO / "src", target / "src", ignore=ignore)
    return target


@pytest.fixture(scope="module")
def lean_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with `pip install .` of this checkout and nothing else; returns its bin/ folder."""
    root = tmp_path_factory.mktemp("lean")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    (root / "checkout").mkdir()
    checkout = _copy_checkout(root / "checkout")
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(checkout)],
                         capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, f"pip install . failed:\n{pip.stdout[-3000:]}\n{pip.stderr[-3000:]}"
    return venv / "bin"


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the venv's own jevserve, not this tree's
    env["JEVSERVE_CACHE"] = str(tmp / "cache")
    return env


def _run_python(bin_dir: Path, code: str) -> str:
    done = subprocess.run([str(bin_dir / "python"), "-c", code], capture_output=True, text=True, timeout=120,
                          env=_env(bin_dir.parent))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_base_install_holds_no_torch_nor_the_lab_libraries(lean_venv):
    code = f"import importlib.util, json; print(json.dumps([m for m in {HEAVY!r} if importlib.util.find_spec(m)]))"
    assert json.loads(_run_python(lean_venv, code)) == []


def test_wheel_holds_only_the_default_weights(lean_venv):
    names = json.loads(_run_python(lean_venv, PARAMS))
    assert [n for n in names if n.endswith(".npz")] == [READER_WEIGHTS.name]
    assert not [n for n in names if n.endswith(".states.gz")]  # training-state hashes: read by tests only


def test_base_install_lists_every_command_and_names_the_extra_a_missing_one_needs(lean_venv, tmp_path):
    action = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    assert json.loads(_run_python(lean_venv, COMMANDS)) == sorted(action.choices)
    bench = subprocess.run([str(lean_venv / "jevserve"), "bench", "list"], capture_output=True, text=True,
                           timeout=120, env=_env(tmp_path))
    assert bench.returncode == 2
    assert "pip install 'jevserve[bench]'" in bench.stderr and "Traceback" not in bench.stderr


def test_gateway_with_a_remote_decider_runs_on_the_base_install(lean_venv, tmp_path, started):
    from openai import OpenAI

    with stub_server() as (stub_url, hits):
        serve_port, gateway_port = free_port(), free_port()
        # the decision server's remote backend, forwarding to the stub System One endpoint
        started.append(subprocess.Popen(
            [str(lean_venv / "jevserve"), "serve", f"remote:{stub_url}", "--port", str(serve_port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(tmp_path)))
        wait_ready(f"http://127.0.0.1:{serve_port}/v1/models", started[-1])
        config = tmp_path / "gw.yaml"
        config.write_text(
            f"decider: remote:http://127.0.0.1:{serve_port}\n"
            f"upstreams:\n  - {{name: stub, url: {stub_url}/v1}}\n"
            "routes:\n  - {model: my-model, upstream_model: stub-model, guard: {threshold: 0.5}, "
            "harm: {threshold: 0.5}}\n"
        )
        started.append(subprocess.Popen(
            [str(lean_venv / "jevserve"), "gateway", "--config", str(config), "--port", str(gateway_port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(tmp_path)))
        wait_ready(f"http://127.0.0.1:{gateway_port}/v1/models", started[-1])

        client = OpenAI(base_url=f"http://127.0.0.1:{gateway_port}/v1", api_key="anything", max_retries=0)
        reply = client.chat.completions.create(model="my-model", messages=[{"role": "user", "content": "hi there"}])

    assert reply.choices[0].message.content == STUB_REPLY
    assert hits["/v1/chat/completions"] == 1  # the upstream answered once
    assert hits["/v1/systemone"] >= 1  # the guard and harm decisions went gateway → jevserve serve → the stub
