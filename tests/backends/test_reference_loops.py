"""The reference path runs loops directly: each loop op against
what numpy computes directly (a double buffer is a copy, a grid walks
row-major, `when` guards, descriptors name the views where they are made,
asynchronous window copies take the ragged block, computations round per
operation in the destination's dtype, integers wrap, NaN propagates), errors
at the iteration that fails, and the loop examples with their expected
results.

Programs are written in the MLIR form of the copy dialect, which parses
without the authoring syntax of loops."""

from __future__ import annotations

import ast
from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest
from conftest import EXAMPLES, LOOP_EXAMPLES, ROOT
from copyir.backends.reference import run_reference
from hypothesis import given, settings
from hypothesis import strategies as st
from loop_programs import FRAGMENTS, LoopProgram, loop_programs

import copyir
from copyir import errors
from copyir.cli import main
from copyir.dtypes import BY_NAME
from copyir.errors import CopyIRError
from copyir.testing import compute_region

BF16 = np.dtype(ml_dtypes.bfloat16)


def ref(shape: tuple[int, ...], dtype: str = "f32", space: str = "hbm") -> str:
    """A ref type in the MLIR form: `!copy.ref<8x128xf32, hbm>` (`u8` is
    MLIR's `ui8`)."""
    dims = "".join(f"{d}x" for d in shape)
    element = f"ui{dtype[1:]}" if dtype.startswith("u") else dtype
    return f"!copy.ref<{dims}{element}, {space}>"


def parse(text: str):
    return copyir.parse(text, filename="t.mlir")


def run(text: str, **inputs: np.ndarray) -> dict[str, np.ndarray]:
    """Verify the program, then run it in the reference path."""
    module = parse(text)
    copyir.verify(module)
    return run_reference(module.ops.first, inputs)


def poison(shape: tuple[int, ...], dtype=np.float32) -> np.ndarray:
    """Pallas' interpret mode's uninitialized value: NaN, or the integer
    maximum."""
    if np.issubdtype(dtype, np.integer):
        return np.full(shape, np.iinfo(dtype).max, dtype)
    return np.full(shape, np.nan, dtype)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def rows_of(n: int, cols: int = 128, rows: int = 8) -> np.ndarray:
    return np.random.default_rng(n).random((n * rows, cols), dtype=np.float32)


# --------------------------------------------------------------------------
# Loops
# --------------------------------------------------------------------------


def double_buffer(n: int) -> str:
    """The spec's double buffer over n blocks of (8, 128) f32: block i + 1
    is fetched under `when i + 1 < n` while block i is waited and copied out,
    through a descriptor made in the loop."""
    rows = 8 * n
    x, blk, buf = ref((rows, 128)), ref((8, 128)), ref((2, 8, 128), space="vmem")
    w = ref((8, 128), space="vmem")
    return f"""copy.kernel @double_buffer(%x: {x}, %y: {x}) {{
  %buf = copy.alloc : {buf}
  %sems = copy.semaphore : !copy.sem_array<2>
  %out = copy.semaphore : !copy.sem_array<2>
  %x0 = copy.view %x[0:8, 0:128] : {x}
  %b0 = copy.view %buf[0] : {buf}
  %s0 = copy.sem_index %sems[0] : !copy.sem_array<2> -> !copy.sem
  copy.dma "start" %x0, %b0, %s0 : {blk}, {w}, !copy.sem
  copy.for %i in range(0, {n}) {{
    %slot = copy.index affine_map<(d0) -> (d0 mod 2)>(%i)
    copy.when [affine_set<(d0) : ({n} - d0 - 2 >= 0)>](%i) {{
      %next = copy.index affine_map<(d0) -> (d0 * 8 + 8)>(%i)
      %nslot = copy.index affine_map<(d0) -> ((d0 + 1) mod 2)>(%i)
      %nx = copy.view %x[ds(%next, 8), 0:128] : {x}
      %nb = copy.view %buf[%nslot] : {buf}
      %ns = copy.sem_index %sems[%nslot] : !copy.sem_array<2> -> !copy.sem
      copy.dma "start" %nx, %nb, %ns : {blk}, {w}, !copy.sem
    }}
    %row = copy.index affine_map<(d0) -> (d0 * 8)>(%i)
    %xv = copy.view %x[ds(%row, 8), 0:128] : {x}
    %bv = copy.view %buf[%slot] : {buf}
    %s = copy.sem_index %sems[%slot] : !copy.sem_array<2> -> !copy.sem
    %c = copy.async_copy %xv, %bv, %s : {blk}, {w}, !copy.sem
    copy.async_dma "wait" %c
    %yv = copy.view %y[ds(%row, 8), 0:128] : {x}
    %o = copy.sem_index %out[%slot] : !copy.sem_array<2> -> !copy.sem
    copy.dma "start" %bv, %yv, %o : {w}, {blk}, !copy.sem
    copy.dma "wait" %bv, %yv, %o : {w}, {blk}, !copy.sem
  }}
}}
"""


