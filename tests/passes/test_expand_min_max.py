"""min and max in index expressions: their pieces, the exact checks over a
loop's domain, and expand-min-max's stream against numpy.

Generated clamped loops (a block of rows copied HBM -> VMEM -> HBM per
iteration, its start a min or max of affine expressions, as kernels clamp
their last block) run on the stream in every completion mode and on the
reference path, and must give what a plain numpy loop gives, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from copyir.backends.interpreter import MODES
from copyir.backends.reference import run_reference
from copyir.passes.expand_min_max import ExpandMinMaxPass
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.context import Context
from xdsl.ir.affine import AffineConstraintExpr, AffineConstraintKind, AffineExpr

import copyir
from copyir import errors, limits
from copyir.dialects.copy import IndexOp, WhenOp
from copyir.errors import CopyIRError
from copyir.index import (
    MAX,
    MIN,
    Pieces,
    combine,
    conjoin,
    evaluate,
    plus,
    substitute_expr,
)

D0, D1 = AffineExpr.dimension(0), AffineExpr.dimension(1)


# -- pieces ----------------------------------------------------------------------


def test_a_min_is_two_affine_pieces_that_partition_the_domain():
    clamped = combine(MIN, [D0 * 128, AffineExpr.constant(872)])
    assert isinstance(clamped, Pieces)
    assert [expr for _, expr in clamped.pieces] == [D0 * 128, AffineExpr.constant(872)]
    i = np.arange(-20, 20)
    assert (evaluate(clamped, [i]) == np.minimum(128 * i, 872)).all()


@pytest.mark.parametrize("kind, function", [(MIN, np.minimum), (MAX, np.maximum)])
def test_nested_and_shifted_pieces_evaluate_as_numpy(kind, function):
    i, j = np.meshgrid(np.arange(-9, 10), np.arange(-9, 10))
    inner = combine(MAX, [D0 * 3 - 4, D1, AffineExpr.constant(1)])
    outer = plus(combine(kind, [inner, D1 * 2 + 1]), D0 * 5)
    want = function(np.maximum(np.maximum(3 * i - 4, j), 1), 2 * j + 1) + 5 * i
    assert (evaluate(outer, [i, j]) == want).all()
    assert (evaluate(outer * 3, [i, j]) == 3 * want).all()


def test_pieces_that_cannot_hold_together_are_left_out():
    """min(a, b) met twice (a view's start and its end) has two pieces, not
    four; a min of equal expressions is the expression."""
    clamped = combine(MIN, [D0 * 8, AffineExpr.constant(60)])
    both = plus(clamped, clamped)
    assert isinstance(both, Pieces) and len(both.pieces) == 2
    assert combine(MAX, [D0 + 1, D0 + 1]) == D0 + 1
    assert combine(MIN, [D0, D0 + 3]) == D0  # i <= i + 3 everywhere


def test_an_expression_is_in_pieces_only_of_the_args_it_uses():
    """`copy.index` of (c, i) whose map reads only i stays affine, however
    many pieces c has: else each chained min would multiply its pieces by
    its own args' (too_many_pieces.cpy took minutes, not a second)."""
    clamped = combine(MIN, [D0, AffineExpr.constant(3)])
    assert substitute_expr(D1 * 2, [clamped, D0]) == D0 * 2
    assert isinstance(substitute_expr(D0 + D1, [clamped, D0]), Pieces)


def test_more_pieces_than_the_limit_is_one_error():
    many = D0
    with pytest.raises(CopyIRError) as caught:
        for k in range(1, 12):
            many = combine(MIN, [many, D0 * k - D1 * (k * k) + k])
    assert str(caught.value) == errors.TOO_MANY_PIECES.format(limit=limits.MAX_PIECES)


@pytest.mark.parametrize(
    "kind, lhs, rhs, kept",
    [
        ("le", 3, 5, ()),
        ("le", 5, 3, None),
        ("ge", 5, 3, ()),
        ("ge", 3, 5, None),
        ("eq", 3, 3, ()),
        ("eq", 3, 5, None),
    ],
)
def test_a_constant_constraint_of_any_kind_is_dropped_or_drops_its_piece(
    kind, lhs, rhs, kept
):
    constraint = AffineConstraintExpr(
        AffineConstraintKind[kind],
        AffineExpr.constant(lhs),
        AffineExpr.constant(rhs),
        canonicalize=False,
    )
    assert conjoin((constraint,)) == kept


# -- the checks over the domain ----------------------------------------------------


def kernel(body: str, rows: int = 1000, trips: int = 8) -> str:
    return (
        f"kernel k(x: f32[{rows}, 128] @hbm, y: f32[{rows}, 128] @hbm) {{\n"
        "  buf = alloc f32[128, 128] @vmem\n  s = semaphore\n"
        f"  for i in range({trips}) {{\n{body}\n  }}\n}}\n"
    )


def verify_error(text: str) -> CopyIRError:
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text))
    return caught.value


