"""Running opaque computations: the DMA protocol on the refs they read and
write, the poison they write, and the warning where it ends in an output."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from copyir.backends.interpreter import MODES, check_stream
from copyir.backends.reference import run_reference

import copyir
from copyir import errors
from copyir.errors import CopyIRError, CopyIRWarning
from copyir.stream import (
    OPAQUE,
    Stream,
    load_npz,
    print_dma,
    read_dma,
    save_npz,
    to_program,
)

X = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
POISON_F32 = np.full((8, 128), np.nan, np.float32)
"""Pallas' interpret mode's uninitialized f32 value (bits 0x7FC00000)."""


def program(body: str, params: str = "x: f32[8, 128], y: f32[8, 128]") -> str:
    lines = "\n".join(f"  {line}" for line in body.strip().splitlines())
    return f"kernel k({params}) {{\n{lines}\n}}\n"


def run(text: str, inputs=None, **options) -> tuple[dict, list[str]]:
    """The run's outputs and the messages of its CopyIRWarnings."""
    module = copyir.parse(text, filename="t.cpy")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CopyIRWarning)
        out = copyir.run(module, {"x": X} if inputs is None else inputs, **options)
    return out, [str(w.message) for w in caught if w.category is CopyIRWarning]


def error_of(text: str) -> CopyIRError:
    with pytest.raises(CopyIRError) as caught:
        run(text)
    return caught.value


EXP = """
a = alloc f32[8, 128] @vmem
b = alloc f32[8, 128] @vmem
sync_copy x -> a
opaque "exp" (a) -> (b)
sync_copy b -> y
"""


def test_poison_copied_to_an_output_is_reported_at_the_opaque_computation():
    module = copyir.parse(program(EXP), filename="t.cpy")
    with pytest.warns(CopyIRWarning) as caught:
        out = copyir.run(module, {"x": X})
    (warning,) = caught
    assert str(warning.message) == errors.RUN_OPAQUE_OUTPUT.format(
        name="y", what="exp", count=1024, size=1024, first="y[0, 0]"
    )
    loc = warning.message.loc  # type: ignore[attr-defined]
    assert (loc.file, loc.line, loc.col) == ("t.cpy", 5, 3)
    assert out["y"].tobytes() == POISON_F32.tobytes()


def test_poison_overwritten_by_real_data_before_the_end_is_not_reported():
    body = EXP + "sync_copy a[0:4] -> y[0:4]\nsync_copy a[4:8] -> y[4:8]\n"
    out, warned = run(program(body))
    assert warned == []
    assert np.array_equal(out["y"], X)


def test_the_part_still_holding_poison_is_counted_from_its_first_element():
    body = EXP + "sync_copy a[0:3] -> y[0:3]\n"
    _, warned = run(program(body))
    assert warned == [
        errors.RUN_OPAQUE_OUTPUT.format(
            name="y", what="exp", count=5 * 128, size=1024, first="y[3, 0]"
        )
    ]


def test_a_computation_over_poison_makes_poison():
    body = """
a = alloc f32[8, 128] @vmem
b = alloc f32[8, 128] @vmem
c = alloc f32[8, 128] @vmem
sync_copy x -> a
opaque "dot_general" (a) -> (b)
c[...] = 2.0 * b + a
sync_copy c -> y
"""
    _, warned = run(program(body))
    assert warned == [
        errors.RUN_OPAQUE_OUTPUT.format(
            name="y", what="dot_general", count=1024, size=1024, first="y[0, 0]"
        )
    ]


def test_a_computation_of_real_data_over_poison_clears_it():
    body = EXP + "b[...] = 2.0 * a\nsync_copy b -> y\n"
    out, warned = run(program(body))
    assert warned == []
    assert np.array_equal(out["y"], 2 * X)


def test_poison_counts_as_written_for_a_later_read():
    """No read of memory nobody wrote: the DMA copies the poison on."""
    out, _ = run(program(EXP))
    assert check_stream(copyir.to_stream(copyir.lower(program(EXP)))) is not None
    assert np.isnan(out["y"]).all()


