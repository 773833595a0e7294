"""jevserve: decision-model-aware LLM serving."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__version__ = "0.1.0"


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` (PEP 562) for `package` that imports each export from its sub-module on first use.

    `exports` maps a name to the sub-module that defines it. A package whose exports pull in optional libraries
    uses it, so importing one of its modules (its command line, say) does not import them all.
    """

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        setattr(importlib.import_module(package), name, value)  # found directly from now on
        return value

    return __getattr__
