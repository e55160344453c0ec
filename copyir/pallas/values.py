"""What a kernel's jaxpr values become while the importer walks it.

A ref is the copy-dialect value of the ref (`SSAValue`); an integer is an
`int` or an `AffineExpr` (`symbols`); a boolean a `bool` or a `Condition`;
an array read from a ref, or computed from such reads, a `Vector`: an
elementwise expression over reads that becomes one `copy.compute` (or, for
primitives with no scalar op, one `copy.opaque`) where it is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import SSAValue

from copyir.compute import Apply, Expression, Literal, Operand


@dataclass(frozen=True, eq=False)
class Read:
    """`ref[...]` read into a value: the view, the buffer it lies in, and
    that buffer's write count at the read (a later write makes the value
    stale, which one computation at the store could not express)."""

    view: SSAValue
    root: SSAValue
    writes: int


@dataclass(frozen=True, eq=False)
class Vector:
    """An array value: a read, a literal, or an operation on others.

    `op` is a scalar op's word (`add`, `mul`, ...), or the jaxpr primitive
    with no copyir op when `opaque`."""

    shape: tuple[int, ...]
    dtype: str
    read: Read | None = None
    literal: str | None = None
    op: str | None = None
    args: tuple[Vector, ...] = ()
    opaque: bool = False
    reads: tuple[Read, ...] = field(default=())

    @staticmethod
    def of_read(read: Read, shape: tuple[int, ...], dtype: str) -> Vector:
        return Vector(shape, dtype, read=read, reads=(read,))

    @staticmethod
    def of_literal(text: str, dtype: str) -> Vector:
        return Vector((), dtype, literal=text)

    @staticmethod
    def apply(
        op: str, args: tuple[Vector, ...], shape, dtype: str, opaque: bool = False
    ) -> Vector:
        reads: list[Read] = []
        for arg in args:
            reads.extend(r for r in arg.reads if all(r is not s for s in reads))
        return Vector(shape, dtype, op=op, args=args, opaque=opaque, reads=tuple(reads))

    def opaque_ops(self) -> list[str]:
        """The primitives with no copyir op, in the order the kernel
        applies them (operands before the operation)."""
        found: list[str] = []
        stack: list[tuple[Vector, bool]] = [(self, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                if node.opaque and node.op not in found:
                    found.append(node.op or "")
                continue
            stack.append((node, True))
            stack.extend((arg, False) for arg in reversed(node.args))
        return found

    def expression(self, inputs: list[SSAValue]) -> Expression:
        """The computation's expression; each read's view joins `inputs`
        once, as operand k."""
        if self.read is not None:
            for k, view in enumerate(inputs):
                if view is self.read.view:
                    return Operand(k)
            inputs.append(self.read.view)
            return Operand(len(inputs) - 1)
        if self.literal is not None:
            return Literal(self.literal)
        assert self.op is not None and not self.opaque
        return Apply(self.op, tuple(a.expression(inputs) for a in self.args))
