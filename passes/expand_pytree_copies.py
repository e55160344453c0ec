"""expand-pytree-copies: each `sync_copy` becomes the DMAs of Pallas' helper.

One DMA semaphore (made at the kernel's top level, so that a sync_copy in
a loop reuses it each iteration), a start per leaf in leaf order, then a
wait per leaf in the same order; `add` goes to every start, and an empty tree lowers to
nothing. Every DMA is located at the `sync_copy` with a note naming its
leaf (`leaf ['w'][1]`), so later diagnostics can point at the leaf.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from copyir.dialects.copy import (
    DmaOp,
    SemaphoreOp,
    SemaphoreType,
    SyncCopyOp,
    kernel_level,
)
from copyir.locations import with_detail


class ExpandSyncCopy(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: SyncCopyOp, rewriter: PatternRewriter) -> None:
        if not op.srcs:
            rewriter.erase(op)
            return
        tree, _ = op.trees()
        sem = SemaphoreOp.create(result_types=[SemaphoreType()], location=op.location)
        leaves = [
            (
                src,
                dst,
                with_detail(op.location, f"leaf {path}") if path else op.location,
            )
            for path, src, dst in zip(tree.leaf_paths(), op.srcs, op.dsts, strict=True)
        ]
        starts = [
            DmaOp.create(
                operands=[src, dst, sem.result],
                properties=DmaOp.option_properties("start", op.add is not None, 0),
                location=location,
            )
            for src, dst, location in leaves
        ]
        waits = [
            DmaOp.create(
                operands=[src, dst, sem.result],
                properties=DmaOp.option_properties("wait", False, 0),
                location=location,
            )
            for src, dst, location in leaves
        ]
        rewriter.insert(sem, InsertPoint.before(kernel_level(op)))
        rewriter.replace(op, [*starts, *waits], [])


@dataclass(frozen=True)
class ExpandPytreeCopiesPass(ModulePass):
    """Expand each sync_copy into a semaphore, the starts, then the waits."""

    name = "expand-pytree-copies"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not any(isinstance(o, SyncCopyOp) for o in op.walk()):
            return  # a walk that rewrites nothing costs far more than a look
        PatternRewriteWalker(ExpandSyncCopy(), apply_recursively=False).rewrite_module(
            op
        )
