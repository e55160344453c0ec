"""Completion models: one interface (`CompletionModel.schedule`, asked with
the program's `DmaProtocol`), the three named models' schedules on small
streams known by hand, the one place that picks a model by its mode, and
a new model plugging in as one class."""

from __future__ import annotations

import numpy as np
import pytest
from copyir.backends.interpreter import (
    MODELS,
    MODES,
    CompletionModel,
    Eager,
    Executable,
    OnWait,
    Random,
    Schedule,
    completion_model,
    prepare,
)
from copyir.backends.protocol import DmaProtocol
from programs import SHARED

from copyir import errors
from copyir.errors import CopyIRError
from copyir.stream import read_dma


def protocol_of(text: str) -> DmaProtocol:
    return prepare(read_dma(text, "models.dma"), frozenset({"x"})).protocol


def test_every_mode_names_a_model():
    assert set(MODELS) == set(MODES)
    assert isinstance(completion_model("eager"), Eager)
    assert isinstance(completion_model("on_wait"), OnWait)
    assert completion_model("random", 5) == Random(5)


def test_an_unknown_mode_or_a_bad_seed_is_refused_in_one_place():
    with pytest.raises(CopyIRError) as caught:
        completion_model("lazy")
    assert str(caught.value) == errors.RUN_UNKNOWN_MODE.format(mode="lazy")
    for seed in (-1, 2**63, True, 1.5):
        with pytest.raises(CopyIRError) as caught:
            completion_model("eager", seed)
        assert str(caught.value) == errors.RUN_BAD_SEED.format(seed=seed)


def test_eager_moves_each_dma_at_its_start():
    schedule = Eager().schedule(protocol_of(SHARED))
    assert schedule.completions == [(0, 0), (1, 1), (4, 4), (6, 6)]


def test_on_wait_moves_the_most_recently_started_dma_first():
    """The first wait on s[0] needs 4096 bytes: it pops DMA 1 (started at
    event 1); the second pops DMA 0."""
    schedule = OnWait().schedule(protocol_of(SHARED))
    assert schedule.completions == [(2, 1), (3, 0), (5, 4), (7, 6)]


def test_on_wait_moves_dmas_at_waits_only():
    """An invalidation and a scope's releases (events with a box's bytes
    and a semaphore column of 0) are not waits: the DMA on semaphore 0
    moves inside its own wait, event 4."""
    schedule = OnWait().schedule(
        protocol_of(
            """\
dma.program "k" target "default" semaphores 2 {
  dma.buffer "x" "hbm" 0 f32 [8, 128] param
  dma.buffer "a" "vmem" 0 f32 [8, 128]
  dma.buffer "b" "vmem" 4096 f32 [8, 128]
  dma.start "hbm" 0 [128, 1] -> "vmem" 0 [128, 1] f32 [8, 128] sem 0
  dma.invalidate "vmem" 4096 [128, 1] f32 [8, 128]
  dma.release "vmem" 4096 [128, 1] f32 [8, 128]
  dma.release_sem sem 1
  dma.wait sem 0 bytes 4096
}
"""
        )
    )
    assert schedule.completions == [(4, 0)]


def test_random_moves_each_dma_inside_its_window_reproducibly():
    protocol = protocol_of(SHARED)
    window = dict(zip(protocol.starts.tolist(), protocol.finish.tolist(), strict=True))
    seen = set()
    for seed in range(8):
        schedule = Random(seed).schedule(protocol)
        assert schedule.completions == Random(seed).schedule(protocol).completions
        assert sorted(schedule.moved.tolist()) == [0, 1, 4, 6]
        assert list(schedule.moments) == sorted(schedule.moments)
        for moment, start in schedule.completions:
            assert start <= moment < window[start]
        seen.add(tuple(schedule.completions))
    assert len(seen) > 1  # DMAs 0 and 1 share the window [0, 3) or [1, 3)


def test_only_random_permutes_parallel_loops():
    text = """dma.program "par" target "default" semaphores 1 {
  dma.buffer "x" "hbm" 0 f32 [8, 128] param
  dma.buffer "y" "hbm" 4096 f32 [8, 128] param
  dma.loop "i" 8 parallel {
    dma.start "hbm" {(d0) -> (d0 * 128)} [128, 1] -> "hbm" {(d0) -> (d0 * 128 + 4096)} [128, 1] f32 [1, 128] sem 0
    dma.wait sem 0 bytes 512
  }
}
"""
    stream = read_dma(text, "par.dma")
    assert Eager().iteration_order(stream) == {}
    assert OnWait().iteration_order(stream) == {}
    (order,) = Random(3).iteration_order(stream).values()
    assert sorted(order.tolist()) == list(range(8))


class Late(CompletionModel):
    """Each DMA moves at the wait that finishes it: a model written in one
    class, as a timed model would be."""

    def schedule(self, protocol: DmaProtocol) -> Schedule:
        order = np.argsort(protocol.finish, kind="stable")
        return Schedule(protocol.finish[order], protocol.starts[order])


def test_a_new_model_plugs_in_as_one_class():
    stream = read_dma(SHARED, "models.dma")
    x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
    late = Executable(stream, {"x"}, Late())
    assert late.completions == [(3, 0), (3, 1), (5, 4), (7, 6)]
    expected = Executable(stream, {"x"}, "eager").run({"x": x})["y"]
    assert np.array_equal(late.run({"x": x})["y"], expected)
    assert np.array_equal(expected, x)
