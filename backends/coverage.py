"""Written regions as intervals of elements, never one flag per element.

A box of a buffer is a set of runs of consecutive elements in the buffer's
row-major order: a (8, 128) block of a (N, 128) array is one run, a (128,
128) tile of a (1000, 384) array is 128 runs. Runs of all buffers are laid
end to end on one line of "global" element numbers (buffer b's element e is
`base[b] + e`), so that the union of millions of runs is one sort and one
running maximum, and a buffer that is written whole is one interval.

`IntervalSet` is the incremental form, for the rare reads that no single
earlier write covers exactly.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from copyir.tables import group_rows, row_hash, small_groups


@dataclass(frozen=True)
class Runs:
    """Half-open runs [lo, hi) of global element numbers, one row per run,
    with the access each came from."""

    lo: np.ndarray
    hi: np.ndarray
    owner: np.ndarray


def bases(shapes: np.ndarray) -> np.ndarray:
    """Each buffer's first global element number (its elements follow)."""
    sizes = np.prod(shapes, axis=1)
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)


def box_runs(
    shapes: np.ndarray,
    strides: np.ndarray,
    base: np.ndarray,
    buffer: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    shape_kind: np.ndarray | None = None,
) -> Runs:
    """The runs of each box (rows of `buffer`, `lo`, `hi`).

    Boxes with the same buffer and extents have the same pattern of runs,
    so the pattern is computed once per kind and offset per box. A box
    spans a buffer dimension whole exactly when its extent there is the
    buffer's. `shape_kind`, when given, already groups the rows by buffer
    and extents (see `protocol.BoxAccesses`), which spares hashing them.
    """
    if not len(buffer):
        empty = np.zeros(0, np.int64)
        return Runs(empty, empty, empty)
    if shape_kind is not None:
        _, kinds, group = small_groups(shape_kind)
    else:
        extents = hi - lo
        full = extents == shapes[buffer]
        keys = np.concatenate([buffer[:, None], extents, full], axis=1)
        kinds, group = group_rows(keys)
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(len(kinds) + 1))
    firsts = base[buffer]
    for d in range(lo.shape[1]):  # a column at a time: no (boxes, rank) temporary
        firsts = firsts + lo[:, d] * strides[buffer, d]
    parts_lo, parts_hi, parts_owner = [], [], []
    for number, row in enumerate(kinds.tolist()):
        members = order[bounds[number] : bounds[number + 1]]
        b = int(buffer[row])
        ext = hi[row] - lo[row]
        pattern, length = _pattern(shapes[b], strides[b], ext, ext == shapes[b])
        starts = (firsts[members][:, None] + pattern[None, :]).reshape(-1)
        parts_lo.append(starts)
        parts_hi.append(starts + length)
        parts_owner.append(np.repeat(members, len(pattern)))
    return Runs(
        np.concatenate(parts_lo), np.concatenate(parts_hi), np.concatenate(parts_owner)
    )


def _pattern(shape, strides, extents, full) -> tuple[np.ndarray, int]:
    """Offsets of a box's runs from its first element, and the run length.

    The run covers the trailing dimensions the box spans whole and the one
    before them in part; every combination of the dimensions before that
    starts a run.
    """
    rank = len(shape)
    split = rank - 1
    while split > 0 and full[split]:
        split -= 1
    length = int(extents[split] * strides[split])
    offsets = np.zeros(1, np.int64)
    for d in range(split):
        if extents[d] > 1:
            steps = np.arange(int(extents[d]), dtype=np.int64) * int(strides[d])
            offsets = (offsets[:, None] + steps[None, :]).reshape(-1)
    return offsets, length


def box_keys(buffer: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each box: equal boxes get equal keys, and callers
    compare the boxes themselves where keys agree."""
    return row_hash(np.concatenate([buffer[:, None], lo, hi], axis=1))


def union(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of runs as sorted, disjoint, non-adjacent intervals."""
    if not len(lo):
        return lo, hi
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    new = np.concatenate([[True], lo[1:] > reach[:-1]])
    starts = lo[new]
    ends = reach[np.concatenate([np.flatnonzero(new)[1:] - 1, [len(lo) - 1]])]
    return starts, ends


def gaps(
    starts: np.ndarray, ends: np.ndarray, lo: int, hi: int
) -> list[tuple[int, int]]:
    """The parts of [lo, hi) that sorted disjoint intervals leave uncovered."""
    first = np.searchsorted(ends, lo, side="right")
    last = np.searchsorted(starts, hi, side="left")
    found, at = [], lo
    for s, e in zip(starts[first:last], ends[first:last], strict=True):
        if s > at:
            found.append((at, int(s)))
        at = max(at, int(e))
    if at < hi:
        found.append((at, hi))
    return found


class IntervalSet:
    """Sorted, disjoint, merged intervals of global element numbers."""

    def __init__(self):
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, lo: int, hi: int) -> None:
        i = bisect.bisect_left(self.ends, lo)  # first interval ending at or after lo
        j = bisect.bisect_right(self.starts, hi)  # intervals starting up to hi
        if i < j:
            lo = min(lo, self.starts[i])
            hi = max(hi, self.ends[j - 1])
        self.starts[i:j] = [lo]
        self.ends[i:j] = [hi]

    def remove(self, lo: int, hi: int) -> None:
        i = bisect.bisect_right(self.ends, lo)  # first interval ending after lo
        j = bisect.bisect_left(self.starts, hi)  # intervals starting before hi
        if i >= j:
            return
        keep_starts, keep_ends = [], []
        if self.starts[i] < lo:
            keep_starts.append(self.starts[i])
            keep_ends.append(lo)
        if self.ends[j - 1] > hi:
            keep_starts.append(hi)
            keep_ends.append(self.ends[j - 1])
        self.starts[i:j] = keep_starts
        self.ends[i:j] = keep_ends

    def gaps(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """The parts of [lo, hi) not in the set."""
        i = bisect.bisect_right(self.ends, lo)  # first interval ending after lo
        found, at = [], lo
        while i < len(self.starts) and self.starts[i] < hi:
            if self.starts[i] > at:
                found.append((at, self.starts[i]))
            at = max(at, self.ends[i])
            i += 1
        if at < hi:
            found.append((at, hi))
        return found

    def first_missing(self, lo: int, hi: int) -> int | None:
        """The first element of [lo, hi) not in the set, or None."""
        i = bisect.bisect_right(self.starts, lo) - 1
        if i >= 0 and self.ends[i] > lo:
            return None if self.ends[i] >= hi else self.ends[i]
        return lo
