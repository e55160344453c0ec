"""The reference path: the high-level program run directly, in plain numpy.

Each op means what it says, at once: a DMA start is an immediate copy (or
add), a wait does nothing, a `sync_copy` copies leaf by leaf, a view is
numpy slicing, and a `buffered_copy` takes its block with numpy's own
slicing, `x[b*i : b*(i+1)]`, whose cut at the array's end is exactly the
ragged-edge rule. It shares no window arithmetic with the lowering, so that
comparing the two checks something. Memory nobody writes holds the same
poison as in the interpreter (every byte 0xFF).

Written with xDSL's interpreter framework: one function per op.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)

from copyir.dialects.copy import (
    ELEMENT,
    SQUEEZED,
    AllocOp,
    BufferedCopyOp,
    BufferedRefOp,
    BufferedRefType,
    DmaOp,
    KernelOp,
    RefType,
    SemaphoreOp,
    SemIndexOp,
    SyncCopyOp,
    ViewOp,
)

POISON = 0xFF


def poisoned(type: RefType | BufferedRefType) -> np.ndarray:
    """An array of the type's shape and dtype whose every byte is 0xFF."""
    dtype = (
        type.dtype.numpy if isinstance(type, RefType) else type.array_type.dtype.numpy
    )
    shape = (
        type.get_shape() if isinstance(type, RefType) else type.window_type.get_shape()
    )
    count = int(np.prod(shape, dtype=np.int64))
    return np.full(count * dtype.itemsize, POISON, np.uint8).view(dtype).reshape(shape)


def copy(src: np.ndarray, dst: np.ndarray, add: bool) -> None:
    if add:
        dst += src
    else:
        dst[...] = src


@register_impls
class CopyReference(InterpreterFunctions):
    """The meaning of each copy-dialect op, with numpy arrays as refs."""

    @impl(AllocOp)
    def run_alloc(self, interpreter: Interpreter, op: AllocOp, args: PythonValues):
        return (poisoned(op.result.type),)

    @impl(SemaphoreOp)
    def run_semaphore(self, interpreter: Interpreter, op: SemaphoreOp, args):
        return (None,)  # every DMA is immediate: semaphores have nothing to count

    @impl(SemIndexOp)
    def run_sem_index(self, interpreter: Interpreter, op: SemIndexOp, args):
        return (None,)

    @impl(ViewOp)
    def run_view(self, interpreter: Interpreter, op: ViewOp, args: PythonValues):
        (source,) = args
        index = tuple(
            offset if dropped else slice(offset, offset + size)
            for offset, size, dropped in op.subscripts()
        )
        return (source[(*index, ...)],)  # `...`: a view even when all are indexed

    @impl(DmaOp)
    def run_dma(self, interpreter: Interpreter, op: DmaOp, args: PythonValues):
        src, dst, _ = args
        if op.is_start:
            copy(src, dst, op.add is not None)
        return ()

    @impl(SyncCopyOp)
    def run_sync_copy(self, interpreter: Interpreter, op: SyncCopyOp, args):
        leaves = len(op.srcs)
        for src, dst in zip(args[:leaves], args[leaves:], strict=True):
            copy(src, dst, op.add is not None)
        return ()

    @impl(BufferedRefOp)
    def run_buffered_ref(self, interpreter: Interpreter, op: BufferedRefOp, args):
        return (poisoned(op.result.type),)

    @impl(BufferedCopyOp)
    def run_buffered_copy(self, interpreter: Interpreter, op: BufferedCopyOp, args):
        src, dst = args[:2]
        window, array = (dst, src) if op.copy_in else (src, dst)
        type: BufferedRefType = op.bref.type
        indices = op.block_indices or (0,) * len(type.get_shape())
        index = []
        for block, i in zip(type.block_dims, indices, strict=True):
            size = block.size.data
            if block.kind.data == SQUEEZED:
                index.append(i)
            elif block.kind.data == ELEMENT:
                index.append(slice(i, i + size))
            else:
                index.append(slice(i * size, (i + 1) * size))
        block = array[(*index, ...)]
        slot = window[(op.slot_value, *(slice(0, n) for n in block.shape), ...)]
        if op.copy_in:
            slot[...] = block
        else:
            block[...] = slot
        return ()


def run_reference(
    kernel: KernelOp, inputs: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Every parameter's final value after running the kernel directly.

    Inputs are copied; a parameter not given starts poisoned.
    """
    params = []
    for arg, name in zip(kernel.params, kernel.param_names, strict=True):
        if name in inputs:
            params.append(np.array(inputs[name], dtype=arg.type.dtype.numpy, copy=True))
        else:
            params.append(poisoned(arg.type))
    interpreter = Interpreter(_module_of(kernel))
    interpreter.register_implementations(CopyReference())
    interpreter.run_ssacfg_region(kernel.body, tuple(params), kernel.kernel_name)
    return dict(zip(kernel.param_names, params, strict=True))


def _module_of(kernel: KernelOp) -> Any:
    return kernel.parent_op() or kernel
