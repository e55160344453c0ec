"""Imported Pallas kernels give what Pallas' own TPU interpret mode gives.

Each kernel runs twice per completion mode: by Pallas, with `pallas_call(...,
interpret=pltpu.InterpretParams(dma_execution_mode=mode, detect_races=True))`
(`jax._src.pallas.mosaic.interpret`, which simulates HBM, VMEM, semaphores and
DMAs on the CPU), and by copyir, `copyir.pallas.run(f, ..., mode=mode)`, for
the two modes both have: `eager` (a DMA moves its data when it starts) and
`on_wait` (when it is waited). The outputs must agree bit for bit, and
interpret mode's race detector must find no race in a kernel copyir accepts.

Kernels are generated with hypothesis (a few examples each, no deadline), in
these classes:

(a) explicit DMAs HBM -> VMEM -> HBM, `pltpu.make_async_copy(...).start()` /
    `.wait()` on semaphore arrays, with static slices and `pl.ds` slices
    (dynamic in a `fori_loop`);
(b) `jax.lax.fori_loop` double buffering: slot `i % 2`, the next block
    prefetched under `pl.when(i + 1 < n)`, the write-back waited an
    iteration later;
(c) elementwise computations in VMEM (`+ - * / max min neg`, literals) in
    f32, i32 and bf16; float expressions leave out the forms that XLA's CPU
    compiler, which runs interpret mode's arithmetic, rounds differently
    from op-by-op IEEE arithmetic (copyir's and numpy's; see `rewritten`);
(d) `pallas_call` grids of `pl.BlockSpec(block, index_map)` operands, which
    Pallas' pipeline copies (interpret mode makes no DMA events for them:
    outputs are compared), with `pipeline_mode=pl.Buffered(n)` and
    `dimension_semantics` arbitrary, and an output block revisited along the
    grid (a reduction);
(e) integer indices (`.at[k]`), `...`, and squeezed block dimensions (`None`
    and `pl.Squeezed()`);
(f) `pl.program_id` and `pl.num_programs` in the DMA slices of a grid whose
    operands are `memory_space=pl.ANY`;
(g) `input_output_aliases`: an output that is its input, updated in part.

Known-bad kernels (a DMA never waited, a computation writing a buffer that a
DMA in flight writes, a wrongly slotted prefetch, `add=True` DMAs into memory
nobody wrote or concurrently, an output block revisited, a buffer read after
a wait that another DMA on its semaphore may have satisfied) must raise one
`CopyIRError` with its documented message, located at the offending
statement's line in this file.

An `add=True` DMA is compared with numpy rather than interpret mode: interpret
mode (jax 0.10.2) drops `add`, its `dma_start` callback is never given it.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip(
    "jax", reason="copyir's Pallas frontend needs JAX (pip install jax)"
)

import jax
import jax.numpy as jnp
from hypothesis import given, settings
from hypothesis import strategies as st
from jax._src.pallas.mosaic.interpret import interpret_pallas_call
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import copyir.pallas
from copyir import errors
from copyir.errors import CopyIRError

MODES = ("eager", "on_wait")
LANES = 128
FEW = settings(max_examples=3, deadline=None)
DMA = pltpu.SemaphoreType.DMA
ANY = pl.BlockSpec(memory_space=pl.ANY)


# -- running both ---------------------------------------------------------------


def interpret(mode: str) -> pltpu.InterpretParams:
    return pltpu.InterpretParams(dma_execution_mode=mode, detect_races=True)


def assert_agrees(call, *args, ours=None) -> None:
    """`call(*args, interpret=...)` run by Pallas' interpret mode and by
    copyir (`ours` instead, where given), in each mode: the same bits, and
    no race interpret mode sees."""
    for mode in MODES:
        want = interpreted(call, *args, mode=mode)
        assert not interpret_pallas_call.races.races_found, "interpret mode saw a race"
        got = copyir.pallas.run(ours or call, *args, mode=mode)
        for w, g in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
            assert_same_bits(np.asarray(g), np.asarray(w), mode)


def interpreted(call, *args, mode: str):
    """The call run by interpret mode, whose state is reset after an error
    (as its docs ask) so that the next kernel runs."""
    try:
        return call(*args, interpret=interpret(mode))
    except Exception:
        interpret_pallas_call.reset_tpu_interpret_mode_state()
        raise


def assert_same_bits(got: np.ndarray, want: np.ndarray, mode: str) -> None:
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    bits = np.dtype(f"u{got.dtype.itemsize}")
    np.testing.assert_array_equal(got.view(bits), want.view(bits), err_msg=mode)


def data(seed: int, shape: tuple[int, ...], dtype=jnp.float32) -> jax.Array:
    """Values in ±[0.5, 4), or integers in [-1000, 1000): none NaN, none
    near 0 (they divide)."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        values = rng.integers(-1000, 1000, shape)
    else:
        values = rng.uniform(0.5, 4.0, shape) * rng.choice([-1.0, 1.0], shape)
    return jnp.asarray(values, dtype=dtype)