def test_a_double_buffered_loop_is_a_copy():
    x = rows_of(16)
    assert same_bits(run(double_buffer(16), x=x)["y"], x)


def chain(loops: str, close: str, indices: str) -> str:
    """Each iteration writes the block it holds to y at its own indices,
    then takes its own block of x: y at an index tuple gets the x of the
    iteration before it, so y shows the order of the walk."""
    x, row, vrow = ref((3, 4, 8)), ref((8,)), ref((8,), space="vmem")
    return f"""copy.kernel @walk(%x: {x}, %y: {x}, %first: {row}) {{
  %buf = copy.alloc : {vrow}
  copy.sync_copy %first -> %buf : ({row}) -> ({vrow})
  {loops}
    %yv = copy.view %y[{indices}] : {x}
    %xv = copy.view %x[{indices}] : {x}
    copy.sync_copy %buf -> %yv : ({vrow}) -> ({row})
    copy.sync_copy %xv -> %buf : ({row}) -> ({vrow})
  {close}
}}
"""


def walked_row_major(x: np.ndarray, first: np.ndarray) -> np.ndarray:
    """What `chain` leaves in y when the walk is row-major, last index fastest."""
    flat = x.reshape(-1, x.shape[-1])
    return np.concatenate([first[None], flat[:-1]]).reshape(x.shape)


@pytest.mark.parametrize(
    "loops, close, indices",
    [
        ("copy.for %i, %j in grid(3, 4) {", "}", "%i, %j"),
        (
            "copy.for %i, %j in grid(3, 4) dimension_semantics [parallel, parallel] {",
            "}",
            "%i, %j",
        ),
        (
            "copy.for %i in range(0, 3) {\n  copy.for %j in range(0, 4) {",
            "}\n  }",
            "%i, %j",
        ),
    ],
    ids=["grid", "parallel grid", "nested"],
)
def test_a_grid_walks_row_major_with_the_last_index_fastest(loops, close, indices):
    rng = np.random.default_rng(1)
    x = rng.random((3, 4, 8), dtype=np.float32)
    first = rng.random(8, dtype=np.float32)
    y = run(chain(loops, close, indices), x=x, first=first)["y"]
    assert same_bits(y, walked_row_major(x, first))
    column_major = walked_row_major(x.transpose(1, 0, 2), first).transpose(1, 0, 2)
    assert not np.array_equal(y, column_major)


def test_a_range_with_a_start_runs_from_it():
    x, row = ref((8, 4)), ref((4,))
    text = f"""copy.kernel @k(%x: {x}, %y: {x}) {{
  copy.for %i in range(2, 5) {{
    %xv = copy.view %x[%i] : {x}
    %yv = copy.view %y[%i] : {x}
    copy.sync_copy %xv -> %yv : ({row}) -> ({row})
  }}
}}
"""
    x_in = np.arange(32, dtype=np.float32).reshape(8, 4)
    y = run(text, x=x_in, y=np.zeros((8, 4), np.float32))["y"]
    expected = np.zeros((8, 4), np.float32)
    expected[2:5] = x_in[2:5]
    assert same_bits(y, expected)


def test_dynamic_views_of_dynamic_views_compose():
    """y[j, i] = x[i][2j : 2j + 2] through a chain of two dynamic views on
    each side, under a loop nested in a `when` of an outer loop."""
    y, pair = ref((3, 4, 2)), ref((2,))
    text = f"""copy.kernel @k(%x: {ref((4, 12))}, %y: {y}) {{
  copy.for %i in range(0, 4) {{
    copy.when [affine_set<(d0) : (d0 >= 0)>](%i) {{
      %row = copy.view %x[%i] : {ref((4, 12))}
      copy.for %j in range(0, 3) {{
        %two = copy.index affine_map<(d0) -> (d0 * 2)>(%j)
        %xv = copy.view %row[ds(%two, 2)] : {ref((12,))}
        %yj = copy.view %y[%j] : {y}
        %yv = copy.view %yj[%i] : {ref((4, 2))}
        copy.sync_copy %xv -> %yv : ({pair}) -> ({pair})
      }}
    }}
  }}
}}
"""
    x_in = np.arange(48, dtype=np.float32).reshape(4, 12)
    expected = x_in[:, :6].reshape(4, 3, 2).transpose(1, 0, 2)
    assert same_bits(run(text, x=x_in)["y"], np.ascontiguousarray(expected))


