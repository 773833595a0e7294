"""The package table of ARCHITECTURE.md, enforced: every `jevserve.X` import must be one the table allows.

The table is copied here as data; change it together with ARCHITECTURE.md and say why in the commit. Imports
inside functions count too (a lazy import is still a dependency). `import jevserve` / `from jevserve import
__version__` (the root package) is allowed everywhere.

Within a package, modules may not import each other in a circle (a → b → … → a). Lazy imports count here too: a
function-level import keeps a circle from failing at import time but not from tying the modules together. Imports
under `if TYPE_CHECKING:` do not count (they never run; they only name a type for annotations).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

SRC = Path(__file__).resolve().parents[1] / "src" / "jevserve"

# package → the packages it may import (besides itself); "*" = everything. From ARCHITECTURE.md "Package layout".
ALLOWED: dict[str, frozenset[str] | str] = {
    "cli": "*",
    # The lab (experiments, sweeps, reports) sits above every runtime part and may use any of them; nothing
    # imports it but the command line.
    "lab": frozenset({"web", "train", "bench", "gateway", "server", "engine", "loadgen", "plan", "sim", "predict",
                      "decide", "client", "serving", "protocol", "docsections", "argtypes", "json_report",
                      "cache_root"}),
    "web": frozenset({"argtypes", "gateway", "bench", "client", "protocol", "cache_root"}),
    # train also reaches serving, for serving/decision_inputs.py: everyday negatives are built as the gateway
    # builds its decision texts, so what is trained on is what is served.
    "train": frozenset({"argtypes", "bench", "predict", "decide", "client", "protocol", "serving", "docsections",
                        "cache_root"}),
    "bench": frozenset({"argtypes", "client", "predict", "serving", "sim", "protocol", "docsections", "json_report",
                        "cache_root"}),
    # json_report also opens every append-only JSONL file (the bench's answers, the decision log), closing a torn
    # last line first
    "gateway": frozenset({"argtypes", "serving", "predict", "client", "decide", "protocol", "json_report",
                          "cache_root"}),
    "server": frozenset({"argtypes", "decide", "protocol"}),
    # The live engine (`jevserve engine`) is the HTTP shell around the simulator's engine: the one step planner of
    # serving/ run on the wall clock, with sim/'s profiles, workloads and engine options; sim/ itself knows no HTTP.
    # It reads bodies with protocol/'s strict JSON reader (NaN, Infinity and 1e400 refused), as the gateway does.
    "engine": frozenset({"argtypes", "sim", "serving", "protocol"}),
    # `jevserve loadgen` replays the simulator's workloads and arrivals and reports with its metrics (sim/metrics.py),
    # so a live run and a simulated one are measured alike; it speaks HTTP to any server, not to jevserve's.
    "loadgen": frozenset({"argtypes", "sim", "serving", "json_report"}),
    "plan": frozenset({"argtypes", "sim", "serving", "docsections"}),
    "sim": frozenset({"argtypes", "serving", "json_report", "cache_root"}),
    "predict": frozenset({"client", "protocol"}),
    "decide": frozenset({"client", "protocol", "cache_root"}),
    "client": frozenset({"protocol"}),
    "serving": frozenset({"protocol"}),
    "protocol": frozenset(),
    # docsections.py, the writer of generated doc sections, is a leaf module every reporting part (plan, bench,
    # train, the lab) uses; it imports nothing of jevserve, so it sits below them all.
    "docsections": frozenset(),
    # argtypes.py, the number types of every command line, is a leaf for the same reason: the decision server's
    # command line parses its limits as the simulator's does without reaching into sim/.
    "argtypes": frozenset(),
    # json_report.py writes the reports of sim, the lab's sweeps and loadgen as standard JSON (no NaN), and opens
    # append-only JSONL files: a leaf too.
    "json_report": frozenset(),
    # cache_root.py names the one folder every part keeps its fetched and computed files in ($JEVSERVE_CACHE): a leaf,
    # so the decision backends, the simulator and the gateway read it without reaching into bench/.
    "cache_root": frozenset(),
}


def package_of(path: Path, root: Path = SRC) -> str:
    """`src/jevserve/sim/loop.py` → `sim`; `src/jevserve/client.py` → `client`; the root `__init__.py` → ``."""
    parts = path.relative_to(root).parts
    if parts == ("__init__.py",):
        return ""
    return parts[0] if len(parts) > 1 else path.stem


def imported_packages(path: Path, root: Path = SRC) -> list[tuple[int, str]]:
    """(line, package) for every `jevserve.<package>` the module imports, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module_parts = ["jevserve", *path.relative_to(root).with_suffix("").parts]
    if module_parts[-1] == "__init__":
        module_parts.pop()
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # the importing module's package, up `level - 1` more (a package's __init__ is its own package)
                base = module_parts if path.name == "__init__.py" else module_parts[:-1]
                base = base[: len(base) - (node.level - 1)]
                names = [".".join([*base, node.module] if node.module else base)]
            else:
                names = [node.module or ""]
            if names[0] == "jevserve":
                names = [f"jevserve.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "jevserve" and len(parts) > 1 and parts[1] in ALLOWED:
                found.append((node.lineno, parts[1]))
    return found


def violations(root: Path = SRC) -> list[tuple[str, int, str, str]]:
    """Every import the table does not allow, as (module path, line, package, imported package)."""
    out = []
    for path in sorted(root.rglob("*.py")):
        package = package_of(path, root)
        allowed = ALLOWED.get(package, frozenset()) if package else "*"
        if allowed == "*":
            continue
        for line, target in imported_packages(path, root):
            if target != package and target not in allowed:
                out.append((path.relative_to(root).as_posix(), line, package, target))
    return out


def test_every_package_in_the_source_tree_is_in_the_table():
    packages = {package_of(p) for p in SRC.rglob("*.py")} - {""}
    assert packages <= set(ALLOWED), f"packages missing from the table: {sorted(packages - set(ALLOWED))}"


def test_no_import_points_up_the_table():
    found = violations()
    lines = [f"{module}:{line}: {package} imports {target}" for module, line, package, target in found]
    assert not found, "imports the ARCHITECTURE.md table does not allow:\n" + "\n".join(lines)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from jevserve.bench import task\n", "gateway imports bench"),
        ("import jevserve.web.app\n", "gateway imports web"),
        ("def f():\n    from jevserve.server.app import create_app\n", "gateway imports server"),
        ("from ..sim import loop\n", "gateway imports sim"),
        ("from jevserve import bench\n", "gateway imports bench"),
    ],
)
def test_an_upward_import_is_caught(tmp_path, source, expected):
    fake = tmp_path / "jevserve"
    (fake / "gateway").mkdir(parents=True)
    (fake / "gateway" / "bad.py").write_text(source)
    (fake / "gateway" / "good.py").write_text("from jevserve.serving import make_queue_policy\nfrom . import bad\n")
    found = violations(fake)
    assert [f"{package} imports {target}" for _, _, package, target in found] == [expected]