def dma_call(kernel, out_shape, scratch, *, inputs: int = 1, **options):
    """A `pallas_call` of `kernel` on whole HBM operands (`pl.ANY`)."""

    def call(*args, interpret=None):
        return pl.pallas_call(
            kernel,
            out_shape=out_shape,
            in_specs=[ANY] * inputs,
            out_specs=ANY,
            scratch_shapes=scratch,
            interpret=interpret,
            **options,
        )(*args)

    return call


def copy(src, dst, sem):
    return pltpu.make_async_copy(src, dst, sem)


# -- (a) explicit DMAs ---------------------------------------------------------


@FEW
@given(
    perm=st.integers(1, 4).flatmap(lambda n: st.permutations(range(n))),
    rows=st.sampled_from([1, 8]),
    use_ds=st.booleans(),
    reverse_waits=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_static_dmas_permute_blocks(perm, rows, use_ds, reverse_waits, seed):
    """Blocks of x gathered into VMEM in a generated order, each on its own
    semaphore of an array, all in flight at once, then scattered back in
    order: output block k is input block perm[k]. Slices are Python slices
    or `pl.ds`; waits in start order or reversed. Compared with interpret
    mode's `dma_start` and `dma_wait`, which move the data at the start
    (`eager`) or at the wait (`on_wait`)."""
    n = len(perm)

    def block(k: int):
        return pl.ds(k * rows, rows) if use_ds else slice(k * rows, (k + 1) * rows)

    def kernel(x_hbm, o_hbm, buf, sems):
        ins = [
            copy(x_hbm.at[block(p)], buf.at[k], sems.at[k]) for k, p in enumerate(perm)
        ]
        outs = [copy(buf.at[k], o_hbm.at[block(k)], sems.at[k]) for k in range(n)]
        for phase in (ins, outs):
            for c in phase:
                c.start()
            for c in reversed(phase) if reverse_waits else phase:
                c.wait()

    x = data(seed, (n * rows, LANES))
    call = dma_call(
        kernel,
        jax.ShapeDtypeStruct(x.shape, x.dtype),
        [pltpu.VMEM((n, rows, LANES), x.dtype), DMA((n,))],
    )
    assert_agrees(call, x)


def rotation(n: int, shift: int, rows: int):
    """A `fori_loop` copying block i of its input through VMEM slot `i % 2`
    to block `(i + shift) % n` of its output."""

    def kernel(x_hbm, o_hbm, buf, sems):
        def body(i, carry):
            slot = i % 2
            fetch = copy(x_hbm.at[pl.ds(i * rows, rows)], buf.at[slot], sems.at[slot])
            fetch.start()
            fetch.wait()
            dst = o_hbm.at[pl.ds(((i + shift) % n) * rows, rows)]
            back = copy(buf.at[slot], dst, sems.at[1 - slot])
            back.start()
            back.wait()
            return carry

        jax.lax.fori_loop(0, n, body, 0)

    return dma_call(
        kernel,
        jax.ShapeDtypeStruct((n * rows, LANES), jnp.float32),
        [pltpu.VMEM((2, rows, LANES), jnp.float32), DMA((2,))],
    )


@FEW
@given(
    n=st.integers(1, 5),
    shift=st.integers(0, 4),
    rows=st.sampled_from([2, 8]),
    seed=st.integers(0, 2**16),
)
def test_loop_dmas_rotate_blocks(n, shift, rows, seed):
    """`rotation`: `pl.ds` starts and semaphore indices computed from the
    loop index, `%` of it included. Compared with interpret mode running
    the `fori_loop` (a `scan`) and its DMAs step by step."""
    assert_agrees(rotation(n, shift, rows), data(seed, (n * rows, LANES)))


def test_a_changed_kernel_is_told_apart():
    """The comparison sees a difference: copyir running the rotation by one
    block more than Pallas runs fails it."""
    x = data(0, (3 * 8, LANES))
    with pytest.raises(AssertionError, match="Mismatched elements"):
        assert_agrees(rotation(3, 1, 8), x, ours=rotation(3, 2, 8))


# -- (b) double buffering --------------------------------------------------------

STEPS = {
    "scale": lambda v: v * 2.0 + 1.0,
    "square": lambda v: jnp.maximum(v * v, 2.0) - v,
    "clamp": lambda v: jnp.minimum(jnp.maximum(v, -1.0), 2.5),
}


@FEW
@given(
    n=st.integers(1, 5),
    rows=st.sampled_from([1, 8]),
    step=st.sampled_from(sorted(STEPS)),
    seed=st.integers(0, 2**16),
)
def test_double_buffered_loop(n, rows, step, seed):
    """The classic manual pipeline: block i + 1 is fetched into slot
    `(i + 1) % 2` under `pl.when(i + 1 < n)` while block i, in slot `i % 2`,
    is computed on in place and written back; the write-back of block i is
    waited in iteration i + 1, before that slot is fetched into again, and
    the last one after the loop. Compared with interpret mode's DMAs,
    `pl.when` (a `cond`) and arithmetic, its race detector finding none."""
    f = STEPS[step]

    def kernel(x_hbm, o_hbm, buf, in_sems, out_sems):
        def fetch(i):
            src = x_hbm.at[pl.ds(i * rows, rows)]
            return copy(src, buf.at[i % 2], in_sems.at[i % 2])

        def write_back(i):
            dst = o_hbm.at[pl.ds(i * rows, rows)]
            return copy(buf.at[i % 2], dst, out_sems.at[i % 2])

        fetch(0).start()

        def body(i, carry):
            @pl.when(i >= 1)
            def _():
                write_back(i - 1).wait()

            @pl.when(i + 1 < n)
            def _():
                fetch(i + 1).start()

            fetch(i).wait()
            slot = i % 2
            buf[slot] = f(buf[slot])
            write_back(i).start()
            return carry

        jax.lax.fori_loop(0, n, body, 0)
        write_back(n - 1).wait()

    x = data(seed, (n * rows, LANES))
    call = dma_call(
        kernel,
        jax.ShapeDtypeStruct(x.shape, x.dtype),
        [pltpu.VMEM((2, rows, LANES), x.dtype), DMA((2,)), DMA((2,))],
    )
    assert_agrees(call, x)


# -- (c) elementwise computations --------------------------------------------------

BINARY = {
    "+": jnp.add,
    "-": jnp.subtract,
    "*": jnp.multiply,
    "/": jnp.divide,
    "max": jnp.maximum,
    "min": jnp.minimum,
}
LITERALS = {
    "f32": [0.5, 2.0, -1.5, 3.0],
    "bf16": [0.5, 2.0, -1.5, 3.0],
    "i32": [1, 2, -3, 7],
}
DTYPES = {"f32": jnp.float32, "bf16": jnp.bfloat16, "i32": jnp.int32}


def expressions(dtype: str, depth: int):
    """Trees over the reads `x` and `y` and the dtype's literals: a leaf is
    a name or a number, a node (op, args). Integers are not divided, floats
    only by `y` or a literal (`data` keeps `y` away from 0)."""
    leaf = st.sampled_from(["x", "y", *LITERALS[dtype]])
    if depth == 0:
        return leaf
    sub = expressions(dtype, depth - 1)
    ops = [op for op in BINARY if dtype != "i32" or op != "/"]
    binary = st.tuples(st.sampled_from(ops), st.tuples(sub, sub)).filter(
        lambda e: e[0] != "/" or e[1][1] == "y" or not isinstance(e[1][1], str | tuple)
    )
    neg = st.tuples(st.just("neg"), st.tuples(sub))
    trees = st.one_of(leaf, binary, neg)
    return trees if dtype == "i32" else trees.filter(lambda e: not rewritten(e))


ADDITIVE, MULTIPLICATIVE = ("+", "-"), ("*", "/")
EXACT_RECIPROCALS = (0.5, 2.0)


def rewritten(expr) -> bool:
    """Whether XLA's CPU compiler, which runs interpret mode's arithmetic,
    rewrites part of the float tree into a form that rounds differently
    from op-by-op evaluation (copyir's, numpy's): a product added or
    subtracted (one fused multiply-add), a constant (any tree that reads
    nothing) added to a sum with a constant or multiplied into a product
    with one (the constants folded first), a division by a constant (a product with its reciprocal; exact
    only for powers of 2). Integer arithmetic is exact under all of them."""
    if not isinstance(expr, tuple):
        return False
    op, args = expr
    if op in ADDITIVE and any(_under_negations(a)[0] == "*" for a in args):
        return True
    if op == "/" and not reads(args[1]) and args[1] not in EXACT_RECIPROCALS:
        return True
    for family in (ADDITIVE, MULTIPLICATIVE):
        if op in family and not all(map(reads, args)):
            inner = [_under_negations(a) for a in args]
            if any(i[0] in family and not all(map(reads, i[1])) for i in inner):
                return True
    return any(rewritten(a) for a in args)


def _under_negations(expr) -> tuple:
    """The node under any `neg`s, as (op, args); ("", ()) for a leaf."""
    while isinstance(expr, tuple) and expr[0] == "neg":
        expr = expr[1][0]
    return expr if isinstance(expr, tuple) else ("", ())


def reads(expr) -> bool:
    """Whether the tree reads `x` or `y` (a computation reads something)."""
    if isinstance(expr, tuple):
        return any(reads(a) for a in expr[1])
    return expr in ("x", "y")


def evaluate(expr, x, y):
    if isinstance(expr, tuple):
        op, args = expr
        values = [evaluate(a, x, y) for a in args]
        return jnp.negative(*values) if op == "neg" else BINARY[op](*values)
    return {"x": x, "y": y}.get(expr, expr) if isinstance(expr, str) else expr


@settings(max_examples=6, deadline=None, derandomize=True, database=None)
@given(
    dtype=st.sampled_from(sorted(DTYPES)),
    in_place=st.booleans(),
    data_=st.data(),
    seed=st.integers(0, 2**16),
)
def test_elementwise_compute(dtype, in_place, data_, seed):
    """`o[...] = expr(x[...], y[...])` on VMEM buffers between DMAs, the
    expression generated, or in place: `x[...] = expr(x[...], y[...])`.
    Compared with interpret mode's loads and stores (`get`, `swap`) and the
    arithmetic between them, which JAX compiles with XLA for the CPU. The
    examples are fixed (`derandomize`): which forms XLA rewrites was found by
    running this test with hundreds of examples, not read from a spec."""
    expr = data_.draw(expressions(dtype, 3).filter(reads), label="expr")

    def kernel(x_hbm, y_hbm, o_hbm, xb, yb, ob, sems):
        for k, (src, dst) in enumerate([(x_hbm, xb), (y_hbm, yb)]):
            c = copy(src, dst, sems.at[k])
            c.start()
            c.wait()
        result = xb if in_place else ob
        result[...] = evaluate(expr, xb[...], yb[...]).astype(ob.dtype)
        out = copy(result, o_hbm, sems.at[0])
        out.start()
        out.wait()

    shape, jdtype = (8, LANES), DTYPES[dtype]
    x, y = data(seed, shape, jdtype), data(seed + 1, shape, jdtype)
    vmem = pltpu.VMEM(shape, jdtype)
    call = dma_call(
        kernel,
        jax.ShapeDtypeStruct(shape, jdtype),
        [vmem, vmem, vmem, DMA((2,))],
        inputs=2,
    )
    assert_agrees(call, x, y)


def test_constant_operand_computed_in_the_kernel():
    """`jnp.divide(0.5, 0.5)` in a bf16 kernel is staged as `div` of two
    f32 literals, then converted to bf16: a number, not a computation (it
    was refused as `convert_element_type`, found by the generator above)."""

    def kernel(x_ref, o_ref):
        o_ref[...] = -(x_ref[...] + jnp.divide(0.5, 0.5))

    def call(x, interpret=None):
        out_shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return pl.pallas_call(kernel, out_shape=out_shape, interpret=interpret)(x)

    assert_agrees(call, data(0, (8, LANES), jnp.bfloat16))


# -- (d) grids of BlockSpecs ------------------------------------------------------

INDEX_MAPS = {
    "same": lambda gi, gj: lambda i, j: (i, j),
    "flip": lambda gi, gj: lambda i, j: (gi - 1 - i, j),
    "rotate": lambda gi, gj: lambda i, j: (i, (j + 1) % gj),
}


@FEW
@given(
    grid=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    block=st.tuples(st.sampled_from([1, 8]), st.sampled_from([16, LANES])),
    maps=st.tuples(
        st.sampled_from(sorted(INDEX_MAPS)), st.sampled_from(sorted(INDEX_MAPS))
    ),
    buffers=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    semantics=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_blockspec_grid(grid, block, maps, buffers, semantics, seed):
    """`o = 2 * x + y` block by block over a 2-D grid: x and y read through
    generated index maps (the same block, the grid flipped, a block
    rotated) and `pl.Buffered(n)` buffers, the output block by block.
    Compared with interpret mode's grid loop (`interpret_pallas_call`),
    which copies each block in and out itself (no DMA events; `Buffered`
    changes nothing there); copyir lowers the call to a `copy.pipeline`."""
    (gi, gj), (bi, bj) = grid, block

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0 + y_ref[...]

    def spec(name: str, buffers: int):
        index_map = INDEX_MAPS[name](gi, gj)
        return pl.BlockSpec(block, index_map, pipeline_mode=pl.Buffered(buffers))

    params = pltpu.CompilerParams(dimension_semantics=("arbitrary", "arbitrary"))
    shape = (gi * bi, gj * bj)

    def call(x, y, interpret=None):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(shape, x.dtype),
            grid=grid,
            in_specs=[spec(maps[0], buffers[0]), spec(maps[1], buffers[1])],
            out_specs=pl.BlockSpec(block, lambda i, j: (i, j)),
            compiler_params=params if semantics else None,
            interpret=interpret,
        )(x, y)

    assert_agrees(call, data(seed, shape), data(seed + 1, shape))


@FEW
@given(
    grid=st.tuples(st.integers(1, 3), st.integers(1, 4)),
    rows=st.sampled_from([1, 8]),
    dtype=st.sampled_from(["f32", "i32"]),
    seed=st.integers(0, 2**16),
)
def test_blockspec_reduction(grid, rows, dtype, seed):
    """A sum over the grid's last (arbitrary) dimension: the output block
    `(i, 0)` is revisited along k, zeroed under `pl.when(k == 0)` and
    accumulated into with `+=`. Compared with interpret mode's grid loop,
    which accepts the revisit because it is consecutive
    (`_check_for_revisiting`)."""
    gi, gk = grid

    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(1) == 0)
        def _():
            o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)

        o_ref[...] += x_ref[...]

    jdtype = DTYPES[dtype]

    def call(x, interpret=None):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((gi * rows, LANES), jdtype),
            grid=grid,
            in_specs=[pl.BlockSpec((rows, LANES), lambda i, k: (i, k))],
            out_specs=pl.BlockSpec((rows, LANES), lambda i, k: (i, 0)),
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("arbitrary", "arbitrary")
            ),
            interpret=interpret,
        )(x)

    assert_agrees(call, data(seed, (gi * rows, gk * LANES), jdtype))


