"""`jevserve engine`: an OpenAI-compatible server whose scheduling is the simulator's engine (the one step planner of
`jevserve.serving`) run against the wall clock, with vLLM's metrics; it generates filler text, not model output."""