# --------------------------------------------------------------------------
# when
# --------------------------------------------------------------------------


def guarded(condition: str) -> str:
    """Row i of x is copied to y where the condition holds at i."""
    x, row = ref((8, 4)), ref((4,))
    return f"""copy.kernel @k(%x: {x}, %y: {x}) {{
  copy.for %i in range(0, 8) {{
    copy.when {condition}(%i) {{
      %xv = copy.view %x[%i] : {x}
      %yv = copy.view %y[%i] : {x}
      copy.sync_copy %xv -> %yv : ({row}) -> ({row})
    }}
  }}
}}
"""


@pytest.mark.parametrize(
    "condition, rows",
    [
        ("[affine_set<(d0) : (d0 mod 2 == 0)>]", [0, 2, 4, 6]),
        ("[affine_set<(d0) : (d0 == 0)>]", [0]),  # a prologue
        ("[affine_set<(d0) : (d0 - 7 == 0)>]", [7]),  # an epilogue
        ("[affine_set<(d0) : (d0 - 2 >= 0, 4 - d0 >= 0)>]", [2, 3, 4]),  # and
        (
            "[affine_set<(d0) : (d0 - 6 >= 0)>, affine_set<(d0) : (-d0 >= 0)>]",
            [0, 6, 7],
        ),  # or
        ("[affine_set<(d0) : ((d0 + 1) mod 3 == 0, d0 - 3 >= 0)>]", [5]),
    ],
    ids=["even", "prologue", "epilogue", "and", "or", "mod and"],
)
def test_when_runs_its_body_exactly_where_its_condition_holds(condition, rows):
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    y = run(guarded(condition), x=x, y=np.zeros((8, 4), np.float32))["y"]
    expected = np.zeros((8, 4), np.float32)
    expected[rows] = x[rows]
    assert same_bits(y, expected)


def test_when_over_two_indices_of_a_grid():
    x, elem = ref((4, 4)), ref(())
    text = f"""copy.kernel @k(%x: {x}, %y: {x}) {{
  copy.for %i, %j in grid(4, 4) {{
    copy.when [affine_set<(d0, d1) : (d0 - d1 == 0)>](%i, %j) {{
      %xv = copy.view %x[%i, %j] : {x}
      %yv = copy.view %y[%i, %j] : {x}
      copy.sync_copy %xv -> %yv : ({elem}) -> ({elem})
    }}
  }}
}}
"""
    x_in = np.arange(16, dtype=np.float32).reshape(4, 4) + 1
    y = run(text, x=x_in, y=np.zeros((4, 4), np.float32))["y"]
    assert same_bits(y, np.diag(np.diag(x_in)))


# --------------------------------------------------------------------------
# Descriptors
# --------------------------------------------------------------------------


def descriptors(add: str = "") -> str:
    """`c` is made before the loop (buf -> y) and started in every iteration;
    `d` is made in each iteration (buf -> z[i]). Each iteration first
    copies row i of x into buf."""
    x, row, vrow = ref((4, 8)), ref((8,)), ref((8,), space="vmem")
    return f"""copy.kernel @k(%x: {x}, %y: {row}, %z: {x}) {{
  %buf = copy.alloc : {vrow}
  %s = copy.semaphore : !copy.sem
  %c = copy.async_copy %buf, %y, %s : {vrow}, {row}, !copy.sem
  copy.for %i in range(0, 4) {{
    %xv = copy.view %x[%i] : {x}
    copy.sync_copy %xv -> %buf : ({row}) -> ({vrow})
    copy.async_dma "start" %c {add}
    copy.async_dma "wait" %c
    %zv = copy.view %z[%i] : {x}
    %d = copy.async_copy %buf, %zv, %s : {vrow}, {row}, !copy.sem
    copy.async_dma "start" %d
    copy.async_dma "wait" %d
  }}
}}
"""


