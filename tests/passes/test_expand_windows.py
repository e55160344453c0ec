"""The window arithmetic of expand-windows against numpy slicing.

For thousands of generated (shape, block shape, block index) cases, ragged
edges, `Element` and squeezed dimensions included, the array slice that
`window_slices` computes must select exactly what numpy's own slicing
selects (numpy cuts a slice at the array's end, which is the ragged-edge
rule), and the window slice must select a region of the same shape at the
start of the slot.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from copyir.passes.expand_windows import window_slices
from xdsl.dialects.builtin import f32

from copyir.dialects.copy import (
    BLOCKED,
    ELEMENT,
    SQUEEZED,
    BlockDimAttr,
    BufferedRefType,
)


def apply(array: np.ndarray, subscripts) -> np.ndarray:
    """Explicit subscripts (offset, size, dropped), applied with integers."""
    index = tuple(
        offset if dropped else slice(offset, offset + size)
        for offset, size, dropped in subscripts
    )
    view = array[(*index, ...)]  # a 0-d view, not a scalar, when all are indexed
    for (offset, size, dropped), extent in zip(subscripts, array.shape, strict=False):
        assert offset >= 0 and (dropped or offset + size <= extent)
    return view


def oracle(array: np.ndarray, block, indices) -> np.ndarray:
    """The block as plain numpy slicing reads it."""
    index = []
    for (kind, size), i in zip(block, indices, strict=True):
        if kind == SQUEEZED:
            index.append(i)
        elif kind == ELEMENT:
            index.append(slice(i, i + size))
        else:
            index.append(slice(i * size, (i + 1) * size))
    return array[tuple(index)]


def cases(count: int, seed: int = 7):
    rng = random.Random(seed)
    for _ in range(count):
        shape = [rng.randint(1, 13) for _ in range(rng.randint(1, 3))]
        block, indices = [], []
        for extent in shape:
            kind = rng.choice([BLOCKED, BLOCKED, ELEMENT, SQUEEZED])
            size = 1 if kind == SQUEEZED else rng.randint(1, extent)
            block.append((kind, size))
            grid = -(-extent // size) if kind == BLOCKED else extent
            indices.append(rng.randrange(grid))
        yield shape, block, indices, rng.randint(1, 3)


def bref(shape, block, buffers) -> BufferedRefType:
    return BufferedRefType(
        shape, f32, [BlockDimAttr(kind, size) for kind, size in block], buffers
    )


def test_worked_example_of_the_design():
    type = bref([1000, 384], [(BLOCKED, 128), (BLOCKED, 128)], 2)
    array, window = window_slices(type, (7, 2), 0)
    assert array == [(896, 104, False), (256, 128, False)]
    assert window == [(0, 1, True), (0, 104, False), (0, 128, False)]
    assert 104 * 128 * 4 == 53_248


@pytest.mark.parametrize("seed", range(4))
def test_window_slices_match_numpy(seed):
    checked = ragged = 0
    for shape, block, indices, buffers in cases(1500, seed):
        type = bref(shape, block, buffers)
        slot = (seed + len(shape)) % buffers
        array_slice, window_slice = window_slices(type, indices, slot)
        data = np.arange(np.prod(shape)).reshape(shape)
        expected = oracle(data, block, indices)
        got = apply(data, array_slice)
        assert got.shape == expected.shape and (got == expected).all(), (
            shape,
            block,
            indices,
        )
        window = np.zeros(type.window_type.get_shape())
        region = apply(window, window_slice)
        assert region.shape == expected.shape
        region[...] = 1
        kept = [size for kind, size in block if kind != SQUEEZED]
        assert window[slot].sum() == expected.size
        assert (window[slot][tuple(slice(0, n) for n in expected.shape)] == 1).all()
        assert list(window.shape[1:]) == kept
        ragged += expected.size < np.prod(kept)
        checked += 1
    assert checked == 1500
    assert ragged > 100  # the generator reaches ragged edges
