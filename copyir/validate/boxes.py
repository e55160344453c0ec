"""Where each DMA end lies: its buffer, element offset and box.

Written over arrays so that instructions in loops, whose addresses differ
per iteration, resolve all their iterations at once. An end is valid when
it is a box of one buffer: inside it, of the buffer's own dtype, and
stepping along the buffer's dimensions with the buffer's own strides.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ShapedType

from copyir import errors, limits
from copyir.dtypes import BY_NAME, DTYPES
from copyir.index import row_major_strides
from copyir.machine import SPACES
from copyir.stream import (
    Buffer,
)
from copyir.tables import small_groups
from copyir.validate.problems import StreamProblem, first_problem

ITEMSIZES = np.array([d.itemsize for d in DTYPES], dtype=np.int64)


@dataclass(frozen=True)
class Boxes:
    """DMA ends resolved against the buffers, one row per end.

    `lo` and `hi` bound the box per buffer dimension (dimensions past a
    buffer's rank are padded with [0, 1)); `offset` is the element offset
    of the end's first element in its buffer.
    """

    buffer: np.ndarray
    offset: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


@dataclass(frozen=True)
class BufferIndex:
    """The buffers of a stream, sorted per memory space for lookups."""

    buffers: list[Buffer]
    rank: int
    shapes: np.ndarray
    """(buffers, rank): each buffer's shape, padded with 1s at the end."""
    strides: np.ndarray
    """(buffers, rank): row-major strides in elements, padded with 1s."""
    dtypes: np.ndarray
    starts: dict[int, np.ndarray]
    """Per space code: the buffers' byte addresses, sorted."""
    ids: dict[int, np.ndarray]
    """Per space code: buffer numbers in the order of `starts`."""

    @staticmethod
    def of(buffers: list[Buffer]) -> BufferIndex:
        rank = max([len(b.shape) for b in buffers] + [1])
        shapes = np.ones((len(buffers), rank), np.int64)
        strides = np.ones((len(buffers), rank), np.int64)
        for i, b in enumerate(buffers):
            shapes[i, : len(b.shape)] = b.shape
            strides[i, : len(b.shape)] = row_major_strides(b.shape)
        codes = {d.name: i for i, d in enumerate(DTYPES)}
        dtypes = np.array([codes[BY_NAME[b.dtype].name] for b in buffers], np.int64)
        starts, ids = {}, {}
        for code, space in enumerate(SPACES):
            members = [i for i, b in enumerate(buffers) if b.space == space]
            members.sort(key=lambda i: buffers[i].address)
            ids[code] = np.array(members, np.int64)
            starts[code] = np.array([buffers[i].address for i in members], np.int64)
        return BufferIndex(buffers, rank, shapes, strides, dtypes, starts, ids)


# -- DMA ends ------------------------------------------------------------------------


@dataclass(frozen=True)
class EndKinds:
    """The static fields of each kind of end (one instruction's source,
    say): every end of a kind has its kind's dtype code, rank, shape and
    strides (padded to one width) and memory space; only the byte address
    varies, per iteration inside loops."""

    dtype: np.ndarray
    rank: np.ndarray
    shape: np.ndarray
    strides: np.ndarray
    space: np.ndarray


def resolve_ends(
    layout: BufferIndex,
    label: str,
    kinds: EndKinds,
    kind: np.ndarray,
    address: np.ndarray,
) -> Boxes:
    """Where each DMA end lies: its buffer, element offset and box.

    One row per end: its kind (a row of `kinds`) and byte address. `label`
    names the ends in messages (`source`). Raises the first end that is out
    of bounds, of another dtype than its buffer, or not a box, as a
    `StreamProblem` at its row. What depends only on the kind (the extent
    of a box in bytes, whether it is too large to address) is worked out
    once per kind, not per end.
    """
    count = len(address)
    ranks = kinds.rank.astype(np.int64)
    used = np.arange(kinds.shape.shape[1])[None, :] < ranks[:, None]
    shape = np.where(used, kinds.shape, 1)
    strides = np.where(used, kinds.strides, 0)
    item_k = ITEMSIZES[kinds.dtype.astype(np.int64)]
    reach = ((shape - 1).astype(np.float64) * np.abs(strides)).sum(axis=1)
    huge_k = reach * item_k >= limits.LIMIT
    steps = np.where(huge_k[:, None], 0, (shape - 1) * strides)
    below = item_k * np.minimum(steps, 0).sum(axis=1)
    above = item_k * (np.maximum(steps, 0).sum(axis=1) + 1)
    item, huge, space = item_k[kind], huge_k[kind], kinds.space[kind]
    lo_byte = address + below[kind]
    hi_byte = address + above[kind]
    buffer = np.full(count, -1, np.int64)
    for code, starts in layout.starts.items():
        mine = space == code
        if starts.size and mine.any():
            at = np.searchsorted(starts, lo_byte[mine], side="right") - 1
            buffer[mine] = np.where(at >= 0, layout.ids[code][np.maximum(at, 0)], -1)
    sizes = np.array([b.nbytes for b in layout.buffers] + [0], np.int64)
    bases = np.array([b.address for b in layout.buffers] + [0], np.int64)
    base, size = bases[buffer], sizes[buffer]
    outside = huge | (buffer < 0) | (lo_byte >= base + size)
    past = ~outside & (hi_byte > base + size)
    wrong_dtype = (
        ~outside
        & ~past
        & (
            (layout.dtypes[np.maximum(buffer, 0)] != kinds.dtype[kind])
            | ((address - base) % item != 0)
        )
    )

    def region(r: int) -> str:
        return f"{SPACES[space[r]]}[{lo_byte[r]}:{hi_byte[r]}]"

    def out_of_bounds(r: int) -> str:
        if outside[r]:
            why = f"it lies outside every {SPACES[space[r]]} buffer"
        else:
            b = layout.buffers[buffer[r]]
            why = (
                f"it runs past the end of buffer {b.name} "
                f"({b.space}[{b.address}:{b.address + b.nbytes}])"
            )
        return errors.RUN_OUT_OF_BOUNDS.format(end=label, region=region(r), why=why)

    def mismatch(r: int) -> str:
        b = layout.buffers[buffer[r]]
        if layout.dtypes[buffer[r]] == kinds.dtype[kind[r]]:  # same, misaligned
            return errors.RUN_MISALIGNED.format(
                end=label,
                region=region(r),
                name=b.name,
                offset=int((address[r] - base[r]) % item[r]),
                item=int(item[r]),
            )
        return errors.RUN_MISMATCHED_BUFFER.format(
            end=label,
            dtype=DTYPES[kinds.dtype[kind[r]]].name,
            name=b.name,
            held=b.dtype,
        )

    if not layout.buffers and count:
        raise StreamProblem(0, out_of_bounds(0), False)
    bad = outside | past | wrong_dtype
    safe_buffer = np.where(bad, 0, buffer)
    offset = np.where(bad, 0, (address - base) // item)
    lo, hi, not_box = _boxes(layout, safe_buffer, offset, shape, strides, kind)
    not_box &= ~bad

    def not_a_box(r: int) -> str:
        b = layout.buffers[buffer[r]]
        k = kind[r]
        return errors.RUN_NOT_A_BOX.format(
            end=label,
            region=region(r),
            name=b.name,
            shape=list(b.shape),
            extents=shape[k, : ranks[k]].tolist(),
            strides=strides[k, : ranks[k]].tolist(),
        )

    first = first_problem(
        [
            (outside | past, out_of_bounds),
            (wrong_dtype, mismatch),
            (not_box, not_a_box),
        ]
    )
    if first is not None:
        raise StreamProblem(first[0], first[1], False)
    return Boxes(buffer, offset, lo, hi)


def _boxes(layout: BufferIndex, buffer, offset, shape, strides, kind):
    """Each end as one [lo, hi) per buffer dimension, and which ends are not
    boxes. The mapping of DMA dimensions onto buffer dimensions depends only
    on the buffer and the kind's shape and strides (rows of `shape` and
    `strides`), so it is worked out once per (kind, buffer) and applied to
    all its ends at once."""
    key = kind.astype(np.int64) * len(layout.buffers) + buffer
    _, firsts, group = small_groups(key)
    # Per combination: the extent along each buffer dimension, whether it
    # must start at 0 there, and whether it is no box at all.
    rank = layout.shapes.shape[1]
    extent = np.ones((len(firsts), rank), np.int64)
    from_zero = np.zeros((len(firsts), rank), bool)
    never = np.zeros(len(firsts), bool)
    for number, row in enumerate(firsts.tolist()):
        extents = _dimension_extents(
            layout.buffers[buffer[row]].shape, shape[kind[row]], strides[kind[row]]
        )
        if extents is None:
            never[number] = True
            continue
        for dim, (size, zero) in extents.items():
            extent[number, dim], from_zero[number, dim] = size, zero
    # A column at a time, with per-combination tables gathered by `group`:
    # no (ends, rank) temporaries, and nothing done for a dimension where
    # every buffer has extent 1 or no box can fall short or run over.
    shapes, bstrides = layout.shapes[buffer[firsts]], layout.strides[buffer[firsts]]
    lo = np.zeros((len(buffer), rank), np.int64)
    hi = np.ones((len(buffer), rank), np.int64)
    not_box = never[group] if never.any() else np.zeros(len(buffer), bool)
    for d in range(rank):
        if (shapes[:, d] == 1).all():
            continue
        stride, extent_d = bstrides[:, d], shapes[:, d]
        if (stride == stride[0]).all() and (extent_d == extent_d[0]).all():
            lo[:, d] = offset // stride[0] % extent_d[0]  # scalars: fast division
        else:
            lo[:, d] = offset // stride[group] % extent_d[group]
        hi[:, d] = lo[:, d] + extent[group, d]
        if from_zero[:, d].any():
            not_box |= from_zero[group, d] & (lo[:, d] != 0)
        room = shapes[:, d] - extent[:, d]  # the last start that fits
        if (room < shapes[:, d] - 1).any():
            not_box |= lo[:, d] > room[group]
    return lo, hi, not_box


def _dimension_extents(
    buffer_shape, shape, strides
) -> dict[int, tuple[int, bool]] | None:
    """For a DMA of `shape` and `strides` (in elements) over a buffer, the
    extent it covers in each buffer dimension it steps along, and whether it
    must start there at 0 (a DMA dimension that spans several buffer
    dimensions, such as 16 contiguous elements of 8-element rows); None
    when the DMA's elements cannot form a box of the buffer."""
    dims, bstrides = list(buffer_shape), ShapedType.strides_for_shape(buffer_shape)
    covered: dict[int, tuple[int, bool]] = {}
    for extent, stride in zip(shape, strides, strict=True):
        extent, stride = int(extent), int(stride)
        if extent == 1:
            continue
        dim = next(
            (d for d, s in enumerate(bstrides) if s == stride and dims[d] > 1), None
        )
        if dim is None:
            return None
        while extent > dims[dim]:  # spans whole rows of the next dimension out
            if extent % dims[dim] or dim in covered or dim == 0:
                return None
            covered[dim] = (dims[dim], True)
            extent //= dims[dim]
            dim -= 1
            while dim > 0 and dims[dim] == 1:
                dim -= 1
        if dim in covered:
            return None
        covered[dim] = (extent, False)
    return covered