def test_a_descriptor_names_its_views_as_evaluated_where_it_is_made():
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = run(descriptors(), x=x)
    assert same_bits(out["y"], x[3])  # one y, written by every start of c
    assert same_bits(out["z"], x)  # z[i] for the d of iteration i


def test_a_descriptor_started_with_add_accumulates():
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    y = np.full(8, 0.5, np.float32)
    out = run(descriptors("add"), x=x, y=y)
    assert same_bits(out["y"], y + x[0] + x[1] + x[2] + x[3])


# --------------------------------------------------------------------------
# Asynchronous window copies
# --------------------------------------------------------------------------

WINDOWED = "!copy.buffered<20x12xf32, [8, 5], buffers 2, vmem>"
"""Blocks that are no whole TPU tiles: the BufferedRefs below are `padded`
(a kernel grid's), whose cut blocks are copied cut and padded with poison
(Pallas' BufferedRef rounds them to the tiling: `test_tiled_*`)."""


def test_async_window_copies_move_every_ragged_block():
    """A (20, 12) array through (8, 5) blocks: a 3 x 3 grid whose last row
    of blocks has 4 rows and last column 2 columns."""
    x = ref((20, 12))
    text = f"""copy.kernel @k(%x: {x}, %y: {x}) {{
  %bx = copy.buffered_ref padded : {WINDOWED}
  %sems = copy.semaphore : !copy.sem_array<2>
  copy.for %i, %j in grid(3, 3) {{
    %slot = copy.index affine_map<(d0, d1) -> ((d0 * 3 + d1) mod 2)>(%i, %j)
    %s = copy.sem_index %sems[%slot] : !copy.sem_array<2> -> !copy.sem
    copy.buffered_copy "start" %x -> %bx[%i, %j] slot %slot sem %s : {x} -> {WINDOWED}, !copy.sem
    copy.buffered_copy "wait" %x -> %bx[%i, %j] slot %slot sem %s : {x} -> {WINDOWED}, !copy.sem
    copy.buffered_copy %bx[%i, %j] -> %y slot %slot : {WINDOWED} -> {x}
  }}
}}
"""
    x_in = np.random.default_rng(2).random((20, 12), dtype=np.float32)
    assert same_bits(run(text, x=x_in)["y"], x_in)


def test_an_async_window_copy_of_the_corner_block_takes_only_its_rows():
    """Block (2, 2) of a (20, 12) array in (8, 5) blocks is x[16:20, 10:12]:
    it lands in the slot's [0:4, 0:2] and the rest of the slot keeps poison,
    which copying the whole slot out to block (0, 0) of y shows."""
    x = ref((20, 12))
    text = f"""copy.kernel @k(%x: {x}, %y: {x}) {{
  %bx = copy.buffered_ref padded : {WINDOWED}
  %s = copy.semaphore : !copy.sem
  copy.for %i in range(2, 3) {{
    %slot = copy.index affine_map<(d0) -> (d0 - 1)>(%i)
    copy.buffered_copy "start" %x -> %bx[%i, %i] slot %slot sem %s : {x} -> {WINDOWED}, !copy.sem
    copy.buffered_copy "wait" %x -> %bx[%i, %i] slot %slot sem %s : {x} -> {WINDOWED}, !copy.sem
    copy.buffered_copy %bx[0, 0] -> %y slot %slot : {WINDOWED} -> {x}
  }}
}}
"""
    x_in = np.random.default_rng(3).random((20, 12), dtype=np.float32)
    y_in = np.zeros((20, 12), np.float32)
    slot = poison((8, 5))
    slot[0:4, 0:2] = x_in[16:20, 10:12]
    expected = y_in.copy()
    expected[0:8, 0:5] = slot
    assert same_bits(run(text, x=x_in, y=y_in)["y"], expected)


def test_dynamic_element_and_squeezed_window_dimensions():
    """`Element(4)` at offsets 0, 3, 6, 9 (the last cut to one row) and a
    squeezed column j: every element of x passes through the window."""
    x = ref((10, 3))
    windowed = "!copy.buffered<10x3xf32, [element 4, squeezed], buffers 1, vmem>"
    text = f"""copy.kernel @k(%x: {x}, %y: {x}) {{
  %bx = copy.buffered_ref padded : {windowed}
  copy.for %i, %j in grid(4, 3) {{
    %at = copy.index affine_map<(d0) -> (d0 * 3)>(%i)
    copy.buffered_copy %x -> %bx[%at, %j] : {x} -> {windowed}
    copy.buffered_copy %bx[%at, %j] -> %y : {windowed} -> {x}
  }}
}}
"""
    x_in = np.random.default_rng(4).random((10, 3), dtype=np.float32)
    assert same_bits(run(text, x=x_in)["y"], x_in)


