"""expand-min-max: split each op that reads a `min` or `max` index into its
affine pieces.

A `copy.index min` (or max) is affine on each piece of the loop domain
(`copyir.index.Pieces`: `min(a, b)` is `a` where `a <= b`, `b`
elsewhere). Each op that reads one, through views, semaphore indices,
windows, descriptors or index values computed from it, becomes one copy
per piece, under a `copy.when` of the piece's constraints, its views and
indices rebuilt from the piece's affine expressions (a constant one
static, `x[872:1000]`); pieces that cannot hold together are left out.
A `copy.when` whose condition reads one takes the condition on each
piece instead (an `or` of sets), its body kept once. Afterwards no op
reads a min or max, so that the rest of the lowering, the stream and the
protocol see affine accesses on exact sub-domains; the stream grows by a
predicated instruction per piece, never per iteration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from xdsl.context import Context
from xdsl.dialects.builtin import AffineSetAttr, ArrayAttr, ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from copyir.access import Accesses
from copyir.dialects.copy import (
    DYNAMIC,
    AsyncCopyOp,
    BufferedCopyOp,
    IndexOp,
    KernelOp,
    SemIndexOp,
    ViewOp,
    WhenOp,
    WindowOp,
)
from copyir.dialects.copy.indexing import Index
from copyir.index import (
    Conjunction,
    combinations,
    renumbered,
    renumbered_set,
    substitute_sets,
    used_dims,
)

VALUES = (ViewOp, SemIndexOp, IndexOp, AsyncCopyOp, WindowOp)
"""Ops that only make a value from their operands: rebuilt per piece with
the op that reads them."""


class _Splitter:
    """Splits the ops of one kernel that read a min or max."""

    def __init__(self) -> None:
        self.accesses = Accesses()

    def readers(self, kernel: KernelOp) -> list[Operation]:
        """The ops other than value ops that read a min or max, in program
        order."""
        clamps = self.accesses.clamps
        return [
            op
            for op in kernel.walk()
            if not isinstance(op, VALUES) and any(clamps(o) for o in op.operands)
        ]

    def split(self, op: Operation) -> None:
        if isinstance(op, WhenOp):
            self.condition(op)
            return
        chain, indices = self.chain(op)
        for where, exprs in combinations([self.accesses.index(v) for v in indices]):
            made: list[Operation] = []
            mapper: dict[SSAValue, SSAValue] = {}
            for value, expr in zip(indices, exprs, strict=True):
                mapper[value] = self.index(expr, made, op)
            for value_op in chain:
                clone = _static(value_op.clone(value_mapper=mapper))
                mapper[value_op.results[0]] = clone.results[0]
                made.append(clone)
            made.append(_static(op.clone(value_mapper=mapper)))
            made = [o for o in made if not _unused_constant(o)]
            if where:
                made = [self.when(where, made, op)]
            Rewriter.insert_op(made, InsertPoint.before(op))
        Rewriter.erase_op(op)

    def chain(self, op: Operation) -> tuple[list[Operation], list[SSAValue]]:
        """The value ops between `op` and the min or max it reads, in an
        order that defines each before its use, and the indices in pieces
        that they and `op` read (replaced per piece)."""
        chain: list[Operation] = []
        indices: list[SSAValue] = []
        seen: set[SSAValue] = set()

        def visit(owner: Operation) -> None:
            for operand in owner.operands:
                if operand in seen or not self.accesses.clamps(operand):
                    continue
                seen.add(operand)
                if self.accesses.clamps(operand) == {operand}:
                    indices.append(operand)
                else:
                    source = cast(Operation, operand.owner)
                    visit(source)
                    chain.append(source)

        visit(op)
        return chain, indices

    def erase_unused(self, kernel: KernelOp) -> None:
        """The mins and maxes, and the value ops that read them, left
        without users, last first."""
        for op in reversed(list(kernel.walk())):
            if (
                isinstance(op, VALUES)
                and any(self.accesses.clamps(r) for r in op.results)
                and not any(r.uses for r in op.results)
            ):
                Rewriter.erase_op(op)

    def index(self, expr: AffineExpr, made: list[Operation], at: Operation) -> SSAValue:
        """A piece's affine index as an index value of the loop indices."""
        dims = sorted(expr.used_dims())
        args = [self.accesses.dim_value(d) for d in dims]
        local = renumbered(expr, dims)
        if isinstance(local, AffineDimExpr):
            return args[0]
        index = IndexOp(AffineMap(len(args), 0, (local,)), args)
        index.location = at.location
        made.append(index)
        return index.result

    def when(self, where: Conjunction, body: list[Operation], at: Operation) -> WhenOp:
        """The piece's ops under the piece's constraints."""
        dims = used_dims(where)
        when = WhenOp(
            [renumbered_set(where, dims)],
            [self.accesses.dim_value(d) for d in dims],
            Region(Block(body)),
        )
        when.location = at.location
        return when

    def condition(self, op: WhenOp) -> None:
        """A condition on a min or max: the condition on each piece."""
        args = [self.accesses.index(a) for a in op.args]
        sets = substitute_sets([s.data for s in op.condition.data], args)
        dims = used_dims(c for s in sets for c in s.constraints)
        local = [renumbered_set(s.constraints, dims) for s in sets]
        op.operands = [self.accesses.dim_value(d) for d in dims]
        op.properties["condition"] = ArrayAttr(AffineSetAttr(s) for s in local)


