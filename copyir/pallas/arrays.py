"""Loads, stores and computations of a kernel's jaxpr.

`get` reads a view into a `Vector`; elementwise primitives build an
expression over such reads; `swap` and `addupdate` store one as a
`copy.compute` (one `scalar` op per operation), or, for primitives copyir
has no op for and `opaque_compute`, a `copy.opaque`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.ir import SSAValue

from copyir.dialects.copy import ComputeOp, OpaqueOp, describe
from copyir.dialects.copy.types import RefType
from copyir.pallas.refs import Refs
from copyir.pallas.values import Read, Vector
from copyir.pallas.walker import Value, Walker, dtype_name, known, python_value

VECTOR_OPS = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "max"}
VECTOR_OPS |= {"min": "min", "neg": "neg"}
"""jaxpr primitives that are one `scalar` op of a computation."""


class Arrays(Refs):
    """Loads, stores and elementwise computations."""

    def get(self, eqn, args: list[Value]) -> Vector:
        ref, *flat = args
        if not isinstance(ref, SSAValue):
            raise self.unsupported("an index read from memory (scalar prefetch)")
        return self.get_view(self.transformed(ref, eqn.params["tree"].unflatten(flat)))

    def swap(self, eqn, args: list[Value]) -> Vector | list:
        """`ref[...] = value`: one computation (`addupdate`: `+=`)."""
        ref, value, *flat = args
        view = self.transformed(ref, eqn.params["tree"].unflatten(flat))
        old = self.get_view(view)
        value = self.as_vector(value, eqn.invars[1].aval)
        if eqn.primitive.name == "addupdate":
            value = Vector.apply("add", (old, value), value.shape, value.dtype)
        self.store(view, value)
        return old if eqn.primitive.name == "swap" else []

    def transformed(self, ref: SSAValue, transforms: Sequence[Any]) -> SSAValue:
        """The ref under a `get`'s or `swap`'s transforms (`ref.at[a].at[b]`
        is one indexer per `.at`)."""
        for transform in transforms:
            ref = self.indexed(ref, transform)
        return ref

    def get_view(self, view: SSAValue) -> Vector:
        """`view[...]` as a value, read now: its buffer's write count kept."""
        assert isinstance(view.type, RefType)
        root = self.roots.get(view, view)
        read = Read(view, root, self.writes.get(root, 0))
        return Vector.of_read(
            read, tuple(view.type.get_shape()), dtype_name_of_ref(view)
        )

    def store(self, view: SSAValue, value: Vector) -> None:
        assert isinstance(view.type, RefType)
        for read in value.reads:
            if self.writes.get(read.root, 0) != read.writes:
                raise self.unsupported(
                    f"a value read from {describe(read.root)} before a later "
                    "write to it, stored after that write"
                )
        opaque = value.opaque_ops()
        if opaque and not self.opaque_compute:
            raise self.unsupported(", ".join(f"`{p}`" for p in opaque))
        shape = tuple(view.type.get_shape())
        for read in value.reads if not opaque else ():
            got = tuple(read.view.type.get_shape())  # type: ignore[union-attr]
            if got != shape:
                raise self.unsupported(
                    f"broadcasting a {list(got)} block into a {list(shape)} ref"
                )
        if opaque:
            reads = [r.view for r in value.reads]
            self.emit(OpaqueOp(", ".join(opaque), reads, [view]))
        else:
            inputs: list[SSAValue] = []
            expression = value.expression(inputs)
            self.emit(ComputeOp(view, expression, inputs))
        self.wrote(view)

    def as_vector(self, value: Value, aval) -> Vector:
        if isinstance(value, Vector):
            return value
        if known(value):
            return Vector.of_literal(literal_text(value), _dtype_of(self, aval.dtype))
        raise self.unsupported("storing an index value into a ref")

    def vector(self, eqn, args: list[Value]) -> Vector:
        """An elementwise operation on arrays: a scalar op of the computation
        where copyir has one, else an opaque one (or an error)."""
        name = eqn.primitive.name
        if eqn.primitive.multiple_results:  # `split`, of `jnp.unstack`
            raise self.unsupported(f"`{name}`")
        aval = eqn.outvars[0].aval
        dtype = _dtype_of(self, aval.dtype)
        operands = []
        for var, arg in zip(eqn.invars, args, strict=False):
            if isinstance(arg, Vector):
                operands.append(arg)
            elif known(arg):
                operands.append(
                    Vector.of_literal(
                        literal_text(arg), _dtype_of(self, var.aval.dtype)
                    )
                )
            elif any(isinstance(a, Vector) for a in args):
                raise self.unsupported(f"`{name}` of an index value and an array")
            else:
                raise self.unsupported(f"`{name}` of index values")
        same = all(o.dtype == dtype for o in operands)
        if name in VECTOR_OPS and same:
            return Vector.apply(
                VECTOR_OPS[name], tuple(operands), tuple(aval.shape), dtype
            )
        if name == "convert_element_type" and same:
            return operands[0]
        if name in ("broadcast_in_dim", "reshape", "squeeze") and operands[0].literal:
            return Vector.of_literal(operands[0].literal, dtype)
        return Vector.apply(
            name, tuple(operands), tuple(aval.shape), dtype, opaque=True
        )


def literal_text(value: Any) -> str:
    if isinstance(value, bool | np.bool_):
        return "True" if value else "False"
    if isinstance(value, float | np.floating):
        return repr(float(value))
    if isinstance(value, np.ndarray):
        flat = np.unique(value)
        if flat.size == 1:
            return literal_text(python_value(flat[0]))
        raise ValueError("an array constant")
    return str(int(value))


def _dtype_of(importer: Walker, dtype: Any) -> str:
    try:
        return dtype_name(dtype)
    except (KeyError, TypeError):
        raise importer.unsupported(f"the dtype {dtype}") from None


def dtype_name_of_ref(view: SSAValue) -> str:
    assert isinstance(view.type, RefType)
    from copyir.dtypes import BY_IR

    return BY_IR[view.type.element_type].name
