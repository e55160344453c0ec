"""The machine model's fixed vocabulary: memory spaces, size limits, and how
a run completes DMAs.

Shared by the copy dialect, the dma dialect, the stream and the targets, so
that each names the spaces and limits from one place.
"""

from __future__ import annotations

import numpy as np

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


PADDING = "padding of a cut block"
"""The opaque computation (`copy.opaque`) that writes poison where a cut
block (the ragged edge of an array) leaves its window slot, as Pallas'
interpret mode pads a `pallas_call`'s inputs: a run warns where it reaches
an output (`RUN_PADDING_OUTPUT`)."""


def poison(dtype: np.dtype) -> np.ndarray:
    """The element a run's memory holds until written: Pallas' TPU interpret
    mode's `uninitialized_memory="nan"` (`interpret/utils.py`,
    `get_uninitialized_value`, the same in JAX 0.10.2 and 0.12), so that
    where it reaches an output both agree bit for bit. NaN for floats (the
    bits `jnp.nan` has in the dtype: 0x7FC00000 in f32, 0x7FC0 in bf16,
    0x7E00 in f16), the dtype's maximum for integers, signed or not, and
    True for bool. A 0-d array of the dtype, copied as is."""
    if dtype == np.bool_:
        return np.array(True)
    if np.issubdtype(dtype, np.integer):
        return np.array(np.iinfo(dtype).max, dtype)
    return np.array(np.nan, dtype)


def memory_space(name: str) -> str:
    """The canonical space for a name (`any` is `hbm`), or UNKNOWN_SPACE."""
    name = SPACE_ALIASES.get(name, name)
    if name not in SPACES:
        raise CopyIRError(errors.UNKNOWN_SPACE.format(space=name))
    return name
