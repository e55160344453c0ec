"""Folding chains of views into accesses (`copyir.access`), against numpy.

A view of `np.arange(size).reshape(shape)` holds, at each of its elements,
that element's flat offset in the root: numpy's own slicing is the
independent computation each folded access is compared with.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import f32

import copyir
from copyir.access import Accesses
from copyir.dialects.copy import (
    KernelOp,
    RefType,
    SemaphoreOp,
    SemIndexOp,
    ViewOp,
)

Subscripts = list[tuple[int, int, bool]]


@st.composite
def subscripts(draw, shape: tuple[int, ...]) -> Subscripts:
    """Valid subscripts of a ref of this shape: indices and unit-step slices
    of its first k dimensions."""
    count = draw(st.integers(0, len(shape)))
    result = []
    for extent in shape[:count]:
        if draw(st.booleans()):
            result.append((draw(st.integers(0, extent - 1)), 1, True))
        else:
            lo = draw(st.integers(0, extent - 1))
            hi = draw(st.integers(lo + 1, extent))
            result.append((lo, hi - lo, False))
    return result


@st.composite
def chains(draw, shape: tuple[int, ...], max_length: int = 5) -> list[Subscripts]:
    """A chain of views from a root of this shape: each view's subscripts
    apply to the shape the one before it left."""
    chain = []
    for _ in range(draw(st.integers(0, max_length))):
        view = draw(subscripts(shape))
        chain.append(view)
        kept = [size for _, size, dropped in view if not dropped]
        shape = (*kept, *shape[len(view) :])
    return chain


shapes = st.lists(st.integers(1, 5), min_size=0, max_size=4).map(tuple)


def numpy_index(view: Subscripts) -> tuple:
    return tuple(
        start if dropped else slice(start, start + size)
        for start, size, dropped in view
    )


def offsets_covered(shape: tuple[int, ...], chain: list[Subscripts]) -> np.ndarray:
    """The flat offsets in the root of each element of the chain's last view."""
    array = np.arange(int(np.prod(shape, dtype=int))).reshape(shape)
    for view in chain:
        array = array[numpy_index(view)]
    return np.asarray(array)


def root(shape: tuple[int, ...]):
    kernel = KernelOp("k", [("x", RefType(shape, f32))])
    return kernel.params[0]


def build(source, chain: list[Subscripts]):
    for view in chain:
        source = ViewOp(source, view).result
    return source


def flat_offsets(access) -> np.ndarray:
    """Every element's flat offset in the root, from the access alone."""
    index = np.indices(access.shape, dtype=int)
    return access.offset + sum(
        (i * s for i, s in zip(index, access.strides, strict=True)),
        start=np.zeros(access.shape, dtype=int),
    )


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_folded_chain_covers_what_numpy_slicing_covers(data):
    shape = data.draw(shapes)
    chain = data.draw(chains(shape))
    x = root(shape)
    access = Accesses()(build(x, chain))
    expected = offsets_covered(shape, chain)
    assert access.root is x
    assert access.shape == expected.shape
    assert np.array_equal(flat_offsets(access), expected)
    coords = np.unravel_index(expected.ravel(), shape) if shape else ()
    assert access.box == tuple(
        (int(c.min()), int(c.max()) + 1) for c in coords
    )  # views are boxes: their elements span exactly the box


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_two_views_overlap_when_numpy_says_they_share_an_element(data):
    shape = data.draw(shapes)
    x = root(shape)
    a, b = (data.draw(chains(shape)) for _ in range(2))
    accesses = Accesses()
    shared = np.intersect1d(offsets_covered(shape, a), offsets_covered(shape, b))
    assert accesses.overlap(build(x, a), build(x, b)) == (shared.size > 0)


def test_views_of_different_roots_never_overlap():
    x, y = root((4, 4)), root((4, 4))
    assert not Accesses().overlap(x, y)
    assert Accesses().overlap(x, x)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_a_semaphore_index_folds_to_its_flat_index(data):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
    indices = [data.draw(st.integers(0, d - 1)) for d in shape]
    cut = data.draw(st.integers(0, len(indices)))
    sems = SemaphoreOp(shape).result
    first = SemIndexOp(sems, indices[:cut]).result
    value = SemIndexOp(first, indices[cut:]).result if cut < len(indices) else first
    access = Accesses()(value)
    assert access.root is sems
    assert access.offset == np.ravel_multi_index(indices, shape)
    assert access.shape == shape[len(indices) :]


def test_each_view_is_folded_once():
    x = root((64, 8))
    views = [x]
    for _ in range(50):
        views.append(
            ViewOp(views[-1], [(1, views[-1].type.get_shape()[0] - 1, False)]).result
        )
    accesses = Accesses()
    assert accesses(views[-1]).offset == 50 * 8
    assert accesses.folded == 50
    for view in reversed(views):  # every link of the chain is known now
        accesses(view)
    assert accesses.folded == 50
    assert accesses(views[25]).box == ((25, 64), (0, 8))


def test_a_root_that_is_no_ref_has_no_access():
    kernel = KernelOp("k", [("x", RefType((4,), f32))])
    bref = copyir.parse(
        "kernel k(x: f32[8]) {\n  b = buffered_ref x, block=(4,)\n}\n"
    ).ops.first.body.block.ops.first.result
    assert Accesses()(bref) is None
    assert not Accesses().overlap(bref, kernel.params[0])


def test_the_lowering_takes_offsets_and_strides_from_the_access():
    text = (
        "kernel k(x: f32[4, 6, 8] @hbm) {\n  buf = alloc f32[3, 8] @vmem\n"
        "  v = x[1:4]\n  w = v[1:3, 2]\n  s = semaphore\n"
        "  copy_start w -> buf[0:2], s\n  copy_wait w -> buf[0:2], s\n}\n"
    )
    program = copyir.lower(copyir.parse(text))
    start = next(op for op in program.body.block.ops if op.name == "dma.start")
    assert start.src_address.value.data == ((2 * 6 + 2) * 8) * 4
    assert tuple(start.src_strides.get_values()) == (48, 1)
    assert tuple(start.shape.get_values()) == (2, 8)
