"""Pipelines (`copy.pipeline`, Pallas' `emit_pipeline`): the schedule, the
values, the static checks and the faults the checker must find.

The schedule is compared, event by event, with an independent step-by-step
model of Pallas' scheduler (`pipeline_programs.pallas_schedule`) on
generated pipelines; the FileCheck tests tests/filecheck/run/pipeline-schedule-* pin
the three schedules the issue gives.
"""

from __future__ import annotations

import functools
import re
import warnings

import numpy as np
import pytest
from conftest import EXAMPLES, PIPELINE_EXAMPLES, ROOT
from copyir.backends.interpreter import MODES, trace_lines
from hypothesis import HealthCheck, given, settings
from pipeline_programs import (
    expected_outputs,
    pallas_schedule,
    pipelines,
)

import copyir
from copyir import errors
from copyir.api import apply_passes, pipeline
from copyir.errors import CopyIRError
from copyir.testing import compute_region, nested_pipeline_in_loop

AXPY = compute_region("(add (mul 2.0 $0) 1.0)", "f32", 1)
COPY = compute_region("$0", "f32", 1)
SUM = compute_region("(add $0 $1)", "f32", 2)


def f32(shape) -> str:
    return f"!copy.ref<{'x'.join(map(str, shape))}xf32, hbm>"


def vmem(shape) -> str:
    return f"!copy.ref<{'x'.join(map(str, shape))}xf32, vmem>"


