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

from copyir.pallas import compare as compare_module  # noqa: E402
from copyir.pallas.compare import compare  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "pallas"))
import double_buffer  # noqa: E402
import grid_blockspec  # noqa: E402
import race  # noqa: E402
import sync_copy_tree  # noqa: E402

ANY = pl.BlockSpec(memory_space=pl.ANY)
X = jnp.arange(16 * 128, dtype=jnp.float32).reshape(16, 128)
SCRATCH = [pltpu.VMEM((16, 128), jnp.float32), pltpu.SemaphoreType.DMA]


def hbm_call(kernel, scratch=SCRATCH):
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(X.shape, X.dtype),
        in_specs=[ANY],
        out_specs=ANY,
        scratch_shapes=scratch,
    )


def known(comparison) -> set[str]:
    return {d.known.name for d in comparison.differences if d.known}


@pytest.mark.parametrize(
    "example", [double_buffer, sync_copy_tree, grid_blockspec, race]
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
    semaphores; a reordered wait is a schedule difference."""
    comparison = compare(double_buffer.main, modes=["eager"])
    ours, theirs = comparison.runs["eager"]
    assert ours.events[0][0] == "start" and ours.events[0][1][0] == "hbm0"
    evidence = compare_module.Evidence("eager", ours, theirs, None)
    swapped = [*ours.events]
    swapped[1], swapped[2] = swapped[2], swapped[1]
    moved = compare_module.CopyIRRun("ok", ours.outputs, swapped, "")
    (difference,) = compare_module._differences(
        compare_module.Evidence("eager", moved, theirs, None)
    )
    assert difference.kind == "schedule"
    assert difference.known is not None and difference.known.name == "pipeline-order"
    assert compare_module._differences(evidence) == []


def test_add_is_ignored_by_interpret_mode():
    def kernel(x, y, buf, sem):
        pltpu.sync_copy(x, y)
        pltpu.sync_copy(x, buf)
        copy = pltpu.make_async_copy(buf, y, sem)
        copy.start(add=True)
        copy.wait()

    comparison = compare(lambda: hbm_call(kernel)(X))
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
        [sys.executable, "-m", "copyir", "check", "race.py", "--call", "main"]
        + ["--compare"],
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
