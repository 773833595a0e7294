"""The simulator's own argument type: an arrival process (`ArrivalSpec`), refused with the parser's message.
The number types every command line shares are in jevserve/argtypes.py."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from jevserve.sim.errors import WorkloadError


def arrivals_arg(*, allow_trace: bool) -> Callable[[str], str]:
    """An `ArrivalSpec` text (poisson, gamma:CV, mmpp:..., and trace where the workload carries times)."""

    def parse(text: str) -> str:
        from jevserve.sim.arrivals import ArrivalSpec

        try:
            spec = ArrivalSpec.parse(text)
        except WorkloadError as exc:
            said = str(exc) if allow_trace else str(exc).replace(" or trace", "")  # not offered where refused
            raise argparse.ArgumentTypeError(said) from None
        if spec.process == "trace" and not allow_trace:
            raise argparse.ArgumentTypeError(
                f"{text!r}: this command generates arrivals; expected poisson, gamma:CV or mmpp:...")
        return text.strip()

    parse.__name__ = "arrival process"
    return parse


def gamma_cv(arrivals: str, cv: float | None) -> float:
    """The CV `--cv` gives plain `--arrivals gamma` (2 when not given); a `--cv` that another process or an inline
    `gamma:CV` would ignore is refused (WorkloadError), not dropped silently."""
    if cv is not None and arrivals.strip() != "gamma":
        raise WorkloadError(f"--cv {cv:g} sets the CV of `--arrivals gamma`; with --arrivals {arrivals} it would be "
                            "ignored (give the CV inline, gamma:CV, or leave --cv out)")
    return 2.0 if cv is None else cv
