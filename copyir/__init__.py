"""copyir: write, check and run TPU-style DMA copy programs.

The API (`parse`, `verify`, `lower`, `to_stream`, `run`, `to_text`,
`load_outputs`, ...) loads on first use, so that importing the core IR
pulls in no pass or backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from copyir.errors import CopyIRError, CopyIRWarning, InvocationError, Loc

if TYPE_CHECKING:  # what `__getattr__` loads, as a type checker sees it
    from copyir.api import (
        check_protocol,
        dma_text,
        kernels,
        lower,
        parse,
        run,
        select_kernel,
        to_stream,
        to_text,
        verify,
    )
    from copyir.files import load_outputs

__version__ = "0.1.0"

_API = {
    "parse": "copyir.api",
    "verify": "copyir.api",
    "lower": "copyir.api",
    "run": "copyir.api",
    "check_protocol": "copyir.api",
    "to_stream": "copyir.api",
    "to_text": "copyir.api",
    "dma_text": "copyir.api",
    "select_kernel": "copyir.api",
    "kernels": "copyir.api",
    "load_outputs": "copyir.files",
}
"""Each lazily loaded name of the API and the module that defines it."""

__all__ = [
    "CopyIRError",
    "CopyIRWarning",
    "InvocationError",
    "Loc",
    "__version__",
    "check_protocol",
    "dma_text",
    "kernels",
    "load_outputs",
    "lower",
    "parse",
    "run",
    "select_kernel",
    "to_stream",
    "to_text",
    "verify",
]


def __getattr__(name: str) -> object:
    if name in _API:
        import importlib

        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'copyir' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The API as well as what is loaded, so that completion finds it."""
    return sorted({*globals(), *__all__})