# Circles that exist today and are tolerated until they are broken; a circle not listed here fails the test.
KNOWN_CIRCLES = {
    # web/pages.py and web/play.py import web/app.py for the site's settings and forms; app.py imports them to
    # mount their routes.
    frozenset({"jevserve.web.app", "jevserve.web.pages", "jevserve.web.play"}),
}


def module_name(path: Path, root: Path = SRC) -> str:
    """`src/jevserve/sim/loop.py` → `jevserve.sim.loop`; a package's `__init__.py` → the package."""
    parts = ["jevserve", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _executed_imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under `node`, at any depth, except those under `if TYPE_CHECKING:`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            for branch in child.orelse:
                yield from _executed_imports(branch)
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        yield from _executed_imports(child)


def imported_modules(path: Path, modules: set[str], root: Path = SRC) -> set[str]:
    """The jevserve modules `path` imports: `from pkg import name` means module `pkg.name` when that is a module."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _executed_imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - (node.level - 1)], *([node.module] if node.module else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for target in targets:
            while target and target not in modules:  # `import jevserve.a.b.C`-style names: the module above
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_circles(root: Path = SRC) -> list[frozenset[str]]:
    """Sets of modules that import each other in a circle: the strongly connected components with two or more."""
    paths = {module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    names = sorted(paths)
    index = {name: i for i, name in enumerate(names)}
    modules = set(paths)
    edges = [(index[name], index[target]) for name in names for target in imported_modules(paths[name], modules, root)]
    rows, cols = zip(*edges, strict=True) if edges else ((), ())
    graph = coo_matrix((np.ones(len(edges)), (rows, cols)), shape=(len(names), len(names)))
    _, labels = connected_components(graph, directed=True, connection="strong")
    components: dict[int, set[str]] = {}
    for name, label in zip(names, labels, strict=True):
        components.setdefault(int(label), set()).add(name)
    return sorted((frozenset(c) for c in components.values() if len(c) > 1), key=sorted)


def test_no_module_imports_itself_through_a_circle():
    circles = [sorted(c) for c in import_circles() if c not in KNOWN_CIRCLES]
    assert not circles, "modules that import each other in a circle:\n" + "\n".join(" ↔ ".join(c) for c in circles)


def _fake_package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "jevserve"
    for name, source in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(source)
    return root


def test_a_circle_through_a_lazy_import_is_caught(tmp_path):
    root = _fake_package(tmp_path, {
        "gateway/__init__.py": "",
        "gateway/a.py": "from jevserve.gateway import b\n",
        "gateway/b.py": "def f():\n    from . import c\n",
        "gateway/c.py": "import jevserve.gateway.a\n",
        "gateway/d.py": "from jevserve.gateway.a import thing\n",  # imports into the circle, is not in it
    })
    assert import_circles(root) == [frozenset({"jevserve.gateway.a", "jevserve.gateway.b", "jevserve.gateway.c"})]


def test_a_type_checking_import_makes_no_circle(tmp_path):
    root = _fake_package(tmp_path, {
        "sim/__init__.py": "",
        "sim/loop.py": "from jevserve.sim.events import Event\n",
        "sim/events.py": "from typing import TYPE_CHECKING\n"
                         "if TYPE_CHECKING:\n    from jevserve.sim.loop import Loop\n",
    })
    assert import_circles(root) == []