# --------------------------------------------------------------------------
# Computations
# --------------------------------------------------------------------------


def computation(expression: str, dtype: str, inputs: int, shape=(4, 16)) -> str:
    """y = expression($0, ..) over inputs a0, a1, .. copied into VMEM."""
    hbm, vmem = ref(shape, dtype), ref(shape, dtype, "vmem")
    params = ", ".join(f"%a{k}: {hbm}" for k in range(inputs))
    lines = []
    for k in range(inputs):
        lines.append(f"  %v{k} = copy.alloc : {vmem}")
        lines.append(f"  copy.sync_copy %a{k} -> %v{k} : ({hbm}) -> ({vmem})")
    operands = ", ".join(f"%v{k}" for k in range(inputs))
    types = "".join(f", {vmem}" for _ in range(inputs))
    body = "\n".join(lines)
    return f"""copy.kernel @k({params}, %y: {hbm}) {{
{body}
  %out = copy.alloc : {vmem}
  copy.compute %out ({operands}) : {vmem}{types} {compute_region(expression, dtype, inputs)}
  copy.sync_copy %out -> %y : ({vmem}) -> ({hbm})
}}
"""


def computed(expression: str, dtype: str, *arrays: np.ndarray) -> np.ndarray:
    inputs = {f"a{k}": a for k, a in enumerate(arrays)}
    return run(computation(expression, dtype, len(arrays), arrays[0].shape), **inputs)[
        "y"
    ]


def bf16_values(seed: int, shape=(4, 16)) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(BF16)


def test_a_bf16_computation_rounds_after_every_operation():
    a, b, c = bf16_values(5), bf16_values(6), bf16_values(7)
    got = computed("(add (mul $0 $1) $2)", "bf16", a, b, c)
    product = (a * b).astype(BF16)  # ml_dtypes, one operation at a time
    assert product.dtype == BF16
    assert same_bits(got, (product + c).astype(BF16))
    f32 = np.float32
    by_hand = (
        (a.astype(f32) * b.astype(f32)).astype(BF16).astype(f32) + c.astype(f32)
    ).astype(BF16)
    assert same_bits(got, by_hand)
    once = (a.astype(f32) * b.astype(f32) + c.astype(f32)).astype(BF16)
    assert not np.array_equal(got, once)  # rounding once would differ


def test_a_bf16_literal_takes_the_destination_dtype_first():
    a = bf16_values(8)
    got = computed("(add (mul 0.1 $0) 1.0)", "bf16", a)
    tenth = np.asarray(0.1, BF16)
    expected = ((tenth * a).astype(BF16) + np.asarray(1.0, BF16)).astype(BF16)
    assert same_bits(got, expected)
    f32 = np.float32
    exact_tenth = ((f32(0.1) * a.astype(f32)).astype(BF16).astype(f32) + 1).astype(BF16)
    assert not np.array_equal(got, exact_tenth)


def test_f32_and_f16_computations_round_in_their_dtype():
    rng = np.random.default_rng(9)
    for dtype, numpy in (("f32", np.float32), ("f16", np.float16)):
        a = rng.standard_normal((4, 16)).astype(numpy)
        b = (rng.random((4, 16)) + 0.5).astype(numpy)
        got = computed("(sub (div $0 $1) (neg (mul 2 $0)))", dtype, a, b)
        two = np.asarray(2, numpy)
        expected = np.subtract(np.true_divide(a, b), np.negative(np.multiply(two, a)))
        assert same_bits(got, expected.astype(numpy)), dtype
        wide = a.astype(np.float64) / b + 2 * a.astype(np.float64)
        if numpy is np.float16:
            assert not np.array_equal(got, wide.astype(numpy))


def wrapper(numpy) -> Callable[[np.ndarray], np.ndarray]:
    """Python integers reduced into the dtype's range: wrapping, written out."""
    info = np.iinfo(numpy)
    modulus = 1 << info.bits

    def wrap(values: np.ndarray) -> np.ndarray:
        reduced = [
            (int(v) - int(info.min)) % modulus + int(info.min) for v in values.flat
        ]
        return np.array(reduced, dtype=object).reshape(values.shape)

    return wrap


