"""The reference path runs pipelines by what they mean (at each grid point
the current blocks in, the body, the blocks that are done out), with no
schedule, slot or semaphore, and its results agree with the lowered
schedule run on the interpreter in every mode: on generated pipelines, on
ragged, `Element` and squeezed blocks, on accumulation and on pipelines
whose expansion (`expand-pipelines`) is itself run on the reference path.

Classes covered beyond tests/pipeline_programs.py's: ragged last blocks
in both dimensions, `Element` windows with a stride, squeezed dimensions,
index maps with arithmetic (a transposed walk, `i // 2`), integer dtypes
(the padding of a cut block is poison of the dtype), and outputs left
unvisited (they keep their input values).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from copyir.backends.interpreter import MODES
from copyir.backends.reference import run_reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pipeline_programs import expected_outputs, pipelines

import copyir
from copyir import errors
from copyir.api import apply_passes, pipeline
from copyir.errors import CopyIRError, CopyIRWarning
from copyir.testing import compute_region


def ref(shape, dtype: str = "f32", space: str = "hbm") -> str:
    return f"!copy.ref<{'x'.join(map(str, shape))}x{dtype}, {space}>"


def reference(program: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    module = copyir.parse(program, format="mlir")
    copyir.verify(module)
    return run_reference(module.ops.first, inputs)


def agree(program: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The reference's result, after checking that the interpreter gives the
    same bits in every mode."""
    want = reference(program, inputs)
    stream = copyir.to_stream(copyir.lower(program))
    for mode in MODES:
        got = copyir.run(stream, inputs, mode=mode, seed=5)
        for name, value in want.items():
            assert got[name].tobytes() == value.tobytes(), f"{name} in {mode} mode"
    return want


