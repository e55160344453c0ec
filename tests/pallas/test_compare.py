"""`copyir.pallas.compare`: copyir against Pallas' TPU interpret mode, with
each known divergence met by a kernel that shows it, and a difference no
entry explains reported as unclassified.

Interpret mode is jax's `interpret_pallas_call` with
`InterpretParams(dma_execution_mode=..., detect_races=True)`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the Pallas frontend needs JAX")
jnp = pytest.importorskip("jax.numpy")
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

from copyir import errors  # noqa: E402
from copyir.pallas import compare as compare_module  # noqa: E402
from copyir.pallas.compare import compare  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "pallas"))
import clamped_blocks  # noqa: E402
import double_buffer  # noqa: E402
import grid_blockspec  # noqa: E402
import race  # noqa: E402
import sync_copy_tree  # noqa: E402
from pallas_calls import ANY, X, hbm_call  # noqa: E402


def known(comparison) -> set[str]:
    return {d.known.name for d in comparison.differences if d.known}


@pytest.mark.parametrize(
    "example", [double_buffer, sync_copy_tree, grid_blockspec, race, clamped_blocks]
)
def test_the_examples_agree_in_both_modes(example):
    comparison = compare(example.main)
    assert comparison.status == "agrees", comparison.report()
    assert list(comparison.runs) == ["eager", "on_wait"]
    ours, theirs = comparison.runs["eager"]
    assert ours.verdict == theirs.verdict
    if ours.verdict == "ok" and not ours.grid_copies:
        assert ours.events and ours.events == theirs.events


def test_a_schedule_is_compared_event_for_event():
    """Two kernels' events agree only up to renaming of buffers and
    semaphores; a reordered wait is a schedule difference, never known
    (emit_pipeline's schedule is copyir's since issue 19)."""
    comparison = compare(double_buffer.main, modes=["eager"])
    ours, theirs = comparison.runs["eager"]
    assert ours.events[0][0] == "start" and ours.events[0][1][0] == "hbm0"
    evidence = compare_module.Evidence("eager", ours, theirs)
    assert compare_module._differences(evidence) == []
    swapped = [*ours.events]
    swapped[1], swapped[2] = swapped[2], swapped[1]
    moved = compare_module.CopyIRRun("ok", ours.outputs, swapped, "")
    (difference,) = compare_module._differences(
        compare_module.Evidence("eager", moved, theirs)
    )
    assert difference.kind == "schedule"
    assert difference.known is None


def schedule_difference(ours: list, theirs: list) -> str | None:
    """The known divergence that explains two runs' one difference, their
    events (outputs and verdicts equal), or None."""
    outputs = [np.zeros(4)]
    (found,) = compare_module._differences(
        compare_module.Evidence(
            "eager",
            compare_module.CopyIRRun("ok", outputs, ours, ""),
            compare_module.CopyIRRun("ok", outputs, theirs, ""),
        )
    )
    return found.known and found.known.name


def test_a_window_laid_out_otherwise_is_known_only_with_the_same_dmas():
    """`window-layout`: a trivially windowed operand's window has no slot
    dimension in Pallas (`BufferedRef.create`); copyir's has one. Only the
    VMEM coordinates may differ."""
    ours = [
        (
            "start",
            ("hbm0", ((0, 8), (0, 128))),
            ("vmem1", ((0, 1), (0, 8), (0, 128))),
            "s0",
        ),
        ("wait", "s0", 4096),
    ]
    theirs = [
        ("start", ("hbm0", ((0, 8), (0, 128))), ("vmem1", ((0, 8), (0, 128))), "s0"),
        ("wait", "s0", 4096),
    ]

    assert schedule_difference(ours, theirs) == "window-layout"
    elsewhere = [(*ours[0][:1], ("hbm0", ((8, 16), (0, 128))), *ours[0][2:]), ours[1]]
    assert schedule_difference(elsewhere, theirs) is None


def test_semaphores_allocated_otherwise_are_known_only_with_the_same_pairs():
    """`semaphore-allocation`: Pallas' `sync_copy` takes a fresh semaphore at
    every copy (`run_scoped`), copyir's window copy one per copy site. A
    wait tied to another start than on the other side is not it."""

    def copy(rows: tuple[int, int], sem: str) -> tuple:
        return ("start", ("hbm0", (rows, (0, 128))), ("vmem1", ((0, 8), (0, 128))), sem)

    theirs = [
        copy((0, 8), "s0"),
        ("wait", "s0", 4096),
        copy((8, 16), "s1"),
        ("wait", "s1", 4096),
    ]

    reused = [copy((0, 8), "s0"), ("wait", "s0", 4096)]
    reused += [copy((8, 16), "s0"), ("wait", "s0", 4096)]
    assert schedule_difference(reused, theirs) == "semaphore-allocation"
    # Both in flight on one semaphore: the first wait is tied to the second
    # start here, to the first there.
    crossed = [copy((0, 8), "s0"), copy((8, 16), "s0")]
    crossed += [("wait", "s0", 4096), ("wait", "s0", 4096)]
    theirs[1:3] = [theirs[2], theirs[1]]
    assert schedule_difference(crossed, theirs) is None


def test_a_write_write_race_is_known_only_when_interpret_mode_shows_none():
    """`write-write-race`: two DMAs in flight write one region; interpret
    mode says ok with the same outputs in both its modes. A read-write race,
    or outputs that differ between its modes, is not it."""
    outputs = [np.zeros(4)]
    race = (
        "Race: this DMA writes o[0:8, 0:128] while the DMA started at k.py:3:5 "
        "is in flight and writes it"
    )

    def known_as(message, their_outputs=outputs):
        ours = compare_module.CopyIRRun("race", None, [], message)
        theirs = compare_module.CopyIRRun("ok", outputs, [], "")
        other = compare_module.CopyIRRun("ok", their_outputs, [], "")
        evidence = compare_module.Evidence("eager", ours, theirs, other)
        (found,) = compare_module._differences(evidence)
        return found.known and found.known.name

    assert known_as(race) == "write-write-race"
    reading = race.replace("this DMA writes", "this DMA reads")
    assert known_as(reading) is None
    assert known_as(race, [np.ones(4)]) == "race-missed-by-interpret-mode"


def accumulate_kernel(x, y, buf, sem):
    """y = x, then x added to y by a DMA (`add=True`): 2x on copyir."""
    pltpu.sync_copy(x, y)
    pltpu.sync_copy(x, buf)
    copy = pltpu.make_async_copy(buf, y, sem)
    copy.start(add=True)
    copy.wait()


def test_add_is_ignored_by_interpret_mode():
    comparison = compare(lambda: hbm_call(accumulate_kernel)(X))
    assert comparison.status == "differs (known)", comparison.report()
    assert known(comparison) == {"add-ignored"}
    ours, theirs = comparison.runs["eager"]
    np.testing.assert_array_equal(ours.outputs[0], 2 * np.asarray(X))
    np.testing.assert_array_equal(theirs.outputs[0], np.asarray(X))


def test_a_read_of_memory_nobody_wrote():
    def kernel(x, y, buf, sem):
        pltpu.sync_copy(buf, y)  # buf was never written

    comparison = compare(lambda: hbm_call(kernel)(X))
    assert known(comparison) == {"uninitialized-read"}, comparison.report()
    assert comparison.runs["on_wait"][1].verdict == "ok"


def test_a_dma_never_waited():
    def kernel(x, y, buf, sem):
        pltpu.sync_copy(x, y)
        pltpu.make_async_copy(x, buf, sem).start()

    comparison = compare(lambda: hbm_call(kernel)(X))
    assert known(comparison) == {"dma-left-in-flight"}, comparison.report()


def test_a_wait_that_can_never_finish_is_a_hang_on_both_sides():
    """copyir reports the wait (`RUN_UNSATISFIABLE_WAIT`); interpret mode
    blocks until the watchdog stops it: the verdicts agree."""

    def kernel(x, y, buf, sem):
        pltpu.sync_copy(x, y)
        pltpu.make_async_copy(x, buf, sem).wait()

    comparison = compare(lambda: hbm_call(kernel)(X), timeout=1.0)
    assert comparison.status == "agrees", comparison.report()
    assert {run.verdict for pair in comparison.runs.values() for run in pair} == {
        "hang"
    }


def test_an_unsupported_construct_is_not_a_difference():
    def kernel(x, y, buf, sem):
        pltpu.sync_copy(x, buf)
        buf[...] = jnp.exp(buf[...])
        pltpu.sync_copy(buf, y)

    comparison = compare(lambda: hbm_call(kernel)(X))
    assert comparison.status == "not supported"
    assert comparison.unsupported == "`exp`"
    assert comparison.differences == []


def test_a_difference_no_entry_explains_is_unclassified(monkeypatch):
    """copyir's side made wrong on purpose: its output one off."""
    real = compare_module.run_copyir

    def off_by_one(*args, **kwargs):
        run = real(*args, **kwargs)
        return compare_module.CopyIRRun(
            run.verdict, [o + 1 for o in run.outputs], run.events, run.message
        )

    monkeypatch.setattr(compare_module, "run_copyir", off_by_one)
    comparison = compare(double_buffer.main, modes=["on_wait"])
    assert comparison.status == "differs (unclassified)"
    (difference,) = comparison.unclassified
    assert str(difference) == (
        "on_wait: output differs (UNCLASSIFIED): output 0 differs at 8192 of "
        "8192 elements, the first at [0, 0]: np.float32(1.0) against "
        "np.float32(0.0)"
    )


