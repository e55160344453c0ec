"""The verify pass's checks over a loop's domain remember a verdict per
(start expression, bound, domain): views and DMA ends written alike ask
alike. A remembered pass must never hide a view that differs only in its
source's size or its loop's range."""

from __future__ import annotations

import pytest

import copyir
from copyir import errors
from copyir.errors import CopyIRError

LOOP = """\
  for i in range({trips}) {{
    copy_start {src}[ds(i + 4, 1)] -> buf[ds(i, 1)], s
    copy_wait {src}[ds(i + 4, 1)] -> buf[ds(i, 1)], s
  }}
"""


def kernel(*loops: tuple[str, int]) -> str:
    body = "".join(LOOP.format(src=src, trips=trips) for src, trips in loops)
    return (
        "kernel k(x: f32[8] @hbm, y: f32[16] @hbm) {\n"
        "  buf = alloc f32[16] @vmem\n  s = semaphore\n" + body + "}\n"
    )


def first_error(text: str) -> CopyIRError:
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text, "k.cpy"))
    return caught.value


@pytest.mark.parametrize("first", ["y", "x"])
def test_a_view_of_a_smaller_source_fails_after_an_equal_view_passed(first):
    text = kernel((first, 8), ("x" if first == "y" else "y", 8))
    err = first_error(text)
    slice_error = errors.SLICE_OUT_OF_BOUNDS.format(
        start=8, stop=9, dim=0, name="x", size=8
    )
    assert err.message == f"{slice_error}, at i = 4"
    assert err.loc is not None
    assert err.loc.line == (9 if first == "y" else 5)


def test_a_longer_loop_fails_after_a_shorter_one_passed():
    # ds(i + 4, 1) of y (size 16) stays inside for 12 trips, not for 13.
    err = first_error(kernel(("y", 12), ("y", 13)))
    slice_error = errors.SLICE_OUT_OF_BOUNDS.format(
        start=16, stop=17, dim=0, name="y", size=16
    )
    assert err.message == f"{slice_error}, at i = 12"
    assert err.loc is not None and err.loc.line == 9


def test_views_written_alike_in_one_loop_pass_alike():
    copyir.verify(copyir.parse(kernel(("y", 8), ("y", 8), ("y", 12)), "k.cpy"))
