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
from hypothesis import HealthCheck, example, given, settings
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
    shape,
    block: str,
    index: str,
    grid,
    window,
    body: str,
    dtype: str = "f32",
    flavour: str = "",
) -> str:
    array = ref(shape, dtype)
    spec = f"{array} block [{block}] index {index} buffers"
    names = ", ".join(f"%{n}" for n in "ijk"[: len(grid)])
    grid_text = ", ".join(map(str, grid))
    return f"""copy.kernel @p(%x: {array}, %y: {array}) {{
  copy.pipeline grid({grid_text}){flavour} in %x : {spec} 3, out %y : {spec} 2 (%xw, %yw, {names}) {{
    copy.compute %yw (%xw) : {ref(window, dtype, "vmem")}, {ref(window, dtype, "vmem")} {compute_region(body, dtype, 1)}
  }}
}}
"""


RAGGED = [
    # A kernel grid pads a cut block with poison: any cut.
    ((20, 300), "8, 128", (8, 128), " kernel_grid"),
    # emit_pipeline's BufferedRef rounds a cut DMA up to the tiling: cuts
    # of whole tiles (8 rows, 128 columns); the slot keeps the rest.
    ((24, 384), "16, 256", (16, 256), ""),
]


@pytest.mark.parametrize("dtype, numpy", [("f32", np.float32), ("i32", np.int32)])
@pytest.mark.parametrize("shape, block, window, flavour", RAGGED)
def test_ragged_blocks_in_both_dimensions(dtype, numpy, shape, block, window, flavour):
    """Through (8, 128) blocks, (20, 300) has a last row of blocks of 4
    rows and a last column of 44; through (16, 256), (24, 384) has 8 and
    128. The body computes on whole windows, past the cut too."""
    body = "(add (mul 2 $0) 1)"
    program = one_pipeline(
        shape,
        block,
        "affine_map<(d0, d1) -> (d0, d1)>",
        (3, 3) if flavour else (2, 2),
        window,
        body,
        dtype,
        flavour,
    )
    x = values(shape, numpy)
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
        (24, 384),
        "16, 256",
        "affine_map<(d0, d1) -> (d0, d1)>",
        (2, 2),
        (16, 256),
        "(add $0 $0)",
    )
    x = values((24, 384))
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


def test_a_cut_block_of_a_viewed_operand_is_named_at_its_grid_point():
    """An inner pipeline over a (24, 128) VMEM window in 16-row blocks views
    rows 16:32 at its second step (Pallas' `compute_slice`): past the
    window. The verifier says so; the reference path, run without it,
    refuses with the same message rather than a numpy error."""
    text = """kernel k(x: f32[24, 128] @hbm, y: f32[24, 128] @hbm) {
  pipeline grid=(1,)
      in  x block=(24, 128) index=(i) -> (0, 0)
      out y block=(24, 128) index=(i) -> (0, 0)
      (xw, yw) {
    pipeline grid=(2,)
        in  xw block=(16, 128) index=(k) -> (k, 0)
        out yw block=(16, 128) index=(k) -> (k, 0)
        (a, b) {
      b[...] = a
    }
  }
}
"""
    module = copyir.parse(text, "k.cpy")
    with pytest.raises(CopyIRError) as err:
        run_reference(module.ops.first, {"x": values((24, 128))})
    want = errors.VIEWED_BLOCK_PAST_END.format(
        bref="xw", start=16, stop=32, dim=0, extent=24, space="vmem"
    )
    assert want in str(err.value)


def test_padding_that_reaches_an_output_is_a_warning():
    """A kernel grid's cut input block (poison past row 20, as interpret
    mode pads a pallas_call's inputs) copied whole into an output block
    that lies inside its array: both paths give the same bits, and the run
    names the output and its first padded element."""
    text = """kernel pad(x: f32[20, 128] @hbm, y: f32[24, 128] @hbm) {
  pipeline grid=(3,) kernel_grid
      in  x block=(8, 128) index=(i) -> (i, 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}
"""
    got = padding_reaches_y(text, 20, 3072, "y[20, 0]")
    assert got[20:].view(np.uint32).tolist() == [[0x7FC00000] * 128] * 4


TILED = """kernel pad(x: f32[24, 128] @hbm, y: f32[32, 128] @hbm) {
  pipeline grid=(2,)
      in  x block=(16, 128) index=(i) -> (i, 0) buffers=BUFFERS
      out y block=(16, 128) index=(i) -> (i, 0)
      (xw, yw) {
    yw[...] = xw
  }
}
"""