def test_nan_equals_nan_and_bits_count():
    a = np.array([np.nan, 0.0, 1.0], np.float32)
    b = np.array([np.nan, -0.0, 1.0], np.float32)
    assert compare_module._bitwise_equal(a, b).tolist() == [True, False, True]
    assert compare_module._within_ulps(a, b)
    assert not compare_module._within_ulps(a, b + np.float32(1e-3))


def test_copyir_check_compare_prints_one_line_per_mode(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            *("-m", "copyir", "check", "race.py"),
            "--compare",
            "--call",
            "main",
        ],
        cwd=ROOT / "examples" / "pallas",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "eager: copyir race, interpret mode race\n"
        "on_wait: copyir race, interpret mode race\n"
        "agrees\n"
    )


def test_the_readme_lists_exactly_the_known_divergences():
    text = (ROOT / "README.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    listed = [
        row.split("`")[1]
        for row in rows
        if "| verdict |" in row or ("| output |" in row or "| schedule |" in row)
    ]
    assert listed == [d.name for d in compare_module.KNOWN]


def test_parallel_grid_dimensions_replay_pallas_order():
    """Interpret mode permutes each parallel grid dimension (seeded,
    `_get_randomized_grid_coordinates`); copyir replays its recorded order
    (`grid_point_recorder`), so the DMA schedules agree event for event;
    in program order they would not."""

    def kernel(x_hbm, y_hbm, buf, sem):
        row = pl.program_id(0) * 2 + pl.program_id(1)
        fetch = pltpu.make_async_copy(x_hbm.at[pl.ds(row * 8, 8)], buf, sem)
        fetch.start()
        fetch.wait()
        back = pltpu.make_async_copy(buf, y_hbm.at[pl.ds(row * 8, 8)], sem)
        back.start()
        back.wait()

    def call(x):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(4, 2),
            in_specs=[ANY],
            out_specs=ANY,
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA],
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "parallel")
            ),
        )(x)

    x = jnp.arange(64 * 128, dtype=jnp.float32).reshape(64, 128)
    comparison = compare(call, x, modes=["eager"])
    assert comparison.status == "agrees", comparison.report()
    ours, theirs = comparison.runs["eager"]
    points = [point for point, _core in theirs.grid_points]
    assert points != sorted(points)  # interpret mode did permute
    assert len(ours.events) == 32 and ours.events == theirs.events
    unreplayed = compare_module.run_copyir(call, (x,), mode="eager")
    assert unreplayed.events != theirs.events
    assert sorted(map(repr, unreplayed.events)) == sorted(map(repr, theirs.events))