# -- (e) integer indices, `...`, squeezed block dimensions -------------------------


@FEW
@given(
    planes=st.integers(1, 4),
    rows=st.sampled_from([1, 8]),
    squeeze=st.sampled_from(["None", "pl.Squeezed()"]),
    seed=st.integers(0, 2**16),
)
def test_squeezed_blocks(planes, rows, squeeze, seed):
    """A 3-D input read one plane per grid step through a block whose first
    dimension is squeezed (`None` or `pl.Squeezed()`), written in reverse
    plane order into a 2-D output: the kernel sees 2-D refs. Compared with
    interpret mode's grid loop and its block indexing."""
    dim = None if squeeze == "None" else pl.Squeezed()

    def kernel(x_ref, o_ref):
        o_ref[...] = -x_ref[...]

    def call(x, interpret=None):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((planes * rows, LANES), x.dtype),
            grid=(planes,),
            in_specs=[pl.BlockSpec((dim, rows, LANES), lambda p: (p, 0, 0))],
            out_specs=pl.BlockSpec((rows, LANES), lambda p: (planes - 1 - p, 0)),
            interpret=interpret,
        )(x)

    assert_agrees(call, data(seed, (planes, rows, LANES)))


@FEW
@given(
    perm=st.integers(1, 4).flatmap(lambda n: st.permutations(range(n))),
    rows=st.sampled_from([1, 8]),
    seed=st.integers(0, 2**16),
)
def test_integer_indices(perm, rows, seed):
    """DMAs between planes picked by integer indices: `x_hbm.at[p]` of a 3-D
    HBM array into `buf.at[k % 2]` of a 3-D scratch, back into
    `o_hbm.at[k, ...]`, and `buf.at[...]` for the whole scratch. Compared
    with interpret mode's DMAs on its ref transforms (`NDIndexer`)."""
    n = len(perm)

    def kernel(x_hbm, o_hbm, buf, whole, sems):
        for k, p in enumerate(perm):
            c = copy(x_hbm.at[p], buf.at[k % 2], sems.at[0])
            c.start()
            c.wait()
            buf[k % 2] = buf[k % 2] + float(k)
            d = copy(buf.at[k % 2], o_hbm.at[k, ...], sems.at[1])
            d.start()
            d.wait()
        c = copy(o_hbm.at[n - 1], whole.at[...], sems.at[0])
        c.start()
        c.wait()
        d = copy(whole.at[...], o_hbm.at[0], sems.at[1])
        d.start()
        d.wait()

    x = data(seed, (n, rows, LANES))
    call = dma_call(
        kernel,
        jax.ShapeDtypeStruct(x.shape, x.dtype),
        [
            pltpu.VMEM((2, rows, LANES), x.dtype),
            pltpu.VMEM((rows, LANES), x.dtype),
            DMA((2,)),
        ],
    )
    assert_agrees(call, x)