@pytest.mark.parametrize("buffers", [1, 2])
def test_the_slot_past_a_tiled_cut_keeps_what_it_held(buffers):
    """emit_pipeline's BufferedRef copies the cut block x[16:24] into rows
    0:8 of its slot and leaves rows 8:16 as they were (jax 0.12
    `_create_blocked_slice`; `test_a_cut_block_keeps_the_slots_rows_as_
    interpret_mode_does` runs it side by side): the slot's first use holds
    poison there; one slot holds block 0's rows 8:16. Copied whole into y,
    they reach y[24:32], with the padding warning."""
    got = padding_reaches_y(
        TILED.replace("BUFFERS", str(buffers)), 24, 4096, "y[24, 0]"
    )
    x = values((24, 128))
    if buffers == 1:
        np.testing.assert_array_equal(got[24:], x[8:16])
    else:
        assert got[24:].view(np.uint32).tolist() == [[0x7FC00000] * 128] * 8


def padding_reaches_y(text: str, inside: int, size: int, first: str) -> np.ndarray:
    """Run `text` (x's rows are values((inside, 128))) on both paths and in
    every mode: the same bits, x in y's first `inside` rows, and one
    warning at the pipeline that the rest of y holds padding."""
    module = copyir.parse(text, "pad.cpy")
    copyir.verify(module)
    x = values((inside, 128))
    want = run_reference(module.ops.first, {"x": x})["y"]
    stream = copyir.to_stream(copyir.lower(text))
    for mode in MODES:
        with pytest.warns(CopyIRWarning) as caught:
            got = copyir.run(stream, {"x": x}, mode=mode, seed=5)["y"]
        count = size - inside * 128
        assert [str(w.message) for w in caught] == [
            errors.RUN_PADDING_OUTPUT.format(
                name="y", count=count, size=size, first=first
            )
        ]
        loc = caught[0].message.loc  # type: ignore[attr-defined]
        assert (loc.line, loc.col) == (2, 3)
        assert got.tobytes() == want.tobytes()
    np.testing.assert_array_equal(got[:inside], x)
    return got


def test_a_cut_that_is_no_whole_tile_is_interpret_modes_error():
    """(20, 128) in 8-row blocks: the last block's 4 rows round up to the
    8-row tile, x[16:24], past the array: interpret mode's out-of-bounds
    read, located at the pipeline with the grid point; a kernel grid pads
    instead."""
    text = TILED.replace("24, 128", "20, 128").replace("16, 128", "8, 128")
    text = text.replace("grid=(2,)", "grid=(3,)").replace("buffers=BUFFERS", "")
    with pytest.raises(CopyIRError) as err:
        copyir.verify(copyir.parse(text, "pad.cpy"))
    message = errors.CUT_BLOCK_PAST_END.format(
        bref="x", dim=0, start=16, end=20, tile=8, stop=24, extent=20
    )
    assert str(err.value) == f"{message}, in iteration (2,)"
    assert (err.value.loc.line, err.value.loc.col) == (2, 3)
    copyir.verify(copyir.parse(text.replace("(3,)", "(3,) kernel_grid"), "k.cpy"))


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
    """A 1-D pipeline over x's row bands (8 or 16 rows) into y's, whose body
    writes the whole window, writes only its first `rows` rows (Pallas
    writes the rest back as the slot held it), or runs a pipeline over the
    windows' column blocks (views: no copies), or takes a bounded slice of
    each band; the last band may be cut by whole 8-row tiles (Pallas
    rounds a cut DMA up to the tiling: any other cut is an error, tried in
    `test_a_cut_that_is_no_whole_tile_is_interpret_modes_error`), the input
    may look ahead, the output take 1 to 3 buffers."""
    grid = draw(st.integers(1, 4))
    band = draw(st.sampled_from([8, 16]))
    cut = draw(st.sampled_from(range(0, band if grid > 1 else 8, 8)))
    columns = draw(st.sampled_from([128, 256]))
    body = draw(st.sampled_from(["whole", "partial", "nested", "bounded"]))
    rows = draw(st.integers(1, band - 1))
    fetched = draw(st.integers(1, 3))
    lookahead = fetched > 1 and draw(st.booleans())
    written = draw(st.integers(1, 3))
    shape = (band * grid - cut, columns)
    array = f"f32[{shape[0]}, {columns}] @hbm"
    # y of whole bands: the input slot's rows past x's cut reach it.
    reach = cut > 0 and body == "whole" and draw(st.booleans())
    y_array = f"f32[{band * grid}, {columns}] @hbm" if reach else array
    if body == "whole":
        text = "    yw[...] = xw + 1.0"
    elif body == "partial":
        text = f"    yw[0:{rows}, :] = xw[0:{rows}, :] + 1.0"
    else:
        text = f"""    pipeline grid=({columns // 128},)
        in  xw block=({band}, 128) index=(k) -> (0, k)
        out yw block=({band}, 128) index=(k) -> (0, k)
        (inner_x, inner_y, k) {{
      inner_y[...] = inner_x + 1.0
    }}"""
    block, index = f"({band}, {columns})", "(i, 0)"
    if body == "bounded":  # both sides: the first `rows` rows of each band
        text = "    yw[...] = xw + 1.0"
        block = f"(BoundedSlice({band}), {columns})"
        index = f"(ds({band} * i, {rows}), 0)"
    program = f"""kernel gen(x: {array}, y: {y_array}) {{
  pipeline grid=({grid},)
      in  x block={block} index=(i) -> {index} buffers={fetched}{" lookahead" * lookahead}
      out y block={block} index=(i) -> {index} buffers={written}
      (xw, yw) {{
{text}
  }}
}}
"""
    return program, shape, body, rows, (fetched, written), band, reach


