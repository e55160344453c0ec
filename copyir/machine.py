"""The machine model's fixed vocabulary: memory spaces, size limits, and how
a run completes DMAs.

Shared by the copy dialect, the dma dialect, the stream and the targets, so
that each names the spaces and limits from one place.
"""

from __future__ import annotations

from copyir import errors
from copyir.errors import CopyIRError

SPACES = ("hbm", "vmem", "smem")
SPACE_ALIASES = {"any": "hbm"}
MAX_RANK = 32
"""Refs have at most this many dimensions (numpy's own limit is 64)."""
MAX_SEMAPHORES = 1 << 20
"""A semaphore array has at most this many semaphores."""
MODES = ("random", "eager", "on_wait")
"""When, inside its in-flight window, a run moves each DMA's data: at a
random moment, at its start, or in the wait that needs it. A correct
program gives one result in every mode."""
POISON = 0xFF
"""The byte a run's memory holds until written, so that a read of memory
nobody wrote shows."""


def memory_space(name: str) -> str:
    """The canonical space for a name (`any` is `hbm`), or UNKNOWN_SPACE."""
    name = SPACE_ALIASES.get(name, name)
    if name not in SPACES:
        raise CopyIRError(errors.UNKNOWN_SPACE.format(space=name))
    return name