def test_add_ignored_explains_only_what_copying_explains(monkeypatch):
    """With an `add=True` DMA in the kernel, an output difference that
    copyir's run with its DMAs copying does not reproduce is unclassified."""

    real = compare_module.run_copyir

    def off_when_copying(*args, adds_as_copies=False, **kwargs):
        run = real(*args, adds_as_copies=adds_as_copies, **kwargs)
        if not adds_as_copies:
            return run
        return compare_module.CopyIRRun(
            run.verdict, [o + 1 for o in run.outputs], run.events, run.message
        )

    monkeypatch.setattr(compare_module, "run_copyir", off_when_copying)
    comparison = compare(lambda: hbm_call(accumulate_kernel)(X), modes=["eager"])
    assert comparison.status == "differs (unclassified)", comparison.report()


def test_float_rewrites_need_a_computation_and_equal_integers():
    a = np.array([1.0, 2.0], np.float32)
    b = np.nextafter(a, np.float32(3))
    ints = np.array([1, 2], np.int32)
    copying = compare_module.CopyIRRun("ok", [a, ints], [], "")
    computing = compare_module.CopyIRRun("ok", [a, ints], [], "", computes=True)
    interpret = compare_module.InterpretRun("ok", [b, ints], [], "")
    assert not compare_module._float_rewrites(
        compare_module.Evidence("eager", copying, interpret)
    )
    assert compare_module._float_rewrites(
        compare_module.Evidence("eager", computing, interpret)
    )
    other = compare_module.InterpretRun("ok", [b, ints + 1], [], "")
    assert not compare_module._float_rewrites(
        compare_module.Evidence("eager", computing, other)
    )
    inf = np.array([np.inf, 1.0], np.float32)
    assert compare_module._within_ulps(inf, inf.copy())


