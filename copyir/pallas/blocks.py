"""Pallas' `BlockSpec`s (as `BlockMapping`s) as `copy.pipeline` specs, for
`pallas_call` grids and `emit_pipeline` alike."""

from __future__ import annotations

from xdsl.ir import Block
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap

from copyir.dialects.copy import PipelineSpecAttr
from copyir.dialects.copy.pipeline import IN, OUT
from copyir.dialects.copy.types import BLOCKED, ELEMENT, SQUEEZED, BlockDimAttr
from copyir.pallas.body import BodyImporter
from copyir.pallas.symbols import as_expr
from copyir.pallas.walker import Walker, unsupported


def block_spec(importer: Walker, mapping, output: bool, rank: int) -> PipelineSpecAttr:
    """A `BlockMapping` as a pipeline operand's spec: block shape, index
    map (its jaxpr walked over the grid's dimensions), buffer count."""
    block = [_block_dim(b) for b in mapping.block_shape]
    if rank:
        closed = mapping.index_map_jaxpr
        sub = BodyImporter(Block(), importer.location)
        dims = [AffineDimExpr(d) for d in range(rank)]
        sub.dims = [None] * rank  # type: ignore[list-item]  # never emitted
        prefetch = [_NoMemory()] * (len(closed.jaxpr.invars) - rank)
        outs = sub.run(closed.jaxpr, list(closed.consts), [*dims, *prefetch])
        exprs = tuple(as_expr(o) for o in outs)
        index_map = AffineMap(rank, 0, exprs)
    else:
        index_map = AffineMap(1, 0, tuple(AffineConstantExpr(0) for _ in block))
    mode = getattr(mapping, "pipeline_mode", None)
    lookahead = mode is not None and bool(getattr(mode, "use_lookahead", False))
    buffers = mode.buffer_count if mode is not None else 2
    if not isinstance(buffers, int):  # JAX 0.12's (in, out) pair
        raise unsupported(
            "`pl.Buffered` with separate input and output buffer counts",
            importer.loc(),
        )
    direction = OUT if output else IN
    return PipelineSpecAttr(direction, block, index_map, buffers, 0, lookahead)


class _NoMemory:
    """A scalar-prefetch ref given to an index map: reading it is not
    supported yet."""


def _block_dim(dim) -> BlockDimAttr:
    kind = type(dim).__name__
    if dim is None or kind == "Squeezed":
        return BlockDimAttr(SQUEEZED)
    if kind == "Blocked":
        return BlockDimAttr(BLOCKED, dim.block_size)
    if kind == "Element" and tuple(getattr(dim, "padding", (0, 0))) == (0, 0):
        return BlockDimAttr(ELEMENT, dim.block_size)
    if isinstance(dim, int):
        return BlockDimAttr(BLOCKED, dim)
    raise unsupported(f"the block dimension `{dim}`", None)
