"""The Pallas frontend: check and run the Pallas kernels users already have.

`copyir.pallas.run(f, *args)` evaluates a JAX function with every
`pallas_call` in it run by copyir, as inside `checking()`, the drop-in for
Pallas' interpret mode; `compare(f, *args)` runs it on copyir and in
Pallas' interpret mode and reports where they differ;
`import_kernels(f, *args)` gives each kernel as a copy-dialect module with
the inputs it received. JAX is an
optional dependency (`pip install -e ".[pallas]"`): it is imported on first
use, never by `import copyir`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from copyir import errors
from copyir.errors import InvocationError

if TYPE_CHECKING:
    from copyir.pallas.api import import_kernels, run
    from copyir.pallas.calls import ImportedKernel
    from copyir.pallas.checking import checking
    from copyir.pallas.compare import compare

__all__ = [
    "ImportedKernel",
    "checking",
    "compare",
    "import_kernels",
    "require_jax",
    "run",
]

_API = {
    "run": "copyir.pallas.api",
    "import_kernels": "copyir.pallas.api",
    "ImportedKernel": "copyir.pallas.calls",
    "checking": "copyir.pallas.checking",
    "compare": "copyir.pallas.compare",
}


def require_jax() -> None:
    """One line saying how to install JAX, where it is missing."""
    import importlib.util

    if importlib.util.find_spec("jax") is None:
        raise InvocationError(errors.PALLAS_NEEDS_JAX)


def __getattr__(name: str) -> object:
    if name in _API:
        import importlib

        require_jax()
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'copyir.pallas' has no attribute {name!r}")