def test_a_scalar_output_is_compared():
    comparison = compare(
        lambda: hbm_call(lambda x, y, b, s: pltpu.sync_copy(x, y))(X).sum()
    )
    assert comparison.status == "agrees", comparison.report()
    assert comparison.runs["eager"][0].outputs[0].shape == ()


def test_a_parallel_dimension_revisiting_an_output_block():
    """jax's `test_two_cores_along_parallel_dimension_with_race`
    (tpu_pallas_interpret_test.py): both iterations of a parallel grid
    write the one output block. copyir refuses it (`PARALLEL_REVISIT`);
    interpret mode, on one core, writes it twice."""

    def kernel(x_ref, o_ref, vmem_ref):
        vmem_ref[...] = x_ref[...]
        o_ref[...] = x_ref[...] + vmem_ref[...]

    def f(x):
        return pl.pallas_call(
            kernel,
            grid=(2,),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
            scratch_shapes=[pltpu.VMEM(x.shape, x.dtype)],
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
        )(x)

    comparison = compare(f, jnp.ones((8, 128), jnp.float32))
    assert known(comparison) == {"parallel-revisit"}, comparison.report()
    assert comparison.status == "differs (known)"


def test_multiple_of_agrees_with_interpret_mode():
    """`pl.multiple_of`, imported as its value (the pipelining doc's
    dynamic block kernel uses it), side by side: outputs and schedule."""

    def kernel(x, y, buf, sem):
        def body(i, carry):
            rows = pl.ds(pl.multiple_of(i * 8, 8), 8)
            pltpu.sync_copy(x.at[rows], buf.at[pl.ds(0, 8)])
            pltpu.sync_copy(buf.at[pl.ds(0, 8)], y.at[rows])
            return carry

        jax.lax.fori_loop(0, 2, body, 0)

    comparison = compare(lambda: hbm_call(kernel)(X))
    assert comparison.status == "agrees", comparison.report()
    assert len(comparison.runs["on_wait"][0].events) == 8


def clamped_kernel(x, y, buf, sem):
    """16 rows in blocks of 6: the last block clamped to start at row 10
    (`jnp.minimum`), overlapping the second, every block full."""

    def body(i, carry):
        rows = pl.ds(jnp.minimum(i * 6, 10), 6)
        pltpu.sync_copy(x.at[rows], buf.at[pl.ds(0, 6)])
        pltpu.sync_copy(buf.at[pl.ds(0, 6)], y.at[rows])
        return carry

    jax.lax.fori_loop(0, 3, body, 0)


def test_a_clamped_last_block_agrees_with_interpret_mode():
    """`jnp.minimum` of index values, imported as a `copy.index min`, side
    by side with interpret mode: outputs bit for bit, schedules event for
    event, in both modes."""
    from copyir.dialects.copy import IndexOp
    from copyir.pallas import import_kernels

    (imported,) = import_kernels(hbm_call(clamped_kernel), X)
    (clamp,) = [
        op
        for op in imported.module.walk()
        if isinstance(op, IndexOp) and op.combine is not None
    ]
    assert clamp.expression_text() == "min(6 * i, 10)"
    comparison = compare(lambda: hbm_call(clamped_kernel)(X))
    assert comparison.status == "agrees", comparison.report()
    for ours, theirs in comparison.runs.values():
        assert len(ours.events) == 12 and ours.events == theirs.events
        assert ours.outputs is not None and theirs.outputs is not None
        assert [o.tobytes() for o in ours.outputs] == [
            t.tobytes() for t in theirs.outputs
        ]


