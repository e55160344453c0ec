"""`emit_pipeline` kernels run on copyir and, side by side, on Pallas' TPU
interpret mode: outputs bit for bit and DMA schedules event for event
(issue 19: the step-major prologue, output buffer counts above 2, parallel
semantics without cores, nested pipelines).

The schedule is JAX 0.12's `_emit_pipeline` (`jax/_src/pallas/mosaic/
pipeline.py`). Only 0.12's interpret mode runs `emit_pipeline` on the CPU;
0.10.2's fails inside its state discharge (`JaxprInputEffect ... does not
have a corresponding jaxpr input`). On 0.10.2 these kernels still run on
copyir, against numpy; the FileCheck tests tests/filecheck/run/pipeline-*
pin the same schedules from 0.12's code.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the Pallas frontend needs JAX")
jnp = pytest.importorskip("jax.numpy")
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402
from pallas_calls import ANY  # noqa: E402

import copyir  # noqa: E402
from copyir import errors  # noqa: E402
from copyir.errors import CopyIRError, CopyIRWarning  # noqa: E402
from copyir.pallas import run  # noqa: E402
from copyir.pallas.compare import compare  # noqa: E402
from copyir.pallas.interpret_side import TILING_NEVER_ENDS  # noqa: E402

INTERPRET_RUNS_EMIT_PIPELINE = jax.__version_info__ >= (0, 12)
BLOCK = (8, 128)


@pytest.fixture(autouse=True)
def tpu_v6e(monkeypatch):
    """Interpret mode asks the device kind for VMEM sizes; the CPU has none."""
    try:
        from jax._src import tpu_info
    except ImportError:  # JAX 0.10.2
        from jax._src.pallas.mosaic import tpu_info
    monkeypatch.setattr(tpu_info, "get_device_kind", lambda: "TPU v6 lite")
    monkeypatch.setattr(tpu_info, "get_num_device_cores", lambda: 1)


@pytest.fixture(autouse=True)
def emit_pipeline_primitive():
    """copyir reads `emit_pipeline` as one equation (examples/pallas/
    emit_pipeline.py)."""
    old = jax.config.jax_use_emit_pipeline_primitive
    jax.config.update("jax_use_emit_pipeline_primitive", True)
    yield
    jax.config.update("jax_use_emit_pipeline_primitive", old)


def arrays(count: int, shape) -> list:
    rng = np.random.default_rng(0)
    return [jnp.asarray(rng.standard_normal(shape), jnp.float32) for _ in range(count)]


def hbm_kernel(kernel, inputs: int, shape):
    """A pallas_call of `kernel` on `inputs` arrays in HBM, to one."""
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(shape, jnp.float32),
        in_specs=[ANY] * inputs,
        out_specs=ANY,
    )


def spec(buffers: int | None = None, index=lambda i, j: (i, j), block=BLOCK):
    mode = None if buffers is None else pl.Buffered(buffers)
    return pl.BlockSpec(block, index, pipeline_mode=mode)


def agrees_with_interpret_mode(f, *args) -> None:
    if not INTERPRET_RUNS_EMIT_PIPELINE:
        return
    comparison = compare(f, *args)
    assert comparison.status == "agrees", comparison.report()
    ours, _ = comparison.runs["eager"]
    assert ours.events  # the schedule was compared, not only the outputs


def three_inputs(out_buffers: int):
    """Inputs with 4, 2 and 3 buffers: Pallas queues every input's step 0
    fetch, then step 1's, ... (`initialize_step` per step over all
    operands)."""
    grid, shape = (4, 2), (32, 256)

    def body(a, b, c, o):
        o[...] = a[...] + 2.0 * b[...] + c[...]

    def kernel(a, b, c, o):
        pltpu.emit_pipeline(
            body,
            grid=grid,
            in_specs=[spec(4), spec(2), spec(3)],
            out_specs=[spec(out_buffers)],
        )(a, b, c, o)

    return hbm_kernel(kernel, 3, shape), arrays(3, shape)


def test_inputs_of_different_buffer_counts_prefetch_step_major():
    f, (a, b, c) = three_inputs(2)
    np.testing.assert_array_equal(run(f, a, b, c), a + 2.0 * b + c)
    agrees_with_interpret_mode(f, a, b, c)


@pytest.mark.skipif(
    not INTERPRET_RUNS_EMIT_PIPELINE,
    reason="JAX 0.10.2 refuses an output's third buffer while tracing "
    "(`Buffer count >2 not supported for output buffered refs.`)",
)
def test_three_output_buffers_wait_each_copy_two_steps_later():
    f, (a, b, c) = three_inputs(3)
    np.testing.assert_array_equal(run(f, a, b, c), a + 2.0 * b + c)
    agrees_with_interpret_mode(f, a, b, c)


def test_parallel_semantics_without_cores_do_not_restart_the_schedule():
    """`_emit_pipeline` reads `dimension_semantics` only to split the grid
    over cores: without a core axis, it prefetches across rows."""
    shape = (32, 256)

    def body(x, o):
        o[...] = x[...] * 3.0

    def kernel(x, o):
        pltpu.emit_pipeline(
            body,
            grid=(4, 2),
            in_specs=[spec(3)],
            out_specs=[spec()],
            dimension_semantics=(pltpu.PARALLEL, pltpu.ARBITRARY),
        )(x, o)

    f = hbm_kernel(kernel, 1, shape)
    (x,) = arrays(1, shape)
    np.testing.assert_array_equal(run(f, x), x * 3.0)
    agrees_with_interpret_mode(f, x)


def test_a_pipeline_nested_in_another_streams_its_windows():
    """jax's `test_transformed_refs_as_inputs_nested`: the inner pipeline's
    operands are the outer one's VMEM windows."""
    shape = (16, 512)

    def inner_body(x, o):
        o[...] = x[...] + 1.0

    def outer_body(outer_x, outer_o):
        pltpu.emit_pipeline(
            inner_body,
            grid=(2,),
            in_specs=[pl.BlockSpec((16, 128), lambda i: (0, i))],
            out_specs=[pl.BlockSpec((16, 128), lambda i: (0, i))],
        )(outer_x, outer_o)

    def kernel(x, o):
        pltpu.emit_pipeline(
            outer_body,
            grid=(2,),
            in_specs=[pl.BlockSpec((16, 256), lambda i: (0, i))],
            out_specs=[pl.BlockSpec((16, 256), lambda i: (0, i))],
        )(x, o)

    f = hbm_kernel(kernel, 1, shape)
    (x,) = arrays(1, shape)
    np.testing.assert_array_equal(run(f, x), x + 1.0)
    agrees_with_interpret_mode(f, x)


