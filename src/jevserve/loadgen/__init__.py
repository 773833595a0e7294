"""`jevserve loadgen`: replay a workload against any OpenAI-compatible server and report vLLM's serving metrics,
SLO attainment and goodput as the simulator defines them (`jevserve.sim.metrics`)."""
