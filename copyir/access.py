"""Chains of views folded into accesses of their root buffers.

A view aliases its source, so every ref is a root buffer (a kernel
parameter or an alloc) seen through a chain of views. Its `Access` says
which elements of the root it covers: where its first element is, its
shape, its strides, and the box it spans in the root's coordinates. The
verifier asks whether the two ends of a DMA overlap and the lowering asks
for each end's offset and strides; neither walks a chain itself. They ask an
`Accesses`, which folds each view once, from its source's access, and
remembers the result for as long as it lives (one verify, one pass run), so
that a chain of N views used by M DMAs costs O(N + M), not O(N * M).

An index into a semaphore array folds the same way: it is a view that drops
the dimensions it indexes, and its access's offset is the flat index of the
semaphore (or of the first one of a sub-array) in its root array.

Inside loops, a view's start may be an index value: then `offset` and the
`box` bounds are `xdsl.ir.affine.AffineExpr`s of the enclosing loops'
indices (an `int` is the constant case), while `shape`, `strides` and `dims`
stay static integers (view sizes are static). Each loop index is a
dimension numbered once per kernel (`Accesses.dim`), and `Accesses.index`
folds an index value (a loop index, or a `copy.index` of others) into an
expression of those dimensions; a `min` or `max` folds into
`copyir.index.Pieces`, affine on each piece of the domain, and so do the
offsets and bounds computed from it. `overlaps` decides static accesses; for
others it returns None, and the verifier decides them at every point of the
loops' domain (`copyir.domain`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineExpr

from copyir.dialects.copy import (
    DYNAMIC,
    AsyncCopyOp,
    ForOp,
    IndexOp,
    PipelineOp,
    RefType,
    SemaphoreArrayType,
    SemaphoreType,
    SemIndexOp,
    ViewOp,
    WindowOp,
)
from copyir.index import (
    Pieces,
    combinations,
    combine,
    plus,
    row_major_strides,
    substitute_expr,
)

Bound = int | AffineExpr | Pieces
"""A bound of an access's box: an integer, or an expression of loop indices
(affine, or in pieces)."""


@dataclass(frozen=True)
class Access:
    """The elements of a root buffer that a ref covers.

    Element (i0, i1, ...) of the ref is element `offset + sum(i_k * strides[k])`
    of the root, counted in row-major order; `box` gives one half-open
    interval per root dimension, so a dimension that a view indexed keeps an
    interval of length 1.
    """

    root: SSAValue
    """A kernel parameter, an alloc or a semaphore op's result."""
    offset: Bound
    """The flat element index, in the root, of the ref's first element."""
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    """Per dimension of the ref, in elements of the root."""
    box: tuple[tuple[Bound, Bound], ...]
    """[lo, hi) per dimension of the root."""
    dims: tuple[int, ...]
    """The root dimension that each dimension of the ref runs along."""

    @staticmethod
    def whole(root: SSAValue, shape: Sequence[int]) -> Access:
        """All of a root buffer of this shape."""
        return Access(
            root,
            0,
            tuple(shape),
            row_major_strides(shape),
            tuple((0, extent) for extent in shape),
            tuple(range(len(shape))),
        )

    @property
    def is_static(self) -> bool:
        return isinstance(self.offset, int) and all(
            isinstance(lo, int) for lo, _ in self.box
        )

    def view(self, subscripts: Sequence[tuple[Bound, int, bool]]) -> Access:
        """The access of a view of this ref; dimensions after the subscripts
        are kept whole. A subscript's start may be an affine expression of
        loop indices. A subscript beyond the rank (in a view the verifier
        rejects) is ignored."""
        offset, box = self.offset, list(self.box)
        shape, strides, dims = [], [], []
        for (start, size, dropped), stride, dim in zip(
            subscripts, self.strides, self.dims, strict=False
        ):
            offset = plus(offset, start * stride)
            lo = plus(box[dim][0], start)
            box[dim] = (lo, plus(lo, size))
            if not dropped:
                shape.append(size)
                strides.append(stride)
                dims.append(dim)
        rest = len(subscripts)
        return Access(
            self.root,
            offset,
            (*shape, *self.shape[rest:]),
            (*strides, *self.strides[rest:]),
            tuple(box),
            (*dims, *self.dims[rest:]),
        )

    def overlaps(self, other: Access) -> bool | None:
        """Whether the two refs share an element; None when that depends on
        loop indices (the verifier asks `meets` at every point of the
        loops' domain)."""
        if self.root is not other.root:
            return False
        if not (self.is_static and other.is_static):
            return None
        return self.meets(other)

    def meets(self, other: Access, at: Callable[[Bound], Any] = lambda b: b) -> Any:
        """Whether the boxes of two accesses of one root meet: a bool for
        static boxes; with `at`, which gives a bound's values at points of
        the loops' domain (numpy arrays), whether they meet at each point."""
        meet = True
        for (lo1, hi1), (lo2, hi2) in zip(self.box, other.box, strict=True):
            meet = meet & (at(lo1) < at(hi2)) & (at(lo2) < at(hi1))
        return meet