def test_a_maximum_then_scaled_agrees_with_interpret_mode():
    """`jnp.maximum(i - 1, 0) * 4`, arithmetic on a max, and a
    `jnp.minimum` of three values: imported and compared side by side."""

    def kernel(x, y, buf, sem):
        def body(i, carry):
            first = jnp.maximum(i - 1, 0) * 4
            last = jnp.minimum(jnp.minimum(i * 4 + 4, 12), first + 8)
            pltpu.sync_copy(x.at[pl.ds(first, 4)], buf.at[pl.ds(0, 4)])
            pltpu.sync_copy(buf.at[pl.ds(0, 4)], y.at[pl.ds(last, 4)])
            return carry

        pltpu.sync_copy(x, y)
        jax.lax.fori_loop(0, 4, body, 0)

    comparison = compare(lambda: hbm_call(kernel)(X))
    assert comparison.status == "agrees", comparison.report()
    ours, theirs = comparison.runs["on_wait"]
    assert ours.events and ours.events == theirs.events


@pytest.mark.parametrize(
    "clip",
    [
        lambda i: jnp.clip(i * 6 - 3, 0, 10),
        lambda i: jax.lax.clamp(0, i * 6 - 3, 10),
    ],
    ids=["jnp.clip", "lax.clamp"],
)
def test_a_clipped_start_agrees_with_interpret_mode(clip):
    """`jnp.clip` (a jit of max and min) and `lax.clamp` of an index: its
    max, then its min, compared side by side."""

    def kernel(x, y, buf, sem):
        def body(i, carry):
            rows = pl.ds(clip(i), 6)
            pltpu.sync_copy(x.at[rows], buf.at[pl.ds(0, 6)])
            pltpu.sync_copy(buf.at[pl.ds(0, 6)], y.at[rows])
            return carry

        jax.lax.fori_loop(0, 4, body, 0)

    comparison = compare(lambda: hbm_call(kernel)(X))
    assert comparison.status == "agrees", comparison.report()
    ours, theirs = comparison.runs["on_wait"]
    assert len(ours.events) == 16 and ours.events == theirs.events


@pytest.mark.parametrize(
    "dtype",
    ["float32", "bfloat16", "float16", "int32", "int16", "int8", "uint8", "bool"],
)
def test_memory_nobody_wrote_holds_interpret_modes_uninitialized_value(dtype):
    """An output written only in half keeps, in its other half, what
    interpret mode fills unwritten memory with (`interpret/utils.py`,
    `get_uninitialized_value(dtype, "nan")`: NaN, the integer maximum,
    True): the same bits on both sides (compare itself calls any two NaNs
    equal), and copyir's warning."""
    x = jnp.ones((16, 128), dtype)

    def kernel(x, y):
        pltpu.sync_copy(x.at[0:8], y.at[0:8])

    call = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[ANY],
        out_specs=ANY,
    )
    comparison = compare(lambda: call(x))
    assert comparison.status == "agrees", comparison.report()
    for ours, theirs in comparison.runs.values():
        assert ours.outputs[0].tobytes() == theirs.outputs[0].tobytes()
        assert ours.warned == [
            "Output y is written only in part: 1024 of its 2048 elements keep "
            "poison, the first at y[8, 0]"
        ]


def half_written_grid(full_until: int, dtype=jnp.float32):
    """A grid kernel over (4,) blocks of (8, 128) whose body writes its
    whole output block at blocks up to `full_until`, then only rows 0:4."""
    x = jnp.arange(32 * 128, dtype=dtype).reshape(32, 128)
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))

    def kernel(x_ref, y_ref):
        @pl.when(pl.program_id(0) <= full_until)
        def _():
            y_ref[...] = x_ref[...]

        y_ref[0:4, :] = x_ref[0:4, :] * 2

    call = pl.pallas_call(
        kernel,
        grid=(4,),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[spec],
        out_specs=spec,
    )
    return lambda: call(x)


