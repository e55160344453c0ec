"""`copy.scope`, Pallas' `pl.run_scoped`: its builder (the interface of the
Pallas frontend), its verifier rules and its MLIR form."""

from __future__ import annotations

from io import StringIO

import pytest
from xdsl.dialects.builtin import ModuleOp, f32
from xdsl.ir import Block
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.printer import Printer

import copyir
from copyir import errors
from copyir.dialects.copy import (
    DYNAMIC,
    AllocOp,
    DmaOp,
    ForOp,
    IndexOp,
    KernelOp,
    RefType,
    ScopeOp,
    SemaphoreOp,
    ViewOp,
)
from copyir.errors import CopyIRError
from copyir.testing import module_difference

GRID_DMA = """\
kernel grid_dma(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  for i in range(4) {
    scope {
      buf = alloc f32[2, 128] @vmem
      sem = semaphore
      copy_start x[ds(2 * i, 2)] -> buf, sem
      copy_wait x[ds(2 * i, 2)] -> buf, sem
      copy_start buf -> y[ds(2 * i, 2)], sem
      copy_wait buf -> y[ds(2 * i, 2)], sem
    }
  }
}
"""


def vmem(*shape: int) -> RefType:
    return RefType(shape, f32, "vmem")


def grid_dma() -> ModuleOp:
    """GRID_DMA built as the Pallas frontend builds a `run_scoped`:
    `ScopeOp()`, then its allocs and semaphores first in its block."""
    hbm = RefType((8, 128), f32, "hbm")
    kernel = KernelOp("grid_dma", [("x", hbm), ("y", hbm)])
    x, y = kernel.params
    loop = ForOp([0], [4], ["i"])
    kernel.body.block.add_op(loop)
    scope = ScopeOp()
    loop.body.block.add_op(scope)
    block: Block = scope.body.block
    buf = AllocOp(vmem(2, 128), "buf")
    sem = SemaphoreOp(name="sem")
    block.add_ops([buf, sem])
    two_i = AffineMap(1, 0, (AffineExpr.dimension(0) * 2,))
    for ref, into in ((x, True), (y, False)):
        for action in ("start", "wait"):
            start = IndexOp(two_i, [loop.indices[0]])
            view = ViewOp(ref, [(DYNAMIC, 2, False)], dynamic=[start.result])
            src, dst = (view.result, buf.result) if into else (buf.result, view.result)
            block.add_ops([start, view, DmaOp(action, src, dst, sem.result)])
    return ModuleOp([kernel])


def error_of(text: str, filename: str = "t.cpy") -> CopyIRError:
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text, filename=filename))
    return caught.value


def test_the_builder_makes_what_the_authoring_syntax_parses():
    built = grid_dma()
    copyir.verify(built)
    parsed = copyir.parse(GRID_DMA)
    assert module_difference(built, parsed, locations=False) is None


def test_the_builder_gives_an_empty_scope_of_one_block():
    scope = ScopeOp()
    assert len(scope.body.blocks) == 1
    assert not scope.body.block.ops
    assert not scope.operands and not scope.results
    assert str(scope) == "copy.scope {\n}"
    again = copyir.parse(
        "copy.kernel @k() {\n  copy.scope {\n  }\n}\n", filename="t.mlir"
    )
    copyir.verify(again)


def test_allocations_are_the_allocs_and_semaphores_of_the_body():
    module = copyir.parse(GRID_DMA)
    (scope,) = [op for op in module.walk() if isinstance(op, ScopeOp)]
    assert [op.name for op in scope.allocations()] == [
        "copy.alloc",
        "copy.semaphore",
    ]


@pytest.mark.parametrize("generic", [False, True])
def test_the_mlir_form_round_trips(generic):
    module = copyir.parse(GRID_DMA)
    if generic:
        out = StringIO()
        Printer(stream=out, print_generic_format=True).print_op(module)
        text = out.getvalue()
        assert '"copy.scope"() ({' in text
    else:
        text = copyir.to_text(module, "mlir")
        assert "copy.scope {" in text
    again = copyir.parse(text, filename="t.mlir")
    copyir.verify(again)
    assert module_difference(module, again, locations=not generic) is None


def test_the_authoring_syntax_round_trips():
    module = copyir.parse(GRID_DMA)
    assert copyir.to_text(module) == GRID_DMA