@pytest.mark.parametrize(
    "dtype, numpy, expression, model",
    [
        ("i8", np.int8, "(add (mul $0 3) 100)", lambda a, b, w: w(w(a * 3) + 100)),
        ("i8", np.int8, "(neg $0)", lambda a, b, w: w(-a)),
        ("u8", np.uint8, "(sub $0 $1)", lambda a, b, w: w(a - b)),
        ("i32", np.int32, "(mul $0 $1)", lambda a, b, w: w(a * b)),
        (
            "i16",
            np.int16,
            "(max (sub $0 $1) (min $1 7))",
            lambda a, b, w: np.maximum(w(a - b), np.minimum(b, 7)),
        ),
    ],
    ids=["i8 add", "i8 neg", "u8 sub", "i32 mul", "i16 max min"],
)
def test_integer_computations_wrap(dtype, numpy, expression, model):
    info = np.iinfo(numpy)
    rng = np.random.default_rng(10)
    a = rng.integers(info.min, info.max, (4, 16), endpoint=True).astype(numpy)
    b = rng.integers(info.min, info.max, (4, 16), endpoint=True).astype(numpy)
    a[0, 0] = info.min  # -(-128) is -128 in int8
    got = computed(expression, dtype, a, b)
    assert got.dtype == numpy
    expected = model(a.astype(object), b.astype(object), wrapper(numpy))
    assert got.tolist() == expected.tolist()


@pytest.mark.parametrize("dtype, numpy", [("f32", np.float32), ("bf16", BF16)])
@pytest.mark.parametrize("operation", ["max", "min"])
def test_nan_propagates_through_max_and_min(dtype, numpy, operation):
    a = np.array([[1.0, np.nan, 3.0, np.nan, -np.inf, 0.0]], numpy)
    b = np.array([[np.nan, 2.0, 1.0, np.nan, 5.0, -0.0]], numpy)
    got = computed(f"({operation} $0 $1)", dtype, a, b)
    assert list(np.isnan(got[0])) == [True, True, False, True, False, False]
    pick = max if operation == "max" else min
    assert [float(v) for v in got[0, [2, 4]]] == [pick(3.0, 1.0), pick(-np.inf, 5.0)]
    ufunc = np.maximum if operation == "max" else np.minimum
    assert same_bits(got, ufunc(a, b))


def test_accumulate_into_a_ref_that_is_also_an_input():
    """`acc[...] = 0` then `acc += xw` per row: acc is read and written by
    one computation; the sum runs row by row in f32."""
    x, row, vrow = ref((6, 16)), ref((16,)), ref((16,), space="vmem")
    text = f"""copy.kernel @k(%x: {x}, %y: {row}) {{
  %acc = copy.alloc : {vrow}
  %xw = copy.alloc : {vrow}
  copy.compute %acc () : {vrow} {compute_region("0", "f32", 0)}
  copy.for %i in range(0, 6) {{
    %xv = copy.view %x[%i] : {x}
    copy.sync_copy %xv -> %xw : ({row}) -> ({vrow})
    copy.compute %acc (%acc, %xw) : {vrow}, {vrow}, {vrow} {compute_region("(add $0 $1)", "f32", 2)}
  }}
  copy.sync_copy %acc -> %y : ({vrow}) -> ({row})
}}
"""
    x_in = np.random.default_rng(11).random((6, 16), dtype=np.float32)
    expected = np.zeros(16, np.float32)
    for r in x_in:
        expected = expected + r
    assert same_bits(run(text, x=x_in)["y"], expected)


def test_smem_scalars_compute_element_by_element():
    """SMEM holds scalars: y[2] = max(a[0], b[1]) on fully indexed elements."""
    v, s, e = ref((4,), "i32"), ref((4,), "i32", "smem"), ref((), "i32", "smem")
    text = f"""copy.kernel @k(%a: {v}, %b: {v}, %y: {v}) {{
  %sa = copy.alloc : {s}
  %sb = copy.alloc : {s}
  %sy = copy.alloc : {s}
  copy.sync_copy %a -> %sa : ({v}) -> ({s})
  copy.sync_copy %b -> %sb : ({v}) -> ({s})
  copy.sync_copy %y -> %sy : ({v}) -> ({s})
  %a0 = copy.view %sa[0] : {s}
  %b1 = copy.view %sb[1] : {s}
  %y2 = copy.view %sy[2] : {s}
  copy.compute %y2 (%a0, %b1) : {e}, {e}, {e} {compute_region("(max $0 (sub $1 1))", "i32", 2)}
  copy.sync_copy %sy -> %y : ({s}) -> ({v})
}}
"""
    a = np.array([5, 0, 0, 0], np.int32)
    b = np.array([0, 9, 0, 0], np.int32)
    y = np.array([1, 2, 3, 4], np.int32)
    assert list(run(text, a=a, b=b, y=y)["y"]) == [1, 2, 8, 4]