def test_a_read_of_memory_nobody_wrote():
    body = """
a = alloc f32[8, 128] @vmem
b = alloc f32[8, 128] @vmem
opaque "exp" (a[2:4]) -> (b)
sync_copy b -> y
"""
    err = error_of(program(body))
    assert str(err) == errors.RUN_COMPUTE_UNINITIALIZED.format(
        region="a[2:4, 0:128]", first="a[2, 0]"
    )
    assert (err.loc.line, err.loc.col) == (4, 3)


def test_a_read_racing_a_dma_in_flight_into_it():
    body = """
a = alloc f32[8, 128] @vmem
b = alloc f32[8, 128] @vmem
s = semaphore
copy_start x -> a, s
opaque "exp" (a) -> (b)
copy_wait x -> a, s
sync_copy b -> y
"""
    err = error_of(program(body))
    assert str(err) == errors.RUN_ACCESS_RACE.format(
        what="computation",
        action="reads",
        region="a[0:8, 0:128]",
        other="t.cpy:5:3",
        their="writes",
    )
    assert (err.loc.line, err.loc.col) == (6, 3)


def test_a_write_racing_a_dma_in_flight_out_of_it():
    body = """
a = alloc f32[8, 128] @vmem
s = semaphore
sync_copy x -> a
copy_start a -> y, s
opaque "exp" (a[0:2]) -> (a[4:8])
copy_wait a -> y, s
"""
    err = error_of(program(body))
    assert str(err) == errors.RUN_ACCESS_RACE.format(
        what="computation",
        action="writes",
        region="a[4:8, 0:128]",
        other="t.cpy:5:3",
        their="reads",
    )


def test_an_update_in_place_reads_before_it_writes():
    """`opaque (a) -> (a)` of fresh scratch is a read of unwritten memory,
    not covered by its own write."""
    body = 'a = alloc f32[8, 128] @vmem\nopaque "exp" (a) -> (a)\nsync_copy a -> y'
    assert str(error_of(program(body))) == errors.RUN_COMPUTE_UNINITIALIZED.format(
        region="a[0:8, 0:128]", first="a[0, 0]"
    )


LOOP = """
a = alloc f32[2, 8, 128] @vmem
b = alloc f32[8, 128] @vmem
sems = semaphore[2]
copy_start x -> a[0], sems[0]
for i in range(4) {
  copy_wait x -> a[i % 2], sems[i % 2]
  when i <= 2 {
    copy_start x -> a[(i + 1) % 2], sems[(i + 1) % 2]
  }
  opaque "exp" (a[i % 2]) -> (b)
}
b[...] = a[1] + 1.0
sync_copy b -> y
"""


def test_in_a_loop_the_interpreter_agrees_with_the_reference_in_every_mode():
    module = copyir.parse(program(LOOP), filename="t.cpy")
    expected = run_reference(module.ops.first, {"x": X})
    for mode in MODES:
        out, warned = run(program(LOOP), mode=mode, seed=3)
        assert warned == []
        assert out["y"].tobytes() == expected["y"].tobytes()
        assert np.array_equal(out["y"], X + 1)


def test_the_reference_writes_the_same_poison():
    module = copyir.parse(program(EXP))
    expected = run_reference(module.ops.first, {"x": X})
    out, _ = run(program(EXP))
    assert out["y"].tobytes() == expected["y"].tobytes() == POISON_F32.tobytes()


def lowered(text: str) -> Stream:
    return copyir.to_stream(copyir.lower(copyir.parse(text, filename="t.cpy")))


def test_the_stream_forms_keep_opaque_computations(tmp_path):
    stream = lowered(program(EXP))
    text = print_dma(to_program(stream))
    assert 'dma.opaque "exp" reads "vmem" 0 [128, 1] f32 [8, 128]' in text
    assert 'dma.opaque "exp" writes "vmem" 4096 [128, 1] f32 [8, 128]' in text
    assert read_dma(text) == stream
    save_npz(stream, tmp_path / "s.npz")
    assert load_npz(tmp_path / "s.npz") == stream
    assert stream.labels == ["exp"]


