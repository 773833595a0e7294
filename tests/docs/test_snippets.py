"""Python snippets the docs show, run as written: an outside tester's copy of gateway.md's entry-point example
raised KeyError (a text judged in windows has no bare `guard` answer)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def snippet_after(doc: Path, heading: str) -> str:
    text = doc.read_text()
    section = text[text.index(heading):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_gateways_python_entry_point_runs_as_written():
    code = snippet_after(ROOT / "docs/gateway.md", "## Python entry point (no HTTP)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    action, probability, threshold, ms = done.stdout.split()
    assert action in ("allow", "block") and 0 <= float(probability) <= 1 and 0 < float(threshold) < 1
    assert float(ms) > 0