# --------------------------------------------------------------------------
# Errors name their iteration
# --------------------------------------------------------------------------


def failing(text: str) -> CopyIRError:
    """The reference path's error on an unverified program (the verifier
    may well reject it first; the reference path must not clip either)."""
    module = parse(text)
    with pytest.raises(CopyIRError) as caught:
        run_reference(module.ops.first, {})
    return caught.value


def test_a_dynamic_slice_past_the_end_is_an_error_at_its_iteration():
    x, blk = ref((64, 4)), ref((8, 4))
    text = f"""copy.kernel @k(%x: {x}, %y: {x}) {{
  copy.for %i in range(0, 9) {{
    %row = copy.index affine_map<(d0) -> (d0 * 8)>(%i)
    %xv = copy.view %x[ds(%row, 8), 0:4] : {x}
    %yv = copy.view %y[0:8, 0:4] : {x}
    copy.sync_copy %xv -> %yv : ({blk}) -> ({blk})
  }}
}}
"""
    error = failing(text)
    assert str(error) == (
        errors.SLICE_OUT_OF_BOUNDS.format(start=64, stop=72, dim=0, name="x", size=64)
        + ", at i = 8"
    )
    assert (error.loc.line, error.loc.col) == (4, 5)


def test_a_dynamic_index_below_zero_is_an_error_at_its_iteration():
    x, row = ref((4, 4)), ref((4,))
    text = f"""copy.kernel @k(%x: {x}, %y: {x}) {{
  copy.for %i, %j in grid(2, 3) {{
    %k = copy.index affine_map<(d0, d1) -> (d1 - d0 * 2)>(%i, %j)
    %xv = copy.view %x[%k] : {x}
    %yv = copy.view %y[0] : {x}
    copy.sync_copy %xv -> %yv : ({row}) -> ({row})
  }}
}}
"""
    assert str(failing(text)) == (
        errors.NEGATIVE_INDEX.format(index=-2, expr="x[k]") + ", at i = 1, j = 0"
    )


def test_a_semaphore_index_out_of_range_is_an_error_at_its_iteration():
    x = ref((4,))
    text = f"""copy.kernel @k(%x: {x}, %y: {x}) {{
  %sems = copy.semaphore : !copy.sem_array<2>
  copy.for %i in range(0, 3) {{
    %s = copy.sem_index %sems[%i] : !copy.sem_array<2> -> !copy.sem
    copy.dma "start" %x, %y, %s : {x}, {x}, !copy.sem
    copy.dma "wait" %x, %y, %s : {x}, {x}, !copy.sem
  }}
}}
"""
    assert str(failing(text)) == (
        errors.INDEX_OUT_OF_BOUNDS.format(index=2, dim=0, name="sems", size=2)
        + ", at i = 2"
    )


def test_a_block_index_or_slot_out_of_range_is_an_error_at_its_iteration():
    x = ref((20, 12))
    body = """copy.for %i in range(0, 4) {{
    copy.buffered_copy %x -> %bx[{block}] slot {slot} : {x} -> {w}
  }}"""
    head = (
        f"copy.kernel @k(%x: {x}) {{\n  %bx = copy.buffered_ref padded : {WINDOWED}\n  "
    )
    blocks = head + body.format(block="%i, 0", slot="0", x=x, w=WINDOWED) + "\n}\n"
    assert str(failing(blocks)) == (
        errors.BLOCK_INDEX_OUT_OF_BOUNDS.format(index=3, dim=0, bref="bx", extent=3)
        + ", at i = 3"
    )
    slots = head + body.format(block="0, 0", slot="%i", x=x, w=WINDOWED) + "\n}\n"
    assert str(failing(slots)) == (
        errors.SLOT_OUT_OF_RANGE.format(slot=2, bref="bx", buffers=2) + ", at i = 2"
    )


