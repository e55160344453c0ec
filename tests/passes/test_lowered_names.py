"""Names a lowering makes are fresh in their kernel, a bad stream of
copyir's own lowering is copyir's bug (exit 3), and grids and loops nest
past numpy's dimension limits.

Classes covered: two pipelines over one input, `in x` with `out x`, a
user's scratch named like a made name (and like its first fresh
alternative), pipelines in a loop and nested in a pipeline, an unnamed
buffer beside a user's `buffer2`, the printed expansion parsed back in both
forms; every example and generated program lowered without an internal
error; grids of 70 dimensions (loops and pipelines) and 70 nested loops.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLES
from hypothesis import HealthCheck, given, settings
from loop_programs import loop_programs
from pipeline_programs import pipelines

import copyir
from copyir import cli, errors
from copyir.api import apply_passes, lowered_stream, pipeline
from copyir.errors import CopyIRError, InternalError
from copyir.names import FreshNames

ROWS = "f32[256, 128] @hbm"
SPEC = "block=(128, 128) index=(i) -> (i, 0)"


def body(text: str) -> str:
    return text.replace("SPEC", SPEC).replace("ROWS", ROWS)


TWO_PIPELINES_ONE_INPUT = body("""\
kernel two(x: ROWS, y: ROWS, z: ROWS) {
  pipeline grid=(2,) in x SPEC out y SPEC (xw, yw) {
    yw[...] = xw + 1.0
  }
  pipeline grid=(2,) in x SPEC out z SPEC (xw, zw) {
    zw[...] = 2.0 * xw
  }
}
""")

SCRATCH_NAMED_LIKE_A_WINDOW = body("""\
kernel scratch(x: ROWS, y: ROWS) {
  x_window = alloc f32[128, 128] @vmem
  x_window_1 = alloc f32[128, 128] @vmem
  x_sems = semaphore
  pipeline grid=(2,) in x SPEC out y SPEC (xw, yw) {
    x_window[...] = xw + 1.0
    x_window_1[...] = x_window * 3.0
    yw[...] = x_window_1
  }
}
""")

IN_AND_OUT_OF_ONE_REF = body("""\
kernel inout(x: ROWS) {
  pipeline grid=(2,) in x SPEC out x SPEC (xi, xo) {
    xo[...] = 2.0 * xi
  }
}
""")

PIPELINES_IN_A_LOOP = body("""\
kernel inloop(x: ROWS, y: ROWS) {
  for r in range(2) {
    pipeline grid=(2,) in x SPEC out y SPEC (xw, yw) {
      yw[...] = xw + 1.0
    }
    pipeline grid=(2,) in y SPEC out x SPEC (yw, xw) {
      xw[...] = yw
    }
  }
}
""")

NESTED_PIPELINES = body("""\
kernel nested(x: ROWS, y: ROWS, z: ROWS) {
  pipeline grid=(2,) in x SPEC out y SPEC (xw, yw) {
    pipeline grid=(2,)
        in x block=(128, 128) index=(j) -> (j, 0)
        out z block=(128, 128) index=(j) -> (j, 0)
        (xw2, zw) {
      zw[...] = xw2 - 1.0
    }
    yw[...] = xw
  }
}
""")


def rows(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((256, 128)).astype(np.float32)


CASES = {
    "two pipelines, one input": (
        TWO_PIPELINES_ONE_INPUT,
        lambda x, y, z: {"x": x, "y": x + 1, "z": 2 * x},
    ),
    "scratch named x_window": (
        SCRATCH_NAMED_LIKE_A_WINDOW,
        lambda x, y: {"x": x, "y": (x + 1) * 3},
    ),
    "in x and out x": (IN_AND_OUT_OF_ONE_REF, lambda x: {"x": 2 * x}),
    "pipelines in a loop": (
        PIPELINES_IN_A_LOOP,
        lambda x, y: {"x": x + 1 + 1, "y": x + 1 + 1},
    ),
    "nested pipelines": (
        NESTED_PIPELINES,
        lambda x, y, z: {"x": x, "y": x, "z": x - 1},
    ),
}


def check_outputs(text: str, want, filename: str = "p.cpy") -> None:
    module = copyir.parse(text, filename)
    copyir.verify(module)
    kernel = module.ops.first
    inputs = {name: rows(k) for k, name in enumerate(kernel.param_names)}
    expected = want(*inputs.values())
    for mode in ("random", "eager", "on_wait"):
        got = copyir.run(text, inputs, mode=mode)
        for name, value in expected.items():
            np.testing.assert_array_equal(got[name], value, err_msg=f"{name} {mode}")


@pytest.mark.parametrize("case", CASES)
def test_made_names_never_collide_and_the_program_runs(case):
    text, want = CASES[case]
    check_outputs(text, want)


@pytest.mark.parametrize("case", CASES)
def test_every_stream_buffer_and_semaphore_has_its_own_name(case):
    stream = lowered_stream(copyir.parse(CASES[case][0]))
    names = [b.name for b in stream.buffers]
    assert len(set(names)) == len(names), names
    sems = [s.name for s in stream.semaphore_names]
    assert len(set(sems)) == len(sems), sems


def test_made_names_take_the_first_free_suffix():
    stream = lowered_stream(copyir.parse(SCRATCH_NAMED_LIKE_A_WINDOW))
    assert sorted(b.name for b in stream.buffers) == [
        "x",
        "x_window",
        "x_window_1",
        "x_window_2",
        "y",
        "y_window",
    ]
    assert [s.name for s in stream.semaphore_names] == ["x_sems", "x_sems_1", "y_sems"]


def test_in_and_out_of_one_ref_get_a_window_each():
    stream = lowered_stream(copyir.parse(IN_AND_OUT_OF_ONE_REF))
    assert sorted(b.name for b in stream.buffers) == ["x", "x_window", "x_window_1"]


@pytest.mark.parametrize("form", ["cpy", "mlir"])
@pytest.mark.parametrize("case", CASES)
def test_the_printed_expansion_parses_back_and_runs_alike(case, form):
    text, want = CASES[case]
    module = copyir.parse(text, "p.cpy")
    copyir.verify(module)
    apply_passes(module, pipeline("expand-pipelines"))
    printed = copyir.to_text(module, form)
    check_outputs(printed, want, f"expanded.{form}")
    again = lowered_stream(copyir.parse(printed, f"expanded.{form}"))
    names = sorted(b.name for b in again.buffers)
    assert names == sorted(b.name for b in lowered_stream(copyir.parse(text)).buffers)


def test_an_unnamed_buffer_does_not_take_a_users_name():
    ref = "!copy.ref<8xf32, hbm>"
    text = f"""copy.kernel @k(%x: {ref}, %y: {ref}) {{
  %0 = copy.alloc : !copy.ref<8xf32, vmem>
  %buffer2 = copy.alloc : !copy.ref<8xf32, vmem>
  copy.sync_copy %x -> %0 : ({ref}) -> (!copy.ref<8xf32, vmem>)
  copy.sync_copy %0 -> %buffer2 : (!copy.ref<8xf32, vmem>) -> (!copy.ref<8xf32, vmem>)
  copy.sync_copy %buffer2 -> %y : (!copy.ref<8xf32, vmem>) -> ({ref})
}}
"""
    stream = lowered_stream(copyir.parse(text, format="mlir"))
    assert sorted(b.name for b in stream.buffers) == ["buffer2", "buffer2_1", "x", "y"]
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(copyir.run(stream, {"x": x})["y"], x)


def test_fresh_names_skip_taken_ones_without_retrying_them():
    names = FreshNames(["a", "a_1", "a_3"])
    assert [names("a") for _ in range(3)] == ["a_2", "a_4", "a_5"]
    assert names("b") == "b"


# -- a bad stream of copyir's own lowering is copyir's bug -----------------------


def colliding_names(monkeypatch) -> None:
    """Break the lowering as it was: every made name is its base."""
    monkeypatch.setattr(FreshNames, "__call__", lambda self, base: base)


def test_a_bad_lowered_stream_is_an_internal_error(monkeypatch, tmp_path, capsys):
    colliding_names(monkeypatch)
    path = tmp_path / "two.cpy"
    path.write_text(TWO_PIPELINES_ONE_INPUT)
    status = cli.main(["run", "--fill-inputs", "iota", str(path)])
    _, err = capsys.readouterr()
    why = errors.LOWERED_STREAM_INVALID.format(
        why="buffer x_window is declared twice", where=f"{path}:5:3"
    )
    assert status == 3
    assert err == (
        f"copyir: internal error: InternalError: {why}\n"
        "This is a bug in copyir; please report it with the input.\n"
    )
    assert "Malformed" not in err


def test_a_bad_lowered_stream_is_an_internal_error_in_the_api(monkeypatch):
    colliding_names(monkeypatch)
    with pytest.raises(InternalError) as caught:
        copyir.run(TWO_PIPELINES_ONE_INPUT, {"x": rows(0)})
    assert not isinstance(caught.value, CopyIRError)
    with pytest.raises(InternalError):
        copyir.check_protocol(TWO_PIPELINES_ONE_INPUT)


def test_a_hand_made_stream_is_still_malformed(tmp_path, capsys):
    lowered = copyir.dma_text(copyir.lower(TWO_PIPELINES_ONE_INPUT))
    path = tmp_path / "two.dma"
    path.write_text(lowered.replace('"z_window"', '"y_window"'))
    status = cli.main(["run", "--fill-inputs", "iota", str(path)])
    _, err = capsys.readouterr()
    assert status == 1
    assert (
        f"error: {errors.STREAM_MALFORMED.format(why='buffer y_window is declared twice')}"
        in err
    )


# -- no example or generated program reaches an internal error -------------------


def lower_and_validate(module) -> None:
    """Lower as run does and validate; a user error is not this test's
    business (another check refuses it), an InternalError fails it."""
    try:
        lowered_stream(module).validate()
    except InternalError as err:
        pytest.fail(f"the lowering made a bad stream: {err}")
    except CopyIRError:
        pass  # the user's mistake: not this test's business


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.cpy")), ids=lambda p: p.stem)
def test_no_example_reaches_an_internal_error(path):
    lowered_stream(copyir.parse(path.read_text(), str(path))).validate()


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(pipelines())
def test_no_generated_pipeline_reaches_an_internal_error(p):
    lower_and_validate(copyir.parse(p.mlir(), format="mlir"))


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(loop_programs())
def test_no_generated_loop_program_reaches_an_internal_error(program):
    lower_and_validate(program.parse())


# -- grids and loops past numpy's 32 and 64 dimensions ----------------------------

DEPTH = 70


def test_a_grid_of_70_dimensions_runs():
    names = ", ".join(f"i{k}" for k in range(DEPTH))
    extents = ", ".join("2" if k in (3, 66) else "1" for k in range(DEPTH))
    text = f"""kernel g(x: f32[2, 2, 8] @hbm, y: f32[2, 2, 8] @hbm) {{
  for {names} in grid({extents}) {{
    sync_copy x[i66, i3] -> y[i3, i66]
  }}
}}
"""
    copyir.verify(text)
    x = np.arange(32, dtype=np.float32).reshape(2, 2, 8)
    np.testing.assert_array_equal(copyir.run(text, {"x": x})["y"], x.swapaxes(0, 1))


def test_a_pipeline_grid_of_70_dimensions_runs():
    names = ", ".join(f"i{k}" for k in range(DEPTH))
    extents = ", ".join("2" if k in (0, 69) else "1" for k in range(DEPTH))
    block = f"block=(8, 128) index=({names}) -> (2 * i0 + i69, 0)"
    text = f"""kernel p(x: f32[32, 128] @hbm, y: f32[32, 128] @hbm) {{
  pipeline grid=({extents}) in x {block} out y {block} (xw, yw) {{
    yw[...] = xw + 1.0
  }}
}}
"""
    copyir.verify(text)
    x = np.arange(32 * 128, dtype=np.float32).reshape(32, 128)
    np.testing.assert_array_equal(copyir.run(text, {"x": x})["y"], x + 1)


def test_the_printed_expansion_of_a_70_dimension_pipeline_parses_back():
    """Found by review: the printer writes a linearised grid step as a sum
    of a term per dimension, once counted one nesting level per term."""
    names = ", ".join(f"i{k}" for k in range(DEPTH))
    extents = ", ".join("2" if k in (0, 69) else "1" for k in range(DEPTH))
    block = f"block=(8, 128) index=({names}) -> (2 * i0 + i69, 0)"
    text = f"""kernel p(x: f32[32, 128] @hbm, y: f32[32, 128] @hbm) {{
  pipeline grid=({extents}) in x {block} out y {block} (xw, yw) {{
    yw[...] = xw + 1.0
  }}
}}
"""
    module = copyir.parse(text)
    apply_passes(module, pipeline("expand-pipelines"))
    printed = copyir.to_text(module, "cpy")
    x = np.arange(32 * 128, dtype=np.float32).reshape(32, 128)
    np.testing.assert_array_equal(copyir.run(printed, {"x": x})["y"], x + 1)


def nested_loops_mlir(depth: int) -> str:
    ref = "!copy.ref<2x8xf32, hbm>"
    loops = "".join(
        f"copy.for %i{k} in range(0, {2 if k == 40 else 1}) {{\n" for k in range(depth)
    )
    return (
        f"copy.kernel @nest(%x: {ref}, %y: {ref}) {{\n{loops}"
        f"%a = copy.view %x[%i40] : {ref}\n"
        f"%b = copy.view %y[%i40] : {ref}\n"
        "copy.sync_copy %a -> %b : (!copy.ref<8xf32, hbm>) -> "
        "(!copy.ref<8xf32, hbm>)\n" + "}\n" * depth + "}\n"
    )


def test_70_nested_loops_run():
    text = nested_loops_mlir(DEPTH)
    copyir.verify(text)
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    np.testing.assert_array_equal(copyir.run(text, {"x": x})["y"], x)


def test_70_nested_loops_in_the_authoring_syntax_are_a_located_limit():
    """64 nested loops parse; the 65th (`i64`) is the error, at its `for`."""
    from copyir import pytree

    lines = [f"{'  ' * (k + 1)}for i{k} in range(1) {{" for k in range(DEPTH)]
    text = "kernel k(x: f32[8] @hbm, y: f32[8] @hbm) {\n" + "\n".join(lines)
    text += "\n" + "sync_copy x -> y\n" + "}\n" * (DEPTH + 1)
    with pytest.raises(CopyIRError) as caught:
        copyir.parse(text, "deep.cpy")
    assert str(caught.value) == errors.NESTED_TOO_DEEP.format(limit=pytree.MAX_DEPTH)
    assert (caught.value.loc.line, caught.value.loc.col) == (66, 131)