# -- (f) program ids in the DMA slices of a grid -----------------------------------


@FEW
@given(
    grid=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    block=st.tuples(st.sampled_from([1, 8]), st.sampled_from([16, LANES])),
    seed=st.integers(0, 2**16),
)
def test_program_ids_in_dma_slices(grid, block, seed):
    """A grid over whole HBM operands (`memory_space=pl.ANY`): each step
    copies block `(i, j)` of x through VMEM to block
    `(num_programs(0) - 1 - i, j)` of the output, its slices `pl.ds` of
    `pl.program_id` and `pl.num_programs`. Compared with interpret mode's
    grid loop (`_get_grid_point`) and DMAs."""
    (gi, gj), (bi, bj) = grid, block

    def kernel(x_hbm, o_hbm, buf, sems):
        i, j = pl.program_id(0), pl.program_id(1)
        flipped = pl.num_programs(0) - 1 - i
        src = x_hbm.at[pl.ds(i * bi, bi), pl.ds(j * bj, bj)]
        c = copy(src, buf, sems.at[0])
        c.start()
        c.wait()
        buf[...] = buf[...] + 1.0
        d = copy(buf, o_hbm.at[pl.ds(flipped * bi, bi), pl.ds(j * bj, bj)], sems.at[1])
        d.start()
        d.wait()

    x = data(seed, (gi * bi, gj * bj))
    call = dma_call(
        kernel,
        jax.ShapeDtypeStruct(x.shape, x.dtype),
        [pltpu.VMEM(block, x.dtype), DMA((2,))],
        grid=grid,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("arbitrary", "arbitrary")
        ),
    )
    assert_agrees(call, x)


