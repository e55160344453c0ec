"""A view whose dynamic offsets outnumber its operands (the generic MLIR
form can write one; the verifier rejects it) still prints: the missing
offset as None, as a dropped one already printed."""

import copyir
from copyir import errors
from copyir.errors import CopyIRError

VIEW = (
    "copy.kernel @k(%x : !copy.ref<4x4xf32, hbm>) {\n"
    '  %t = "copy.view"(%x) <{offsets = array<i64: -9223372036854775808, 0>, '
    "sizes = array<i64: 2, 4>, dropped = array<i64>}> : "
    "(!copy.ref<4x4xf32, hbm>) -> !copy.ref<2x4xf32, hbm>\n"
    "}\n"
)


def test_a_view_missing_its_offset_operand_prints():
    module = copyir.parse(VIEW, "t.mlir")
    assert "copy.view %x[ds(None, 2), 0:4]" in str(module)


def test_the_verifier_reports_it():
    module = copyir.parse(VIEW, "t.mlir")
    try:
        copyir.verify(module)
    except CopyIRError as err:
        assert str(err) == errors.MALFORMED_VIEW.format(
            name="x", why="its dynamic offsets and operands disagree"
        )
    else:
        raise AssertionError("verified")