UNWRITTEN_WINDOW = (
    "DMA writes y_ref_hbm[0:8, 0:128] from window memory the pipeline body did "
    "not write (the first at y_ref_hbm[4, 0]): as Pallas writes a whole window "
    "back, it holds what the window's slot held before, at block (i, 0) slot "
    "i % 2, at i = 0"
)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_a_grid_body_writing_half_its_output_block(dtype):
    """Never written, the other half carries interpret mode's uninitialized
    value on both sides (`get_uninitialized_array` in
    `interpret_pallas_call`'s output buffer), bit for bit; copyir warns
    once, at the first write-back."""
    comparison = compare(half_written_grid(-1, jnp.dtype(dtype)))
    assert comparison.status == "agrees", comparison.report()
    for ours, theirs in comparison.runs.values():
        assert ours.outputs[0].tobytes() == theirs.outputs[0].tobytes()
        assert ours.warned == [UNWRITTEN_WINDOW]
        unwritten = ours.outputs[0].reshape(4, 8, 128)[:, 4:]
        assert unwritten.tobytes() == np.full_like(unwritten, _poison(dtype)).tobytes()


def _poison(dtype: str):
    return np.iinfo(dtype).max if dtype.startswith("int") else np.nan


def test_a_grid_output_block_is_one_buffer_in_interpret_mode():
    """Written whole at blocks 0 and 1, in half after: interpret mode's
    single output buffer (`interpret_pallas_call`'s kernel buffer, stored
    back whole by `_store_to_output_buffer`) leaves block 1's rows in block
    2's other half; copyir's two slots leave block 0's, as emit_pipeline's
    do (`BufferedRef` swaps its slot at each block)."""
    comparison = compare(half_written_grid(1))
    assert known(comparison) == {"grid-output-one-buffer"}, comparison.report()
    ours, theirs = comparison.runs["eager"]
    x = np.arange(32 * 128, dtype=np.float32).reshape(32, 128)
    np.testing.assert_array_equal(ours.outputs[0][20:24], x[4:8])
    np.testing.assert_array_equal(theirs.outputs[0][20:24], x[12:16])


PARTIAL_PIPELINE = """
kernel half(x: f32[48, 128] @hbm, y: f32[48, 128] @hbm) {
  pipeline grid=(6,) OPTIONS
      in  x block=(8, 128) index=(i) -> (i, 0) buffers=3
      out y block=(8, 128) index=(i) -> (i, 0) BUFFERS
      (xw, yw, i) {
    when i <= 1 {
      yw[...] = xw
    }
    when i == 3 {
      yw[4:8, :] = xw[4:8, :] * 3.0
    }
    yw[0:4, :] = xw[0:4, :] + 1.0
  }
}
"""


@pytest.fixture
def tiling_on_the_cpu(monkeypatch):
    """emit_pipeline asks `tpu_info` for the chip's tiling, which the CPU
    has none of: a TPU v5e's, for the test's length."""
    from jax._src.pallas.mosaic import tpu_info

    def v5e():
        return tpu_info.get_tpu_info_for_chip(tpu_info.ChipVersion.TPU_V5E, 1)

    monkeypatch.setitem(tpu_info.registry, "cpu", v5e)
    yield
    tpu_info.get_tpu_info.cache_clear()


