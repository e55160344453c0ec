"""Builders: every kind of program made from Python with op constructors
only (no text) prints and verifies exactly as the same program parsed from
the authoring syntax. The Pallas frontend and the passes build IR this way."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp, StringAttr, f32
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineExpr,
    AffineMap,
    AffineSet,
)

import copyir
from copyir import errors, pytree
from copyir.compute import Apply, Literal, Operand
from copyir.dialects import scalar
from copyir.dialects.copy import (
    BLOCKED,
    DYNAMIC,
    IN,
    OUT,
    AllocOp,
    BlockDimAttr,
    ComputeOp,
    DmaOp,
    ForOp,
    IndexOp,
    KernelOp,
    PipelineOp,
    PipelineSpecAttr,
    RefType,
    SemaphoreOp,
    SyncCopyOp,
    ViewOp,
    WhenOp,
    WindowOp,
)
from copyir.testing import module_difference

LEAF = pytree.parse_spec("*")
AXPY = Apply("add", (Apply("mul", (Literal("2.0"), Operand(0))), Literal("1.0")))
"""2.0 * x + 1.0 as an expression tree, which `ComputeOp` makes a region."""


def axpy() -> Region:
    """2.0 * x + 1.0 as the region of scalar ops it is, built op by op."""
    block = Block(arg_types=[f32])
    two = scalar.ConstantOp("2.0", f32)
    product = scalar.MulOp(two.result, block.args[0])
    one = scalar.ConstantOp("1.0", f32)
    total = scalar.AddOp(product.result, one.result)
    block.add_ops([two, product, one, total, scalar.YieldOp(total.result)])
    return Region(block)


STATIC_DMAS = """\
kernel accumulate(a: f32[8, 128] @hbm, b: f32[8, 128] @hbm, out: f32[8, 128] @hbm) {
  acc = alloc f32[8, 128] @vmem
  s = semaphore
  copy_start a -> acc, s
  copy_wait a -> acc, s
  copy_start b -> acc, s, add
  copy_wait b -> acc, s
  sync_copy acc -> out
}
"""

LOOP_WITH_WHEN = """\
kernel loop(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {
  buf = alloc f32[16, 128] @vmem
  s = semaphore
  for i in range(4) {
    when i <= 2 {
      copy_start x[ds(16 * i, 16)] -> buf, s
      copy_wait x[ds(16 * i, 16)] -> buf, s
      copy_start buf -> y[ds(16 * i, 16)], s
      copy_wait buf -> y[ds(16 * i, 16)], s
    }
  }
}
"""

CLAMPED = """\
kernel clamped(x: f32[60, 128] @hbm) {
  buf = alloc f32[16, 128] @vmem
  for i in range(4) {
    start = min(16 * i, 44)
    sync_copy x[ds(start, 16)] -> buf
    sync_copy x[ds(max(16 * i - 4, 0), 16)] -> buf
  }
}
"""

PIPELINE = """\
kernel scale(x: f32[64, 256] @hbm, y: f32[64, 256] @hbm) {
  pipeline grid=(4, 2)
      in  x block=(16, 128) index=(i, j) -> (i, j) buffers=3
      out y block=(16, 128) index=(i, j) -> (i, j)
      (xw, yw) {
    yw[...] = 2.0 * xw + 1.0
  }
}
"""

PARALLEL_GRIDS = """\
kernel rows(x: f32[64, 256] @hbm, y: f32[64, 256] @hbm) {
  for i, j in grid(4, 2), parallel=(0,) {
  }
  pipeline grid=(4, 2) dimension_semantics=(parallel, arbitrary)
      in  x block=(16, 128) index=(i, j) -> (i, j)
      out y block=(16, 128) index=(i, j) -> (i, j)
      (xw, yw) {
    yw[...] = 2.0 * xw + 1.0
  }
}
"""

COMPUTE = """\
kernel axpy(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  xv = alloc f32[8, 128] @vmem
  yv = alloc f32[8, 128] @vmem
  sync_copy x -> xv
  yv[...] = 2.0 * xv + 1.0
  sync_copy yv -> y
}
"""


def hbm(*shape: int) -> RefType:
    return RefType(shape, f32, "hbm")


def vmem(*shape: int) -> RefType:
    return RefType(shape, f32, "vmem")


def static_dmas() -> ModuleOp:
    k = KernelOp(
        "accumulate", [("a", hbm(8, 128)), ("b", hbm(8, 128)), ("out", hbm(8, 128))]
    )
    a, b, out = k.params
    acc = AllocOp(vmem(8, 128), "acc")
    s = SemaphoreOp(name="s")
    k.body.block.add_ops(
        [
            acc,
            s,
            DmaOp("start", a, acc.result, s.result),
            DmaOp("wait", a, acc.result, s.result),
            DmaOp("start", b, acc.result, s.result, add=True),
            DmaOp("wait", b, acc.result, s.result),
            SyncCopyOp(LEAF, [acc.result], LEAF, [out]),
        ]
    )
    return ModuleOp([k])


def loop_with_when() -> ModuleOp:
    k = KernelOp("loop", [("x", hbm(64, 128)), ("y", hbm(64, 128))])
    x, y = k.params
    buf = AllocOp(vmem(16, 128), "buf")
    s = SemaphoreOp(name="s")
    loop = ForOp([0], [4], ["i"])
    (i,) = loop.indices
    d0, zero = AffineExpr.dimension(0), AffineExpr.constant(0)
    at_most_two = AffineConstraintExpr(AffineConstraintKind.ge, -d0 + 2, zero)
    when = WhenOp([AffineSet(1, 0, (at_most_two,))], [i])
    rows = [(DYNAMIC, 16, False)]
    ops: list[Operation] = []

    def rows_of(ref: SSAValue) -> SSAValue:
        """`ref[ds(16 * i, 16)]` as the parser makes it: at each writing."""
        start = IndexOp(AffineMap(1, 0, (d0 * 16,)), [i])
        view = ViewOp(ref, rows, dynamic=[start.result])
        ops.extend([start, view])
        return view.result

    for action in ("start", "wait"):
        ops.append(DmaOp(action, rows_of(x), buf.result, s.result))
    for action in ("start", "wait"):
        ops.append(DmaOp(action, buf.result, rows_of(y), s.result))
    when.body.block.add_ops(ops)
    loop.body.block.add_op(when)
    k.body.block.add_ops([buf, s, loop])
    return ModuleOp([k])


def clamped() -> ModuleOp:
    """`copy.index min` and `max` as the builders make them."""
    k = KernelOp("clamped", [("x", hbm(60, 128))])
    (x,) = k.params
    buf = AllocOp(vmem(16, 128), "buf")
    loop = ForOp([0], [4], ["i"])
    (i,) = loop.indices
    d0, rows = AffineExpr.dimension(0), [(DYNAMIC, 16, False)]
    low = IndexOp(
        AffineMap(1, 0, (d0 * 16 - 4, AffineExpr.constant(0))), [i], combine="max"
    )
    start = IndexOp(
        AffineMap(1, 0, (d0 * 16, AffineExpr.constant(44))), [i], "start", "min"
    )
    first = ViewOp(x, rows, dynamic=[start.result])
    second = ViewOp(x, rows, dynamic=[low.result])
    loop.body.block.add_ops(
        [
            start,
            first,
            SyncCopyOp(LEAF, [first.result], LEAF, [buf.result]),
            low,
            second,
            SyncCopyOp(LEAF, [second.result], LEAF, [buf.result]),
        ]
    )
    k.body.block.add_ops([buf, loop])
    return ModuleOp([k])


def pipeline() -> ModuleOp:
    k = KernelOp("scale", [("x", hbm(64, 256)), ("y", hbm(64, 256))])
    block = [BlockDimAttr(BLOCKED, 16), BlockDimAttr(BLOCKED, 128)]
    identity = AffineMap.identity(2)
    specs = [
        PipelineSpecAttr(IN, block, identity, buffers=3),
        PipelineSpecAttr(OUT, block, identity),
    ]
    op = PipelineOp((4, 2), k.params, specs, ["xw", "yw"])
    xw, yw = op.windows
    op.body.block.add_op(ComputeOp(yw, AXPY, [xw]))
    k.body.block.add_op(op)
    return ModuleOp([k])


def parallel_grids() -> ModuleOp:
    """`dimension_semantics` as the builders take it: one per dimension."""
    k = KernelOp("rows", [("x", hbm(64, 256)), ("y", hbm(64, 256))])
    semantics = ("parallel", "arbitrary")
    loop = ForOp([0, 0], [4, 2], ["i", "j"], grid=True, dimension_semantics=semantics)
    block = [BlockDimAttr(BLOCKED, 16), BlockDimAttr(BLOCKED, 128)]
    identity = AffineMap.identity(2)
    specs = [
        PipelineSpecAttr(IN, block, identity),
        PipelineSpecAttr(OUT, block, identity),
    ]
    op = PipelineOp(
        (4, 2), k.params, specs, ["xw", "yw"], dimension_semantics=semantics
    )
    xw, yw = op.windows
    op.body.block.add_op(ComputeOp(yw, AXPY, [xw]))
    k.body.block.add_ops([loop, op])
    return ModuleOp([k])


def compute() -> ModuleOp:
    k = KernelOp("axpy", [("x", hbm(8, 128)), ("y", hbm(8, 128))])
    x, y = k.params
    xv, yv = AllocOp(vmem(8, 128), "xv"), AllocOp(vmem(8, 128), "yv")
    k.body.block.add_ops(
        [
            xv,
            yv,
            SyncCopyOp(LEAF, [x], LEAF, [xv.result]),
            ComputeOp(yv.result, axpy(), [xv.result]),
            SyncCopyOp(LEAF, [yv.result], LEAF, [y]),
        ]
    )
    return ModuleOp([k])


PROGRAMS = {
    "static DMAs": (static_dmas, STATIC_DMAS),
    "a loop with when": (loop_with_when, LOOP_WITH_WHEN),
    "min and max": (clamped, CLAMPED),
    "a pipeline": (pipeline, PIPELINE),
    "parallel grids": (parallel_grids, PARALLEL_GRIDS),
    "a compute": (compute, COMPUTE),
}


@pytest.mark.parametrize("kind", PROGRAMS)
def test_built_programs_print_and_verify_as_parsed(kind: str):
    build, text = PROGRAMS[kind]
    built: ModuleOp = build()
    parsed = copyir.parse(text)
    for form in ("cpy", "mlir"):
        assert copyir.to_text(built, form, debuginfo=False) == copyir.to_text(
            parsed, form, debuginfo=False
        )
    assert copyir.to_text(built) == text
    assert module_difference(built, parsed, locations=False) is None
    copyir.verify(built)
    copyir.verify(parsed)
    built.verify()  # xDSL's own checks of every op's declaration, too


def test_a_builder_checks_eagerly():
    k = KernelOp("k", [("x", hbm(8))])
    with pytest.raises(ValueError, match="Unknown action: go"):
        DmaOp("go", k.params[0], k.params[0], SemaphoreOp().result)
    with pytest.raises(ValueError) as caught:
        ForOp([0], [4], dimension_semantics=("core_parallel",))
    assert str(caught.value) == errors.DIMENSION_SEMANTICS.format(name="core_parallel")
    with pytest.raises(ValueError) as caught:
        WindowOp(k.params[0])  # a window of a ref, not of a BufferedRef
    assert str(caught.value) == errors.EXPECTED_BUFFERED_REF.format(
        op="window", role="source", name="x", type="f32[8] @hbm"
    )


def test_a_declared_type_keeps_its_documented_message():
    """`operand_def(RefType)` fails first, but the message a user gets is
    the documented one that names the value (`verify_all`)."""
    text = """copy.kernel @k(%x : !copy.ref<8x128xf32, hbm>) {
  %b = copy.alloc : !copy.ref<8x128xf32, vmem>
  %s = copy.semaphore : !copy.sem
  copy.compute %b (%s) : !copy.ref<8x128xf32, vmem>, !copy.sem {
  ^bb0(%a: f32):
    %one = scalar.constant "1.0" : f32
    %r = scalar.add %a, %one : f32
    scalar.yield %r : f32
  }
}
"""
    with pytest.raises(copyir.CopyIRError) as caught:
        copyir.verify(copyir.parse(text, filename="t.mlir"))
    assert str(caught.value) == errors.EXPECTED_REF.format(
        op="a computation", role="input", name="s", type="a semaphore"
    )
    assert (caught.value.loc.line, caught.value.loc.col) == (4, 3)


def test_a_parsed_module_changed_afterwards_gets_the_generic_checks():
    """No module skips xDSL's own verification, not even one the authoring
    syntax's parser made: a pass (here, a hand) may have changed it."""
    module = copyir.parse(kernel_text("copy_start x[0:4] -> b, s"))
    view = next(op for op in module.walk() if isinstance(op, ViewOp))
    view.properties["sizes"] = StringAttr("4")
    with pytest.raises(copyir.CopyIRError, match="should be of base attribute"):
        copyir.verify(module)


def kernel_text(statement: str) -> str:
    return (
        "kernel k(x: f32[8, 128] @hbm) {\n  b = alloc f32[4, 128] @vmem\n"
        f"  s = semaphore\n  {statement}\n}}\n"
    )
