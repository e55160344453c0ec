"""Adversarial inputs to the Pallas frontend: each kernel here runs on
copyir and on Pallas' TPU interpret mode (eager and on-wait DMAs, race
detection) with bit-identical outputs, or is refused or reported by
copyir at its Python line. Known gaps are strict xfails, so that they
flip when fixed."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the Pallas frontend needs JAX")
jnp = pytest.importorskip("jax.numpy")
from jax import lax  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import copyir  # noqa: E402
from copyir.pallas import import_kernels, run  # noqa: E402

ANY = pl.BlockSpec(memory_space=pl.ANY)
DMA = pltpu.SemaphoreType.DMA
X = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
MODES = {"eager": "eager", "on_wait": "on_wait"}


def interpret(mode: str):
    return pltpu.InterpretParams(dma_execution_mode=mode, detect_races=True)


def hbm_call(kernel, scratch, interp=False):
    def f(x):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            in_specs=[ANY],
            out_specs=ANY,
            scratch_shapes=scratch,
            interpret=interp,
        )(x)

    return f


def assert_same_as_interpret_mode(make, *args):
    """copyir's outputs equal, bit for bit, Pallas' interpret mode's in
    both DMA execution modes."""
    for mode in MODES:
        want = jax.tree_util.tree_leaves(make(interpret(mode))(*args))
        got = jax.tree_util.tree_leaves(run(make(False), *args, mode=mode))
        for a, b in zip(got, want, strict=True):
            a, b = np.asarray(a), np.asarray(b)
            assert a.dtype == b.dtype
            assert a.tobytes() == b.tobytes(), mode


def line_of(function, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(k for k, line in enumerate(lines) if text in line)


def copy(src, dst, sem):
    c = pltpu.make_async_copy(src, dst, sem)
    c.start()
    c.wait()


def test_wrapped_slot_index_of_a_negative_value():
    def kernel(x, y, buf, sem):
        def body(i, c):
            slot = (i - 1) % 2
            copy(x.at[pl.ds(i, 1)], buf.at[slot], sem.at[slot])
            copy(buf.at[slot], y.at[pl.ds(7 - i, 1)], sem.at[2])
            return c

        lax.fori_loop(0, 8, body, 0)

    scratch = [pltpu.VMEM((2, 1, 128), jnp.float32), DMA((3,))]
    assert_same_as_interpret_mode(lambda m: hbm_call(kernel, scratch, m), X)


def test_when_with_and_or_not_ne_eq_and_two_loop_indices():
    def kernel(x, y, sem):
        def body(i, c):
            def inner(j, c):
                a, b = i < 4, j % 2 == 0

                @pl.when(((a & ~b) | (~a & b)) & (i != j))
                def _():
                    copy(x.at[pl.ds(j, 1)], y.at[pl.ds(i, 1)], sem)

                return c

            lax.fori_loop(1, 8, inner, 0)
            return c

        lax.fori_loop(0, 8, body, 0)
        copy(x.at[pl.ds(0, 1)], y.at[pl.ds(0, 1)], sem)

    assert_same_as_interpret_mode(lambda m: hbm_call(kernel, [DMA], m), X)


@pytest.mark.parametrize("unroll", [2, 3, True])
def test_unrolled_fori_loop_starting_at_one(unroll):
    def kernel(x, y, sem):
        def body(i, c):
            copy(x.at[pl.ds(i, 1)], y.at[pl.ds(8 - i, 1)], sem)
            return c

        lax.fori_loop(1, 8, body, 0, unroll=unroll)
        copy(x.at[pl.ds(0, 1)], y.at[pl.ds(0, 1)], sem)

    assert_same_as_interpret_mode(lambda m: hbm_call(kernel, [DMA], m), X)


def test_cond_with_dmas_in_both_branches_and_a_rank_2_semaphore_array():
    def kernel(x, y, sems):
        def body(i, c):
            sem = sems.at[i % 2, i // 4]
            lax.cond(
                i % 3 == 0,
                lambda: copy(x.at[pl.ds(i, 1)], y.at[pl.ds(i, 1)], sem),
                lambda: copy(x.at[pl.ds(7 - i, 1)], y.at[pl.ds(i, 1)], sem),
            )
            return c

        lax.fori_loop(0, 8, body, 0)

    assert_same_as_interpret_mode(lambda m: hbm_call(kernel, [DMA((2, 2))], m), X)


@pytest.mark.parametrize("dtype", ["int8", "bfloat16", "bool", "uint8", "float16"])
def test_small_dtypes_through_vmem(dtype):
    def kernel(x, y, buf, sem):
        copy(x, buf, sem)
        copy(buf, y, sem)

    x = (jnp.arange(8 * 128) % 7 > 2) if dtype == "bool" else jnp.arange(8 * 128)
    x = x.astype(dtype).reshape(8, 128)
    scratch = [pltpu.VMEM((8, 128), dtype), DMA]
    assert_same_as_interpret_mode(lambda m: hbm_call(kernel, scratch, m), x)


def test_three_dimensional_grid_with_squeezed_dims_and_wrapped_index_maps():
    def kernel(x, y):
        y[...] = x[...] * 2 + 1

    def make(interp):
        def f(x):
            return pl.pallas_call(
                kernel,
                out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                grid=(2, 2, 2),
                in_specs=[pl.BlockSpec((None, 4, 128), lambda a, b, c: (a, b, c))],
                out_specs=pl.BlockSpec(
                    (None, 4, 128),
                    lambda a, b, c: (1 - a, (b - 1) % 2, (c + 1) // 1 % 2),
                ),
                interpret=interp,
            )(x)

        return f

    x = jnp.arange(2 * 8 * 256, dtype=jnp.int8).reshape(2, 8, 256)
    assert_same_as_interpret_mode(make, x)


def test_a_read_of_an_output_nobody_wrote_is_reported_at_its_line():
    def kernel(x, y, buf, sem):
        copy(y, buf, sem)  # reads y
        copy(buf, y, sem)

    scratch = [pltpu.VMEM((8, 128), jnp.float32), DMA]
    with pytest.raises(copyir.CopyIRError, match="which nobody wrote") as caught:
        run(hbm_call(kernel, scratch), X, mode="eager")
    assert caught.value.loc.line == line_of(copy, "c.start()")


def test_deeply_nested_when_on_ne_lowers_to_few_condition_sets():
    """Eight nested `pl.when(i != c)`, each an `or` of two sets: the
    lowering took the product of the conditions, 2**8 sets per DMA (with
    `(i != c) & (i >= 0)` a run took 12 s at depth 14, 4 min at depth 18);
    it now drops the conjunctions that hold nowhere in the loop as it
    multiplies (tests/passes/test_predicates.py)."""
    depth = 8

    def kernel(x, y, sem):
        def body(i, c):
            def nest(d):
                if d == depth:
                    copy(x.at[pl.ds(i, 1)], y.at[pl.ds(i, 1)], sem)
                    return

                @pl.when(i != d + 100)
                def _():
                    nest(d + 1)

            nest(0)
            return c

        lax.fori_loop(0, 8, body, 0)

    (imported,) = import_kernels(hbm_call(kernel, [DMA]), X)
    program = copyir.lower(imported.module)
    sets = [
        len(op.properties["predicate"].data)
        for op in program.walk()
        if "predicate" in op.properties
    ]
    assert sets and max(sets) <= 2 * depth


@pytest.mark.parametrize(
    "index, what",
    [
        (lambda i: lax.div(i - 4, 2) + 2, "`div` of index values"),
        (lambda i: lax.rem(i - 4, 3) + 2, "`rem`"),
    ],
)
def test_an_integer_operation_on_an_index_and_a_constant_is_named(index, what):
    """`lax.div` and `lax.rem` truncate (they are not `//` and `%`):
    refused, and the message does not call the constant an array. (`min`
    was here: it is an index now, tests/pallas/test_compare.py.)"""

    def kernel(x, y, sem):
        def body(i, c):
            j = index(i)
            copy(x.at[pl.ds(j, 1)], y.at[pl.ds(i, 1)], sem)
            return c

        lax.fori_loop(0, 8, body, 0)

    with pytest.raises(copyir.CopyIRError) as caught:
        import_kernels(hbm_call(kernel, [DMA]), X)
    assert str(caught.value).startswith(f"{what} is not supported yet (")
    assert caught.value.loc.line == index.__code__.co_firstlineno


def test_ragged_blocks_of_a_two_dimensional_grid():
    """(Aliased, the same call crashes Pallas' interpret mode itself.)"""

    def kernel(x, y):
        y[...] = x[...] * x[...] + 1

    def make(interp):
        def f(x):
            return pl.pallas_call(
                kernel,
                out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                grid=(2, 2),
                in_specs=[pl.BlockSpec((4, 3), lambda i, j: (i, j))],
                out_specs=pl.BlockSpec((4, 3), lambda i, j: (i, j)),
                interpret=interp,
            )(x)

        return f

    assert_same_as_interpret_mode(
        make, jnp.arange(7 * 5, dtype=jnp.float32).reshape(7, 5)
    )


def test_two_dmas_writing_one_ref_at_once_are_a_race_pallas_misses():
    """Both DMAs write the same data, so Pallas' race detection is silent;
    on a TPU the order of the writes is undefined all the same."""

    def kernel(x, y, sems):
        first = pltpu.make_async_copy(x, y, sems.at[0])
        second = pltpu.make_async_copy(x, y, sems.at[1])
        first.start()
        second.start()
        first.wait()
        second.wait()

    with pytest.raises(copyir.CopyIRError, match=r"^Race: this DMA writes y") as caught:
        run(hbm_call(kernel, [DMA((2,))]), X, mode="eager")
    assert caught.value.loc.line == line_of(kernel, "second.start()")