def scale(
    rows: int = 32,
    cols: int = 128,
    block=(8, 128),
    grid=None,
    in_buffers: int = 2,
    out_buffers: int = 2,
    options: str = "",
) -> str:
    """y = 2x + 1 streamed through blocks, row-major over the block grid."""
    grid = grid or (-(-rows // block[0]), -(-cols // block[1]))
    if grid[1:] == (1,):  # one block wide: a 1-D grid
        grid = grid[:1]
    dims = ", ".join(f"d{d}" for d in range(len(grid)))
    results = "d0, d1" if len(grid) == 2 else "d0, 0"
    index = f"affine_map<({dims}) -> ({results})>"
    names = ", ".join(f"%{n}" for n in "ij"[: len(grid)])
    shape = (rows, cols)
    return f"""copy.kernel @scale(%x: {f32(shape)}, %y: {f32(shape)}) {{
  copy.pipeline grid({", ".join(map(str, grid))}){options} in %x : {f32(shape)} block [{block[0]}, {block[1]}] index {index} buffers {in_buffers}, out %y : {f32(shape)} block [{block[0]}, {block[1]}] index {index} buffers {out_buffers} (%xw, %yw, {names}) {{
    copy.compute %yw (%xw) : {vmem(block)}, {vmem(block)} {AXPY}
  }}
}}
"""


def rng_array(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def normal(line: str) -> str:
    """A trace line with a synchronous copy's internal semaphore as `sync`."""
    line = re.sub(r" on \d+$", " on sync", line)
    return re.sub(r"wait \d+ \d+$", "wait sync", line)


# -- the schedule and the values, on generated pipelines -------------------------


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(pipelines())
def test_generated_pipelines_follow_pallas_schedule_and_agree_with_numpy(p):
    stream = copyir.to_stream(copyir.lower(p.mlir()))
    assert [normal(line) for line in trace_lines(stream)] == pallas_schedule(p)
    inputs = {s.name: rng_array(s.shape, k) for k, s in enumerate(p.specs)}
    expected = expected_outputs(p, inputs)
    for mode in MODES:
        got = copyir.run(stream, inputs, mode=mode, seed=3)
        for name, value in expected.items():
            np.testing.assert_array_equal(got[name], value, err_msg=f"{name} {mode}")


def test_the_model_tells_a_wrong_prefetch_distance_apart():
    """The model is a real oracle: one step of prefetch less is a different
    schedule."""
    program = copyir.to_stream(copyir.lower(scale(in_buffers=3)))
    fewer = copyir.to_stream(copyir.lower(scale(in_buffers=2)))
    assert trace_lines(program) != trace_lines(fewer)


def test_the_stream_does_not_grow_with_the_grid():
    small = copyir.to_stream(copyir.lower(scale(rows=32)))
    large = copyir.to_stream(copyir.lower(scale(rows=8 * 4000)))
    assert len(small.instructions) == len(large.instructions)


def test_a_nested_pipeline_in_a_long_loop_keeps_the_stream_small():
    """200,000 steps lower to the stream of 2 (benchmarks/growth.py's
    `check-nested-pipeline-in-loop` times the check)."""
    small = copyir.to_stream(copyir.lower(nested_pipeline_in_loop(2)))
    large = copyir.to_stream(copyir.lower(nested_pipeline_in_loop(200_000)))
    assert len(small.instructions) == len(large.instructions) == 8
    x = rng_array((48, 256))
    for mode in MODES:
        got = copyir.run(nested_pipeline_in_loop(3), {"x": x}, mode=mode, seed=2)["y"]
        np.testing.assert_array_equal(got, x + np.float32(1))


# -- examples: ragged edges, accumulation, parallel dimensions ------------------------


def test_a_ragged_pipeline_copies_every_element_in_every_mode():
    program = scale(rows=1000, cols=384, block=(128, 128), in_buffers=3)
    x = rng_array((1000, 384))
    for mode in MODES:
        got = copyir.run(program, {"x": x, "y": np.zeros_like(x)}, mode=mode)
        np.testing.assert_array_equal(got["y"], 2 * x + 1)


ROWSUM = f"""copy.kernel @rowsum(%x: {f32((16, 512))}, %y: {f32((16, 128))}) {{
  copy.pipeline grid(2, 4) in %x : {f32((16, 512))} block [8, 128] index affine_map<(d0, d1) -> (d0, d1)> buffers 2, out %y : {f32((16, 128))} block [8, 128] index affine_map<(d0, d1) -> (d0, 0)> buffers 2 (%xw, %yw, %i, %j) {{
    copy.when [affine_set<(d0) : (d0 == 0)>](%j) {{
      copy.compute %yw (%xw) : {vmem((8, 128))}, {vmem((8, 128))} {COPY}
    }}
    copy.when [affine_set<(d0) : (d0 - 1 >= 0)>](%j) {{
      copy.compute %yw (%yw, %xw) : {vmem((8, 128))}, {vmem((8, 128))}, {vmem((8, 128))} {SUM}
    }}
  }}
}}
"""


def test_an_output_block_that_stays_put_accumulates_in_vmem():
    x = rng_array((16, 512))
    expected = x.reshape(16, 4, 128)
    want = ((expected[:, 0] + expected[:, 1]) + expected[:, 2]) + expected[:, 3]
    stream = copyir.to_stream(copyir.lower(ROWSUM))
    writes = [line for line in trace_lines(stream) if "-> y[" in line]
    assert [w.split(":")[0] for w in writes] == ["i = 0, j = 3", "i = 1, j = 3"]
    for mode in MODES:
        got = copyir.run(
            stream, {"x": x, "y": np.zeros((16, 128), np.float32)}, mode=mode
        )
        np.testing.assert_array_equal(got["y"], want)


def test_a_body_that_reads_its_output_before_writing_it_is_reported():
    window = vmem((8, 128))
    program = ROWSUM.replace(
        f"copy.compute %yw (%xw) : {window}, {window} {COPY}",
        f"copy.compute %yw (%yw, %xw) : {window}, {window}, {window} {SUM}",
        1,
    )
    with pytest.raises(CopyIRError) as err:
        copyir.check_protocol(program)
    assert str(err.value).startswith(
        "Computation reads y_window[0:1, 0:8, 0:128], which nobody wrote"
    )
    assert str(err.value).endswith("at i = 0, j = 0")


def carried(options: str = "") -> str:
    """A body that carries state in scratch from step to step: legal over a
    sequential grid, wrong across a parallel dimension."""
    return f"""copy.kernel @carry(%x: {f32((32, 128))}, %y: {f32((32, 128))}) {{
  %acc = copy.alloc : {vmem((8, 128))}
  copy.compute %acc () : {vmem((8, 128))} {compute_region("0.0", "f32", 0)}
  copy.pipeline grid(4){options} in %x : {f32((32, 128))} block [8, 128] index affine_map<(d0) -> (d0, 0)> buffers 2, out %y : {f32((32, 128))} block [8, 128] index affine_map<(d0) -> (d0, 0)> buffers 2 (%xw, %yw, %i) {{
    copy.compute %acc (%acc, %xw) : {vmem((8, 128))}, {vmem((8, 128))}, {vmem((8, 128))} {SUM}
    copy.compute %yw (%acc) : {vmem((8, 128))}, {vmem((8, 128))} {COPY}
  }}
}}
"""


def test_state_carried_across_a_parallel_dimension_is_an_error_in_every_mode():
    """State carried across a parallel dimension is a
    broken claim, reported alike in every mode and seed and by the
    data-free check, naming both iterations; over a sequential grid the
    same body is legal and every order gives one result."""
    x = (
        np.ones((32, 128), np.float32)
        * np.arange(1, 5, dtype=np.float32).repeat(8)[:, None]
    )
    inputs = {"x": x, "y": np.zeros_like(x)}
    sequential = carried()
    eager = copyir.run(sequential, inputs, mode="eager")["y"]
    assert all(
        np.array_equal(
            copyir.run(sequential, inputs, mode="random", seed=s)["y"], eager
        )
        for s in range(4)
    )
    message = (
        "Parallel loop i: this computation reads acc[0:8, 0:128], which "
        "iteration i = 0 writes; an iteration of a parallel loop reads only "
        "what it wrote itself or what was there before the loop, at i = 1"
    )
    parallel = carried(" kernel_grid dimension_semantics [parallel]")
    runs = [("eager", 0), ("on_wait", 0)] + [("random", s) for s in range(4)]
    for mode, seed in runs:
        with pytest.raises(CopyIRError) as err:
            copyir.run(parallel, inputs, mode=mode, seed=seed)
        assert str(err.value) == message
    with pytest.raises(CopyIRError) as err:
        copyir.check_protocol(parallel)
    assert str(err.value) == message


def test_emit_pipeline_ignores_parallel_semantics_without_cores():
    """`_emit_pipeline` uses `dimension_semantics` only in
    `_partition_grid`, and only with a core count: one schedule, carried
    state legal."""
    x = np.arange(32 * 128, dtype=np.float32).reshape(32, 128)
    inputs = {"x": x, "y": np.zeros_like(x)}
    want = copyir.run(carried(), inputs, mode="eager")["y"]
    emitted = carried(" dimension_semantics [parallel]")
    assert trace_lines(copyir.to_stream(copyir.lower(emitted))) == trace_lines(
        copyir.to_stream(copyir.lower(carried()))
    )
    for seed in range(3):
        got = copyir.run(emitted, inputs, mode="random", seed=seed)["y"]
        np.testing.assert_array_equal(got, want)


def test_state_carried_across_cores_is_an_error_naming_both_cores():
    """Split over 2 cores (`_partition_grid`: 4 rows, 2 each), the second
    core's first step reads what the first core wrote. Iterations name the
    core and its step in its share (core 1's i = 0 is the grid's i = 2)."""
    x = np.ones((32, 128), np.float32)
    inputs = {"x": x, "y": np.zeros_like(x)}
    program = carried(" dimension_semantics [parallel] cores 2")
    with pytest.raises(CopyIRError) as err:
        copyir.run(program, inputs, mode="eager")
    assert str(err.value) == (
        "Parallel loop core: this computation reads acc[0:8, 0:128], which "
        "iteration core = 0, i = 0 writes; an iteration of a parallel loop "
        "reads only what it wrote itself or what was there before the loop, "
        "at core = 1, i = 0"
    )


def test_a_parallel_kernel_grid_runs_one_schedule_per_parallel_index():
    program = scale(
        rows=32,
        cols=256,
        grid=(4, 2),
        options=" kernel_grid dimension_semantics [parallel, arbitrary]",
    )
    stream = copyir.to_stream(copyir.lower(program))
    lines = trace_lines(stream)
    prologues = [line for line in lines if re.match(r"i = \d: start x", line)]
    assert len(prologues) == 4
    x = rng_array((32, 256))
    for mode in MODES:
        got = copyir.run(stream, {"x": x, "y": np.zeros_like(x)}, mode=mode, seed=1)
        np.testing.assert_array_equal(got["y"], 2 * x + 1)


def test_consecutive_element_windows_that_overlap_race():
    """Pallas accepts it: two write-backs in flight at once write rows
    8:16 both."""
    shape, block = (24, 128), "[element 16, 128]"
    index = "affine_map<(d0) -> (d0 * 8, 0)>"
    program = f"""copy.kernel @overlap(%x: {f32(shape)}, %y: {f32(shape)}) {{
  copy.pipeline grid(2) in %x : {f32(shape)} block {block} index {index} buffers 2, out %y : {f32(shape)} block {block} index {index} buffers 2 (%xw, %yw, %i) {{
    copy.compute %yw (%xw) : {vmem((16, 128))}, {vmem((16, 128))} {COPY}
  }}
}}
"""
    with pytest.raises(CopyIRError) as err:
        copyir.check_protocol(program)
    message = str(err.value)
    assert message.startswith("Race: this DMA writes y[8:24, 0:128] while the DMA")
    assert message.endswith("at i = 1")


# -- the pipeline examples ----------------------------------------------------------


def row_blocks(x: np.ndarray, cols: int) -> list[np.ndarray]:
    return [x[:, k : k + cols] for k in range(0, x.shape[1], cols)]


def of_x(f):
    """A result computed from the example's one input, x."""
    return lambda inputs: f(inputs["x"])


PIPELINE_RESULTS = {
    "pipeline_copy.cpy": of_x(lambda x: x),
    "pipeline_scale.cpy": of_x(lambda x: np.float32(2) * x + np.float32(1)),
    "pipeline_sum.cpy": of_x(
        lambda x: functools.reduce(
            np.add, row_blocks(x, 128), np.zeros((x.shape[0], 128), np.float32)
        )
    ),
    "pipeline_parallel.cpy": of_x(
        lambda x: functools.reduce(np.maximum, row_blocks(x, 128))
    ),
    "pipeline_element.cpy": of_x(
        lambda x: np.stack(
            [x[8 * i : 8 * i + 8] + x[8 * i + 8 : 8 * i + 16] for i in range(4)]
        )
    ),
    "pipeline_three_inputs.cpy": lambda d: d["a"] + np.float32(2) * d["b"] + d["c"],
    "pipeline_nested.cpy": of_x(lambda x: x + np.float32(1)),
    "pipeline_inout.cpy": lambda d: d["y"] + d["x"],
    "pipeline_bounded.cpy": of_x(
        lambda x: np.where(
            (np.arange(32) % 8 < 6)[:, None], x + np.float32(1), np.float32(0)
        )
    ),
    "pipeline_lookahead.cpy": of_x(lambda x: np.float32(2) * x),
    "pipeline_half.cpy": of_x(
        lambda x: np.where(
            (np.arange(x.shape[0]) % 8 < 4)[:, None],
            np.float32(2) * x,
            np.float32(np.nan),
        )
    ),
}
"""Each pipeline example's y as numpy computes it from its inputs (where a
body leaves window rows unwritten, the NaN Pallas' interpret mode fills a
slot with at its first use: `get_uninitialized_value`)."""

PIPELINE_WARNINGS = {
    "pipeline_half.cpy": errors.RUN_UNWRITTEN_WINDOW.format(
        region="y[0:8, 0:128]", first="y[4, 0]"
    )
    + ", at block (i, 0) slot i % 2, at i = 0"
}
"""The pipeline examples that warn, on purpose, and their warning."""


def test_every_pipeline_example_has_its_expected_result():
    assert set(PIPELINE_RESULTS) == PIPELINE_EXAMPLES


@pytest.mark.parametrize("name", sorted(PIPELINE_EXAMPLES))
def test_pipeline_examples_agree_with_numpy_in_every_mode(name):
    """With its inputs file and with random inputs; random mode with
    several seeds (parallel rows run in a permuted order)."""
    path = EXAMPLES / name
    stream = copyir.to_stream(copyir.lower(path.read_text()))
    with np.load(path.with_suffix(".inputs.npz")) as data:
        given = {k: data[k] for k in data.files}
    drawn = {k: rng_array(v.shape, 5 + n) for n, (k, v) in enumerate(given.items())}
    for values in (given, drawn):
        want = PIPELINE_RESULTS[name](values)
        for mode in MODES:
            for seed in (0, 1, 2) if mode == "random" else (0,):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    got = copyir.run(stream, values, mode=mode, seed=seed)
                assert [str(w.message) for w in caught] == (
                    [PIPELINE_WARNINGS[name]] if name in PIPELINE_WARNINGS else []
                )
                assert got["y"].tobytes() == want.tobytes(), (mode, seed)


def test_the_readme_lists_every_pipeline_example():
    readme = (ROOT / "README.md").read_text()
    for name in PIPELINE_EXAMPLES:
        assert f"| [`{name}`](examples/{name}) |" in readme, name


# -- static errors, verbatim --------------------------------------------------------


def verify_error(program: str) -> str:
    with pytest.raises(CopyIRError) as err:
        copyir.verify(copyir.parse(program, format="mlir"))
    return err.value.message


def test_a_grid_with_a_zero_is_pallas_error():
    program = scale(rows=32, cols=128, grid=(0, 3))
    assert verify_error(program) == (
        "All elements in the grid must be strictly positive, but got grid=(0, 3)"
    )


def test_three_output_buffers_on_a_kernel_grid_is_pallas_error():
    """JAX 0.10.2's emit_pipeline message; 0.12's emit_pipeline takes more
    (tests/filecheck/run/pipeline-output-lag.cpy), a kernel grid still not."""
    assert verify_error(scale(out_buffers=3, options=" kernel_grid")) == (
        errors.OUTPUT_BUFFERS
    )
    copyir.verify(copyir.parse(scale(out_buffers=3), format="mlir"))
    assert errors.OUTPUT_BUFFERS == (
        "Buffer count >2 not supported for output buffered refs."
    )


def test_parallel_dimensions_of_a_kernel_grid_must_be_a_prefix():
    options = " dimension_semantics [arbitrary, parallel]"
    program = scale(rows=32, cols=256, grid=(4, 2), options=" kernel_grid" + options)
    assert verify_error(program) == (
        "Dimensions with parallel semantics must form a prefix of the grid."
    )
    emitted = scale(rows=32, cols=256, grid=(4, 2), options=options + " cores 2")
    x = rng_array((32, 256))
    got = copyir.run(emitted, {"x": x, "y": np.zeros_like(x)}, mode="random")
    np.testing.assert_array_equal(got["y"], 2 * x + 1)


def test_cores_without_a_parallel_dimension_is_pallas_error():
    """`_partition_grid`'s message; Pallas assumes `arbitrary` everywhere
    when no semantics are given."""
    assert verify_error(scale(cols=256, grid=(4, 2), options=" cores 2")) == (
        "Cannot partition over cores without parallel grid dimensions: "
        "dimension_semantics=(<GridDimensionSemantics.ARBITRARY: 'arbitrary'>, "
        "<GridDimensionSemantics.ARBITRARY: 'arbitrary'>)"
    )
    options = " kernel_grid dimension_semantics [parallel, arbitrary] cores 2"
    assert verify_error(scale(cols=256, grid=(4, 2), options=options)) == (
        errors.CORES_ON_KERNEL_GRID
    )


def test_a_pipeline_has_one_dimension_semantics_per_grid_dimension():
    """The MLIR form's count is checked as the authoring syntax's is."""
    options = " dimension_semantics [parallel]"
    program = scale(rows=32, cols=256, grid=(4, 2), options=options)
    assert verify_error(program) == errors.DIMENSION_SEMANTICS_COUNT.format(
        count=1, rank=2
    )


def revisiting(index: str, options: str = "") -> str:
    shape = (16, 256)
    return f"""copy.kernel @revisit(%x: {f32((24, 256))}, %y: {f32(shape)}) {{
  copy.pipeline grid(3, 2){options} in %x : {f32((24, 256))} block [8, 128] index affine_map<(d0, d1) -> (d0, d1)> buffers 2, out %y : {f32(shape)} block [8, 128] index affine_map<(d0, d1) -> ({index})> buffers 2 (%xw, %yw, %i, %j) {{
    copy.compute %yw (%xw) : {vmem((8, 128))}, {vmem((8, 128))} {COPY}
  }}
}}
"""


def test_a_non_consecutive_output_revisit_is_reported_as_pallas_interpret_mode_does():
    # Step L = 2 i + j visits blocks (1, 0), (1, 0), (0, 0), (0, 0), (1, 1),
    # then (1, 0) again.
    step = "(d0 * 2 + d1)"
    index = f"({step} floordiv 2 + 1) mod 2, {step} floordiv 4 - {step} floordiv 5"
    assert verify_error(revisiting(index, " kernel_grid")) == (
        "Revisited block (1, 0) of output 0 in iteration (2, 1). The block was "
        "previously visited in iterations (0, 0) through (0, 1) ."
    )


def test_an_output_block_shared_across_a_parallel_dimension_is_reported():
    assert verify_error(
        revisiting(
            "0, d1", options=" kernel_grid dimension_semantics [parallel, arbitrary]"
        )
    ) == (
        "Output 0 (y) visits block (0, 0) in iterations (0, 0) and (1, 0), which "
        "differ in parallel dimension 0: iterations of a parallel dimension run "
        "on different cores and must not share an output block"
    )


def test_a_block_index_outside_the_array_names_its_iteration():
    message = verify_error(revisiting("d0, d1"))
    assert message == (
        "Block index 2 is out of bounds in dimension 0: the grid of y has 2 "
        "blocks there, in iteration (2, 0)"
    )


def test_a_body_that_writes_an_input_window_is_reported_at_the_write():
    program = scale().replace(
        "copy.compute %yw (%xw)",
        f"copy.compute %xw (%xw) : {vmem((8, 128))}, {vmem((8, 128))} "
        + compute_region("(add $0 1.0)", "f32", 1)
        + "\n    copy.compute %yw (%xw)",
    )
    with pytest.raises(CopyIRError) as err:
        copyir.verify(copyir.parse(program, format="mlir"))
    assert err.value.message == errors.PIPELINE_WRITES_INPUT.format(
        window="xw", name="x"
    )
    assert err.value.loc.line == 3


# -- faults injected into lowered pipelines -------------------------------------------


def expanded(program: str) -> str:
    """The pipeline as loops of asynchronous window copies (MLIR text)."""
    module = copyir.parse(program, format="mlir")
    copyir.verify(module)
    apply_passes(module, pipeline("expand-pipelines"))
    return copyir.to_text(module, "mlir", debuginfo=False)


def run_error(text: str) -> str:
    with pytest.raises(CopyIRError) as err:
        copyir.run(
            text, {"x": rng_array((32, 128)), "y": np.zeros((32, 128), np.float32)}
        )
    return err.value.message


def test_the_unmutated_expansion_runs():
    text = expanded(scale())
    x = rng_array((32, 128))
    got = copyir.run(text, {"x": x, "y": np.zeros_like(x)})
    np.testing.assert_array_equal(got["y"], 2 * x + 1)


def test_fault_one_input_wait_dropped_at_step_2():
    text = expanded(scale())
    wait = re.search(r'^( *)(copy\.buffered_copy "wait" %x .*)$', text, re.M)
    indent, line = wait.group(1), wait.group(2)
    guarded = (
        f"{indent}copy.when [affine_set<(d0) : (1 - d0 >= 0)>, "
        f"affine_set<(d0) : (d0 - 3 >= 0)>](%i) {{\n{indent}  {line}\n{indent}}}"
    )
    message = run_error(text.replace(wait.group(0), guarded))
    assert message.startswith("Race: this computation reads x_window[0:1, 0:8, 0:128]")
    assert message.endswith("at i = 2")


def test_fault_a_slot_reused_one_step_too_early():
    text = expanded(scale())
    mutant = text.replace(
        "copy.index affine_map<(d0) -> (((d0 + 1) mod 2))>",
        "copy.index affine_map<(d0) -> ((d0 mod 2))>",
    )
    assert mutant != text
    message = run_error(mutant)
    assert message.startswith("Race: this DMA writes x_window[0:1, 0:8, 0:128]")
    assert message.endswith("at i = 0")


def test_fault_a_write_back_that_overlaps_the_next_fetch():
    """Step 0 writes back from slot 0 of the input's window; step 1 fetches
    block 2 into that slot while the write-back may still read it."""
    text = expanded(scale())
    start = '"start" %y_window[%i, 0] -> %y'
    assert start in text
    message = run_error(text.replace(start, '"start" %x_window[%i, 0] -> %y'))
    assert message.startswith("Race: this DMA writes x_window[0:1, 0:8, 0:128]")
    assert "is in flight and reads it" in message
    assert message.endswith("at i = 1")


def test_fault_one_buffer_fewer_than_the_schedule_needs():
    """Three buffers' schedule (fetch two steps ahead) on two slots."""
    text = expanded(scale(in_buffers=3))
    mutant = (
        text.replace("mod 3", "mod 2")
        .replace("buffers 3, vmem", "buffers 2, vmem")
        .replace("!copy.sem_array<3>", "!copy.sem_array<2>")
        .replace("slot 2 ", "slot 0 ")
        .replace("%x_sems[2]", "%x_sems[0]")
    )
    assert mutant != text
    message = run_error(mutant)
    assert message.startswith("Race: this DMA writes x_window[0:1, 0:8, 0:128]")
    assert message.endswith("at i = 0")


def test_a_block_size_below_one_in_the_mlir_form_is_located_at_the_block():
    program = scale().replace("block [8, 128] index", "block [0, 128] index", 1)
    with pytest.raises(CopyIRError) as err:
        copyir.parse(program, format="mlir", filename="p.mlir")
    assert str(err.value) == errors.BLOCK_SIZE.format(size=0, dim=0, extent=32)
    line = program.splitlines()[err.value.loc.line - 1]
    assert line[err.value.loc.col - 1 :].startswith("[0, 128] index")


def test_a_schedule_numbers_its_steps_row_major():
    """`Schedule.strides` are xDSL's row-major strides of the grid; a step's
    number and the point some steps later agree with numpy's row-major
    order (the parallel dimension stays a dimension)."""
    from xdsl.dialects.builtin import ShapedType
    from xdsl.ir.affine import AffineMap

    from copyir.pipelines import Schedule

    schedule = Schedule(grid=(2, 3, 4), parallel=1, operands=[], user=())
    assert schedule.strides((1, 2)) == ShapedType.strides_for_shape((3, 4)) == (4, 1)
    number = AffineMap(3, 0, (schedule.linear(),))
    later = AffineMap(3, 0, tuple(schedule.at_step(5)))
    for point in np.ndindex(2, 3, 4):
        step = int(np.ravel_multi_index(point[1:], (3, 4)))
        assert number.eval(list(point), []) == (step,)
        if step + 5 < 12:
            expected = (point[0], *np.unravel_index(step + 5, (3, 4)))
            assert later.eval(list(point), []) == tuple(map(int, expected))