# -- (g) input_output_aliases ------------------------------------------------------


@FEW
@given(
    updated=st.integers(1, 4).flatmap(
        lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1)))
    ),
    rows=st.sampled_from([1, 8]),
    seed=st.integers(0, 2**16),
)
def test_aliased_output_updated_in_part(updated, rows, seed):
    """`input_output_aliases={0: 0}`: the output is the input, and the
    kernel rewrites only a generated set of its blocks (through VMEM); the
    others keep the input's values. Called inside `jax.jit`. Compared with
    interpret mode, which hands the input's HBM buffer to the output."""
    n, blocks = updated

    def kernel(x_hbm, o_hbm, buf, sems):
        for k in sorted(blocks):
            c = copy(x_hbm.at[pl.ds(k * rows, rows)], buf, sems.at[0])
            c.start()
            c.wait()
            buf[...] = buf[...] * 3.0
            d = copy(buf, o_hbm.at[pl.ds(k * rows, rows)], sems.at[0])
            d.start()
            d.wait()

    x = data(seed, (n * rows, LANES))
    call = dma_call(
        kernel,
        jax.ShapeDtypeStruct(x.shape, x.dtype),
        [pltpu.VMEM((rows, LANES), x.dtype), DMA((1,))],
        input_output_aliases={0: 0},
    )
    assert_agrees(jax.jit(call, static_argnames="interpret"), x)


