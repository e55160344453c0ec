"""Running scopes (`copy.scope`, Pallas' `pl.run_scoped`): fresh buffers and
semaphores on every entry, and no DMA in flight on them when a scope ends,
the same in every completion mode, in the data-free check, and on the
reference path."""

from __future__ import annotations

import numpy as np
import pytest
from copyir.backends.interpreter import MODES, fill_inputs
from copyir.backends.reference import run_reference

import copyir
from copyir import errors
from copyir.errors import CopyIRError

NAME = "t.cpy"
RUNS = [("random", 0), ("random", 1), ("eager", 0), ("on_wait", 0)]
assert {mode for mode, _ in RUNS} == set(MODES)


def run_error(text: str) -> list[CopyIRError]:
    """The error of every completion mode and of the data-free check, which
    must all be the same."""
    module = copyir.parse(text, NAME)
    stream = copyir.to_stream(copyir.lower(module))
    inputs = fill_inputs(stream, {}, "iota")
    caught = []
    for mode, seed in RUNS:
        with pytest.raises(CopyIRError) as error:
            copyir.run(stream, inputs, mode=mode, seed=seed)
        caught.append(error.value)
    with pytest.raises(CopyIRError) as error:
        copyir.check_protocol(module)
    caught.append(error.value)
    first = caught[0]
    for other in caught[1:]:
        assert (str(other), other.loc, other.notes) == (
            str(first),
            first.loc,
            first.notes,
        )
    return caught


GRID_DMA = """\
kernel grid_dma(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  for i in range(8) {
    scope {
      sem = semaphore
      copy_start x[ds(8 * i, 8)] -> y[ds(8 * i, 8)], sem
      copy_wait x[ds(8 * i, 8)] -> y[ds(8 * i, 8)], sem
    }
  }
}
"""


def test_a_fresh_semaphore_per_step_copies_hbm_to_hbm():
    """jax's test_hbm_hbm_grid_dma: a fresh DMA semaphore per grid step."""
    x = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    module = copyir.parse(GRID_DMA, NAME)
    for mode, seed in RUNS:
        out = copyir.run(module, {"x": x}, mode=mode, seed=seed)
        assert np.array_equal(out["y"], x)
    assert np.array_equal(run_reference(module.ops.first, {"x": x})["y"], x)


SCALE = """\
kernel scale(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  for i in range(8) {
    scope {
      buf = alloc f32[8, 128] @vmem
      sems = semaphore[2]
      copy_start x[ds(8 * i, 8)] -> buf, sems[0]
      copy_wait x[ds(8 * i, 8)] -> buf, sems[0]
      buf[...] = 3.0 * buf
      copy_start buf -> y[ds(8 * i, 8)], sems[1]
      copy_wait buf -> y[ds(8 * i, 8)], sems[1]
    }
  }
}
"""


def test_a_scoped_buffer_in_a_loop_agrees_with_the_reference():
    x = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    module = copyir.parse(SCALE, NAME)
    expected = run_reference(module.ops.first, {"x": x})
    assert np.array_equal(expected["y"], 3 * x)
    for mode, seed in RUNS:
        out = copyir.run(module, {"x": x}, mode=mode, seed=seed)
        assert out["y"].tobytes() == expected["y"].tobytes()


def test_each_entry_poisons_the_buffer_afresh():
    """Iteration 1 reads what iteration 0 wrote into the same memory: a
    read of memory nobody wrote, in this entry."""
    (error, *_) = run_error(
        """\
kernel poison(x: f32[8, 128] @hbm, y: f32[16, 128] @hbm) {
  for i in range(2) {
    scope {
      buf = alloc f32[8, 128] @vmem
      sem = semaphore
      when i == 0 {
        copy_start x -> buf, sem
        copy_wait x -> buf, sem
      }
      copy_start buf -> y[ds(8 * i, 8)], sem
      copy_wait buf -> y[ds(8 * i, 8)], sem
    }
  }
}
"""
    )
    assert str(error) == (
        errors.RUN_UNINITIALIZED.format(region="buf[0:8, 0:128]", first="buf[0, 0]")
        + ", at i = 1"
    )
    assert (error.loc.file, error.loc.line) == (NAME, 10)


