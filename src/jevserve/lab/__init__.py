"""The lab: experiments, sweeps, reports and probes built on the runtime, whose results the docs cite.

Nothing in the runtime imports the lab. Its commands hang under `jevserve sim` (`queue-order`, `cluster`)."""