# -- known-bad kernels ---------------------------------------------------------------

SHAPE = (8, LANES)


def line_of(function, text: str) -> tuple[int, int]:
    """The line of the first statement of `function` containing `text`,
    and the 1-based column where `text` starts."""
    lines, start = inspect.getsourcelines(function)
    for k, line in enumerate(lines):
        if text in line:
            return start + k, line.index(text) + 1
    raise AssertionError(f"{text!r} is not in {function.__name__}")


def refused(kernel, *args, scratch) -> CopyIRError:
    """copyir's error for the kernel, the same in both modes, located in
    this file."""
    call = dma_call(
        kernel, jax.ShapeDtypeStruct(SHAPE, jnp.float32), scratch, inputs=len(args)
    )
    found = []
    for mode in MODES:
        with pytest.raises(CopyIRError) as info:
            copyir.pallas.run(call, *args, mode=mode)
        found.append(info.value)
    first, second = found
    assert (str(first), first.loc) == (str(second), second.loc)
    assert first.loc is not None
    assert Path(first.loc.file).resolve() == Path(__file__).resolve()
    return first


def interpret_sees_race(kernel, *args, scratch) -> list[bool]:
    """Whether interpret mode's race detector reports a race, per mode.
    jax 0.10.2 records it (`races.races_found`) and returns; 0.12 raises
    `RuntimeError: RACE DETECTED` from its callback (a `JaxRuntimeError`
    here)."""
    call = dma_call(
        kernel, jax.ShapeDtypeStruct(SHAPE, jnp.float32), scratch, inputs=len(args)
    )
    seen = []
    for mode in MODES:
        try:
            interpreted(call, *args, mode=mode)
        except jax.errors.JaxRuntimeError as err:
            if "RACE DETECTED" not in str(err):
                raise
            seen.append(True)
            continue
        seen.append(interpret_pallas_call.races.races_found)
    return seen


