"""Each construct the Pallas frontend maps imports to the IR that the
equivalent hand-written `.cpy` gives (printed text compared), and each
construct it does not map yet is one located `CopyIRError`.

The kernels follow jax's own Pallas TPU tests and docs
(`tests/pallas/tpu_pallas_async_test.py`, `docs/pallas/tpu/pipelining.md`).
"""

from __future__ import annotations

import inspect
import textwrap

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the Pallas frontend needs JAX")
jnp = pytest.importorskip("jax.numpy")
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import copyir  # noqa: E402
from copyir import errors  # noqa: E402
from copyir.pallas import import_kernels, run  # noqa: E402

ANY = pl.BlockSpec(memory_space=pl.ANY)


def imported_text(f, *args, **options) -> str:
    (kernel,) = import_kernels(f, *args, **options)
    return copyir.to_text(kernel.module, "cpy")


def written(text: str) -> str:
    """A hand-written kernel as the printer prints it."""
    return copyir.to_text(copyir.parse(textwrap.dedent(text)), "cpy")


def line_of(function, text: str) -> int:
    """The file line of the statement of `function` that contains `text`."""
    lines, first = inspect.getsourcelines(function)
    for k, line in enumerate(lines):
        if text in line:
            return first + k
    raise AssertionError(text)


def hbm_call(kernel, x, scratch, out_shape=None):
    return pl.pallas_call(
        kernel,
        out_shape=out_shape or jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[ANY],
        out_specs=ANY,
        scratch_shapes=scratch,
    )(x)


X = jnp.arange(16 * 128, dtype=jnp.float32).reshape(16, 128)


def test_static_dmas_with_every_indexer_form():
    def copy_kernel(x, y, buf, sems):
        pltpu.make_async_copy(x.at[0:8], buf.at[0], sems.at[0]).start()
        pltpu.make_async_copy(x.at[8:16, :], buf.at[1], sems.at[1]).start()
        pltpu.make_async_copy(x.at[0:8], buf.at[0], sems.at[0]).wait()
        pltpu.make_async_copy(x.at[8:16, :], buf.at[1], sems.at[1]).wait()
        pltpu.make_async_copy(buf.at[0], y.at[pl.ds(0, 8)], sems.at[0]).start()
        pltpu.make_async_copy(buf.at[0], y.at[pl.ds(0, 8)], sems.at[0]).wait()
        pltpu.make_async_copy(buf.at[1, 3], y.at[8], sems.at[1]).start(priority=1)
        pltpu.make_async_copy(buf.at[1, 3], y.at[8], sems.at[1]).wait()

    def f():
        scratch = [pltpu.VMEM((2, 8, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))]
        return hbm_call(copy_kernel, X, scratch)

    assert imported_text(f) == written(
        """
        kernel copy_kernel(x: f32[16, 128] @hbm, y: f32[16, 128] @hbm) {
          buf = alloc f32[2, 8, 128] @vmem
          sems = semaphore[2]
          copy_start x[0:8, :] -> buf[0, :, :], sems[0]
          copy_start x[8:16, :] -> buf[1, :, :], sems[1]
          copy_wait x[0:8, :] -> buf[0, :, :], sems[0]
          copy_wait x[8:16, :] -> buf[1, :, :], sems[1]
          copy_start buf[0, :, :] -> y[0:8, :], sems[0]
          copy_wait buf[0, :, :] -> y[0:8, :], sems[0]
          copy_start buf[1, 3, :] -> y[8, :], sems[1], priority=1
          copy_wait buf[1, 3, :] -> y[8, :], sems[1]
        }
        """
    )


def test_fori_loop_slots_and_when():
    """`fori_loop` (a `scan` whose index is a carry stepped by 1), `%` (a
    `jit` named `remainder`), `pl.when` (a `cond`) and `pl.ds` starts."""

    def double_buffer(x, y, buf, sems):
        pltpu.make_async_copy(x.at[pl.ds(0, 2)], buf.at[0], sems.at[0]).start()

        def body(i, carry):
            slot = i % 2

            @pl.when(i + 1 < 8)
            def _():
                nxt = pltpu.make_async_copy(
                    x.at[pl.ds(2 * (i + 1), 2)],
                    buf.at[(i + 1) % 2],
                    sems.at[(i + 1) % 2],
                )
                nxt.start()

            pltpu.make_async_copy(
                x.at[pl.ds(2 * i, 2)], buf.at[slot], sems.at[slot]
            ).wait()
            out = pltpu.make_async_copy(
                buf.at[slot], y.at[pl.ds(2 * i, 2)], sems.at[slot]
            )
            out.start()
            out.wait()
            return carry

        jax.lax.fori_loop(0, 8, body, 0)

    def f():
        scratch = [pltpu.VMEM((2, 2, 128), jnp.float32), pltpu.SemaphoreType.DMA((2,))]
        return hbm_call(double_buffer, X, scratch)

    assert imported_text(f) == written(
        """
        kernel double_buffer(x: f32[16, 128] @hbm, y: f32[16, 128] @hbm) {
          buf = alloc f32[2, 2, 128] @vmem
          sems = semaphore[2]
          copy_start x[0:2, :] -> buf[0, :, :], sems[0]
          for i in range(8) {
            when i <= 6 {
              copy_start x[ds(2 * i + 2, 2), :] -> buf[(i + 1) % 2, :, :], sems[(i + 1) % 2]
            }
            copy_wait x[ds(2 * i, 2), :] -> buf[i % 2, :, :], sems[i % 2]
            copy_start buf[i % 2, :, :] -> y[ds(2 * i, 2), :], sems[i % 2]
            copy_wait buf[i % 2, :, :] -> y[ds(2 * i, 2), :], sems[i % 2]
          }
        }
        """
    )
    for mode in ("eager", "on_wait", "random"):
        assert np.array_equal(np.asarray(run(f, mode=mode)), np.asarray(X))


