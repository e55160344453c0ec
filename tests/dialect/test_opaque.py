"""`copy.opaque`: its builder (what the Pallas frontend calls), its
verifier's messages, and its MLIR and authoring forms."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp, f32, i32
from xdsl.ir import SSAValue

import copyir
from copyir import errors
from copyir.dialects.copy import (
    AllocOp,
    KernelOp,
    OpaqueOp,
    RefType,
    SemaphoreOp,
    ViewOp,
)
from copyir.errors import CopyIRError
from copyir.testing import module_difference

SOFTMAX = """\
kernel softmax(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  xv = alloc f32[8, 128] @vmem
  yv = alloc f32[8, 128] @vmem
  m = alloc f32[] @smem
  opaque "dot_general, exp" (xv[0:4, :], m) -> (yv, m)
}
"""


def softmax() -> tuple[ModuleOp, OpaqueOp]:
    """SOFTMAX, built op by op as the frontend builds it."""
    k = KernelOp("softmax", [("x", hbm(8, 128)), ("y", hbm(8, 128))])
    xv, yv = AllocOp(vmem(8, 128), "xv"), AllocOp(vmem(8, 128), "yv")
    m = AllocOp(RefType((), f32, "smem"), "m")
    rows = ViewOp(xv.result, [(0, 4, False), (0, 128, False)])
    op = OpaqueOp("dot_general, exp", [rows.result, m.result], [yv.result, m.result])
    k.body.block.add_ops([xv, yv, m, rows, op])
    return ModuleOp([k]), op


def hbm(*shape: int) -> RefType:
    return RefType(shape, f32, "hbm")


def vmem(*shape: int) -> RefType:
    return RefType(shape, f32, "vmem")


def test_the_builder_makes_what_the_authoring_syntax_writes():
    built, op = softmax()
    copyir.verify(built)
    assert op.what.data == "dot_general, exp"
    assert [v.type for v in op.reads] == [
        RefType((4, 128), f32, "vmem"),
        RefType((), f32, "smem"),
    ]
    assert list(op.writes) == [op.operands[2], op.operands[3]]
    assert op.written() == tuple(op.writes)
    parsed = copyir.parse(SOFTMAX, filename="softmax.cpy")
    assert module_difference(parsed, built, locations=False) is None


def test_the_mlir_form():
    built, _ = softmax()
    text = copyir.to_text(built, "mlir", debuginfo=False)
    assert (
        'copy.opaque "dot_general, exp" (%0, %m) -> (%yv, %m) : '
        "!copy.ref<4x128xf32, vmem>, !copy.ref<f32, smem> -> "
        "!copy.ref<8x128xf32, vmem>, !copy.ref<f32, smem>"
    ) in text
    again = copyir.parse(text, filename="t.mlir")
    assert module_difference(again, built, locations=False) is None


def test_the_generic_mlir_form_reads_into_the_custom_one():
    text = """
copy.kernel @k(%x : !copy.ref<8xf32, hbm>) {
  %a = copy.alloc : !copy.ref<8xf32, vmem>
  "copy.opaque"(%a, %a) <{what = "exp", operandSegmentSizes = array<i32: 1, 1>}> : (!copy.ref<8xf32, vmem>, !copy.ref<8xf32, vmem>) -> ()
}
"""
    module = copyir.parse(text, filename="t.mlir")
    copyir.verify(module)
    printed = copyir.to_text(module, "mlir", debuginfo=False)
    assert (
        'copy.opaque "exp" (%a) -> (%a) : !copy.ref<8xf32, vmem> -> '
        "!copy.ref<8xf32, vmem>"
    ) in printed


def test_an_opaque_computation_may_read_and_write_nothing():
    text = 'kernel k(x: f32[8] @hbm) {\n  opaque "print" () -> ()\n}\n'
    module = copyir.parse(text)
    copyir.verify(module)
    assert 'opaque "print" () -> ()' in copyir.to_text(module, "cpy")


def test_what_keeps_quotes_and_backslashes_through_the_authoring_syntax():
    text = 'kernel k(x: f32[8] @hbm) {\n  opaque "a \\"b\\" \\\\ c" () -> ()\n}\n'
    module = copyir.parse(text)
    (op,) = [o for o in module.walk() if isinstance(o, OpaqueOp)]
    assert op.what.data == 'a "b" \\ c'
    assert copyir.to_text(module, "cpy") == text


def build(reads, writes) -> ModuleOp:
    """A kernel whose opaque computation reads and writes the refs made by
    `reads(values)` and `writes(values)` from x, a VMEM array `v`, an SMEM
    array `t`, an SMEM scalar `s`, a VMEM scalar `w` and a semaphore."""
    k = KernelOp("k", [("x", hbm(8, 128))])
    allocs = [
        AllocOp(vmem(8, 128), "v"),
        AllocOp(RefType((8,), f32, "smem"), "t"),
        AllocOp(RefType((), i32, "smem"), "s"),
        AllocOp(RefType((), f32, "vmem"), "w"),
    ]
    sem = SemaphoreOp(name="sem")
    k.body.block.add_ops([*allocs, sem])
    values: dict[str, SSAValue] = {
        "x": k.params[0],
        **{a.result.name_hint or "": a.result for a in allocs},
        "sem": sem.result,
    }
    op = OpaqueOp(
        "exp", [values[n] for n in reads.split()], [values[n] for n in writes.split()]
    )
    k.body.block.add_op(op)
    return ModuleOp([k])


@pytest.mark.parametrize(
    "reads, writes, message",
    [
        ("x", "v", errors.HBM_LOAD),
        ("v", "x", errors.HBM_STORE),
        ("t", "v", errors.SMEM_LOAD),
        ("v", "t", errors.SMEM_STORE),
        ("v", "w", errors.VMEM_SCALAR_STORE),
        (
            "sem",
            "v",
            errors.EXPECTED_REF.format(
                op="an opaque computation",
                role="input",
                name="sem",
                type="a semaphore",
            ),
        ),
        (
            "v",
            "sem",
            errors.EXPECTED_REF.format(
                op="an opaque computation",
                role="output",
                name="sem",
                type="a semaphore",
            ),
        ),
    ],
)
def test_the_verifier_holds_a_computations_rules(reads, writes, message):
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(build(reads, writes))
    assert str(caught.value) == message


def test_what_a_computation_may_touch_it_may_touch():
    """VMEM arrays and SMEM scalars either way; a VMEM scalar read."""
    copyir.verify(build("v s w", "v s"))


def test_the_error_is_at_the_opaque_computation():
    text = SOFTMAX.replace("(yv, m)", "(y)")
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text, filename="softmax.cpy"))
    assert str(caught.value) == errors.HBM_STORE
    assert (caught.value.loc.line, caught.value.loc.col) == (5, 3)
