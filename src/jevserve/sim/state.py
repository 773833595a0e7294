"""What simulation events act on: the engines and the observers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jevserve.sim.engine import Engine
from jevserve.sim.observer import Observer


@dataclass
class SimState:
    """The engines (by replica id) and the observers of one simulation."""

    engines: Sequence[Engine]
    observers: tuple[Observer, ...] = ()