def test_grid_with_block_specs_is_a_pipeline():
    """A `pallas_call` grid with `BlockSpec`s: Pallas' pipeline, the
    kernel's arguments its windows (`pallas_call.py`'s grid mapping)."""

    def scale(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0 + y_ref[...]

    x = jnp.arange(64 * 256, dtype=jnp.float32).reshape(64, 256)
    y = jnp.arange(64 * 256, dtype=jnp.float32).reshape(64, 256) % 7

    def f(x, y):
        return pl.pallas_call(
            scale,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(4, 2),
            in_specs=[
                pl.BlockSpec((16, 128), lambda i, j: (i, j)),
                pl.BlockSpec(
                    (16, 128), lambda i, j: (3 - i, j), pipeline_mode=pl.Buffered(3)
                ),
            ],
            out_specs=pl.BlockSpec((16, 128), lambda i, j: (i, j)),
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "arbitrary")
            ),
        )(x, y)

    assert imported_text(f, x, y) == written(
        """
        kernel scale(x_ref_hbm: f32[64, 256] @hbm, y_ref_hbm: f32[64, 256] @hbm,
                     o_ref_hbm: f32[64, 256] @hbm) {
          pipeline kernel_grid grid=(4, 2) dimension_semantics=(parallel, arbitrary)
              in  x_ref_hbm block=(16, 128) index=(i, j) -> (i, j)
              in  y_ref_hbm block=(16, 128) index=(i, j) -> (3 - i, j) buffers=3
              out o_ref_hbm block=(16, 128) index=(i, j) -> (i, j)
              (x_ref, y_ref, o_ref, i, j) {
            o_ref[...] = x_ref * 2.0 + y_ref
          }
        }
        """
    )
    flipped = np.asarray(y).reshape(4, 16, 256)[::-1].reshape(64, 256)
    expected = np.asarray(x) * 2.0 + flipped
    assert np.array_equal(np.asarray(run(f, x, y, mode="eager")), expected)


def test_any_grid_program_id_and_aliases():
    """A grid with every operand in `pl.ANY` is a `for` grid; `program_id`
    its indices, `num_programs` its sizes; an aliased output is its
    input's parameter (`input_output_aliases`)."""

    def bump(x, y, buf, sem):
        i = pl.program_id(0)
        rows = x.shape[0] // pl.num_programs(0)
        pltpu.make_async_copy(x.at[pl.ds(i * 4, 4)], buf, sem).start()
        pltpu.make_async_copy(x.at[pl.ds(i * 4, 4)], buf, sem).wait()
        buf[...] = buf[...] + 1.0
        pltpu.make_async_copy(buf, y.at[pl.ds(i * rows, 4)], sem).start()
        pltpu.make_async_copy(buf, y.at[pl.ds(i * rows, 4)], sem).wait()

    def f(x):
        return pl.pallas_call(
            bump,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(4,),
            in_specs=[ANY],
            out_specs=ANY,
            scratch_shapes=[pltpu.VMEM((4, 128), jnp.float32), pltpu.SemaphoreType.DMA],
            input_output_aliases={0: 0},
        )(x)

    assert imported_text(f, X) == written(
        """
        kernel bump(x: f32[16, 128] @hbm) {
          buf = alloc f32[4, 128] @vmem
          sem = semaphore
          for i in grid(4) {
            copy_start x[ds(4 * i, 4), :] -> buf, sem
            copy_wait x[ds(4 * i, 4), :] -> buf, sem
            buf[...] = buf + 1.0
            copy_start buf -> x[ds(4 * i, 4), :], sem
            copy_wait buf -> x[ds(4 * i, 4), :], sem
          }
        }
        """
    )
    assert np.array_equal(np.asarray(run(f, X)), np.asarray(X) + 1.0)