def _constant(value: SSAValue) -> int | None:
    """The integer a piece's constant index is (`copy.index` of no args)."""
    owner = value.owner
    if isinstance(owner, IndexOp) and not owner.args and owner.combine is None:
        (result,) = owner.map.data.results
        if isinstance(result, AffineConstantExpr):
            return result.value
    return None


def _static(op: Operation) -> Operation:
    """A view, semaphore index or window copy whose piece made an index
    constant, with that index static (`x[872:1000]`, `bx[7, 0]`, as the
    parser makes them); another op as it is."""
    if isinstance(op, BufferedCopyOp):
        return _static_window_copy(op)
    if not isinstance(op, ViewOp | SemIndexOp) or not _has_constant(op.starts()):
        return op
    starts = op.starts()
    assert None not in starts  # verified: as many operands as dynamic starts
    static = [_value(cast(Index, s)) for s in starts]
    dynamic = [s for s in static if isinstance(s, SSAValue)]
    static = [DYNAMIC if isinstance(s, SSAValue) else s for s in static]
    if isinstance(op, SemIndexOp):
        folded: Operation = SemIndexOp(op.source, static, dynamic)
    else:
        subscripts = [
            (start, size, dropped)
            for start, (_, size, dropped) in zip(static, op.subscripts(), strict=True)
        ]
        folded = ViewOp(op.source, subscripts, dynamic=dynamic)
    return _replaced(op, folded)


def _static_window_copy(op: BufferedCopyOp) -> Operation:
    indices = op.block_indices
    if not _has_constant([*(indices or ()), op.slot_value]):
        return op
    folded = BufferedCopyOp(
        op.src,
        op.dst,
        None if indices is None else [_value(cast(Index, i)) for i in indices],
        slot=_value(op.slot_value),
        action=None if op.action is None else str(op.action_value),
        sem=op.sem,
    )
    return _replaced(op, folded)


def _has_constant(indices: Sequence[object]) -> bool:
    return any(isinstance(i, SSAValue) and _constant(i) is not None for i in indices)


def _value(index: Index) -> Index:
    """An index with a piece's constant as its integer."""
    if isinstance(index, SSAValue):
        value = _constant(index)
        return index if value is None else value
    return index


def _replaced(op: Operation, folded: Operation) -> Operation:
    folded.location = op.location
    op.erase()
    return folded


def _unused_constant(op: Operation) -> bool:
    """Whether the op is a piece's constant index that every view took as
    static (then erased)."""
    if not isinstance(op, IndexOp) or _constant(op.result) is None or op.result.uses:
        return False
    op.erase()
    return True


def expand_min_max(kernel: KernelOp) -> None:
    splitter = _Splitter()
    readers = splitter.readers(kernel)
    for op in reversed(readers):  # inner ops first: a clone holds their split
        splitter.split(op)
    if readers:
        splitter.erase_unused(kernel)


@dataclass(frozen=True)
class ExpandMinMaxPass(ModulePass):
    """Split each op that reads a min or max index into its affine pieces."""

    name = "expand-min-max"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not any(isinstance(o, IndexOp) and o.combine is not None for o in op.walk()):
            return
        for kernel in op.ops:
            if isinstance(kernel, KernelOp):
                expand_min_max(kernel)