# --------------------------------------------------------------------------
# Independence from the lowering
# --------------------------------------------------------------------------


def test_the_reference_path_imports_no_lowering_arithmetic():
    """A guard: the reference path states the semantics on its own, so it
    imports nothing of the index folding, the lowering or the stream."""
    tree = ast.parse((ROOT / "backends" / "reference.py").read_text())
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            modules.add(node.module or "")
            if node.module == "copyir.compute":
                assert "compile_expression" not in {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            modules.update(a.name for a in node.names)
    forbidden = (
        "copyir.index",
        "copyir.access",
        "copyir.expand",
        "copyir.stream",
        "copyir.passes",
        "copyir.backends.interpreter",
        "passes",
    )
    assert not [m for m in modules if m.startswith(forbidden)]


# --------------------------------------------------------------------------
# Generated loop programs
# --------------------------------------------------------------------------


def check_generated(program: LoopProgram, seed: int) -> None:
    """The program verifies and runs in the reference path; every output
    numpy can predict is bit for bit what it predicts; inputs stay as given."""
    module = program.parse()
    copyir.verify(module)
    inputs = program.random_inputs(seed)
    given = {k: v.copy() for k, v in inputs.items()}
    out = run_reference(module.ops.first, inputs)
    kernel = module.ops.first
    for name, arg in zip(kernel.param_names, kernel.params, strict=True):
        assert out[name].shape == arg.type.get_shape()
        assert out[name].dtype == BY_NAME[program.dtype].numpy
    for name, expected in program.expected(given).items():
        assert same_bits(out[name], expected), name
    assert all(same_bits(inputs[k], given[k]) for k in given)


@pytest.mark.parametrize("fragment", FRAGMENTS)
def test_every_generated_program_of_each_fragment_runs(fragment):
    @settings(max_examples=15, deadline=None, database=None)
    @given(loop_programs(fragments=(fragment,)), st.integers(0, 2**16))
    def check(program, seed):
        check_generated(program, seed)

    check()


@settings(max_examples=40, deadline=None)
@given(loop_programs(), st.integers(0, 2**16))
def test_every_generated_program_verifies_and_runs_in_the_reference_path(program, seed):
    check_generated(program, seed)


# --------------------------------------------------------------------------
# The loop examples
# --------------------------------------------------------------------------


def block_sum(x: np.ndarray) -> np.ndarray:
    """loop_sum's y: each row of (128, 128) blocks summed in walk order, one
    f32 add per block."""
    total = np.zeros((x.shape[0], 128), np.float32)
    for j in range(x.shape[1] // 128):
        total = total + x[:, 128 * j : 128 * (j + 1)]
    return total


EXAMPLE_RESULTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "loop_clamp.cpy": lambda x: x,
    "loop_compute.cpy": lambda x: np.float32(2) * x + np.float32(1),
    "loop_double_buffer.cpy": lambda x: x,
    "loop_prologue_epilogue.cpy": lambda x: x,
    "loop_sum.cpy": block_sum,
    "loop_windows.cpy": lambda x: x,
}
"""Each loop example's y as numpy computes it from its x."""


def test_every_loop_example_has_its_expected_result():
    assert set(EXAMPLE_RESULTS) == LOOP_EXAMPLES


@pytest.mark.parametrize("name", sorted(LOOP_EXAMPLES))
def test_loop_example_verifies_from_the_command_line(name, capsys):
    assert main(["verify", str(EXAMPLES / name)]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("name", sorted(LOOP_EXAMPLES))
def test_loop_example_runs_in_the_reference_path(name):
    """With its inputs file, and with random inputs."""
    path = EXAMPLES / name
    kernel = copyir.parse(path.read_text(), filename=str(path)).ops.first
    with np.load(path.with_suffix(".inputs.npz")) as data:
        assert data.files == ["x"]
        x = data["x"]
    random = np.random.default_rng(12).standard_normal(x.shape).astype(np.float32)
    for values in (x, random):
        y = run_reference(kernel, {"x": values})["y"]
        assert same_bits(y, EXAMPLE_RESULTS[name](values).astype(np.float32))


def test_the_readme_lists_every_loop_example():
    readme = (ROOT / "README.md").read_text()
    for name in LOOP_EXAMPLES:
        assert f"| [`{name}`](examples/{name}) |" in readme, name