def test_emit_pipeline_primitive_is_a_pipeline():
    """`pltpu.emit_pipeline` traced as one equation
    (`jax_use_emit_pipeline_primitive`, `pipeline.py`)."""

    def inner(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    def outer(x_hbm, o_hbm):
        pltpu.emit_pipeline(
            inner,
            grid=(4, 2),
            in_specs=[pl.BlockSpec((4, 64), lambda i, j: (i, j))],
            out_specs=[pl.BlockSpec((4, 64), lambda i, j: (i, j))],
        )(x_hbm, o_hbm)

    def f():
        return pl.pallas_call(
            outer,
            out_shape=jax.ShapeDtypeStruct(X.shape, X.dtype),
            in_specs=[ANY],
            out_specs=ANY,
        )(X)

    with _flag():
        text = imported_text(f)
        result = run(f, mode="on_wait")
    assert text == written(
        """
        kernel outer(x_hbm: f32[16, 128] @hbm, o_hbm: f32[16, 128] @hbm) {
          pipeline grid=(4, 2)
              in  x_hbm block=(4, 64) index=(i, j) -> (i, j)
              out o_hbm block=(4, 64) index=(i, j) -> (i, j)
              (x_ref, o_ref, i, j) {
            o_ref[...] = x_ref * 2.0
          }
        }
        """
    )
    assert np.array_equal(np.asarray(result), np.asarray(X) * 2.0)


class _flag:
    """`jax_use_emit_pipeline_primitive` on for a block."""

    def __enter__(self):
        self.old = jax.config.jax_use_emit_pipeline_primitive
        jax.config.update("jax_use_emit_pipeline_primitive", True)

    def __exit__(self, *exc):
        jax.config.update("jax_use_emit_pipeline_primitive", self.old)


def unsupported_message(what: str, function, text: str) -> str:
    return errors.PALLAS_UNSUPPORTED.format(
        what=what, where=f" ({_shown(function)}:{line_of(function, text)})"
    )


def _shown(function) -> str:
    from copyir.pallas.jaxpr_source import shown

    return shown(inspect.getsourcefile(function))


def _vmem_call(kernel, scratch=()):
    def f():
        return hbm_call(kernel, X, [*scratch])

    return f


def test_exp_is_not_supported_yet_at_its_line():
    def kernel(x, y, buf, sem):
        buf[...] = jnp.exp(buf[...])

    f = _vmem_call(
        kernel, [pltpu.VMEM((16, 128), jnp.float32), pltpu.SemaphoreType.DMA]
    )
    with pytest.raises(copyir.CopyIRError) as caught:
        import_kernels(f)
    assert str(caught.value) == unsupported_message("`exp`", kernel, "buf[...] = jnp")
    assert caught.value.loc.line == line_of(kernel, "buf[...] = jnp")


def test_loop_carried_value_is_not_supported_yet():
    def kernel(x, y, buf, sem):
        def body(i, offset):
            pltpu.make_async_copy(x.at[pl.ds(offset, 2)], buf, sem).start()
            pltpu.make_async_copy(x.at[pl.ds(offset, 2)], buf, sem).wait()
            return offset + 2 * i

        jax.lax.fori_loop(0, 4, body, 0)

    f = _vmem_call(kernel, [pltpu.VMEM((2, 128), jnp.float32), pltpu.SemaphoreType.DMA])
    with pytest.raises(copyir.CopyIRError) as caught:
        import_kernels(f)
    assert str(caught.value) == unsupported_message(
        "a loop-carried index value", kernel, "jax.lax.fori_loop"
    )


def test_non_affine_index_names_the_expression():
    def kernel(x, y, buf, sem):
        def body(i, carry):
            pltpu.make_async_copy(x.at[pl.ds(i * i, 2)], buf, sem).start()
            pltpu.make_async_copy(x.at[pl.ds(i * i, 2)], buf, sem).wait()
            return carry

        jax.lax.fori_loop(0, 3, body, 0)

    f = _vmem_call(kernel, [pltpu.VMEM((2, 128), jnp.float32), pltpu.SemaphoreType.DMA])
    with pytest.raises(copyir.CopyIRError) as caught:
        import_kernels(f)
    assert str(caught.value) == errors.PALLAS_NOT_AFFINE.format(expr="i * i")
    assert caught.value.loc.line == line_of(kernel, "start()")


def test_regular_semaphores_are_not_supported_yet():
    def kernel(x, y, sem):
        pl.semaphore_signal(sem, 1)
        pl.semaphore_wait(sem, 1)

    f = _vmem_call(kernel, [pltpu.SemaphoreType.REGULAR])
    with pytest.raises(copyir.CopyIRError) as caught:
        import_kernels(f)
    assert str(caught.value) == errors.PALLAS_UNSUPPORTED.format(
        what="a regular (non-DMA) semaphore",
        where=f" ({_shown(kernel)}:{caught.value.loc.line})",
    )


def test_index_read_from_memory_is_not_supported_yet():
    def kernel(x, y, idx, buf, sem):
        k = idx[0]
        pltpu.make_async_copy(x.at[pl.ds(k, 2)], buf, sem).start()
        pltpu.make_async_copy(x.at[pl.ds(k, 2)], buf, sem).wait()

    def f():
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(X.shape, X.dtype),
            in_specs=[ANY],
            out_specs=ANY,
            scratch_shapes=[
                pltpu.SMEM((1,), jnp.int32),
                pltpu.VMEM((2, 128), jnp.float32),
                pltpu.SemaphoreType.DMA,
            ],
        )(X)

    with pytest.raises(copyir.CopyIRError) as caught:
        import_kernels(f)
    assert str(caught.value) == unsupported_message(
        "an index read from memory", kernel, ".start()"
    )


