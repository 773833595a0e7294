import jevserve.serving as serving


def test_public_exports_are_pinned():
    assert sorted(serving.__all__) == sorted([
        "QUEUE_POLICIES", "Decision", "DuplicatePolicyError", "FirstComeFirstServed", "MissingPredictionError",
        "PredictedLengthFirst", "QueuePolicy", "ReplicaState", "Request", "ResidentRequest", "ServingError",
        "ShortestPromptFirst", "TrueLengthFirst", "UnknownPolicyError", "make_queue_policy", "queue_policy_names",
        "register_queue_policy",
        # routing (issue 5)
        "ROUTERS", "JoinShortestQueue", "LatencyAware", "LeastOutstandingTokens", "ReplicaModel", "RoundRobin",
        "Router", "SchedulerLimits", "UtilityAware", "estimate_ttft", "estimate_ttft_queued_prefill", "make_router",
        "register_router", "router_names", "RunningColumns",
        # aging that keeps the gain (issue 14)
        "RelativeAgingFirst", "VirtualDeadlineFirst",
        # one engine config type for the simulator and the router (issue 14); SchedulerLimits is its alias
        "EngineConfig", "SchedulerConfigError",
        # the one step planner: its seam, its plan, vLLM's rules, the request record it moves
        "StepPlanner", "StepPlan", "VllmStepPlanner", "EngineRequest",
    ])


def test_serving_imports_only_protocol_from_jevserve():
    import ast
    from pathlib import Path

    for path in Path(serving.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jevserve."):
                assert node.module.split(".")[1] in ("serving", "protocol"), f"{path.name} imports {node.module}"
