"""Malformed IR the verifier refuses, located: a kernel name used twice,
generic views of the wrong type, and constants past 64 bits in MLIR text."""

from __future__ import annotations

import pytest

import copyir
from copyir import errors
from copyir.errors import CopyIRError


def test_kernel_names_are_unique():
    text = "kernel a() {}\nkernel b() {}\nkernel a() {}\n"
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text))
    assert str(caught.value) == errors.DUPLICATE_KERNEL.format(name="a")
    assert caught.value.loc.line == 3


@pytest.mark.parametrize(
    ("op", "why"),
    [
        (
            '%t = "copy.sem_index"(%s) <{indices = array<i64: 1>}> : (!copy.sem_array<2x3>) -> !copy.sem',
            "Malformed view of s: its type should be semaphore[3]",
        ),
        (
            '%t = "copy.view"(%x) <{offsets = array<i64: 0>, sizes = array<i64: 2>, dropped = array<i64: 0>}> : (!copy.ref<4x4xf32, hbm>) -> !copy.ref<4xf32, hbm>',
            "Malformed view of x: an indexed dimension must have size 1",
        ),
    ],
)
def test_generic_views_are_checked(op, why):
    text = (
        "copy.kernel @k(%x : !copy.ref<4x4xf32, hbm>) {\n"
        "  %s = copy.semaphore : !copy.sem_array<2x3>\n"
        f"  {op}\n}}\n"
    )
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text, "t.mlir"))
    assert str(caught.value) == why
    assert caught.value.loc.line == 3


HUGE_CONSTANT = """builtin.module {
  copy.kernel @k(%x: !copy.ref<8xf32, hbm>, %y: !copy.ref<8xf32, hbm>) {
    %s = copy.semaphore : !copy.sem
    copy.for %i in range(0, 4) {
      PLACE
    }
  }
}
"""


@pytest.mark.parametrize(
    "op, value",
    [
        (
            "copy.when [affine_set<(d0) : (d0 - 80000000000000000000000 == 0)>](%i) {\n"
            '  copy.dma "start" %x, %y, %s : !copy.ref<8xf32, hbm>, '
            "!copy.ref<8xf32, hbm>, !copy.sem\n}",
            -80000000000000000000000,
        ),
        (
            "%0 = copy.index affine_map<(d0) -> (d0 * 90000000000000000000000)>(%i)",
            90000000000000000000000,
        ),
    ],
)
def test_a_constant_past_64_bits_in_mlir_is_a_located_error(op, value):
    """Found by the fuzzer: a `copy.when` of MLIR text whose constant numpy
    cannot hold crashed the verifier with an OverflowError."""
    text = HUGE_CONSTANT.replace("PLACE", op)
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text, "huge.mlir", format="mlir"))
    assert str(caught.value) == errors.INT_RANGE.format(value=value)
    assert (caught.value.loc.file, caught.value.loc.line) == ("huge.mlir", 5)