def test_lookahead_fetches_the_next_blocks_that_differ():
    """`pl.Buffered(3, use_lookahead=True)`: x's block stays put over j, so
    the walk of `fetch_with_lookahead` fetches 2 blocks ahead, 4 steps,
    where a plain `pl.Buffered(3)` fetches 2 steps ahead."""
    shape = (32, 256)
    rows = pl.BlockSpec(
        (8, 256), lambda i, j: (i, 0), pipeline_mode=pl.Buffered(3, use_lookahead=True)
    )

    def body(x, o):
        o[...] = x[...] * 2.0

    def kernel(x, o):
        out = pl.BlockSpec((8, 256), lambda i, j: (i, 0))
        pltpu.emit_pipeline(body, grid=(4, 2), in_specs=[rows], out_specs=[out])(x, o)

    f = hbm_kernel(kernel, 1, shape)
    (x,) = arrays(1, shape)
    np.testing.assert_array_equal(run(f, x), x * 2.0)
    agrees_with_interpret_mode(f, x)


def test_a_revisit_mode_on_an_output_is_refused_with_pallas_message():
    """JAX 0.12's `_make_pipeline_allocations` raises on an output spec
    given `revisit=` (emit_pipeline implements no RevisitMode); the
    frontend used to drop it and run the kernel."""
    shape = (16, 512)

    def body(x, o):
        o[...] = x[...]

    def kernel(x, o):
        mode = pl.Buffered(2, revisit=pl.RevisitMode.ANY)
        out = pl.BlockSpec((16, 256), lambda i: (0, i), pipeline_mode=mode)
        pltpu.emit_pipeline(
            body,
            grid=(2,),
            in_specs=[spec(block=(16, 256), index=lambda i: (0, i))],
            out_specs=[out],
        )(x, o)

    f = hbm_kernel(kernel, 1, shape)
    (x,) = arrays(1, shape)
    with pytest.raises(CopyIRError) as caught:
        run(f, x)
    assert str(caught.value).startswith(errors.REVISIT_MODE)
    if INTERPRET_RUNS_EMIT_PIPELINE:  # both stop, with the same message
        comparison = compare(f, x)
        assert comparison.status == "agrees", comparison.report()
        ours, theirs = comparison.runs["eager"]
        assert ours.verdict == theirs.verdict == "error"
        assert errors.REVISIT_MODE in theirs.message


