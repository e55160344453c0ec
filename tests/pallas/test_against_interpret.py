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
    f32, i32 and bf16;
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
nobody wrote or concurrently) must raise one `CopyIRError` with its documented
message, located at the offending statement's line in this file.

An `add=True` DMA is compared with numpy rather than interpret mode: interpret
mode (jax 0.10.2) drops `add`, its `dma_start` callback is never given it.
"""

from __future__ import annotations

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

MODES = ("eager", "on_wait")
LANES = 128
FEW = settings(max_examples=3, deadline=None)
DMA = pltpu.SemaphoreType.DMA
ANY = pl.BlockSpec(memory_space=pl.ANY)


# -- running both ---------------------------------------------------------------


def interpret(mode: str) -> pltpu.InterpretParams:
    return pltpu.InterpretParams(dma_execution_mode=mode, detect_races=True)


def assert_agrees(call, *args) -> None:
    """`call(*args, interpret=...)` run by Pallas' interpret mode and by
    copyir, in each mode: the same bits, and no race interpret mode sees."""
    for mode in MODES:
        want = call(*args, interpret=interpret(mode))
        assert not interpret_pallas_call.races.races_found, "interpret mode saw a race"
        got = copyir.pallas.run(call, *args, mode=mode)
        for w, g in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
            assert_same_bits(np.asarray(g), np.asarray(w), mode)


def assert_same_bits(got: np.ndarray, want: np.ndarray, mode: str) -> None:
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    bits = np.dtype(f"u{got.dtype.itemsize}")
    np.testing.assert_array_equal(got.view(bits), want.view(bits), err_msg=mode)


def data(seed: int, shape: tuple[int, ...], dtype=jnp.float32) -> jax.Array:
    """Distinct values, none NaN, none near 0 (they divide)."""
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
    or `pl.ds`; waits in start order or reversed."""
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


@FEW
@given(
    n=st.integers(1, 5),
    shift=st.integers(0, 4),
    rows=st.sampled_from([2, 8]),
    seed=st.integers(0, 2**16),
)
def test_loop_dmas_rotate_blocks(n, shift, rows, seed):
    """A `fori_loop` copies block i of x through VMEM slot `i % 2` to block
    `(i + shift) % n` of the output: `pl.ds` starts and semaphore indices
    computed from the loop index."""

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

    x = data(seed, (n * rows, LANES))
    call = dma_call(
        kernel,
        jax.ShapeDtypeStruct(x.shape, x.dtype),
        [pltpu.VMEM((2, rows, LANES), x.dtype), DMA((2,))],
    )
    assert_agrees(call, x)


# -- (b) double buffering --------------------------------------------------------

STEPS = {
    "scale": lambda v: v * 2.0 + 1.0,
    "square": lambda v: jnp.maximum(v * v, 2.0) - v,
    "clamp": lambda v: jnp.minimum(jnp.maximum(v, -1.0), 2.5),
}


@FEW
@given(
    n=st.integers(2, 5),
    rows=st.sampled_from([1, 8]),
    step=st.sampled_from(sorted(STEPS)),
    seed=st.integers(0, 2**16),
)
def test_double_buffered_loop(n, rows, step, seed):
    """The classic manual pipeline: block i + 1 is fetched into slot
    `(i + 1) % 2` under `pl.when(i + 1 < n)` while block i, in slot `i % 2`,
    is computed on in place and written back; the write-back of block i is
    waited in iteration i + 1, before that slot is fetched into again, and
    the last one after the loop."""
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
    a name or a number, a node (op, args). Integers are not divided; floats
    only by `y` or a literal (`data` keeps them away from 0)."""
    leaf = st.sampled_from(["x", "y", *LITERALS[dtype]])
    if depth == 0:
        return leaf
    sub = expressions(dtype, depth - 1)
    ops = [op for op in BINARY if dtype != "i32" or op != "/"]
    binary = st.tuples(st.sampled_from(ops), st.tuples(sub, sub)).filter(
        lambda e: e[0] != "/" or e[1][1] == "y" or not isinstance(e[1][1], str | tuple)
    )
    neg = st.tuples(st.just("neg"), st.tuples(sub))
    return st.one_of(leaf, binary, neg).filter(lambda e: not contracted(e))


def contracted(expr) -> bool:
    """Whether XLA's CPU backend, which interpret mode runs the kernel's
    arithmetic on, fuses part of the tree into one fused multiply-add (a
    product, negated or not, added or subtracted): it rounds once where
    copyir, like the TPU's vector unit, rounds after each op."""
    if not isinstance(expr, tuple):
        return False
    op, args = expr
    if op in ("+", "-") and any(_product(a) for a in args):
        return True
    return any(contracted(a) for a in args)


def _product(expr) -> bool:
    while isinstance(expr, tuple) and expr[0] == "neg":
        expr = expr[1][0]
    return isinstance(expr, tuple) and expr[0] == "*"


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


@settings(max_examples=6, deadline=None)
@given(
    dtype=st.sampled_from(sorted(DTYPES)),
    data_=st.data(),
    seed=st.integers(0, 2**16),
)
def test_elementwise_compute(dtype, data_, seed):
    """`o[...] = expr(x[...], y[...])` on VMEM buffers between DMAs, the
    expression generated; the result must have the kernel's dtype."""
    expr = data_.draw(expressions(dtype, 3).filter(reads), label="expr")

    def kernel(x_hbm, y_hbm, o_hbm, xb, yb, ob, sems):
        for k, (src, dst) in enumerate([(x_hbm, xb), (y_hbm, yb)]):
            c = copy(src, dst, sems.at[k])
            c.start()
            c.wait()
        ob[...] = evaluate(expr, xb[...], yb[...]).astype(ob.dtype)
        out = copy(ob, o_hbm, sems.at[0])
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
