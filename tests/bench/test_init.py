import ast
from pathlib import Path

import jevserve.bench as bench


def test_public_exports_are_pinned():
    assert sorted(bench.__all__) == sorted([
        "CATEGORIES", "TASKS", "AnswersCache", "BenchData", "Item", "Task", "UnknownTaskError", "request_key",
        "select_tasks", "split_items", "state_key",
    ])


def test_bench_never_imports_packages_above_it():
    allowed = {"bench", "client", "predict", "serving", "sim", "protocol", "decide", "server", "docsections",
               "argtypes", "json_report", "cache_root"}  # leaves: append-only JSONL files, the cache folder
    root = Path(bench.__file__).parent
    for path in root.rglob("*.py"):
        if "sources" in path.relative_to(root).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jevserve."):
                assert node.module.split(".")[1] in allowed, f"{path.name} imports {node.module}"
