"""Write each example's inputs, `<example>.inputs.npz`, next to it.

    python examples/make_inputs.py

Only the parameters a program reads are inputs (the source of a DMA start,
of a descriptor, of a `sync_copy` leaf, of a copy into a window or of a
pipeline's `in` spec, looked up through views in the program itself, so
that programs with loops and pipelines need no lowering); the others are
outputs and start unwritten. Values are small
repeating patterns, so the files stay small, cast to each parameter's dtype.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from xdsl.ir import SSAValue

import copyir
from copyir.dialects.copy import (
    AsyncCopyOp,
    BufferedCopyOp,
    DmaOp,
    KernelOp,
    PipelineOp,
    SyncCopyOp,
    ViewOp,
)

HERE = Path(__file__).parent


def read_parameters(kernel: KernelOp) -> list[SSAValue]:
    """The kernel's parameters that some copy reads, in parameter order."""
    read = set()
    for op in kernel.walk():
        if (isinstance(op, DmaOp) and op.is_start) or isinstance(op, AsyncCopyOp):
            read.add(root(op.src))
        elif isinstance(op, SyncCopyOp):
            read.update(root(v) for v in op.srcs)
        elif isinstance(op, BufferedCopyOp) and op.copy_in:
            read.add(root(op.plain))
        elif isinstance(op, PipelineOp):
            specs = zip(op.refs, op.ref_specs.data, strict=True)
            read.update(root(ref) for ref, spec in specs if spec.input)
    return [p for p in kernel.params if p in read]


def root(value: SSAValue) -> SSAValue:
    """The ref a chain of views views."""
    while isinstance(value.owner, ViewOp):
        value = value.owner.source
    return value


def main() -> None:
    for path in sorted(HERE.glob("*.cpy")):
        name = str(path.relative_to(HERE.parent))
        kernel = copyir.parse(path.read_text(), name).ops.first
        arrays = {}
        for param in read_parameters(kernel):
            type = param.type
            count = int(np.prod(type.get_shape()))
            pattern = np.arange(count) % 251 - 50
            arrays[param.name_hint] = pattern.astype(type.dtype.numpy).reshape(
                type.get_shape()
            )
        np.savez_compressed(path.with_suffix(".inputs.npz"), **arrays)
        print(path.with_suffix(".inputs.npz").name, sorted(arrays))


if __name__ == "__main__":
    main()