def test_a_1d_window_differs_from_pallas_in_its_layout_only():
    """Pallas lays a 1-D window's slots out flat, `(buffers * block,)`
    (`BufferedRef.create`); copyir's is `(buffers, block)`: the known
    divergence `window-layout`, with the same DMAs otherwise."""
    shape = (1024,)

    def body(x, o):
        o[...] = x[...] + 1.0

    def kernel(x, o):
        spec_1d = pl.BlockSpec((256,), lambda i: (i,))
        pltpu.emit_pipeline(body, grid=(4,), in_specs=[spec_1d], out_specs=[spec_1d])(
            x, o
        )

    f = hbm_kernel(kernel, 1, shape)
    (x,) = arrays(1, shape)
    np.testing.assert_array_equal(run(f, x), x + 1.0)
    if INTERPRET_RUNS_EMIT_PIPELINE:
        comparison = compare(f, x)
        assert comparison.status == "differs (known)", comparison.report()
        assert {d.known.name for d in comparison.differences if d.known} == {
            "window-layout"
        }


def test_a_traced_pipeline_with_a_constant_carry_is_not_supported_not_a_crash():
    """Without the primitive, emit_pipeline is traced into a scan whose
    carry includes constants (Literals, unhashable): jax's
    `test_trivial_windowing_elides_double_buffering` made copyir fail with a
    TypeError in the corpus."""

    def body(x, y, o):
        o[...] = x[...] + y[...]

    def kernel(x, y, o):
        pltpu.emit_pipeline(
            body,
            grid=(4, 1),
            in_specs=[spec(index=lambda i, j: (0, i)), spec(index=lambda i, j: (0, j))],
            out_specs=spec(index=lambda i, j: (0, i)),
        )(x, y, o)

    f = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((8, 512), jnp.float32),
        in_specs=[ANY, ANY],
        out_specs=ANY,
    )
    x, y = arrays(1, (8, 512))[0], arrays(1, (8, 128))[0]
    jax.config.update("jax_use_emit_pipeline_primitive", False)
    with pytest.raises(CopyIRError) as err:
        run(f, x, y)
    assert str(err.value).startswith("a loop-carried index value is not supported yet")


@pytest.mark.skipif(
    not INTERPRET_RUNS_EMIT_PIPELINE,
    reason="JAX 0.10.2 refuses an output's fourth buffer while tracing",
)
def test_a_revisit_within_the_write_back_lag_is_a_known_write_write_race():
    """Output block (0, j) comes back 3 steps later, within its lag of 3
    (`Buffered(4)`): the second write-back starts before the first is
    waited. 0.12's own message calls that distance safe for a plain output;
    copyir reports the race, interpret mode lands both in order."""

    def body(x, o):
        o[...] = x[...] + 1.0

    def kernel(x, o):
        out = pl.BlockSpec((8, 128), lambda i, j: (0, j), pipeline_mode=pl.Buffered(4))
        pltpu.emit_pipeline(body, grid=(2, 3), in_specs=[spec()], out_specs=[out])(x, o)

    f = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((8, 384), jnp.float32),
        in_specs=[ANY],
        out_specs=ANY,
    )
    (x,) = arrays(1, (16, 384))
    comparison = compare(f, x)
    assert comparison.status == "differs (known)", comparison.report()
    assert {d.known.name for d in comparison.differences if d.known} == {
        "write-write-race"
    }


BOUNDED_CPY = """kernel bounded(x: f32[32, 128] @hbm, y: f32[32, 128] @hbm) {
  pipeline grid=(2,)
      in  x block=(BoundedSlice(16), 128) index=(i) -> (ds(16 * i, SIZE), 0)
      out y block=(BoundedSlice(16), 128) index=(i) -> (ds(16 * i, SIZE), 0)
      (xw, yw) {
    yw[...] = xw + 1.0
  }
}
"""