@pytest.mark.parametrize(
    "no_pipelining, out_buffers, rows_4_of_block_2",
    [(False, 2, 4), (False, 1, 12), (True, 2, 12)],
)
def test_a_pipeline_body_writing_part_of_its_window_as_emit_pipeline(
    tiling_on_the_cpu, no_pipelining, out_buffers, rows_4_of_block_2
):
    """`pipeline` against interpret mode's `emit_pipeline` (`pipeline.py`'s
    `BufferedRef`: its slots, swapped as the block changes, each written
    back whole; one slot with `pl.Buffered(1)` or `no_pipelining`, which
    never advances them) on a body that writes its output window whole at
    blocks 0 and 1, rows 4:8 at block 3 and rows 0:4 always: block 2's
    rows 4:8 carry block 0's (two slots) or block 1's (one), bit for bit in
    both modes, with one warning. Run directly: copyir does not import
    `pl.program_id` in an emit_pipeline body."""
    x = jnp.arange(48 * 128, dtype=jnp.float32).reshape(48, 128)
    in_spec = pl.BlockSpec((8, 128), lambda i: (i, 0), pipeline_mode=pl.Buffered(3))
    out_spec = pl.BlockSpec(
        (8, 128), lambda i: (i, 0), pipeline_mode=pl.Buffered(out_buffers)
    )

    def inner(xw, yw):
        i = pl.program_id(0)

        @pl.when(i <= 1)
        def _():
            yw[...] = xw[...]

        @pl.when(i == 3)
        def _():
            yw[4:8, :] = xw[4:8, :] * 3.0

        yw[0:4, :] = xw[0:4, :] + 1.0

    def kernel(x_hbm, y_hbm):
        pltpu.emit_pipeline(
            inner,
            grid=(6,),
            in_specs=[in_spec],
            out_specs=[out_spec],
            no_pipelining=no_pipelining,
        )(x_hbm, y_hbm)

    import copyir

    text = PARTIAL_PIPELINE.replace(
        "OPTIONS", "no_pipelining" if no_pipelining else ""
    ).replace("BUFFERS", f"buffers={out_buffers}")
    stream = copyir.to_stream(copyir.lower(text))
    slot = "0" if no_pipelining or out_buffers == 1 else "i % 2"
    for mode in ("eager", "on_wait"):
        theirs = pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            in_specs=[ANY],
            out_specs=ANY,
            interpret=pltpu.InterpretParams(dma_execution_mode=mode),
        )(x)
        with pytest.warns(copyir.CopyIRWarning) as caught:
            ours = copyir.run(stream, {"x": np.asarray(x)}, mode=mode)["y"]
        assert ours.tobytes() == np.asarray(theirs).tobytes()
        assert [str(w.message) for w in caught] == [
            "DMA writes y[16:24, 0:128] from window memory the pipeline body did "
            "not write (the first at y[20, 0]): as Pallas writes a whole window "
            "back, it holds what the window's slot held before"
            + f", at block (i, 0) slot {slot}, at i = 2"
        ]
    k = rows_4_of_block_2
    np.testing.assert_array_equal(ours[20:24], np.asarray(x)[k : k + 4])


def ragged_grid(body, dtype: str, out_rows: int):
    """A (20, 128) array through (8, 128) grid blocks over grid (3,): the
    last block is cut at row 20 (4 rows), into an output of `out_rows`."""
    x = jnp.arange(20 * 128).astype(dtype).reshape(20, 128)
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    call = pl.pallas_call(
        body,
        grid=(3,),
        out_shape=jax.ShapeDtypeStruct((out_rows, 128), dtype),
        in_specs=[spec],
        out_specs=spec,
    )
    return lambda: call(x)


@pytest.mark.parametrize("dtype", ["float32", "int32", "bfloat16"])
def test_a_cut_grid_block_is_padded_as_interpret_mode_pads(dtype):
    """Interpret mode pads a `pallas_call`'s inputs to whole blocks with
    its uninitialized value (`interpret_utils.pad_to_block_dimension`, the
    same under `buffer_bounds="logical"`, the default, and "padded"); copyir
    writes the same poison past the cut. Copied into rows 20:24 of a
    (24, 128) output, the padding reaches it: the same bits on both sides,
    and copyir warns, naming the output."""

    def copy_kernel(x_ref, y_ref):
        y_ref[...] = x_ref[...]

    comparison = compare(ragged_grid(copy_kernel, dtype, 24))
    assert comparison.status == "agrees", comparison.report()
    for ours, theirs in comparison.runs.values():
        assert ours.outputs[0].tobytes() == theirs.outputs[0].tobytes()
        assert ours.warned == [
            errors.RUN_PADDING_OUTPUT.format(
                name="y_ref_hbm", count=512, size=3072, first="y_ref_hbm[20, 0]"
            )
        ]


def test_a_cut_grid_block_written_back_moves_only_the_rows_inside():
    """An elementwise body computes on the padding too, but interpret mode
    stores the whole block into its padded output buffer and returns only
    the array's rows (`interpret_pallas_call`, the final `get` of
    `ds(0, s)`), as copyir writes back only the rows inside: no padding
    reaches the output, and no warning."""

    def scale_kernel(x_ref, y_ref):
        y_ref[...] = x_ref[...] * 2 + 1

    comparison = compare(ragged_grid(scale_kernel, "int32", 20))
    assert comparison.status == "agrees", comparison.report()
    for ours, theirs in comparison.runs.values():
        assert ours.outputs[0].tobytes() == theirs.outputs[0].tobytes()
        assert ours.warned == []
