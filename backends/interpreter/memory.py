"""The memory a run gets: fresh arenas, and the pages compiling freed given
back to the system before they are allocated."""

from __future__ import annotations

import ctypes
import functools
import sys

import numpy as np

from copyir import errors
from copyir.errors import CopyIRError


def arena(space: str, size: int) -> np.ndarray:
    """`size` fresh bytes for a buffer of `space`, or CANNOT_ALLOCATE."""
    try:
        return np.empty(size, np.uint8)
    except (MemoryError, ValueError) as err:  # the machine cannot hold it
        raise CopyIRError(
            errors.CANNOT_ALLOCATE.format(size=size, space=space, why=err)
        ) from None


def release_freed_memory() -> None:
    """Hand the memory that compiling freed back to the system (glibc only;
    elsewhere nothing happens).

    Compiling a large stream makes and frees many tables of a few MiB each.
    glibc serves those from its heap once it has raised its mmap threshold,
    and keeps their pages when they are freed; a run would then allocate
    its arenas on top of that dead weight (about 200 MiB for 400,000 DMAs).
    `malloc_trim(0)` returns every free page of the heap."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    if sys.platform != "linux":
        return None
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