def test_race_is_located_at_the_kernel_line_with_a_note_at_the_dma():
    """What interpret mode misses (`detect_races` sees no race between a
    DMA and a computation in flight in `on_wait` mode): copyir reports it
    at the statement, in every mode."""

    def kernel(x, y, buf, sem):
        copy = pltpu.make_async_copy(x, buf, sem)
        copy.start()
        buf[...] = buf[...] + 1.0
        copy.wait()

    f = _vmem_call(
        kernel, [pltpu.VMEM((16, 128), jnp.float32), pltpu.SemaphoreType.DMA]
    )
    for mode in ("eager", "on_wait", "random"):
        with pytest.raises(copyir.CopyIRError) as caught:
            run(f, mode=mode)
        err = caught.value
        assert err.loc.line == line_of(kernel, "buf[...] = buf")
        assert err.loc.col == 9
        assert str(err).startswith("Race: ")
        (note,) = err.notes
        assert note.loc.line == line_of(kernel, "copy.start()")


def test_a_longer_loop_gives_a_stream_no_larger():
    """A `fori_loop` stays one loop: 200,000 steps lower to the stream of
    2,000 (the issue's bound on the imported stream)."""

    def streamed(steps: int) -> int:
        def kernel(x, y, buf, sem):
            def body(i, carry):
                row = i % 16
                pltpu.make_async_copy(x.at[pl.ds(row, 1)], buf, sem).start()
                pltpu.make_async_copy(x.at[pl.ds(row, 1)], buf, sem).wait()
                pltpu.make_async_copy(buf, y.at[pl.ds(row, 1)], sem).start()
                pltpu.make_async_copy(buf, y.at[pl.ds(row, 1)], sem).wait()
                return carry

            jax.lax.fori_loop(0, steps, body, 0)

        f = _vmem_call(
            kernel, [pltpu.VMEM((1, 128), jnp.float32), pltpu.SemaphoreType.DMA]
        )
        (imported,) = import_kernels(f)
        text = copyir.dma_text(copyir.lower(imported.module), origins=False)
        return len(text.splitlines())  # instructions, one per line

    assert streamed(200_000) == streamed(2_000)