def test_the_first_failing_point_is_named_on_the_piece_that_fails():
    text = kernel("    sync_copy x[ds(max(128 * i - 200, 5), 128)] -> buf", trips=10)
    assert str(verify_error(text)) == (
        errors.SLICE_OUT_OF_BOUNDS.format(
            start=952, stop=1080, dim=0, name="x", size=1000
        )
        + ", at i = 9"
    )


def test_a_max_below_zero_is_refused_at_its_first_point():
    text = kernel("    sync_copy x[ds(max(128 * i - 200, 128 * i - 300), 128)] -> buf")
    assert str(verify_error(text)) == (
        errors.NEGATIVE_INDEX.format(index=-200, expr="x[-200:-72]") + ", at i = 0"
    )


def test_a_clamp_that_holds_everywhere_verifies():
    copyir.verify(
        copyir.parse(kernel("    sync_copy x[ds(min(128 * i, 872), 128)] -> buf"))
    )


def test_an_overlap_is_found_on_one_piece_only():
    """min(8 * i, 16) meets the destination 16:24 of the same array only
    where the min is 16 (from i = 2): the other piece never overlaps."""
    text = (
        "kernel k(x: f32[64, 128] @hbm) {\n  s = semaphore\n"
        "  for i in range(4) {\n"
        "    copy_start x[ds(min(8 * i, 16), 8)] -> x[32:40], s\n"
        "    copy_wait x[0:8] -> x[32:40], s\n"
        "    sync_copy x[ds(min(8 * i, 16), 8)] -> x[16:24]\n"
        "  }\n}\n"
    )
    assert str(verify_error(text)) == (
        errors.DMA_OVERLAP.format(src="x[ds(min(8 * i, 16), 8)]", dst="x[16:24]")
        + ", at i = 2"
    )


# -- the lowering ------------------------------------------------------------------


def lowered_ops(text: str):
    module = copyir.parse(text)
    ExpandMinMaxPass().apply(Context(), module)
    return list(module.walk())


def test_no_op_reads_a_min_after_the_pass():
    text = kernel(
        "    c = min(i, 6)\n    sync_copy x[ds(128 * c, 128)] -> buf\n"
        "    m = max(i, 2)\n    when m == 2 {\n      sync_copy buf -> y[0:128]\n    }"
    )
    ops = lowered_ops(text)
    assert not any(isinstance(o, IndexOp) and o.combine is not None for o in ops)
    whens = [o for o in ops if isinstance(o, WhenOp)]
    assert len(whens) == 3  # the two pieces of the copy, the condition once


def stream_size(trips: int) -> int:
    text = kernel(
        "    start = min(128 * i, 872)\n"
        "    copy_start x[ds(start, 128)] -> buf, s\n"
        "    copy_wait x[ds(start, 128)] -> buf, s",
        rows=128 * trips,
        trips=trips,
    )
    text = text.replace("872", str(128 * trips - 128))
    return len(copyir.to_stream(copyir.lower(copyir.parse(text))).instructions)


def test_the_stream_grows_with_the_program_not_the_iterations():
    assert stream_size(8) == stream_size(8000) == 4


# -- generated clamped loops against numpy ------------------------------------------


