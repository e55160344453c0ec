"""The DMA verifier's checks of two ends: a
type mismatch keeps Mosaic's message and notes both types; a start's ends
must not overlap, a wait's may (it only names a byte count).

Only names that existed before these fixes are used here, so that each test
fails on the old code for its own reason."""

from __future__ import annotations

import numpy as np
import pytest

import copyir
from copyir import errors
from copyir.errors import CopyIRError

KERNEL = "kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {{\n{body}\n}}\n"


def error_of(text: str) -> CopyIRError:
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text, "dma.cpy"))
    return caught.value


@pytest.mark.parametrize(
    "body, message, note",
    [
        (
            "  buf = alloc f32[32, 128] @vmem\n  s = semaphore\n"
            "  copy_start x -> buf, s",
            errors.SHAPE_MISMATCH,
            "x is f32[64, 128] @hbm, buf is f32[32, 128] @vmem",
        ),
        (
            "  buf = alloc i32[64, 128] @vmem\n  s = semaphore\n"
            "  copy_start x -> buf, s",
            errors.DTYPE_MISMATCH,
            "x is f32[64, 128] @hbm, buf is i32[64, 128] @vmem",
        ),
        (
            "  buf = alloc i32[8, 128] @vmem\n  s = semaphore\n"
            "  copy_wait x[0:8] -> buf[0:4], s",
            errors.DTYPE_MISMATCH,
            "x[0:8] is f32[8, 128] @hbm, buf[0:4] is i32[4, 128] @vmem",
        ),
    ],
)
def test_a_dma_type_mismatch_notes_both_types(body, message, note):
    err = error_of(KERNEL.format(body=body))
    assert str(err) == message
    assert [n.message for n in err.notes] == [note]


OVERLAPPING = """kernel k(x: f32[256] @hbm, y: f32[128] @hbm) {{
  s = semaphore
  copy_start x[0:128] -> y, s
  {wait}
}}
"""


def test_a_wait_may_name_overlapping_ends():
    text = OVERLAPPING.format(wait="copy_wait x[0:128] -> x[0:128], s")
    module = copyir.parse(text)
    copyir.verify(module)
    x = np.arange(256, dtype=np.float32)
    outputs = copyir.run(module, {"x": x}, mode="on_wait")
    assert np.array_equal(outputs["y"], x[:128])


def test_a_start_still_may_not():
    text = OVERLAPPING.format(wait="copy_start x[0:128] -> x[64:192], s")
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text))
    assert str(caught.value) == errors.DMA_OVERLAP.format(
        src="x[0:128]", dst="x[64:192]"
    )
    assert caught.value.loc.line == 4


def test_a_sync_copy_leaf_may_not_either():
    text = (
        "kernel k(x: f32[4, 8] @hbm) {\n"
        "  sync_copy (x[0], x[1:3]) -> (x[1], x[2:4])\n}\n"
    )
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text))
    assert str(caught.value) == errors.DMA_OVERLAP.format(src="x[1:3]", dst="x[2:4]")
    assert caught.value.notes[0].message.startswith("at leaf [1]: ")