def values(shape, dtype=np.float32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-1000, 1000, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(pipelines())
def test_generated_pipelines_agree_with_the_reference_and_numpy(p):
    inputs = {s.name: values(s.shape, seed=k) for k, s in enumerate(p.specs)}
    got = agree(p.mlir(), inputs)
    for name, value in expected_outputs(p, inputs).items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def one_pipeline(
    shape, block: str, index: str, grid, window, body: str, dtype: str = "f32"
) -> str:
    array = ref(shape, dtype)
    spec = f"{array} block [{block}] index {index} buffers"
    names = ", ".join(f"%{n}" for n in "ijk"[: len(grid)])
    return f"""copy.kernel @p(%x: {array}, %y: {array}) {{
  copy.pipeline grid({", ".join(map(str, grid))}) in %x : {spec} 3, out %y : {spec} 2 (%xw, %yw, {names}) {{
    copy.compute %yw (%xw) : {ref(window, dtype, "vmem")}, {ref(window, dtype, "vmem")} {compute_region(body, dtype, 1)}
  }}
}}
"""


@pytest.mark.parametrize("dtype, numpy", [("f32", np.float32), ("i32", np.int32)])
def test_ragged_blocks_in_both_dimensions(dtype, numpy):
    """(20, 300) through (8, 128): the last row of blocks has 4 rows, the
    last column 44; the body sees poison in the rest of its window."""
    body = "(add (mul 2 $0) 1)"
    program = one_pipeline(
        (20, 300),
        "8, 128",
        "affine_map<(d0, d1) -> (d0, d1)>",
        (3, 3),
        (8, 128),
        body,
        dtype,
    )
    x = values((20, 300), numpy)
    got = agree(program, {"x": x, "y": np.zeros_like(x)})
    np.testing.assert_array_equal(got["y"], 2 * x + 1)


def test_a_transposed_walk_with_arithmetic_in_the_index_map():
    """Blocks visited column-major (`(i, j) -> (j, i)` over a (3, 2) grid of a
    (2, 3)-block array), each written once."""
    program = one_pipeline(
        (16, 384), "8, 128", "affine_map<(d0, d1) -> (d1, d0)>", (3, 2), (8, 128), "$0"
    )
    x = values((16, 384))
    got = agree(program, {"x": x, "y": np.zeros_like(x)})
    np.testing.assert_array_equal(got["y"], x)


def test_element_windows_with_a_stride_and_a_squeezed_dimension():
    """`Element(8)` rows starting at 4*i over a squeezed leading dimension:
    window i holds rows 4i .. 4i+8 of plane k; outputs overlap, so only the
    input is element-windowed and the output follows whole blocks."""
    x_type, y_type = ref((2, 36, 128)), ref((2, 64, 128))
    program = f"""copy.kernel @p(%x: {x_type}, %y: {y_type}) {{
  copy.pipeline grid(2, 8) in %x : {x_type} block [squeezed, element 8, 128] index affine_map<(d0, d1) -> (d0, d1 * 4, 0)> buffers 2, out %y : {y_type} block [squeezed, 8, 128] index affine_map<(d0, d1) -> (d0, d1, 0)> buffers 2 (%xw, %yw, %k, %i) {{
    copy.compute %yw (%xw) : {ref((8, 128), "f32", "vmem")}, {ref((8, 128), "f32", "vmem")} {compute_region("(neg $0)", "f32", 1)}
  }}
}}
"""
    x = values((2, 36, 128))
    got = agree(program, {"x": x, "y": np.zeros((2, 64, 128), np.float32)})
    for k in range(2):
        for i in range(8):
            want = -x[k, 4 * i : 4 * i + 8]
            np.testing.assert_array_equal(got["y"][k, 8 * i : 8 * i + 8], want)


def test_an_accumulator_revisited_along_two_inner_axes():
    """`(i, j, k) -> (i, 0)` over grid (2, 2, 2): each output block stays put
    for four consecutive steps and accumulates all of them, initialised at
    j = k = 0."""
    x_type, y_type = ref((16, 512)), ref((16, 128))
    window = ref((8, 128), "f32", "vmem")
    program = f"""copy.kernel @p(%x: {x_type}, %y: {y_type}) {{
  copy.pipeline grid(2, 2, 2) in %x : {x_type} block [8, 128] index affine_map<(d0, d1, d2) -> (d0, d1 * 2 + d2)> buffers 2, out %y : {y_type} block [8, 128] index affine_map<(d0, d1, d2) -> (d0, 0)> buffers 2 (%xw, %yw, %i, %j, %k) {{
    copy.when [affine_set<(d0, d1) : (d0 == 0, d1 == 0)>](%j, %k) {{
      copy.compute %yw (%xw) : {window}, {window} {compute_region("$0", "f32", 1)}
    }}
    copy.when [affine_set<(d0, d1) : (d0 - 1 >= 0)>, affine_set<(d0, d1) : (d1 - 1 >= 0)>](%j, %k) {{
      copy.compute %yw (%yw, %xw) : {window}, {window}, {window} {compute_region("(add $0 $1)", "f32", 2)}
    }}
  }}
}}
"""
    x = values((16, 512))
    got = agree(program, {"x": x, "y": np.zeros((16, 128), np.float32)})
    blocks = x.reshape(16, 4, 128)
    want = ((blocks[:, 0] + blocks[:, 1]) + blocks[:, 2]) + blocks[:, 3]
    np.testing.assert_array_equal(got["y"], want)


def test_the_expansion_run_on_the_reference_path_agrees():
    """`expand-pipelines` then the reference path (windows, invalidations and
    asynchronous window copies run at once) gives the pipeline's meaning."""
    program = one_pipeline(
        (20, 300),
        "8, 128",
        "affine_map<(d0, d1) -> (d0, d1)>",
        (3, 3),
        (8, 128),
        "(add $0 $0)",
    )
    x = values((20, 300))
    inputs = {"x": x, "y": np.zeros_like(x)}
    module = copyir.parse(program, format="mlir")
    apply_passes(module, pipeline("expand-pipelines"))
    copyir.verify(module)
    expanded = run_reference(module.ops.first, inputs)
    np.testing.assert_array_equal(expanded["y"], reference(program, inputs)["y"])
    np.testing.assert_array_equal(expanded["y"], x + x)


def test_a_block_outside_the_array_is_named_at_its_grid_point():
    """The verifier finds this statically; the reference path, run without
    it, still refuses rather than letting numpy clip."""
    program = one_pipeline(
        (16, 128), "8, 128", "affine_map<(d0) -> (d0, 0)>", (3,), (8, 128), "$0"
    )
    module = copyir.parse(program, format="mlir")
    with pytest.raises(CopyIRError) as err:
        run_reference(module.ops.first, {"x": values((16, 128))})
    want = errors.BLOCK_INDEX_OUT_OF_BOUNDS.format(index=2, dim=0, bref="x", extent=2)
    assert str(err.value).endswith(f"{want}, at i = 2")


def test_padding_that_reaches_an_output_is_a_warning():
    """A cut input block's padding (poison past row 20) copied whole into
    an output block that lies inside its array: both paths give the same
    bits, and the run names the output and its first padded element."""
    text = """kernel pad(x: f32[20, 128] @hbm, y: f32[24, 128] @hbm) {
  pipeline grid=(3,)
      in  x block=(8, 128) index=(i) -> (i, 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}
"""
    module = copyir.parse(text, "pad.cpy")
    copyir.verify(module)
    x = values((20, 128))
    want = run_reference(module.ops.first, {"x": x})["y"]
    stream = copyir.to_stream(copyir.lower(text))
    for mode in MODES:
        with pytest.warns(CopyIRWarning) as caught:
            got = copyir.run(stream, {"x": x}, mode=mode, seed=5)["y"]
        assert [str(w.message) for w in caught] == [
            errors.RUN_PADDING_OUTPUT.format(
                name="y", count=512, size=3072, first="y[20, 0]"
            )
        ]
        loc = caught[0].message.loc  # type: ignore[attr-defined]
        assert (loc.line, loc.col) == (2, 3)
        assert got.tobytes() == want.tobytes()
    np.testing.assert_array_equal(got[:20], x)
    assert got[20:].view(np.uint32).tolist() == [[0x7FC00000] * 128] * 4


PARTIAL = """kernel partial(x: f32[48, 128] @hbm, y: f32[48, 128] @hbm) {
  pipeline grid=(6,) OPTIONS
      in  x block=(8, 128) index=(i) -> (i, 0) buffers=3
      out y block=(8, 128) index=(i) -> (i, 0) BUFFERS
      (xw, yw, i) {
    when i <= 1 {
      yw[...] = xw
    }
    yw[0:4, :] = xw[0:4, :] + 1.0
  }
}
"""


@pytest.mark.parametrize(
    "options, buffers, earlier",
    [("", "buffers=2", 0), ("", "buffers=1", 1), ("no_pipelining", "buffers=2", 1)],
)
def test_a_body_writing_part_of_its_output_window_agrees(options, buffers, earlier):
    """Rows a body leaves unwritten go back holding what the window's slot
    held: with two slots, the block two before's; with one (one buffer, or
    `no_pipelining`, whose slots never advance), the block before's. The
    reference's slots and the lowered schedule agree bit for bit in every
    mode, and the run warns once."""
    text = PARTIAL.replace("OPTIONS", options).replace("BUFFERS", buffers)
    module = copyir.parse(text, "partial.cpy")
    copyir.verify(module)
    x = values((48, 128))
    want = run_reference(module.ops.first, {"x": x})["y"]
    stream = copyir.to_stream(copyir.lower(text))
    for mode in MODES:
        with pytest.warns(CopyIRWarning) as caught:
            got = copyir.run(stream, {"x": x}, mode=mode, seed=5)["y"]
        assert len(caught) == 1
        assert str(caught[0].message).startswith(
            errors.RUN_UNWRITTEN_WINDOW.format(
                region="y[16:24, 0:128]", first="y[20, 0]"
            )
        )
        assert got.tobytes() == want.tobytes(), mode
    np.testing.assert_array_equal(got[20:24], x[8 * earlier + 4 : 8 * earlier + 8])


# -- generated: nested pipelines, partial output writes, ragged blocks ----------


@st.composite
def window_programs(draw):
    """A 1-D pipeline over x's row blocks into y's, whose body writes the
    whole window, writes only its first `rows` rows (Pallas writes the
    rest back as the slot held it), or runs a pipeline over the windows'
    column blocks (views: no copies); the last row block may be cut, the
    input may look ahead, the output take 1 to 3 buffers."""
    grid = draw(st.integers(1, 4))
    cut = draw(st.integers(0, 7 if grid > 1 else 0))  # no block past a 1-block array
    columns = draw(st.sampled_from([128, 256]))
    body = draw(st.sampled_from(["whole", "partial", "nested", "bounded"]))
    rows = draw(st.integers(1, 7))
    fetched = draw(st.integers(1, 3))
    lookahead = fetched > 1 and draw(st.booleans())
    written = draw(st.integers(1, 3))
    shape = (8 * grid - cut, columns)
    array = f"f32[{shape[0]}, {columns}] @hbm"
    if body == "whole":
        text = "    yw[...] = xw + 1.0"
    elif body == "partial":
        text = f"    yw[0:{rows}, :] = xw[0:{rows}, :] + 1.0"
    else:
        text = f"""    pipeline grid=({columns // 128},)
        in  xw block=(8, 128) index=(k) -> (0, k)
        out yw block=(8, 128) index=(k) -> (0, k)
        (inner_x, inner_y, k) {{
      inner_y[...] = inner_x + 1.0
    }}"""
    block, index = f"(8, {columns})", "(i, 0)"
    if body == "bounded":  # both sides: the first `rows` rows of each band
        text = "    yw[...] = xw + 1.0"
        block, index = f"(BoundedSlice(8), {columns})", f"(ds(8 * i, {rows}), 0)"
    program = f"""kernel gen(x: {array}, y: {array}) {{
  pipeline grid=({grid},)
      in  x block={block} index=(i) -> {index} buffers={fetched}{" lookahead" * lookahead}
      out y block={block} index=(i) -> {index} buffers={written}
      (xw, yw) {{
{text}
  }}
}}
"""
    return program, shape, body, rows, written


def windows_model(
    x: np.ndarray, y: np.ndarray, body: str, rows: int, written: int
) -> np.ndarray:
    """y as Pallas leaves it: each block's window is the output's next slot
    (NaN, interpret mode's uninitialized value, at its first use); the body
    writes its rows; the rows inside the array go back. A bounded slice
    moves only its `rows` rows each way."""
    if body == "bounded":
        y = y.copy()
        for start in range(0, x.shape[0], 8):
            y[start : start + rows] = x[start : start + rows] + np.float32(1)
        return y
    slots = [np.full((8, x.shape[1]), np.nan, np.float32) for _ in range(written)]
    y = np.empty_like(x)
    for block, start in enumerate(range(0, x.shape[0], 8)):
        window = slots[block % written]
        part = x[start : start + 8]
        wrote = rows if body == "partial" else 8
        window[: min(wrote, len(part))] = part[:wrote] + np.float32(1)
        y[start : start + 8] = window[: len(part)]
    return y


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(window_programs())
def test_generated_nested_partial_and_ragged_pipelines_agree(case):
    """The stream in every mode, the reference path and a numpy model of
    Pallas' slots agree bit for bit (a partial write warns; its warning is
    tests/passes/test_expand_pipelines.py's)."""
    program, shape, body, rows, written = case
    x = values(shape, seed=1)
    inputs = {"x": x, "y": values(shape, seed=2)}
    module = copyir.parse(program, filename="gen.cpy")
    copyir.verify(module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CopyIRWarning)
        want = run_reference(module.ops.first, inputs)["y"]
        stream = copyir.to_stream(copyir.lower(program))
        for mode in MODES:
            got = copyir.run(stream, inputs, mode=mode, seed=5)["y"]
            assert got.tobytes() == want.tobytes(), mode
    model = windows_model(x, inputs["y"], body, rows, written)
    assert want.tobytes() == model.tobytes()