@st.composite
def clamped_loops(draw):
    """A loop copying a block of rows per iteration from x to y, the
    source start clamped with min or max, or both, of affine expressions,
    sometimes only where a condition on the clamp holds; each iteration's
    block written to its own rows of y (y has a block of rows per
    iteration), so nothing races. With the iterations that copy and each
    one's start, as Python computes them."""
    block = draw(st.sampled_from([1, 2, 8]))
    rows = draw(st.integers(block, 40))
    trips = draw(st.integers(1, 12))
    last = rows - block
    a, b = draw(st.integers(-3, 3)), draw(st.integers(-12, 12))
    c, d = draw(st.integers(-3, 3)), draw(st.integers(-12, 12))
    shape = draw(st.sampled_from(["min", "max", "clamp", "named"]))
    guard = draw(st.none() | st.integers(0, last))

    def start(i):
        one, two = a * i + b, c * i + d
        return {
            "min": min(max(one, 0), last),
            "max": max(min(two, last), 0),
            "clamp": min(max(one, two, 0), last),
            "named": max(min(one, last), 0),
        }[shape]

    first, second = f"{a} * i + {b}", f"{c} * i + {d}"
    source = {
        "min": f"s0 = max({first}, 0)\n    t = min(s0, {last})",
        "max": f"s0 = min({second}, {last})\n    t = max(s0, 0)",
        "clamp": f"s0 = max({first}, {second}, 0)\n    t = min(s0, {last})",
        "named": f"s0 = min({first}, {last})\n    t = max(s0 + 0, 0)",
    }[shape]
    copies = (
        f"    copy_start x[ds(t, {block})] -> buf[slot], sems[slot]\n"
        f"    copy_wait x[ds(t, {block})] -> buf[slot], sems[slot]\n"
        f"    sync_copy buf[slot] -> y[ds({block} * i, {block})]\n"
    )
    if guard is not None:  # a condition on the min: its pieces' or
        copies = f"    when t >= {guard} {{\n{copies}    }}\n"
    text = (
        f"kernel clamped(x: i32[{rows}, 4] @hbm, y: i32[{block * trips}, 4] @hbm) {{\n"
        f"  buf = alloc i32[2, {block}, 4] @vmem\n  sems = semaphore[2]\n"
        f"  for i in range({trips}) {{\n    slot = i % 2\n    {source}\n"
        f"{copies}  }}\n}}\n"
    )
    copied = [i for i in range(trips) if guard is None or start(i) >= guard]
    return text, rows, block, trips, copied, start


@settings(max_examples=40, deadline=None)
@given(clamped_loops(), st.integers(0, 2**16))
def test_generated_clamped_loops_agree_with_numpy(program, seed):
    text, rows, block, trips, copied, start = program
    rng = np.random.default_rng(seed)
    x = rng.integers(-(2**31), 2**31, (rows, 4), np.int32)
    y = rng.integers(-(2**31), 2**31, (block * trips, 4), np.int32)
    want = y.copy()
    for i in copied:
        want[block * i : block * (i + 1)] = x[start(i) : start(i) + block]
    inputs = {"x": x, "y": y}
    module = copyir.parse(text)
    copyir.verify(module)
    assert run_reference(module.ops.first, inputs)["y"].tobytes() == want.tobytes()
    stream = copyir.to_stream(copyir.lower(copyir.parse(text)))
    assert len(stream.instructions) < 40  # O(program), whatever the trips
    for mode in MODES:
        got = copyir.run(stream, inputs, mode=mode, seed=seed)["y"]
        assert got.tobytes() == want.tobytes(), mode


def test_the_run_limit_counts_each_piece():
    """A DMA pair that reads a min is two pairs in the stream, each run at
    every iteration: a loop of MAX_EVENTS / 2 iterations of one pair is the
    limit exactly; with a min, its wait brings the events to twice it."""
    trips = limits.MAX_EVENTS // 2  # a start and a wait: the limit exactly
    plain = (
        f"kernel k(x: f32[64] @hbm) {{\n  buf = alloc f32[8] @vmem\n  s = semaphore\n"
        f"  for i in range({trips}) {{\n"
        "    copy_start x[ds(i % 8, 8)] -> buf, s\n"
        "    copy_wait x[ds(i % 8, 8)] -> buf, s\n  }\n}\n"
    )
    copyir.verify(copyir.parse(plain))
    clamped = plain.replace("i % 8", "min(i, 56)")
    assert str(verify_error(clamped)) == errors.TOO_MANY_EVENTS.format(
        what="Loop i", count=4 * trips, limit=limits.MAX_EVENTS
    )


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([MIN, MAX]),
    st.tuples(st.integers(-4, 4), st.integers(-20, 40)),
    st.tuples(st.integers(-4, 4), st.integers(-20, 40)),
    st.integers(1, 10),
)
def test_verify_finds_exactly_the_first_iteration_out_of_bounds(kind, one, two, trips):
    """Whether a clamped start leaves the array, and at which iteration
    first, as Python's min and max say: the pieces are exact, never a
    bound over the whole loop."""
    rows, block = 32, 4
    (a, b), (c, d) = one, two
    text = (
        f"kernel k(x: f32[{rows}, 4] @hbm) {{\n  buf = alloc f32[{block}, 4] @vmem\n"
        f"  for i in range({trips}) {{\n"
        f"    sync_copy x[ds({kind}({a} * i + {b}, {c} * i + {d}), {block})] -> buf\n"
        "  }\n}\n"
    )
    function = min if kind == MIN else max
    starts = [function(a * i + b, c * i + d) for i in range(trips)]
    bad = [i for i, s in enumerate(starts) if s < 0 or s + block > rows]
    module = copyir.parse(text)
    if not bad:
        copyir.verify(module)
        return
    first = starts[bad[0]]
    view = f"x[{first}:{first + block}]"
    if first < 0:
        message = errors.NEGATIVE_INDEX.format(index=first, expr=view)
    else:
        message = errors.SLICE_OUT_OF_BOUNDS.format(
            start=first, stop=first + block, dim=0, name="x", size=rows
        )
    assert str(verify_error(text)) == f"{message}, at i = {bad[0]}"


