import ast
import subprocess
import sys
from pathlib import Path

import jevserve.plan as plan


def test_public_exports_are_pinned_and_resolve():
    assert plan.__all__ == sorted([
        "CapacityModel", "Demand", "Plan", "PlanError", "ReplicaCapacity", "StabilityBound", "erlang_c", "plan_for",
        "plan_replicas", "request_demand", "slo_attainment", "stability_bound",
    ])
    for name in plan.__all__:
        assert getattr(plan, name) is not None


def test_plan_imports_only_sim_serving_protocol_its_leaves_and_itself_from_jevserve():
    for path in Path(plan.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jevserve."):
                assert node.module.split(".")[1] in ("plan", "sim", "serving", "protocol", "docsections", "argtypes"), \
                    f"{path}: {node.module}"


def test_importing_the_package_and_its_cli_stays_light():
    code = "import sys, jevserve.plan, jevserve.plan.cli; print('numpy' in sys.modules, 'scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