def _root_shape(value: SSAValue) -> tuple[int, ...] | None:
    """The shape of a root: a ref's or a semaphore array's, () for one
    semaphore, None for anything else (such as a BufferedRef)."""
    type = value.type
    if isinstance(type, RefType | SemaphoreArrayType):
        return type.get_shape()
    if isinstance(type, SemaphoreType):
        return ()
    return None


_NONE: frozenset[SSAValue] = frozenset()


class Accesses:
    """The access of each value asked about, each view folded at most once.

    Valid while the IR it has seen does not change: make one per verify or
    per pass run. `folded` counts the views folded, the work it has done.
    """

    def __init__(self) -> None:
        self._known: dict[SSAValue, Access | None] = {}
        self._dims: dict[SSAValue, int] = {}
        self._values: dict[int, SSAValue] = {}
        self._indices: dict[SSAValue, AffineExpr | Pieces] = {}
        self._clamps: dict[SSAValue, frozenset[SSAValue]] = {}
        self.folded = 0

    def dim(self, index: SSAValue) -> int:
        """The kernel-wide dimension number of a loop index."""
        return self._dims.setdefault(index, len(self._dims))

    def index(self, value: SSAValue) -> AffineExpr | Pieces:
        """An index value as an affine expression of loop dimensions, or
        as pieces where a min or max is in it."""
        known = self._indices.get(value)
        if known is not None:
            return known
        owner = value.owner
        if isinstance(owner, IndexOp):
            args = [self.index(a) for a in owner.args]
            results = [substitute_expr(r, args) for r in owner.map.data.results]
            kind = owner.combine_kind
            expr = results[0] if kind is None else combine(kind, results)
        elif isinstance(owner, Block) and isinstance(
            owner.parent_op(), ForOp | PipelineOp
        ):
            expr = AffineExpr.dimension(self.dim(value))
        else:
            raise ValueError(f"{value} is not an index value")
        self._indices[value] = expr
        return expr

    def clamps(self, value: SSAValue) -> frozenset[SSAValue]:
        """The index values in pieces (a min or max, or computed from one)
        that a value reads: itself for such an index, those its views,
        semaphore indices, windows or descriptor read for a ref; each
        value's found once, along a chain without recursion (as `__call__`
        folds one)."""
        known = self._clamps
        stack = [value]
        while stack:
            top = stack[-1]
            if top in known:
                stack.pop()
                continue
            owner = top.owner
            if isinstance(top.type, IndexType):
                pieces = isinstance(self.index(top), Pieces)
                known[top] = frozenset((top,)) if pieces else _NONE
            elif isinstance(owner, ViewOp | SemIndexOp | AsyncCopyOp | WindowOp):
                missing = [o for o in owner.operands if o not in known]
                if missing:
                    stack.extend(missing)
                    continue
                known[top] = _NONE.union(*(known[o] for o in owner.operands))
            else:
                known[top] = _NONE
            stack.pop()
        return known[value]

    def pieces(self, op: Operation) -> int:
        """How many copies of the op `expand-min-max` makes: the
        combinations of the pieces of the indices it reads that can hold
        together (TOO_MANY_PIECES past `limits.MAX_PIECES`)."""
        read = _NONE.union(*(self.clamps(o) for o in op.operands))
        return len(combinations([self.index(v) for v in read]))

    def dim_value(self, dim: int) -> SSAValue:
        """The loop index of a kernel-wide dimension number."""
        if len(self._values) != len(self._dims):
            self._values = {d: v for v, d in self._dims.items()}
        return self._values[dim]

    def start(self, value: int | SSAValue | None) -> int | AffineExpr | Pieces:
        """A subscript's start: an integer, or an index value's expression
        (a constant expression as its integer)."""
        if value is None or isinstance(value, int):
            return 0 if value is None else value
        expr = self.index(value)
        return expr.value if isinstance(expr, AffineConstantExpr) else expr

    def __call__(self, value: SSAValue) -> Access | None:
        """The value's access; None when its root is not a ref or semaphore."""
        chain: list[ViewOp | SemIndexOp] = []
        while value not in self._known and isinstance(value.owner, ViewOp | SemIndexOp):
            chain.append(value.owner)
            value = value.owner.source
        if value in self._known:
            access = self._known[value]
        else:
            shape = _root_shape(value)
            access = None if shape is None else Access.whole(value, shape)
            self._known[value] = access
        for op in reversed(chain):
            if access is not None:
                access = access.view(self._subscripts(op))
                self.folded += 1
            self._known[op.result] = access
        return access

    def _subscripts(self, op: ViewOp | SemIndexOp) -> Sequence[tuple[Bound, int, bool]]:
        """The op's subscripts, each start an integer or an expression."""
        subscripts, static = op.subscripts(), op.static_starts()
        if DYNAMIC not in static and len(static) == len(subscripts):
            return subscripts  # each start its integer, as written
        return [
            (self.start(start), size, dropped)
            for start, (_, size, dropped) in zip(
                op.starts(), op.subscripts(), strict=True
            )
        ]

    def overlap(self, a: SSAValue, b: SSAValue) -> bool | None:
        """Whether two refs share an element of one root buffer (for
        accesses that depend on loop indices: None, decided by the verifier
        at every point of the loops' domain)."""
        first, second = self(a), self(b)
        if first is None or second is None:
            return False
        return first.overlaps(second)
