"""Refs, views, semaphores, scratch and DMAs of a kernel's jaxpr.

A ref is its copy value; each `.at[...]` (an `NDIndexer`) is a
`copy.view`, or a `copy.sem_index` of a semaphore array; `dma_start` and
`dma_wait` are `copy.dma`. The importer counts, per buffer, the ops that
write it, so that a value read before a write is not stored after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.ir import Block, Operation, SSAValue

from copyir.dialects.copy import (
    DYNAMIC,
    AllocOp,
    DmaOp,
    SemaphoreOp,
    SemIndexOp,
    ViewOp,
)
from copyir.dialects.copy.types import (
    RefType,
    SemaphoreArrayType,
    SemaphoreType,
    ref_type,
)
from copyir.pallas import jax_compat
from copyir.pallas.values import Vector
from copyir.pallas.walker import Value, Walker, element_of


class Refs(Walker):
    """Views, semaphores, allocations and DMAs."""

    def ref(self, transformed: Any) -> SSAValue:
        """A (transformed) ref as a copy value: its views, one per
        indexer, or one semaphore of an array."""
        if isinstance(transformed, SSAValue):
            return transformed
        value = transformed.ref
        for transform in transformed.transforms:
            value = self.indexed(value, transform)
        return value

    def indexed(self, value: SSAValue, indexer: Any) -> SSAValue:
        if type(indexer).__name__ != "NDIndexer":
            raise self.unsupported(f"the ref transform `{type(indexer).__name__}`")
        if getattr(indexer, "int_indexer_shape", ()):
            raise self.unsupported("indexing a ref with an array of indices")
        if isinstance(value.type, SemaphoreArrayType | SemaphoreType):
            return self.semaphore(value, indexer.indices)
        subscripts, dynamic = [], []
        for index in indexer.indices:
            if type(index).__name__ == "Slice":
                if not isinstance(index.size, int | np.integer):
                    raise self.unsupported("a slice of a size known only at run time")
                if index.stride != 1:
                    raise self.unsupported(f"a slice with stride {index.stride}")
                start, size, dropped = index.start, int(index.size), False
            else:
                start, size, dropped = index, 1, True
            if isinstance(start, Vector):
                raise self.unsupported("an index read from memory")
            at = self.index_value(start)
            if not isinstance(at, int):
                dynamic.append(at)
                at = DYNAMIC
            subscripts.append((at, size, dropped))
        assert isinstance(value.type, RefType)
        if (
            not dynamic
            and all(
                s == (0, n, False)
                for s, n in zip(subscripts, value.type.get_shape(), strict=False)
            )
            and len(subscripts) == len(value.type.get_shape())
        ):
            return value  # `ref[...]`, `ref.at[:, :]`: the ref itself
        view = self.emit(ViewOp(value, subscripts, dynamic=dynamic)).results[0]
        self.roots[view] = self.roots.get(value, value)
        return view

    def semaphore(self, value: SSAValue, indices: Sequence[Any]) -> SSAValue:
        if not indices:
            return value
        static, dynamic = [], []
        for index in indices:
            if type(index).__name__ == "Slice" or isinstance(index, Vector):
                raise self.unsupported("a slice of a semaphore array")
            at = self.index_value(index)
            if isinstance(at, int):
                static.append(at)
            else:
                static.append(DYNAMIC)
                dynamic.append(at)
        return self.emit(SemIndexOp(value, static, dynamic)).results[0]

    def wrote(self, ref: SSAValue) -> None:
        root = self.roots.get(ref, ref)
        self.writes[root] = self.writes.get(root, 0) + 1

    def dma(self, eqn, args: list[Value]) -> list:
        src, dst, dst_sem, src_sem, device_id = eqn.params["tree"].unflatten(args)
        if device_id is not None:
            raise self.unsupported("a remote DMA (`device_id`)")
        if src_sem is not None or jax_compat.waits_on_source(eqn.params):
            raise self.unsupported("a DMA's source semaphore (`src_sem`, `wait_read`)")
        if dst_sem is None:
            raise self.unsupported("a DMA without a semaphore")
        action = "start" if eqn.primitive.name == "dma_start" else "wait"
        start = action == "start"
        add = start and bool(eqn.params.get("add", False))
        priority = int(eqn.params.get("priority", 0)) if start else 0
        src, dst, sem = self.ref(src), self.ref(dst), self.ref(dst_sem)
        self.emit(DmaOp(action, src, dst, sem, add=add, priority=priority))
        self.wrote(dst)
        return []

    def allocate(self, var, block: Block, name: str | None = None) -> SSAValue:
        """A scratch ref or semaphore array of the aval's shape, named
        `name` (fresh in the kernel), else `sem` or `scratch`."""
        aval = var.aval
        space = jax_compat.memory_space(aval)
        shape = tuple(aval.shape)
        if "semaphore" in space or "sem" in str(aval.dtype):
            if "dma" not in str(aval.dtype):
                raise self.unsupported("a regular (non-DMA) semaphore")
            op: Operation = SemaphoreOp(shape, self.names(name or "sem"))
        elif space not in ("vmem", "smem", "default"):
            raise self.unsupported(f"scratch in {space} memory")
        else:
            where = "smem" if space == "smem" else "vmem"
            op = AllocOp(
                ref_type(shape, self.element(aval.dtype), where),
                self.names(name or "scratch"),
            )
        op.location = self.location
        block.add_op(op)
        return op.results[0]

    def element(self, dtype: Any) -> Any:
        try:
            return element_of(dtype)
        except (KeyError, TypeError):
            raise self.unsupported(f"the dtype {dtype}") from None
