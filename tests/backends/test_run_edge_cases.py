"""Small programs at the edges of running: rank-0 refs, views indexed in
every dimension, all-squeezed windows, the first unwritten element of an
indexed view, every parameter filled, semaphores named in runtime errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLES
from copyir.backends.interpreter import fill_inputs
from copyir.backends.reference import run_reference

import copyir
from copyir import errors
from copyir.errors import CopyIRError, CopyIRWarning


def agree(text: str, inputs: dict) -> dict:
    module = copyir.parse(text)
    expected = run_reference(module.ops.first, inputs)
    got = copyir.run(module, inputs)
    for name, value in expected.items():
        assert np.ascontiguousarray(got[name]).tobytes() == value.tobytes(), name
    return got


@pytest.mark.parametrize(
    "text",
    [
        # A rank-0 ref, copied by a DMA and through a trivial window.
        "kernel k(x: f32[] @hbm, y: f32[] @hbm) {\n  s = semaphore\n"
        "  copy_start x -> y, s\n  copy_wait x -> y, s\n}\n",
        "kernel k(x: f32[] @hbm, y: f32[] @hbm) {\n  b = buffered_ref x, block=()\n"
        "  buffered_copy x -> b\n  buffered_copy b -> y\n}\n",
        # Every dimension indexed, and an all-squeezed window.
        "kernel k(x: f32[4] @hbm, y: f32[4] @hbm) {\n  s = semaphore\n"
        "  copy_start x[2] -> y[1], s\n  copy_wait x[2] -> y[1], s\n}\n",
        "kernel k(x: f32[4] @hbm, y: f32[4] @hbm) {\n  b = buffered_ref x, block=(None,), buffers=1\n"
        "  buffered_copy x -> b[2]\n  buffered_copy b[2] -> y\n}\n",
    ],
)
def test_scalars_run_in_both_paths(text):
    shape = (4,) if "f32[4]" in text else ()
    x = np.arange(np.prod(shape, dtype=int), dtype=np.float32).reshape(shape) + 3
    if not shape:
        agree(text, {"x": x})
        return
    # One element of y is written; the other three keep poison, and say so.
    partly = errors.RUN_PARTLY_WRITTEN.format(
        name="y", unwritten=3, size=4, first="y[0]"
    )
    with pytest.warns(CopyIRWarning) as caught:
        agree(text, {"x": x})
    assert [str(w.message) for w in caught] == [partly]


def test_first_unwritten_element_of_an_indexed_view():
    text = (
        "kernel k(x: f32[8] @hbm, y: f32[5] @hbm) {\n  buf = alloc f32[4, 8] @vmem\n"
        "  sync_copy x[0:2] -> buf[2, 0:2]\n  sync_copy buf[2, 0:5] -> y\n}\n"
    )
    with pytest.raises(CopyIRError) as caught:
        copyir.run(copyir.parse(text), {"x": np.zeros(8, np.float32)})
    assert str(caught.value).endswith("(first unwritten: buf[2, 2])")


def test_fill_inputs_binds_every_parameter():
    stream = copyir.to_stream(
        copyir.lower(copyir.parse((EXAMPLES / "roundtrip.cpy").read_text()))
    )
    filled = fill_inputs(stream, {}, "iota")
    assert sorted(filled) == ["a", "b", "out_a", "out_b"]
    assert filled["b"].dtype == np.int32 and filled["b"][0, 3] == 3


def test_semaphores_keep_their_names_in_runtime_errors():
    text = (
        "kernel k(x: f32[4], y: f32[4]) {\n  sems = semaphore[2, 2]\n"
        "  copy_start x -> y, sems[1, 0]\n  copy_wait x -> y, sems[1, 1]\n}\n"
    )
    with pytest.raises(CopyIRError) as caught:
        copyir.run(copyir.parse(text), {"x": np.zeros(4, np.float32)})
    assert str(caught.value) == errors.RUN_UNSATISFIABLE_WAIT.format(
        sem="sems[1, 1]", need=16, available=0
    )
    stream = copyir.to_stream(copyir.lower(copyir.parse(text)))
    assert [stream.sem_name(i) for i in range(4)] == [
        "sems[0, 0]",
        "sems[0, 1]",
        "sems[1, 0]",
        "sems[1, 1]",
    ]