def test_dma_never_waited():
    """A write-back started and never waited: copyir refuses the kernel at
    the start (interpret mode only prints the semaphore's leftover count
    and, in `on_wait` mode, never moves the data)."""

    def kernel(x_hbm, o_hbm, buf, sems):
        c = copy(x_hbm, buf, sems.at[0])
        c.start()
        c.wait()
        d = copy(buf, o_hbm, sems.at[1])
        d.start()

    err = refused(
        kernel, data(0, SHAPE), scratch=[pltpu.VMEM(SHAPE, jnp.float32), DMA((2,))]
    )
    assert str(err) == errors.RUN_LEFTOVERS.format(count=1)
    assert err.loc.line == line_of(kernel, "d.start()")[0]


def test_compute_writes_a_buffer_a_dma_writes():
    """A computation zeroes `buf` while the DMA into it is in flight: a race
    in copyir, located at the computation and naming the DMA's start, as
    interpret mode's race detector finds in both modes."""

    def kernel(x_hbm, o_hbm, buf, sems):
        c = copy(x_hbm, buf, sems.at[0])
        c.start()
        buf[...] = jnp.zeros(buf.shape, buf.dtype)
        c.wait()
        d = copy(buf, o_hbm, sems.at[1])
        d.start()
        d.wait()

    scratch = [pltpu.VMEM(SHAPE, jnp.float32), DMA((2,))]
    x = data(0, SHAPE)
    err = refused(kernel, x, scratch=scratch)
    start, column = line_of(kernel, "c.start()")
    assert str(err) == errors.RUN_ACCESS_RACE.format(
        what="computation",
        action="writes",
        region="buf[0:8, 0:128]",
        other=f"{err.loc.file}:{start}:{column}",
        their="writes",
    )
    assert err.loc.line == line_of(kernel, "buf[...] = jnp.zeros")[0]
    assert interpret_sees_race(kernel, x, scratch=scratch) == [True, True]


def test_add_dma_into_memory_nobody_wrote():
    """`add=True` accumulates into its destination, so it reads it: into a
    fresh VMEM buffer it reads memory nobody wrote."""

    def kernel(x_hbm, o_hbm, buf, sems):
        c = pltpu.async_copy(x_hbm, buf, sems.at[0], add=True)
        c.wait()
        d = copy(buf, o_hbm, sems.at[1])
        d.start()
        d.wait()

    err = refused(
        kernel, data(0, SHAPE), scratch=[pltpu.VMEM(SHAPE, jnp.float32), DMA((2,))]
    )
    assert str(err) == errors.RUN_UNINITIALIZED.format(
        region="buf[0:8, 0:128]", first="buf[0, 0]"
    )
    assert err.loc.line == line_of(kernel, "add=True")[0]


def test_add_dmas_in_flight_together():
    """Two `add=True` DMAs into one buffer at once: each reads and writes
    it, a race at the second start."""

    def kernel(x_hbm, y_hbm, o_hbm, buf, sems):
        c = copy(x_hbm, buf, sems.at[0])
        c.start()
        c.wait()
        a = pltpu.async_copy(x_hbm, buf, sems.at[0], add=True)
        b = pltpu.async_copy(y_hbm, buf, sems.at[1], add=True)
        a.wait()
        b.wait()
        d = copy(buf, o_hbm, sems.at[1])
        d.start()
        d.wait()

    scratch = [pltpu.VMEM(SHAPE, jnp.float32), DMA((2,))]
    err = refused(kernel, data(0, SHAPE), data(1, SHAPE), scratch=scratch)
    first, column = line_of(kernel, "pltpu.async_copy(x_hbm")
    assert str(err) == errors.RUN_RACE.format(
        action="writes",
        region="buf[0:8, 0:128]",
        other=f"{err.loc.file}:{first}:{column}",
        their="writes",
    )
    assert err.loc.line == line_of(kernel, "pltpu.async_copy(y_hbm")[0]


def test_add_dma_accumulates():
    """`add=True` into a buffer holding y gives x + y, as numpy adds (not
    compared with interpret mode, which drops `add`)."""

    def kernel(x_hbm, y_hbm, o_hbm, buf, sems):
        c = copy(y_hbm, buf, sems.at[0])
        c.start()
        c.wait()
        pltpu.async_copy(x_hbm, buf, sems.at[0], add=True).wait()
        d = copy(buf, o_hbm, sems.at[1])
        d.start()
        d.wait()

    x, y = data(0, SHAPE), data(1, SHAPE)
    call = dma_call(
        kernel,
        jax.ShapeDtypeStruct(SHAPE, jnp.float32),
        [pltpu.VMEM(SHAPE, jnp.float32), DMA((2,))],
        inputs=2,
    )
    for mode in MODES:
        got = copyir.pallas.run(call, x, y, mode=mode)
        assert_same_bits(np.asarray(got), np.asarray(y) + np.asarray(x), mode)