def test_the_reference_path_poisons_each_entry_too():
    module = copyir.parse(
        """\
kernel poison(x: f32[8, 128] @hbm, y: f32[16, 128] @hbm) {
  for i in range(2) {
    scope {
      buf = alloc f32[8, 128] @vmem
      when i == 0 {
        sync_copy x -> buf
      }
      sync_copy buf -> y[ds(8 * i, 8)]
    }
  }
}
""",
        NAME,
    )
    x = np.ones((8, 128), np.float32)
    y = run_reference(module.ops.first, {"x": x})["y"]
    assert np.array_equal(y[:8], x)
    assert np.isnan(y[8:]).all()


IN_FLIGHT_OUT_OF_BUFFER = """\
kernel leaves(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  out = semaphore
  for i in range(8) {
    scope {
      buf = alloc f32[8, 128] @vmem
      sem = semaphore
      copy_start x[ds(8 * i, 8)] -> buf, sem
      copy_wait x[ds(8 * i, 8)] -> buf, sem
      copy_start buf -> y[ds(8 * i, 8)], out
    }
    copy_wait x[0:8] -> y[0:8], out
  }
}
"""


def test_a_dma_out_of_a_scoped_buffer_left_in_flight_is_reported_at_it():
    (error, *_) = run_error(IN_FLIGHT_OUT_OF_BUFFER)
    assert str(error) == (
        errors.RUN_SCOPE_IN_FLIGHT.format(bytes=4096, sem="out", name="buf")
        + ", at i = 0"
    )
    assert (error.loc.file, error.loc.line, error.loc.col) == (NAME, 9, 7)
    (note,) = error.notes
    assert note.message == errors.RUN_SCOPE_ENDS
    assert (note.loc.line, note.loc.col) == (4, 5)


def test_a_dma_into_a_scoped_buffer_left_in_flight_is_reported():
    (error, *_) = run_error(
        """\
kernel into(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  s = semaphore
  scope {
    buf = alloc f32[8, 128] @vmem
    copy_start x -> buf, s
  }
  copy_wait x -> y, s
}
"""
    )
    assert str(error) == errors.RUN_SCOPE_IN_FLIGHT.format(
        bytes=4096, sem="s", name="buf"
    )
    assert error.loc.line == 5


def test_a_dma_on_a_scoped_semaphore_left_in_flight_owes_its_bytes():
    (error, *_) = run_error(
        """\
kernel owes(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  sync_copy x -> buf
  scope {
    sem = semaphore
    copy_start buf -> y, sem
  }
  copy_wait buf -> y, s
}
"""
    )
    assert str(error) == errors.RUN_SCOPE_IN_FLIGHT.format(
        bytes=4096, sem="sem", name="sem"
    )
    assert error.loc.line == 7
    assert [n.message for n in error.notes] == [
        errors.RUN_SCOPE_ENDS,
        errors.RUN_SCOPE_SEMAPHORE.format(sem="sem", bytes=4096),
    ]
    assert error.notes[0].loc.line == 5


def test_a_dma_on_the_kernels_memory_may_outlive_a_scope():
    """Only the scope's own buffers and semaphores end with it."""
    module = copyir.parse(
        """\
kernel outlives(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  buf = alloc f32[8, 128] @vmem
  s = semaphore
  copy_start x -> buf, s
  scope {
    t = semaphore
    tmp = alloc f32[8, 128] @vmem
    copy_start x -> tmp, t
    copy_wait x -> tmp, t
  }
  copy_wait x -> buf, s
  sync_copy buf -> y
}
""",
        NAME,
    )
    x = np.full((8, 128), 2.0, np.float32)
    for mode, seed in RUNS:
        assert np.array_equal(
            copyir.run(module, {"x": x}, mode=mode, seed=seed)["y"], x
        )


