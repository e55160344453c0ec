"""Pallas' side of the differential harness: `run_interpret` runs a function
with every `pallas_call` in Pallas' TPU interpret mode and gives a verdict
(ok, error, race, hang), the outputs and the explicit DMAs' events, canonical
up to renaming, printing nothing. A hang ends within the watchdog's timeout
and leaves the process able to run the next kernel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax", reason="Pallas' interpret mode needs JAX (pip install jax)")

import jax
import jax.numpy as jnp
from conftest import EXAMPLES
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from copyir.pallas.interpret_side import canonical, run_interpret

MODES = ("eager", "on_wait")
ANY = pl.BlockSpec(memory_space=pl.ANY)
ROWS, LANES = 8, 128
NBYTES = ROWS * LANES * 4
HANG_TIMEOUT = 0.5


def dma_call(kernel, out_rows: int, scratch):
    """A `pallas_call` of `kernel` on whole HBM operands (`pl.ANY`)."""
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((out_rows, LANES), jnp.float32),
        in_specs=[ANY],
        out_specs=ANY,
        scratch_shapes=scratch,
    )


def two_dma_kernel(x_hbm, y_hbm, buf, sems):
    """Rows 8:16 of x through VMEM into rows 0:8 of y, on two semaphores."""
    fetch = pltpu.make_async_copy(x_hbm.at[8:16], buf, sems.at[0])
    fetch.start()
    fetch.wait()
    back = pltpu.make_async_copy(buf, y_hbm.at[pl.ds(0, ROWS)], sems.at[1])
    back.start()
    back.wait()


def two_dmas(x):
    scratch = [pltpu.VMEM((ROWS, LANES), jnp.float32), pltpu.SemaphoreType.DMA((2,))]
    return dma_call(two_dma_kernel, ROWS, scratch)(x)


TWO_DMA_EVENTS = [
    ("start", ("hbm0", ((8, 16), (0, LANES))), ("vmem1", ((0, 8), (0, LANES))), "s0"),
    ("wait", "s0", NBYTES),
    ("start", ("vmem1", ((0, 8), (0, LANES))), ("hbm2", ((0, 8), (0, LANES))), "s1"),
    ("wait", "s1", NBYTES),
]


def x16() -> jax.Array:
    return jnp.arange(2 * ROWS * LANES, dtype=jnp.float32).reshape(2 * ROWS, LANES)


def assert_two_dmas_ok(run) -> None:
    assert (run.verdict, run.message) == ("ok", "")
    assert run.events == TWO_DMA_EVENTS
    assert len(run.outputs) == 1
    np.testing.assert_array_equal(run.outputs[0], np.asarray(x16())[8:16])


@pytest.mark.parametrize("mode", MODES)
def test_two_dmas_give_outputs_and_events(mode, capfd):
    assert_two_dmas_ok(run_interpret(two_dmas, (x16(),), mode=mode))
    assert capfd.readouterr() == ("", "")


def test_a_whole_ref_and_an_integer_index_resolve_to_regions():
    """A DMA of a whole ref covers each dimension of the buffer; `.at[k]`
    is the one row k of its dimension."""

    def kernel(x_hbm, y_hbm, buf, sem):
        fetch = pltpu.make_async_copy(x_hbm, buf.at[1], sem)
        fetch.start()
        fetch.wait()
        back = pltpu.make_async_copy(buf.at[1], y_hbm, sem)
        back.start()
        back.wait()

    scratch = [pltpu.VMEM((2, ROWS, LANES), jnp.float32), pltpu.SemaphoreType.DMA(())]
    x = x16()[:ROWS]
    run = run_interpret(
        lambda x: dma_call(kernel, ROWS, scratch)(x), (x,), mode="eager"
    )
    whole, row = ((0, ROWS), (0, LANES)), ((1, 2), (0, ROWS), (0, LANES))
    assert run.events == [
        ("start", ("hbm0", whole), ("vmem1", row), "s0"),
        ("wait", "s0", NBYTES),
        ("start", ("vmem1", row), ("hbm2", whole), "s0"),
        ("wait", "s0", NBYTES),
    ]
    np.testing.assert_array_equal(run.outputs[0], np.asarray(x))


@pytest.mark.parametrize("mode", MODES)
def test_a_jitted_kernel_is_recorded(mode):
    """`jax.jit` around the call, once run by the kernel's own interpret
    mode before: the forced mode and the recording apply all the same."""
    jitted = jax.jit(two_dmas)
    with pltpu.force_tpu_interpret_mode(pltpu.InterpretParams(dma_execution_mode=mode)):
        jitted(x16()).block_until_ready()
    assert_two_dmas_ok(run_interpret(jitted, (x16(),), mode=mode))


@pytest.mark.parametrize("mode", MODES)
def test_the_race_example_is_a_race(mode, capfd):
    """examples/pallas/race.py stores into a buffer a DMA in flight writes:
    JAX 0.10 prints the race and returns, 0.12 raises; both are a race."""
    namespace: dict = {}
    path = EXAMPLES / "pallas" / "race.py"
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    run = run_interpret(namespace["main"], (), mode=mode)
    assert run.verdict == "race"
    assert run.message.startswith("RACE DETECTED\n")
    assert "race.py:29" in run.message
    # 0.12 stops at the race (in the first wait in `on_wait` mode, where the
    # DMA writes), 0.10 runs on to the end.
    kinds = [e[0] for e in run.events]
    assert kinds == ["start", "wait", "start", "wait"][: len(kinds)]
    assert kinds
    assert capfd.readouterr() == ("", "")


def hang_kernel(x_hbm, y_hbm, buf, sem):
    """Waits for a DMA that was never started: nothing signals `sem`."""
    pltpu.make_async_copy(x_hbm, buf, sem).wait()


@pytest.mark.parametrize("mode", MODES)
def test_a_wait_nothing_signals_hangs_and_the_next_kernel_runs(mode, capfd):
    scratch = [pltpu.VMEM((ROWS, LANES), jnp.float32), pltpu.SemaphoreType.DMA(())]
    hang = dma_call(hang_kernel, ROWS, scratch)
    run = run_interpret(hang, (x16()[:ROWS],), mode=mode, timeout=HANG_TIMEOUT)
    assert (run.verdict, run.outputs) == ("hang", None)
    assert run.events == [("wait", "s0", NBYTES)]
    assert run.message.startswith("DMA wait at ")
    assert run.message.endswith(f"(hang_kernel) blocked for more than {HANG_TIMEOUT} s")
    assert_two_dmas_ok(run_interpret(two_dmas, (x16(),), mode=mode))
    assert_two_dmas_ok(run_interpret(jax.jit(two_dmas), (x16(),), mode=mode))
    assert capfd.readouterr() == ("", "")


def test_a_kernel_raising_is_an_error():
    def kernel(x_hbm, y_hbm, buf, sem):
        raise ValueError("the user's own error")

    scratch = [pltpu.VMEM((ROWS, LANES), jnp.float32), pltpu.SemaphoreType.DMA(())]
    run = run_interpret(dma_call(kernel, ROWS, scratch), (x16(),), mode="eager")
    assert (run.verdict, run.outputs, run.events) == ("error", None, [])
    assert run.message == "ValueError: the user's own error"


@pytest.mark.parametrize("mode", MODES)
def test_an_out_of_bounds_dma_at_run_time_is_an_error(mode, capfd):
    """A DMA whose start only the run knows (a loop index) reads past x:
    interpret mode fails in its callback; the next kernel runs."""

    def kernel(x_hbm, y_hbm, buf, sem):
        def body(i, carry):
            fetch = pltpu.make_async_copy(x_hbm.at[pl.ds(i * ROWS, ROWS)], buf, sem)
            fetch.start()
            fetch.wait()
            return carry

        jax.lax.fori_loop(0, 3, body, 0)

    scratch = [pltpu.VMEM((ROWS, LANES), jnp.float32), pltpu.SemaphoreType.DMA(())]
    run = run_interpret(dma_call(kernel, ROWS, scratch), (x16(),), mode=mode)
    assert (run.verdict, run.outputs) == ("error", None)
    assert run.message == (
        "IndexError: Out-of-bounds read of (0 0 hbm 100): reading"
        " [(slice(16, 24, 1), slice(0, 128, 1))] but buffer has shape (16, 128)."
    )
    assert [e[1][1][0] for e in run.events if e[0] == "start"] == [
        (0, 8),
        (8, 16),
        (16, 24),
    ]
    assert_two_dmas_ok(run_interpret(two_dmas, (x16(),), mode=mode))
    assert capfd.readouterr() == ("", "")


def test_parallel_grid_points_are_recorded_in_pallas_order():
    """Interpret mode runs a parallel dimension in a random order (seeded):
    each point once, in the order recorded; BlockSpec copies make no events."""

    def kernel(x_ref, y_ref):
        y_ref[...] = x_ref[...] + 1.0

    def call(x):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(4, 2),
            in_specs=[pl.BlockSpec((ROWS, LANES), lambda i, j: (i * 2 + j, 0))],
            out_specs=pl.BlockSpec((ROWS, LANES), lambda i, j: (i * 2 + j, 0)),
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "arbitrary")
            ),
        )(x)

    x = jnp.zeros((8 * ROWS, LANES), jnp.float32)
    run = run_interpret(call, (x,), mode="on_wait")
    assert (run.verdict, run.events) == ("ok", [])
    np.testing.assert_array_equal(run.outputs[0], np.ones((8 * ROWS, LANES)))
    points = [point for point, _core in run.grid_points]
    assert sorted(points) == [(i, j) for i in range(4) for j in range(2)]
    assert [j for _i, j in points] == [0, 1] * 4
    assert {core for _point, core in run.grid_points} == {0}


def test_canonical_numbers_buffers_and_semaphores_by_first_appearance():
    raw = [
        ("start", (("vmem", 7), ((0, 1),)), (("hbm", 3), ((2, 3),)), 40),
        ("start", (("hbm", 5), ((0, 1),)), (("vmem", 7), ((0, 1),)), 9),
        ("wait", 9, 4),
        ("wait", 40, 4),
    ]
    assert canonical(raw) == [
        ("start", ("vmem0", ((0, 1),)), ("hbm1", ((2, 3),)), "s0"),
        ("start", ("hbm2", ((0, 1),)), ("vmem0", ((0, 1),)), "s1"),
        ("wait", "s1", 4),
        ("wait", "s0", 4),
    ]


def test_modes_other_than_eager_and_on_wait_are_refused():
    with pytest.raises(ValueError, match="'random'"):
        run_interpret(two_dmas, (x16(),), mode="random")


BUILT_BEFORE = pl.pallas_call(
    two_dma_kernel,
    out_shape=jax.ShapeDtypeStruct((ROWS, LANES), jnp.float32),
    in_specs=[ANY],
    out_specs=ANY,
    scratch_shapes=[
        pltpu.VMEM((ROWS, LANES), jnp.float32),
        pltpu.SemaphoreType.DMA((2,)),
    ],
    interpret=True,
)
"""Built at import, with `interpret=True` (the HLO interpreter): the forcing
config, read when `pl.pallas_call(...)` is called, does not reach it."""


@pytest.mark.parametrize("mode", MODES)
def test_a_call_built_before_the_run_runs_in_tpu_interpret_mode(mode):
    assert_two_dmas_ok(run_interpret(BUILT_BEFORE, (x16(),), mode=mode))


LOWERED_BEFORE = """
import jax, jax.numpy as jnp
from jax.experimental.pallas import tpu as pltpu
from copyir.pallas import interpret_side
from test_interpret_side import two_dmas, x16, TWO_DMA_EVENTS

