"""Small numpy helpers for the stream's tables."""

from __future__ import annotations

import numpy as np

_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9))


def row_hash(matrix: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row of an integer matrix (equal rows, equal
    hashes; callers that need exactness compare rows where hashes agree)."""
    key = np.full(len(matrix), _MIX[0], np.uint64)
    for column in matrix.T:
        key = (key ^ column.astype(np.uint64)) * _MIX[1]
        key ^= key >> np.uint64(31)
    return key


def group_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of an integer matrix: (the first row of each kind,
    the kind of every row), as `np.unique(axis=0)` gives but by hashing,
    which is many times faster on long tables."""
    if not len(matrix):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    keys = row_hash(matrix)
    _, first, kind = np.unique(keys, return_index=True, return_inverse=True)
    kind = kind.reshape(-1)
    if not (matrix == matrix[first[kind]]).all():  # a collision: be exact
        _, first, kind = np.unique(
            matrix, axis=0, return_index=True, return_inverse=True
        )
        kind = kind.reshape(-1)
    return first, kind


def small_groups(key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct values of non-negative integer keys, sorted, as
    `np.unique(key, return_inverse=True)` gives them, plus one row of
    each (any row): (values, a row of each, the group of every row).
    Keys that span a range not much larger than their count (instruction
    rows times buffers) are counted in a table instead of sorted."""
    if not len(key):
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    top = int(key.max())
    if key.min() < 0 or top > 4 * len(key) + 1024:
        values, first, group = np.unique(key, return_index=True, return_inverse=True)
        return values, first, group.reshape(-1)
    present = np.zeros(top + 1, bool)
    present[key] = True
    values = np.flatnonzero(present)
    number = np.cumsum(present) - 1
    group = number[key]
    first = np.empty(len(values), np.int64)
    first[group] = np.arange(len(key))
    return values, first, group