def test_while_loop_with_a_static_trip_count_and_floor_divide():
    """`fori_loop(p, p + 3)` on a grid index is a `while` (JAX cannot count
    it); its trip count, 3, is static here. `//` is a `jit` named
    `floor_divide`."""

    def windows(x, y, buf, sem):
        p = pl.program_id(0)

        def body(i, carry):
            rows = pl.ds(4 * (i // 3), 4)
            pltpu.make_async_copy(x.at[rows], buf, sem).start()
            pltpu.make_async_copy(x.at[rows], buf, sem).wait()
            pltpu.make_async_copy(buf, y.at[rows], sem).start()
            pltpu.make_async_copy(buf, y.at[rows], sem).wait()
            return carry

        jax.lax.fori_loop(3 * p, 3 * p + 3, body, 0)

    def f():
        return pl.pallas_call(
            windows,
            out_shape=jax.ShapeDtypeStruct(X.shape, X.dtype),
            grid=(4,),
            in_specs=[ANY],
            out_specs=ANY,
            scratch_shapes=[pltpu.VMEM((4, 128), jnp.float32), pltpu.SemaphoreType.DMA],
        )(X)

    assert imported_text(f) == written(
        """
        kernel windows(x: f32[16, 128] @hbm, y: f32[16, 128] @hbm) {
          buf = alloc f32[4, 128] @vmem
          sem = semaphore
          for i in grid(4) {
            for j in range(3) {
              copy_start x[ds(4 * ((3 * i + j) // 3), 4), :] -> buf, sem
              copy_wait x[ds(4 * ((3 * i + j) // 3), 4), :] -> buf, sem
              copy_start buf -> y[ds(4 * ((3 * i + j) // 3), 4), :], sem
              copy_wait buf -> y[ds(4 * ((3 * i + j) // 3), 4), :], sem
            }
          }
        }
        """
    )
    assert np.array_equal(np.asarray(run(f)), np.asarray(X))


def test_scalar_prefetch_is_copied_to_smem_first():
    """`PrefetchScalarGridSpec`: the scalar operands reach SMEM before the
    kernel, as Pallas copies them (`pallas_call.py`)."""

    def gather(idx, x, y, buf, sem):
        pltpu.make_async_copy(x, buf, sem).start()
        pltpu.make_async_copy(x, buf, sem).wait()
        pltpu.make_async_copy(buf, y, sem).start()
        pltpu.make_async_copy(buf, y, sem).wait()

    idx = jnp.arange(4, dtype=jnp.int32)

    def f(idx, x):
        return pl.pallas_call(
            gather,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1,
                grid=(1,),
                in_specs=[ANY],
                out_specs=ANY,
                scratch_shapes=[
                    pltpu.VMEM((16, 128), jnp.float32),
                    pltpu.SemaphoreType.DMA,
                ],
            ),
        )(idx, x)

    assert imported_text(f, idx, X) == written(
        """
        kernel gather(idx: i32[4] @hbm, x: f32[16, 128] @hbm, y: f32[16, 128] @hbm) {
          idx_smem = alloc i32[4] @smem
          sync_copy idx -> idx_smem
          buf = alloc f32[16, 128] @vmem
          sem = semaphore
          for i in grid(1) {
            copy_start x -> buf, sem
            copy_wait x -> buf, sem
            copy_start buf -> y, sem
            copy_wait buf -> y, sem
          }
        }
        """
    )
    (kernel,) = import_kernels(f, idx, X)
    assert np.array_equal(kernel.inputs["idx"], np.asarray(idx))
    assert np.array_equal(np.asarray(run(f, idx, X)), np.asarray(X))


def test_hbm_scratch_is_not_supported_yet():
    def kernel(x, y, scratch, sem):
        pltpu.make_async_copy(x, scratch, sem).start()
        pltpu.make_async_copy(x, scratch, sem).wait()

    f = _vmem_call(kernel, [pltpu.HBM((16, 128), jnp.float32), pltpu.SemaphoreType.DMA])
    with pytest.raises(copyir.CopyIRError) as caught:
        import_kernels(f)
    assert str(caught.value).startswith(
        errors.PALLAS_UNSUPPORTED.format(what="scratch in hbm memory", where="")
    )


def test_opaque_compute_imports_what_copyir_cannot_compute():
    """With `opaque_compute=True`, `exp` becomes an opaque computation:
    its reads and writes are still checked, and an output that ends up
    holding its poison is reported at its line."""

    def kernel(x, y, buf, sem):
        pltpu.make_async_copy(x, buf, sem).start()
        pltpu.make_async_copy(x, buf, sem).wait()
        buf[...] = jnp.exp(buf[...]) * 2.0
        pltpu.make_async_copy(buf, y, sem).start()
        pltpu.make_async_copy(buf, y, sem).wait()

    f = _vmem_call(
        kernel, [pltpu.VMEM((16, 128), jnp.float32), pltpu.SemaphoreType.DMA]
    )
    assert imported_text(f, opaque_compute=True) == written(
        """
        kernel kernel_(x: f32[16, 128] @hbm, y: f32[16, 128] @hbm) {
          buf = alloc f32[16, 128] @vmem
          sem = semaphore
          copy_start x -> buf, sem
          copy_wait x -> buf, sem
          opaque "exp" (buf) -> (buf)
          copy_start buf -> y, sem
          copy_wait buf -> y, sem
        }
        """
    )
    with pytest.warns(copyir.CopyIRWarning) as caught:
        run(f, opaque_compute=True)
    (warning,) = caught
    assert str(warning.message).startswith(
        'Output y holds poison that opaque computation "exp" wrote'
    )
    assert warning.message.loc.line == line_of(kernel, "jnp.exp")


def test_sync_copy_of_a_pytree_and_in_a_loop_is_a_scope():
    """`pltpu.sync_copy` is a `run_scoped` holding a fresh DMA semaphore
    around its starts and waits (`helpers.py`): a `scope`, also inside a
    `fori_loop`."""

    def trees(a, b, ya, yb, va, vb):
        pltpu.sync_copy({"p": a, "q": b}, {"p": va, "q": vb})

        def body(i, carry):
            pltpu.sync_copy(va.at[pl.ds(i, 1)], ya.at[pl.ds(i, 1)])
            return carry

        jax.lax.fori_loop(0, 16, body, 0)
        pltpu.sync_copy(vb, yb)

    b = jnp.arange(8 * 128, dtype=jnp.int32).reshape(8, 128)

    def f(a, b):
        return pl.pallas_call(
            trees,
            out_shape=(
                jax.ShapeDtypeStruct(a.shape, a.dtype),
                jax.ShapeDtypeStruct(b.shape, b.dtype),
            ),
            in_specs=[ANY, ANY],
            out_specs=(ANY, ANY),
            scratch_shapes=[pltpu.VMEM(a.shape, a.dtype), pltpu.VMEM(b.shape, b.dtype)],
        )(a, b)

    assert imported_text(f, X, b) == written(
        """
        kernel trees(a: f32[16, 128] @hbm, b: i32[8, 128] @hbm,
                     ya: f32[16, 128] @hbm, yb: i32[8, 128] @hbm) {
          va = alloc f32[16, 128] @vmem
          vb = alloc i32[8, 128] @vmem
          scope {
            sem = semaphore
            copy_start a -> va, sem
            copy_start b -> vb, sem
            copy_wait a -> va, sem
            copy_wait b -> vb, sem
          }
          for i in range(16) {
            scope {
              sem_1 = semaphore
              copy_start va[ds(i, 1), :] -> ya[ds(i, 1), :], sem_1
              copy_wait va[ds(i, 1), :] -> ya[ds(i, 1), :], sem_1
            }
          }
          scope {
            sem_2 = semaphore
            copy_start vb -> yb, sem_2
            copy_wait vb -> yb, sem_2
          }
        }
        """
    )
    out_a, out_b = run(f, X, b, mode="on_wait")
    assert np.array_equal(np.asarray(out_a), np.asarray(X))
    assert np.array_equal(np.asarray(out_b), np.asarray(b))


def test_a_dma_left_in_flight_at_the_end_of_run_scoped_is_named():
    """Pallas says nothing when a `run_scoped` body ends with its DMA in
    flight; copyir names the DMA (`jax`'s `test_hbm_hbm_grid_dma` takes a
    fresh semaphore per grid step, waited inside)."""

    def leaky(x, y):
        def scoped(sem):
            pltpu.make_async_copy(
                x.at[pl.ds(4 * pl.program_id(0), 4)],
                y.at[pl.ds(4 * pl.program_id(0), 4)],
                sem,
            ).start()

        pl.run_scoped(scoped, pltpu.SemaphoreType.DMA)

    def f():
        return pl.pallas_call(
            leaky,
            out_shape=jax.ShapeDtypeStruct(X.shape, X.dtype),
            grid=(4,),
            in_specs=[ANY],
            out_specs=ANY,
        )(X)

    with pytest.raises(copyir.CopyIRError) as caught:
        run(f, mode="eager")
    err = caught.value
    message = errors.RUN_SCOPE_IN_FLIGHT.format(
        bytes=4 * 128 * 4, sem="sem", name="sem"
    )
    assert str(err) == message + ", at i = 0"  # the grid point
    assert err.loc.line == line_of(leaky, ".start()")


def _fill_then(store):
    """A kernel that fetches x into buf, then runs `store(buf)` at its
    own line."""

    def kernel(x, y, buf, sem):
        pltpu.sync_copy(x, buf)
        store(buf)
        pltpu.sync_copy(buf, y)

    return kernel


@pytest.mark.parametrize(
    ("store", "what"),
    [
        (
            lambda b: b.__setitem__((slice(0, 8), slice(0, 8)), b[0:8, 0:8].T),
            "`transpose`",
        ),
        (
            lambda b: b.__setitem__(
                (slice(0, 1), slice(None)), jnp.sum(b[...], axis=0, keepdims=True)
            ),
            "`reduce_sum`, `broadcast_in_dim`",
        ),
        (
            lambda b: b.__setitem__(Ellipsis, jnp.where(b[...] > 3.0, b[...], 0.0)),
            "`gt`, `select_n`",
        ),
        (
            lambda b: b.__setitem__(
                Ellipsis, b[...].astype(jnp.int32).astype(jnp.float32)
            ),
            "`convert_element_type`",
        ),
    ],
    ids=["transpose", "reduce", "where", "cast"],
)
def test_vector_primitives_without_a_scalar_op_are_named(store, what):
    kernel = _fill_then(store)
    f = _vmem_call(
        kernel, [pltpu.VMEM((16, 128), jnp.float32), pltpu.SemaphoreType.DMA]
    )
    with pytest.raises(copyir.CopyIRError) as caught:
        import_kernels(f)
    line = caught.value.loc.line
    assert str(caught.value) == errors.PALLAS_UNSUPPORTED.format(
        what=what, where=f" ({_shown(kernel)}:{line})"
    )
    first = store.__code__.co_firstlineno  # the store's own line(s)
    assert first <= line <= first + len(inspect.getsource(store).splitlines())


def test_chained_at_indexers_are_views_of_views():
    """`ref.at[a].at[b]`: one view per `.at`, on both sides of a store."""

    def chained(x, y, buf, sem):
        pltpu.sync_copy(x, buf)
        buf.at[0:8].at[1][...] = buf.at[8:16].at[2][...]
        pltpu.sync_copy(buf, y)

    f = _vmem_call(
        chained, [pltpu.VMEM((16, 128), jnp.float32), pltpu.SemaphoreType.DMA]
    )
    expected = np.asarray(X).copy()
    expected[1] = expected[10]
    assert np.array_equal(np.asarray(run(f, mode="eager")), expected)


def test_a_kernel_inside_jit_runs_on_copyir_and_the_rest_on_jax():
    """`jax.jit` around the call and JAX operations around the kernel:
    the kernel on copyir, the rest evaluated by JAX."""

    def bump(x, y, buf, sem):
        pltpu.sync_copy(x, buf)
        buf[...] = buf[...] + 1.0
        pltpu.sync_copy(buf, y)

    call = pl.pallas_call(
        bump,
        out_shape=jax.ShapeDtypeStruct(X.shape, X.dtype),
        in_specs=[ANY],
        out_specs=ANY,
        scratch_shapes=[pltpu.VMEM((16, 128), jnp.float32), pltpu.SemaphoreType.DMA],
    )

    @jax.jit
    def f(x):
        return call(call(x * 2.0)).sum()

    assert float(run(f, X, mode="on_wait")) == float((np.asarray(X) * 2.0 + 2.0).sum())
    first, second = import_kernels(f, X)
    assert (first.name, second.name) == ("bump", "bump_1")
    assert np.array_equal(second.inputs["x"], np.asarray(X) * 2.0 + 1.0)


def test_vmap_of_a_kernel_is_not_supported_yet():
    def bump(x, y, buf, sem):
        pltpu.sync_copy(x, buf)
        pltpu.sync_copy(buf, y)

    call = pl.pallas_call(
        bump,
        out_shape=jax.ShapeDtypeStruct(X.shape, X.dtype),
        in_specs=[ANY],
        out_specs=ANY,
        scratch_shapes=[pltpu.VMEM((16, 128), jnp.float32), pltpu.SemaphoreType.DMA],
    )
    with pytest.raises(copyir.CopyIRError) as caught:
        import_kernels(jax.vmap(call), jnp.stack([X, X]))
    assert str(caught.value) == errors.PALLAS_UNSUPPORTED.format(
        what="a `pallas_call` under `jax.vmap`", where=""
    )


def test_add_dmas_squeezed_blocks_and_else_branches():
    """`add=True` on a start, a `lax.cond` whose two branches both copy
    (the else under the negated condition), and a squeezed block
    dimension (`None`), each as the hand-written `.cpy` writes it."""

    def accumulate(x, y, acc, sem):
        pltpu.sync_copy(x.at[0], acc)

        def body(i, carry):
            def even():
                pltpu.make_async_copy(x.at[i], acc, sem).start(priority=0)
                pltpu.make_async_copy(x.at[i], acc, sem).wait()

            def odd():
                c = pltpu.make_async_copy(x.at[i], acc, sem)
                c.start(add=True)
                c.wait()

            jax.lax.cond(i % 2 == 0, even, odd)
            return carry

        jax.lax.fori_loop(1, 16, body, 0)
        pltpu.sync_copy(acc, y.at[0])

    def f():
        return pl.pallas_call(
            accumulate,
            out_shape=jax.ShapeDtypeStruct(X.shape, X.dtype),
            in_specs=[ANY],
            out_specs=ANY,
            scratch_shapes=[pltpu.VMEM((128,), jnp.float32), pltpu.SemaphoreType.DMA],
        )(X)

    assert imported_text(f) == written(
        """
        kernel accumulate(x: f32[16, 128] @hbm, y: f32[16, 128] @hbm) {
          acc = alloc f32[128] @vmem
          sem = semaphore
          scope {
            sem_1 = semaphore
            copy_start x[0, :] -> acc, sem_1
            copy_wait x[0, :] -> acc, sem_1
          }
          for i in range(15) {
            when (i + 1) % 2 == 0 {
              copy_start x[i + 1, :] -> acc, sem
              copy_wait x[i + 1, :] -> acc, sem
            }
            when (i + 1) % 2 >= 1 or (i + 1) % 2 <= -1 {
              copy_start x[i + 1, :] -> acc, sem, add
              copy_wait x[i + 1, :] -> acc, sem
            }
          }
          scope {
            sem_2 = semaphore
            copy_start acc -> y[0, :], sem_2
            copy_wait acc -> y[0, :], sem_2
          }
        }
        """
    )

    with pytest.warns(copyir.CopyIRWarning, match="written only in part"):
        out = np.asarray(run(f, mode="on_wait"))  # y's row 0 only
    rows = np.asarray(X)
    assert np.array_equal(out[0], rows[14] + rows[15])  # an even step, then add

    def squeezed_rows(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    def g():
        return pl.pallas_call(
            squeezed_rows,
            out_shape=jax.ShapeDtypeStruct(X.shape, X.dtype),
            grid=(16,),
            in_specs=[pl.BlockSpec((None, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((None, 128), lambda i: (15 - i, 0)),
        )(X)

    assert imported_text(g) == written(
        """
        kernel squeezed_rows(x_ref_hbm: f32[16, 128] @hbm, o_ref_hbm: f32[16, 128] @hbm) {
          pipeline kernel_grid grid=(16,)
              in  x_ref_hbm block=(None, 128) index=(i) -> (i, 0)
              out o_ref_hbm block=(None, 128) index=(i) -> (15 - i, 0)
              (x_ref, o_ref, i) {
            o_ref[...] = x_ref + 1.0
          }
        }
        """
    )
    assert np.array_equal(np.asarray(run(g)), np.asarray(X)[::-1] + 1.0)


def test_a_condition_past_the_set_limit_is_one_error():
    """Nine `!=` under one `pl.when` are 512 conjunctions in or-of-ands
    form, past the 256 a `when` takes."""

    def kernel(x, y, sem):
        def body(i, carry):
            test = i != 0
            for c in range(1, 9):
                test = test & (i != c)

            @pl.when(test)
            def _():
                pltpu.make_async_copy(x.at[pl.ds(i, 1)], y.at[pl.ds(i, 1)], sem).start()
                pltpu.make_async_copy(x.at[pl.ds(i, 1)], y.at[pl.ds(i, 1)], sem).wait()

            return carry

        jax.lax.fori_loop(0, 16, body, 0)

    f = _vmem_call(kernel, [pltpu.SemaphoreType.DMA])
    with pytest.raises(copyir.CopyIRError) as caught:
        import_kernels(f)
    assert str(caught.value) == errors.PALLAS_CONDITION_TOO_LARGE.format(
        count=512, limit=256
    )
    assert caught.value.loc.line == line_of(kernel, "test = test & (i != c)")


def test_a_kernel_inside_a_scan_of_the_caller_runs_but_does_not_import():
    """`run` lowers the call once and runs it at every iteration of the
    caller's loop; `import_kernels`, which lists kernels with the inputs
    they received, cannot give one per iteration yet."""

    def bump(x, y, buf, sem):
        pltpu.sync_copy(x, buf)
        buf[...] = buf[...] + 1.0
        pltpu.sync_copy(buf, y)

    call = pl.pallas_call(
        bump,
        out_shape=jax.ShapeDtypeStruct(X.shape, X.dtype),
        in_specs=[ANY],
        out_specs=ANY,
        scratch_shapes=[pltpu.VMEM((16, 128), jnp.float32), pltpu.SemaphoreType.DMA],
    )

    def f(x):
        return jax.lax.fori_loop(0, 3, lambda i, v: call(v), x)

    assert np.array_equal(run(f, X, mode="on_wait"), np.asarray(X) + 3.0)
    with pytest.raises(copyir.CopyIRError) as caught:
        import_kernels(f, X)
    assert str(caught.value) == errors.PALLAS_CALL_INSIDE.format(primitive="scan")


def test_multiple_of_is_the_value_itself():
    """`pl.multiple_of(i * 8, 8)` (the pipelining doc's dynamic block
    example) imports as `i * 8`: a hint to Mosaic, no operation."""

    def kernel(hinted: bool):
        def copy_rows(x, y, buf, sem):
            def body(i, carry):
                start = pl.multiple_of(i * 8, 8) if hinted else i * 8
                pltpu.sync_copy(x.at[pl.ds(start, 8)], buf.at[pl.ds(0, 8)])
                pltpu.sync_copy(buf.at[pl.ds(0, 8)], y.at[pl.ds(start, 8)])
                return carry

            jax.lax.fori_loop(0, 2, body, 0)

        return copy_rows

    scratch = [pltpu.VMEM((16, 128), jnp.float32), pltpu.SemaphoreType.DMA]
    with_hint = imported_text(lambda: hbm_call(kernel(True), X, scratch))
    assert with_hint == imported_text(lambda: hbm_call(kernel(False), X, scratch))
    out = run(lambda: hbm_call(kernel(True), X, scratch), mode="on_wait")
    np.testing.assert_array_equal(out, X)


def test_what_the_corpus_found_is_not_supported_yet_not_a_crash():
    """Kernels of jax's own tests (`benchmarks/pallas_corpus.py` found them
    crashing the import): a float8 operand (`tpu_pallas_test.py`'s dtype
    tests), `jnp.unstack` (`test_float32_unstack`: a jit of `split`, a
    primitive of several results) and `prng_seed` (`tpu_pallas_random_test.py`), which
    JAX cannot evaluate outside a kernel."""

    def copy(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def unstack(x_ref, o1, o2):
        a, b = jnp.unstack(x_ref[...], axis=0)
        o1[...] = a
        o2[...] = b

    def seeded(o_ref):
        pltpu.prng_seed(0)
        o_ref[...] = jnp.zeros_like(o_ref)

    f8 = jnp.zeros((8, 128), jnp.float8_e4m3fn)
    two = jnp.zeros((2, 128), jnp.float32)
    row = jax.ShapeDtypeStruct((128,), jnp.float32)
    cases = [
        (lambda: pl.pallas_call(copy, out_shape=f8)(f8), ["the dtype float8_e4m3fn"]),
        (
            lambda: pl.pallas_call(unstack, out_shape=(row, row))(two),
            ["`unstack`", "`split`"],
        ),
        (lambda: pl.pallas_call(seeded, out_shape=two)(), ["`prng_seed`"]),
    ]
    for f, whats in cases:
        with pytest.raises(copyir.CopyIRError) as caught:
            run(f, mode="eager")
        message = str(caught.value)
        assert any(message.startswith(f"{w} is not supported yet") for w in whats)


def test_minimum_and_maximum_of_indices_import_as_min_and_max():
    """`jnp.minimum`/`jnp.maximum` (lax `min`/`max`) of index values, as
    kernels clamp their last block: a named `min` or `max` index each,
    which later arithmetic (`* 6`, `- 4`) and another max take as a name."""

    def clamped(x, y, buf, sem):
        def body(i, carry):
            start = jnp.minimum(i * 6, 10)
            c = pltpu.make_async_copy(x.at[pl.ds(start, 6)], buf.at[pl.ds(0, 6)], sem)
            c.start()
            c.wait()
            last = jnp.maximum(jnp.minimum(i, 1) * 6, start - 4)
            c = pltpu.make_async_copy(buf.at[pl.ds(0, 6)], y.at[pl.ds(last, 6)], sem)
            c.start()
            c.wait()
            return carry

        jax.lax.fori_loop(0, 3, body, 0)

    def f():
        scratch = [pltpu.VMEM((16, 128), jnp.float32), pltpu.SemaphoreType.DMA]
        return hbm_call(clamped, X, scratch)

    assert imported_text(f) == written(
        """
        kernel clamped(x: f32[16, 128] @hbm, y: f32[16, 128] @hbm) {
          buf = alloc f32[16, 128] @vmem
          sem = semaphore
          for i in range(3) {
            v0 = min(6 * i, 10)
            copy_start x[ds(v0, 6), :] -> buf[0:6, :], sem
            copy_wait x[ds(v0, 6), :] -> buf[0:6, :], sem
            v5 = min(i, 1)
            v6 = max(6 * v5, v0 - 4)
            copy_start buf[0:6, :] -> y[ds(v6, 6), :], sem
            copy_wait buf[0:6, :] -> y[ds(v6, 6), :], sem
          }
        }
        """
    )


def test_minimum_in_an_index_map_is_not_supported_yet():
    def copy(x_ref, y_ref):
        y_ref[...] = x_ref[...]

    def f(x):
        return pl.pallas_call(
            copy,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (jnp.minimum(i, 1), 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        )(x)

    with pytest.raises(copyir.CopyIRError) as caught:
        import_kernels(f, X)
    line = line_of(f, "jnp.minimum")
    assert caught.value.loc.line == line
    assert str(caught.value) == errors.PALLAS_UNSUPPORTED.format(
        what="`jnp.minimum` in an index map", where=f" ({_shown(f)}:{line})"
    )