def test_a_hand_made_stream_names_an_unknown_label():
    stream = lowered(program(EXP))
    stream.lowered = False  # as if read from a file
    stream.instructions["label"][stream.instructions["op"] == OPAQUE] = 7
    with pytest.raises(CopyIRError) as caught:
        check_stream(stream)
    assert str(caught.value) == errors.STREAM_MALFORMED.format(
        why="instruction 2: label 7 of 1"
    )


@pytest.mark.parametrize(
    "access, message", [("reads", errors.HBM_LOAD), ("writes", errors.HBM_STORE)]
)
def test_a_hand_made_stream_refuses_an_opaque_computation_on_hbm(access, message):
    text = print_dma(to_program(lowered(program(EXP))))
    line = f'dma.opaque "exp" {access} "hbm" 0 [128, 1] f32 [8, 128]'
    start = text.index(f'dma.opaque "exp" {access}')
    end = text.index("  //", start)
    stream = read_dma(text[:start] + line + text[end:], "s.dma")
    with pytest.raises(CopyIRError) as caught:
        check_stream(stream)
    assert str(caught.value) == errors.STREAM_MALFORMED.format(why=message)
    assert caught.value.loc.line == (9 if access == "reads" else 10)


def test_an_update_in_place_keeps_the_poison_it_reads():
    """`b += a` reads b's poison before it writes b."""
    body = EXP + "b += a\nsync_copy b -> y\n"
    _, warned = run(program(body))
    assert warned == [
        errors.RUN_OPAQUE_OUTPUT.format(
            name="y", what="exp", count=1024, size=1024, first="y[0, 0]"
        )
    ]


def test_a_dma_that_adds_poison_makes_poison():
    body = """
a = alloc f32[8, 128] @vmem
b = alloc f32[8, 128] @vmem
s = semaphore
sync_copy x -> a
opaque "exp" (a) -> (b[0:2])
sync_copy x -> y
copy_start b[0:2] -> y[6:8], s, add
copy_wait b[0:2] -> y[6:8], s
"""
    out, warned = run(program(body))
    assert warned == [
        errors.RUN_OPAQUE_OUTPUT.format(
            name="y", what="exp", count=256, size=1024, first="y[6, 0]"
        )
    ]
    assert np.array_equal(out["y"][:6], X[:6]) and np.isnan(out["y"][6:]).all()


def test_the_warning_names_the_opaque_computation_that_wrote_the_first_element():
    body = """
a = alloc f32[8, 128] @vmem
b = alloc f32[8, 128] @vmem
sync_copy x -> a
opaque "first" (a) -> (b[4:8])
opaque "second" (a) -> (b[0:4])
sync_copy b -> y
"""
    _, warned = run(program(body))
    assert warned == [
        errors.RUN_OPAQUE_OUTPUT.format(
            name="y", what="second", count=1024, size=1024, first="y[0, 0]"
        )
    ]


PIPELINE = """\
kernel k(x: f32[64, 256], y: f32[64, 256]) {
  m = alloc f32[] @smem
  pipeline grid=(4, 2) dimension_semantics=(parallel, arbitrary)
      in  x block=(16, 128) index=(i, j) -> (i, j)
      out y block=(16, 128) index=(i, j) -> (i, j)
      (xw, yw) {
    opaque "reduce_max" (xw) -> (m)
    opaque "exp" (xw, m) -> (yw)
  }
}
"""


def test_in_a_pipeline_the_output_holds_poison_on_both_paths():
    x = np.arange(64 * 256, dtype=np.float32).reshape(64, 256)
    expected = run_reference(copyir.parse(PIPELINE).ops.first, {"x": x})
    assert np.isnan(expected["y"]).all()
    for mode in MODES:
        out, warned = run(PIPELINE, {"x": x}, mode=mode, seed=5)
        assert out["y"].tobytes() == expected["y"].tobytes()
        assert warned == [
            errors.RUN_OPAQUE_OUTPUT.format(
                name="y", what="exp", count=16384, size=16384, first="y[0, 0]"
            )
        ]


def test_a_pipeline_body_may_not_write_its_input_window():
    text = PIPELINE.replace("-> (yw)", "-> (yw, xw)")
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text))
    assert str(caught.value) == errors.PIPELINE_WRITES_INPUT.format(
        window="xw", name="x"
    )