def test_a_clamped_block_index_of_a_ragged_window_agrees_with_numpy():
    """bx[min(i, 7), 0] of a (1000, 128) array in (128, 128) blocks: the
    ragged block 7 (104 rows) again for i >= 7, through asynchronous window
    copies whose semaphore and slot are computed from the min."""
    text = """
kernel w(x: f32[1000, 128] @hbm, y: f32[1000, 128] @hbm) {
  bx = buffered_ref x, block=(128, 128), buffers=2
  sems = semaphore[2]
  for i in range(10) {
    b = min(i, 7)
    buffered_copy start x -> bx[b, 0], sems[b % 2], slot=b % 2
    buffered_copy wait x -> bx[b, 0], sems[b % 2], slot=b % 2
    buffered_copy bx[b, 0] -> y, slot=b % 2
  }
}
"""
    x = np.random.default_rng(7).standard_normal((1000, 128)).astype(np.float32)
    module = copyir.parse(text)
    copyir.verify(module)
    assert run_reference(module.ops.first, {"x": x})["y"].tobytes() == x.tobytes()
    stream = copyir.to_stream(copyir.lower(copyir.parse(text)))
    for mode in MODES:
        assert copyir.run(stream, {"x": x}, mode=mode)["y"].tobytes() == x.tobytes()


def test_a_clamped_block_breaks_a_parallel_claim_at_its_first_overlap():
    """Rows of a parallel grid write y[min(8 * i, 52):...]: the last one
    (52:60) overlaps row 6's (48:56), which the parallel claims report at
    the first iteration that meets another, on the min's constant piece."""
    text = (
        "kernel par(x: f32[60, 128] @hbm, y: f32[60, 128] @hbm) {\n"
        "  for i in grid(8), parallel=(0,) {\n"
        "    sync_copy x[ds(min(8 * i, 52), 8)] -> y[ds(min(8 * i, 52), 8)]\n"
        "  }\n}\n"
    )
    x = np.zeros((60, 128), np.float32)
    stream = copyir.to_stream(copyir.lower(copyir.parse(text)))
    with pytest.raises(CopyIRError) as caught:
        copyir.run(stream, {"x": x}, mode="eager")
    assert (
        str(caught.value)
        == errors.PARALLEL_WRITES.format(
            loop="i", what="DMA", region="y[52:60, 0:128]", other="i = 6"
        )
        + ", at i = 7"
    )


def test_an_op_reading_indices_of_many_pieces_is_refused_at_the_op():
    """Two indices that split the domain differently, 32 pieces each, in
    one DMA: more combinations that can hold together than the limit, at
    the DMA's line, before any copy is made; one index read twice (its
    32 pieces) counts once."""
    chain = "".join(
        f"    a{k} = min(a{k - 1}, {k} * i - {k * k} * j + {k})\n" for k in range(1, 6)
    )
    other = chain.replace("a", "b").replace("i - ", "i + 1 - ")
    text = (
        "kernel k(x: f32[4096] @hbm, y: f32[4096] @hbm) {\n"
        "  for i, j in grid(4, 4) {\n    a0 = i + 0\n    b0 = j + 0\n"
        + chain
        + other
        + "    sync_copy x[ds(a5 + 2000, 1)] -> y[ds(b5 + 2000, 1)]\n  }\n}\n"
    )
    err = verify_error(text)
    assert str(err) == errors.TOO_MANY_PIECES.format(limit=limits.MAX_PIECES)
    assert err.loc.line == 15  # the sync_copy
    shared = text.replace("y[ds(b5 + 2000, 1)]", "y[ds(a5 + 2001, 1)]")
    copyir.verify(copyir.parse(shared))
    assert sum(isinstance(o, WhenOp) for o in lowered_ops(shared)) == 32