def windows_model(
    x: np.ndarray,
    y: np.ndarray,
    body: str,
    rows: int,
    buffers: tuple[int, int],
    band: int,
) -> np.ndarray:
    """y as Pallas leaves it: each band lands in the input's next slot,
    whose rows past a cut keep what they held (NaN, interpret mode's
    uninitialized value, at its first use); the band's window is the
    output's next slot (NaN at first use); the body writes its rows; the
    rows inside y go back (all of the band where y is longer than x). A
    bounded slice of `rows` rows moves them rounded up to the 8-row tile,
    as JAX 0.12's `_create_bounded_slice` does, each way (cut at the
    array's end, by whole tiles here)."""
    fetched, written = buffers
    if body == "bounded":
        y = y.copy()
        moved = -(-rows // 8) * 8
        for start in range(0, x.shape[0], band):
            y[start : start + moved] = x[start : start + moved] + np.float32(1)
        return y

    def slots(count: int) -> list[np.ndarray]:
        return [np.full((band, x.shape[1]), np.nan, np.float32) for _ in range(count)]

    ins, outs = slots(fetched), slots(written)
    y = np.empty_like(y)
    for block, start in enumerate(range(0, y.shape[0], band)):
        slot, window = ins[block % fetched], outs[block % written]
        part = x[start : start + band]
        slot[: len(part)] = part
        if body == "whole":  # the whole window, past the cut too
            window[...] = slot + np.float32(1)
        else:
            wrote = min(rows if body == "partial" else band, len(part))
            window[:wrote] = part[:wrote] + np.float32(1)
        y[start : start + band] = window[: len(y[start : start + band])]
    return y


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(window_programs())
@example(  # one input slot: its rows past x's cut hold block 0's, into y
    (
        TILED.replace("BUFFERS", "1").replace("yw[...] = xw", "yw[...] = xw + 1.0"),
        (24, 128),
        "whole",
        1,
        (1, 2),
        16,
        True,
    )
)
def test_generated_nested_partial_and_ragged_pipelines_agree(case):
    """The stream in every mode, the reference path and a numpy model of
    Pallas' slots agree bit for bit (a partial write warns; its warning is
    tests/passes/test_expand_pipelines.py's)."""
    program, shape, body, rows, buffers, band, reach = case
    x = values(shape, seed=1)
    y_shape = (shape[0] + band - shape[0] % band, shape[1]) if reach else shape
    inputs = {"x": x, "y": values(y_shape, seed=2)}
    module = copyir.parse(program, filename="gen.cpy")
    copyir.verify(module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CopyIRWarning)
        want = run_reference(module.ops.first, inputs)["y"]
        stream = copyir.to_stream(copyir.lower(program))
        for mode in MODES:
            got = copyir.run(stream, inputs, mode=mode, seed=5)["y"]
            assert got.tobytes() == want.tobytes(), mode
    model = windows_model(x, inputs["y"], body, rows, buffers, band)
    assert want.tobytes() == model.tobytes()
