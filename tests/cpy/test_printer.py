"""The `.cpy` printer prints what is in the IR: an unnamed view, semaphore
index or index value that one statement writes once is inline in it; any
other op is a statement of its own, named."""

from __future__ import annotations

import pytest

import copyir
from copyir.dialects.copy import ViewOp
from copyir.testing import module_difference

HEADER = """builtin.module {
  copy.kernel @k(%x: !copy.ref<64x16xf32, hbm> loc("a.cpy":1:10)) {
    %buf = copy.alloc : !copy.ref<2x8x16xf32, vmem> loc("a.cpy":2:3)
    %s = copy.semaphore : !copy.sem loc("a.cpy":3:3)
"""
FOOTER = """  } loc("a.cpy":1:1)
} loc("a.cpy":1:1)
"""
VIEWS = """    %0 = copy.view %x[0:8] : !copy.ref<64x16xf32, hbm> loc("a.cpy":4:3)
    %1 = copy.view %buf[0] : !copy.ref<2x8x16xf32, vmem> loc("a.cpy":4:3)
"""
START = """    copy.dma "start" %0, %1, %s : !copy.ref<8x16xf32, hbm>, \
!copy.ref<8x16xf32, vmem>, !copy.sem loc("a.cpy":4:3)
"""
WAIT = """    copy.dma "wait" %0, %1, %s : !copy.ref<8x16xf32, hbm>, \
!copy.ref<8x16xf32, vmem>, !copy.sem loc("a.cpy":5:3)
"""


def printed(mlir: str) -> str:
    module = copyir.parse(HEADER + mlir + FOOTER, "a.mlir")
    text = copyir.to_text(module, "cpy")
    again = copyir.parse(text, "printed.cpy")
    assert len(list(again.walk())) == len(list(module.walk())), text
    assert copyir.to_text(again, "cpy") == text
    return text


def test_an_unnamed_view_of_one_user_is_inline():
    text = printed(VIEWS + START)
    assert "  copy_start x[0:8] -> buf[0], s\n" in text
    assert " = x[" not in text


def test_an_unnamed_view_of_two_users_is_named():
    """What `cse` leaves: a wait that takes its start's views."""
    text = printed(VIEWS + START + WAIT)
    assert "  v0 = x[0:8]\n  v1 = buf[0]\n" in text, text
    assert "  copy_start v0 -> v1, s\n  copy_wait v0 -> v1, s\n" in text, text


def test_a_view_one_statement_writes_twice_is_named():
    """`copy_start x[0:8] -> x[0:8], s` makes two views: one view twice in a
    DMA is a statement of its own."""
    same = VIEWS.replace(
        "%buf[0] : !copy.ref<2x8x16xf32, vmem>", "%x[0:8] : !copy.ref<64x16xf32, hbm>"
    )
    dma = START.replace("%0, %1, %s", "%0, %0, %s").replace(
        "!copy.ref<8x16xf32, vmem>", "!copy.ref<8x16xf32, hbm>"
    )
    text = printed(same + dma)
    assert "  v0 = x[0:8]\n" in text, text
    assert "copy_start v0 -> v0, s" in text, text


def test_a_named_view_is_named():
    text = printed(
        VIEWS.replace("%0 = ", "%v = ").replace("%1 = ", "%w = ")
        + START.replace("%0, %1", "%v, %w")
    )
    assert "  v = x[0:8]\n  w = buf[0]\n  copy_start v -> w, s\n" in text, text


def test_a_view_written_twice_is_printed_twice():
    module = copyir.parse(
        "kernel k(x: f32[64, 16] @hbm) {\n"
        "  buf = alloc f32[2, 8, 16] @vmem\n"
        "  s = semaphore\n"
        "  copy_start x[0:8] -> buf[0], s\n"
        "  copy_wait x[0:8] -> buf[0], s\n"
        "}\n",
        "k.cpy",
    )
    assert len([op for op in module.walk() if isinstance(op, ViewOp)]) == 4
    text = copyir.to_text(module, "cpy")
    assert "  copy_start x[0:8] -> buf[0], s\n  copy_wait x[0:8] -> buf[0], s\n" in text


@pytest.mark.parametrize("debuginfo", [False, True])
def test_an_augmented_computation_writes_its_view_once(debuginfo):
    """`acc[0] += x` uses its view twice, as destination and `$0`: one
    writing, so inline."""
    module = copyir.parse(
        "kernel k(x: f32[8, 16] @vmem, acc: f32[2, 8, 16] @vmem) {\n  acc[0] += x\n}\n",
        "k.cpy",
    )
    text = copyir.to_text(module, "cpy", debuginfo=debuginfo)
    assert "  acc[0] += x" in text, text
    again = copyir.parse(text, "printed.cpy")
    assert module_difference(module, again, locations=debuginfo) is None, text