jitted = jax.jit(two_dmas)
same = pltpu.InterpretParams(
    dma_execution_mode="eager",
    detect_races=True,
    grid_point_recorder=interpret_side._record_grid_point,
)
with pltpu.force_tpu_interpret_mode(same):
    jitted(x16()).block_until_ready()
run = interpret_side.run_interpret(jitted, (x16(),), mode="eager")
assert run.events == TWO_DMA_EVENTS, run.events
print(run.verdict)
"""


def test_an_executable_lowered_before_the_wrappers_is_not_reused():
    """In a fresh process, a jitted kernel lowered by interpret mode with the
    very params of a run, before the first run installed the wrappers: the
    run lowers it again (jax's caches are cleared at installation), so its
    events are recorded."""
    here = Path(__file__).parent
    done = subprocess.run(
        [sys.executable, "-c", LOWERED_BEFORE],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": f"{here}{os.pathsep}{here.parent}"},
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr


def test_the_buffers_and_semaphores_of_two_calls_are_told_apart():
    """Interpret mode numbers buffers and semaphores afresh in each
    `pallas_call`: the second call's are new ones all the same."""

    def twice(x):
        y = two_dmas(x)
        return two_dmas(jnp.concatenate([y, y]))

    run = run_interpret(twice, (x16(),), mode="on_wait")
    assert run.verdict == "ok"
    rows_0_8, rows_8_16 = ((0, 8), (0, LANES)), ((8, 16), (0, LANES))
    assert run.events == [
        *TWO_DMA_EVENTS,
        ("start", ("hbm3", rows_8_16), ("vmem4", rows_0_8), "s2"),
        ("wait", "s2", NBYTES),
        ("start", ("vmem4", rows_0_8), ("hbm5", rows_0_8), "s3"),
        ("wait", "s3", NBYTES),
    ]
    np.testing.assert_array_equal(run.outputs[0], np.asarray(x16())[8:16])


def test_a_dma_never_waited_is_ok_and_what_interpret_mode_printed_is_kept(capfd):
    def kernel(x_hbm, y_hbm, buf, sem):
        pltpu.make_async_copy(x_hbm.at[0:8], buf, sem).start()

    scratch = [pltpu.VMEM((ROWS, LANES), jnp.float32), pltpu.SemaphoreType.DMA(())]
    run = run_interpret(dma_call(kernel, ROWS, scratch), (x16(),), mode="eager")
    assert (run.verdict, run.message) == ("ok", "")
    rows_0_8 = ((0, 8), (0, LANES))
    assert run.events == [("start", ("hbm0", rows_0_8), ("vmem1", rows_0_8), "s0")]
    assert "has non-zero count" in run.printed
    assert capfd.readouterr() == ("", "")