@pytest.mark.skipif(
    not INTERPRET_RUNS_EMIT_PIPELINE,
    reason="JAX 0.10.2's interpret mode cannot run emit_pipeline on the CPU",
)
@pytest.mark.parametrize("size", [8, 6, 11])
def test_bounded_slices_give_interpret_modes_bits(size):
    """copyir's `BoundedSlice(16)` with `ds(16 * i, size)` (the frontend
    cannot import it: the index map's jaxpr keeps only the start) against
    the same kernel in Pallas' interpret mode: JAX 0.12's
    `_create_bounded_slice` rounds the slice up to the 8-row tile, and the
    rounded rows go each way (8 for 6, 16 for 11); the other rows of y stay
    unwritten (NaN on both sides). (0.10.2 rounded only a slice past the
    array's end.)"""
    spec_b = pl.BlockSpec(
        (pl.BoundedSlice(16), 128), lambda i: (pl.ds(i * 16, size), 0)
    )

    def body(x, o):
        o[...] = x[...] + 1.0

    def kernel(x, o):
        pltpu.emit_pipeline(body, grid=(2,), in_specs=[spec_b], out_specs=[spec_b])(
            x, o
        )

    jax.config.update("jax_use_emit_pipeline_primitive", False)
    f = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
        in_specs=[ANY],
        out_specs=ANY,
        interpret=pltpu.InterpretParams(),
    )
    (x,) = arrays(1, (32, 128))
    theirs = np.asarray(f(x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CopyIRWarning)  # y written in part
        ours = copyir.run(BOUNDED_CPY.replace("SIZE", str(size)), {"x": np.asarray(x)})
    assert ours["y"].tobytes() == theirs.tobytes()
    moved = -(-size // 8) * 8
    np.testing.assert_array_equal(
        ours["y"][16 : 16 + moved], np.asarray(x)[16:][:moved] + 1
    )


def cut_pipeline(rows: int, block: int, buffers: int):
    """x (rows, 128) in blocks of `block` rows, copied whole into y's
    blocks of a y with whole blocks: y's rows past x's show what the input
    slot held past the cut."""
    grid = -(-rows // block)
    in_spec = pl.BlockSpec(
        (block, 128), lambda i: (i, 0), pipeline_mode=pl.Buffered(buffers)
    )

    def body(x, o):
        o[...] = x[...]

    def kernel(x, o):
        pltpu.emit_pipeline(
            body,
            grid=(grid,),
            in_specs=[in_spec],
            out_specs=[spec(index=lambda i: (i, 0), block=(block, 128))],
        )(x, o)

    f = hbm_kernel(kernel, 1, (grid * block, 128))
    return f, jnp.arange(rows * 128, dtype=jnp.float32).reshape(rows, 128)


@pytest.mark.parametrize("buffers", [1, 2])
def test_a_cut_block_keeps_the_slots_rows_as_interpret_mode_does(buffers):
    """x (24, 128) in 16-row blocks: the last block's 8 rows are a whole
    tile, so Pallas' DMA (`_create_blocked_slice`) moves x[16:24] into the
    first 8 rows of the slot, and the other 8 keep what the slot held:
    block 0's rows 8:16 with one buffer, the uninitialized value (NaN) at
    the second slot's first use. Copied whole into y, they reach y[24:32],
    bit for bit as in interpret mode, event for event; copyir warns."""
    f, x = cut_pipeline(24, 16, buffers)
    with pytest.warns(CopyIRWarning) as caught:
        got = np.asarray(run(f, x))
    assert [str(w.message) for w in caught] == [
        errors.RUN_PADDING_OUTPUT.format(
            name="o", count=1024, size=4096, first="o[24, 0]"
        )
    ]
    np.testing.assert_array_equal(got[:24], x)
    if buffers == 1:
        np.testing.assert_array_equal(got[24:], x[8:16])
    else:
        assert np.isnan(got[24:]).all()
    agrees_with_interpret_mode(f, x)


def test_a_cut_that_is_no_whole_tile_fails_as_in_interpret_mode():
    """x (20, 128) in 8-row blocks: the last block's 4 rows round up to
    x[16:24], past the array: interpret mode's out-of-bounds read, and
    copyir's located error."""
    f, x = cut_pipeline(20, 8, 2)
    with pytest.raises(CopyIRError) as err:
        run(f, x)
    message = errors.CUT_BLOCK_PAST_END.format(
        bref="x", dim=0, start=16, end=20, tile=8, stop=24, extent=20
    )
    assert str(err.value).startswith(message)
    if INTERPRET_RUNS_EMIT_PIPELINE:
        comparison = compare(f, x)
        assert comparison.status == "agrees", comparison.report()
        assert all("interpret mode error" in line for line in comparison.report())


def test_a_cut_block_of_a_nested_pipelines_window_fails_as_in_interpret_mode():
    """The inner pipeline's operands are the outer one's 24-row windows, in
    VMEM: Pallas views them a whole 16-row block at a time
    (`BufferedRef.compute_slice`), so the second block, rows 16:32, reads
    past the window, interpret mode's out-of-bounds error and copyir's."""
    shape = (24, 256)

    def inner_body(x, o):
        o[...] = x[...] + 1.0

    def outer_body(outer_x, outer_o):
        inner = pl.BlockSpec((16, 128), lambda i: (i, 0))
        pltpu.emit_pipeline(inner_body, grid=(2,), in_specs=[inner], out_specs=[inner])(
            outer_x, outer_o
        )

    def kernel(x, o):
        outer = pl.BlockSpec((24, 128), lambda i: (0, i))
        pltpu.emit_pipeline(outer_body, grid=(2,), in_specs=[outer], out_specs=[outer])(
            x, o
        )

    f = hbm_kernel(kernel, 1, shape)
    (x,) = arrays(1, shape)
    with pytest.raises(CopyIRError) as err:
        run(f, x)
    message = errors.VIEWED_BLOCK_PAST_END.format(
        bref="outer_x", start=16, stop=32, dim=0, extent=24, space="vmem"
    )
    assert str(err.value).startswith(message)
    if INTERPRET_RUNS_EMIT_PIPELINE:
        comparison = compare(f, x)
        assert comparison.status == "agrees", comparison.report()
        assert all("interpret mode error" in line for line in comparison.report())


def test_8_byte_elements_are_refused_where_pallas_tiling_never_ends():
    """i64 (16, 128) in 8-row blocks, no cut: Pallas infers the tiling of
    every block it copies, and for a packing of 4 // 8 = 0 its
    `_get_tiling_factor` doubles 0 forever. copyir refuses the kernel;
    the comparison's interpret side reports the hang at once instead of
    hanging."""
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        shape = (16, 128)
        block = pl.BlockSpec((8, 128), lambda i: (i, 0))

        def body(x, o):
            o[...] = x[...]

        def kernel(x, o):
            pltpu.emit_pipeline(body, grid=(2,), in_specs=[block], out_specs=[block])(
                x, o
            )

        f = pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(shape, jnp.int64),
            in_specs=[ANY],
            out_specs=ANY,
        )
        x = jnp.arange(16 * 128, dtype=jnp.int64).reshape(shape)
        with pytest.raises(CopyIRError) as err:
            run(f, x)
        assert str(err.value).startswith(errors.NO_TILING_HANGS.format(itemsize=8))
        if INTERPRET_RUNS_EMIT_PIPELINE:
            for ours, theirs in compare(f, x).runs.values():
                assert ours.message.startswith(err.value.args[0][:40])
                assert (theirs.verdict, theirs.message) == ("hang", TILING_NEVER_ENDS)
    finally:
        jax.config.update("jax_enable_x64", old)


@pytest.mark.skipif(
    not INTERPRET_RUNS_EMIT_PIPELINE,
    reason="JAX 0.10.2's interpret mode cannot run emit_pipeline on the CPU",
)
def test_no_pipelining_copies_on_fresh_semaphores_in_interpret_mode():
    """`emit_pipeline(..., no_pipelining=True)` copies each block with
    `sync_copy`, whose `run_scoped` semaphore is fresh at every copy in
    interpret mode; copyir's synchronous copy reuses one per copy site: the
    same DMAs and waits, the known divergence `semaphore-allocation`."""

    def body(x, o):
        o[...] = x[...]

    def kernel(x, o):
        pltpu.emit_pipeline(
            body,
            grid=(3,),
            in_specs=[spec(index=lambda i: (i, 0))],
            out_specs=[spec(index=lambda i: (i, 0))],
            no_pipelining=True,
        )(x, o)

    f = hbm_kernel(kernel, 1, (24, 128))
    (x,) = arrays(1, (24, 128))
    comparison = compare(f, x)
    assert comparison.status == "differs (known)", comparison.report()
    assert {d.known.name for d in comparison.differences if d.known} == {
        "semaphore-allocation"
    }
    assert all(d.known for d in comparison.differences)