def test_prefetch_into_the_slot_in_use():
    """The double-buffered loop with its prefetch mutated into slot `i % 2`,
    where the DMA of block i is still in flight: a race at i = 0, at the
    prefetch, naming the first fetch. Interpret mode is not run: this
    kernel also waits on a semaphore the DMA it waits for never signals,
    and hangs there, as the TPU would."""
    n, rows = 3, 8

    def kernel(x_hbm, o_hbm, buf, sems):
        def fetch(i, slot):
            return copy(x_hbm.at[pl.ds(i * rows, rows)], buf.at[slot], sems.at[slot])

        fetch(0, 0).start()

        def body(i, carry):
            @pl.when(i + 1 < n)
            def _():
                fetch(i + 1, i % 2).start()

            fetch(i, i % 2).wait()
            d = copy(buf.at[i % 2], o_hbm.at[pl.ds(i * rows, rows)], sems.at[2])
            d.start()
            d.wait()
            return carry

        jax.lax.fori_loop(0, n, body, 0)

    call = dma_call(
        kernel,
        jax.ShapeDtypeStruct((n * rows, LANES), jnp.float32),
        [pltpu.VMEM((2, rows, LANES), jnp.float32), DMA((3,))],
    )
    x = data(0, (n * rows, LANES))
    for mode in MODES:
        with pytest.raises(CopyIRError) as info:
            copyir.pallas.run(call, x, mode=mode)
        err = info.value
        first, column = line_of(kernel, "fetch(0, 0).start()")
        assert (
            str(err)
            == errors.RUN_RACE.format(
                action="writes",
                region="buf[0:1, 0:8, 0:128]",
                other=f"{err.loc.file}:{first}:{column}",
                their="writes",
            )
            + ", at i = 0"
        )
        assert err.loc.line == line_of(kernel, "fetch(i + 1, i % 2).start()")[0]


def test_output_block_revisited():
    """An output block visited again after another: copyir refuses the call
    at the kernel's line with the message interpret mode gives (which names
    the block by its slices rather than by its block index)."""

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    def call(x, interpret=None):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((16, LANES), x.dtype),
            grid=(2, 2),
            in_specs=[pl.BlockSpec((8, LANES), lambda i, j: (i, j))],
            out_specs=pl.BlockSpec((8, LANES), lambda i, j: (j, 0)),
            interpret=interpret,
        )(x)

    x = data(0, (16, 2 * LANES))
    with pytest.raises(CopyIRError) as info:
        copyir.pallas.run(call, x)
    message = errors.REVISITED.format(
        block="(0, 0)", output=0, iteration="(1, 0)", first="(0, 0)", last="(0, 0)"
    )
    assert str(info.value) == message
    assert info.value.loc.line == line_of(kernel, "def kernel")[0]
    with pytest.raises(Exception, match="Revisited block") as theirs:
        interpreted(call, x, mode="eager")
    assert str(theirs.value).endswith(message.removeprefix("Revisited block (0, 0)"))


def test_wait_on_a_semaphore_two_dmas_share():
    """Two DMAs of one size signal one semaphore; the first wait returns
    once either has arrived, so the buffer of the first may still be in
    flight when the kernel computes on it: a race in copyir. Interpret mode
    runs the DMAs in the order started and its race detector is silent
    here: the one verdict in this file where copyir is stricter, as the
    semaphore, which counts bytes, is."""

    def kernel(x_hbm, o_hbm, buf, sems):
        a = copy(x_hbm.at[0:8], buf.at[0:8], sems.at[0])
        a.start()
        b = copy(x_hbm.at[8:16], buf.at[8:16], sems.at[0])
        b.start()
        a.wait()
        buf[0:8] = buf[0:8] * 2.0
        b.wait()
        c = copy(buf, o_hbm, sems.at[1])
        c.start()
        c.wait()

    call = dma_call(
        kernel,
        jax.ShapeDtypeStruct((16, LANES), jnp.float32),
        [pltpu.VMEM((16, LANES), jnp.float32), DMA((2,))],
    )
    with pytest.raises(CopyIRError) as info:
        copyir.pallas.run(call, data(0, (16, LANES)))
    err = info.value
    start, column = line_of(kernel, "a.start()")
    assert str(err) == errors.RUN_ACCESS_RACE.format(
        what="computation",
        action="writes",
        region="buf[0:8, 0:128]",
        other=f"{err.loc.file}:{start}:{column}",
        their="writes",
    )
    assert err.loc.line == line_of(kernel, "buf[0:8] = ")[0]
