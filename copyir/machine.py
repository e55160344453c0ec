"""The machine model's fixed vocabulary: memory spaces, size limits, and how
a run completes DMAs.

Shared by the copy dialect, the dma dialect, the stream and the targets, so
that each names the spaces and limits from one place.
"""

from __future__ import annotations

from collections.abc import Sequence

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
"""The opaque computation (`copy.opaque`) over the part of a window slot
that a cut block (the ragged edge of an array) leaves: poison, as Pallas'
interpret mode pads a `pallas_call`'s inputs, or, in a BufferedRef's slot
(`emit_pipeline`), what the slot held before (`keeps`). A run warns where
it reaches an output (`RUN_PADDING_OUTPUT`)."""

LANES, SUBLANES = 128, 8
"""A TPU vreg's tile of 32-bit elements: (sublanes, lanes)."""


def tiling(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """The tile Pallas assumes for an array in memory, per dimension, as
    `tpu_info.infer_tiling` computes it for TPU v4 and later (JAX 0.10.2
    and 0.12 alike): a BufferedRef's DMA of a block cut by the array's end
    is rounded up to it. 1-D: 128 lanes of 32 bits, packed
    (`4 // itemsize` elements each); otherwise 1 for the leading
    dimensions, 128 for the last, and for the second-minor the packing
    doubled while below min(extent, 8). Pallas' rule has no tile for 8-byte
    elements (`4 // 8` is 0, and its loop never ends): an error here."""
    packing = lanes_packing(itemsize)
    if not packing:
        raise CopyIRError(errors.NO_TILING.format(itemsize=itemsize))
    if len(shape) == 1:
        return (packing * LANES,)
    second = packing
    while second < min(shape[-2], SUBLANES):
        second *= 2
    return (*(1,) * (len(shape) - 2), second, LANES)


def lanes_packing(itemsize: int) -> int:
    """How many elements of `itemsize` bytes a 32-bit lane holds (Pallas'
    `4 // itemsize`): 0 for 8-byte elements, which Pallas cannot tile."""
    return 4 // itemsize


def align_to(size: int, tile: int) -> int:
    """`size` rounded up to a multiple of `tile` (Pallas' `align_to`)."""
    return -(-size // tile) * tile


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