def test_scopes_nest_anywhere_a_statement_may():
    text = """\
kernel k(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  scope {
    s = semaphore
    for i in range(2) {
      when i == 0 {
        scope {
          buf = alloc f32[8, 128] @vmem
          copy_start x -> buf, s
          copy_wait x -> buf, s
          copy_start buf -> y, s
          copy_wait buf -> y, s
        }
      }
    }
    when 0 == 0 {
      scope {
        buf = alloc f32[8, 128] @vmem
        copy_start x -> buf, s
        copy_wait x -> buf, s
        copy_start buf -> y, s
        copy_wait buf -> y, s
      }
    }
  }
}
"""
    module = copyir.parse(text)
    copyir.verify(module)
    assert copyir.to_text(module) == text


def test_an_alloc_nested_deeper_in_a_scope_is_not_at_top_level():
    err = error_of(
        """\
kernel k(x: f32[8, 128] @hbm) {
  scope {
    for i in range(2) {
      buf = alloc f32[8, 128] @vmem
    }
  }
}
"""
    )
    assert str(err) == errors.NOT_AT_TOP_LEVEL.format(op="copy.alloc")
    assert err.loc.line == 4
    assert [n.message for n in err.notes] == [errors.HINT_SCOPE]


def test_a_buffered_ref_stays_at_the_kernels_top_level():
    err = error_of(
        """\
kernel k(x: f32[256, 128] @hbm) {
  scope {
    bx = buffered_ref x, block=(128, 128)
  }
}
"""
    )
    assert str(err) == errors.NOT_AT_TOP_LEVEL.format(op="copy.buffered_ref")
    assert err.notes == ()


def test_a_scoped_value_used_after_its_scope_is_used_before_definition():
    """The MLIR parser refuses such a text; IR built in Python reaches the
    verifier, which says which value."""
    hbm = RefType((8, 128), f32, "hbm")
    kernel = KernelOp("k", [("x", hbm)])
    scope = ScopeOp()
    buf, sem = AllocOp(vmem(8, 128), "buf"), SemaphoreOp(name="sem")
    scope.body.block.add_ops([buf, sem])
    dma = DmaOp("start", kernel.params[0], buf.result, sem.result)
    kernel.body.block.add_ops([scope, dma])
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(ModuleOp([kernel]))
    assert str(caught.value) == errors.USED_BEFORE_DEFINED.format(name="buf")


def test_a_scoped_buffer_is_checked_against_its_space_like_any():
    err = error_of(
        """\
kernel k(x: f32[8, 128] @hbm) {
  scope {
    big = alloc f32[65536, 1024] @vmem
  }
}
"""
    )
    assert str(err).startswith("big needs 268435456 bytes of vmem, more than")


def test_scoped_buffers_count_against_the_space_with_the_rest():
    """Each buffer fits the small target's 1 MiB of VMEM alone, not both:
    a scope's buffers are laid out with the kernel's."""
    text = """\
kernel k(x: f32[8, 128] @hbm) {
  a = alloc f32[128, 1024] @vmem
  scope {
    b = alloc f32[160, 1024] @vmem
  }
}
"""
    module = copyir.parse(text, "t.cpy")
    copyir.verify(module, target="small")
    with pytest.raises(CopyIRError) as caught:
        copyir.lower(module, target="small")
    assert str(caught.value) == errors.DOES_NOT_FIT.format(
        name="b",
        size=655360,
        space="vmem",
        free=524288,
        capacity=1048576,
        target="small",
    )
    assert caught.value.loc.line == 4


def test_a_scope_counts_its_instructions_in_the_budget():
    from copyir.passes.verify import instructions

    module = copyir.parse(
        """\
kernel k(x: f32[8, 128] @hbm) {
  scope {
    a = alloc f32[8, 128] @vmem
    b = alloc f32[8] @smem
    sems = semaphore[3]
  }
}
"""
    )
    (scope,) = [op for op in module.walk() if isinstance(op, ScopeOp)]
    assert instructions(scope) == 2 + 2 + 3
    lowered = copyir.lower(module)
    names = [op.name for op in lowered.walk()]
    assert names.count("dma.invalidate") == 2
    assert names.count("dma.release") == 2
    assert names.count("dma.release_sem") == 3
