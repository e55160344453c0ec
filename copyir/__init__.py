"""copyir: write, check and run TPU-style DMA copy programs.

The API (`parse`, `verify`, `lower`, `to_stream`, `run`, `to_text`) loads
on first use, so that importing the core IR pulls in no pass or backend.
"""

from __future__ import annotations

from typing import Any

from copyir.errors import CopyIRError, Loc

__version__ = "0.1.0"

_API = (
    "parse",
    "verify",
    "lower",
    "run",
    "to_stream",
    "to_text",
    "dma_text",
    "select_kernel",
    "kernels",
)

__all__ = ["CopyIRError", "Loc", "__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        from copyir import api

        return getattr(api, name)
    raise AttributeError(f"module 'copyir' has no attribute {name!r}")
