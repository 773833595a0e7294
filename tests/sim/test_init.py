import ast
from pathlib import Path

import jevserve.sim as sim


def test_sim_imports_only_serving_protocol_and_itself_from_jevserve():
    for path in Path(sim.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jevserve."):
                # leaves, as in test_layers
                allowed = ("sim", "serving", "protocol", "argtypes", "json_report", "cache_root")
                assert node.module.split(".")[1] in allowed, f"{path} imports {node.module}"


def test_public_exports_are_pinned_and_resolve():
    assert sim.__all__ == sorted([
        "Arrival", "Engine", "EngineConfig", "MetricsRecorder", "Observer", "Profile", "SimError", "SimRequest",
        "Simulator", "Slo", "StepTimeModel", "fit_step_time", "load_profile", "make_arrivals", "sample_sharegpt",
        "WorkCounter", "sharegpt_split", "shipped_profile_names", "simulate", "summarize", "with_arrivals",
    ])
    for name in sim.__all__:
        assert getattr(sim, name) is not None


def test_importing_the_package_and_its_cli_stays_light():
    import subprocess
    import sys

    code = "import sys, jevserve.sim, jevserve.sim.cli; print('numpy' in sys.modules, 'scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