def test_the_first_of_several_scope_errors_is_the_earliest_end():
    """An inner scope ends first: its error wins over the outer one's."""
    (error, *_) = run_error(
        """\
kernel nested(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  scope {
    outer = semaphore
    scope {
      inner = semaphore
      buf = alloc f32[8, 128] @vmem
      copy_start x -> buf, inner
      copy_start x -> y, outer
    }
  }
}
"""
    )
    assert str(error) == errors.RUN_SCOPE_IN_FLIGHT.format(
        bytes=4096, sem="inner", name="buf"
    )
    assert error.loc.line == 7
    assert error.notes[0].loc.line == 4


def test_a_scope_in_a_long_loop_stays_a_few_instructions():
    module = copyir.parse(
        GRID_DMA.replace("range(8)", "range(200000)")
        .replace("x: f32[64, 128]", "x: f32[1600000, 128]")
        .replace("y: f32[64, 128]", "y: f32[1600000, 128]"),
        NAME,
    )
    stream = copyir.to_stream(copyir.lower(module))
    assert len(stream.instructions) == 3
    assert [loop.trip_count for loop in stream.loops] == [200000]


def test_the_stream_text_and_npz_round_trip_releases(tmp_path):
    from copyir.stream import load_npz, parse_dma, print_dma, save_npz

    program = copyir.lower(copyir.parse(SCALE, NAME))
    text = print_dma(program)
    assert 'dma.release "vmem" 0 [128, 1] f32 [8, 128]' in text
    assert "dma.release_sem sem 0" in text and "dma.release_sem sem 1" in text
    again = print_dma(parse_dma(text, "t.dma"))
    assert again == text
    stream = copyir.to_stream(program)
    save_npz(stream, tmp_path / "t.npz")
    assert print_dma(copyir.lower(load_npz(tmp_path / "t.npz"))) == text


def test_a_hand_made_release_of_part_of_a_buffer_checks_that_part():
    """A release's box is what it releases: a DMA in flight elsewhere in the
    buffer does not meet it."""
    header = """\
dma.program "k" target "default" semaphores 1 {
  dma.buffer "x" "hbm" 0 f32 [8, 128] param
  dma.buffer "buf" "vmem" 0 f32 [8, 128]
  dma.start "hbm" 0 [128, 1] -> "vmem" 0 [128, 1] f32 [4, 128] sem 0
"""
    from copyir.stream import from_program, parse_dma

    def check(release: str) -> None:
        text = header + release + "  dma.wait sem 0 bytes 2048\n}\n"
        copyir.check_protocol(from_program(parse_dma(text, "t.dma")))

    check('  dma.release "vmem" 2048 [128, 1] f32 [4, 128]\n')
    with pytest.raises(CopyIRError) as caught:
        check('  dma.release "vmem" 0 [128, 1] f32 [8, 128]\n')
    assert str(caught.value) == errors.RUN_SCOPE_IN_FLIGHT.format(
        bytes=2048, sem="0", name="buf"
    )


@pytest.mark.parametrize(
    ("release", "message"),
    [
        (
            'dma.release "vmem" 2048 [128, 1] f32 [8, 128]',
            errors.RUN_OUT_OF_BOUNDS.format(
                end="destination",
                region="vmem[2048:6144]",
                why="it runs past the end of buffer buf (vmem[0:4096])",
            ),
        ),
        (
            "dma.release_sem sem 3",
            errors.STREAM_MALFORMED.format(why="semaphore 3 in a program of 1"),
        ),
    ],
)
def test_a_hand_made_release_is_validated_like_any_instruction(release, message):
    from copyir.stream import read_dma

    text = (
        'dma.program "k" target "default" semaphores 1 {\n'
        '  dma.buffer "buf" "vmem" 0 f32 [8, 128]\n'
        f"  {release}\n"
        "}\n"
    )
    with pytest.raises(CopyIRError) as caught:
        copyir.check_protocol(read_dma(text, "t.dma"))
    assert str(caught.value) == message
    assert caught.value.loc is not None and caught.value.loc.line == 3
