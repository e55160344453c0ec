"""Walking a kernel's jaxpr: what every part of the importer shares.

`Walker.run` walks a jaxpr with each variable bound to what it is for
copyir (`values`): a ref's copy value, an integer as an `int` or an
`AffineExpr` over the index values met (`dims`), a boolean as a `bool` or a
`Condition`, an array as a `Vector`. Each equation is located at its
Python line (`jaxpr_source`) and handed to `equation`, which
`body.BodyImporter` dispatches; the ops it makes go into the current block
at that location.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import FileLineColLoc
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap

from copyir import errors
from copyir.cpy.expressions import in_print_order
from copyir.dialects.copy import IndexOp, describe
from copyir.dtypes import BY_NAME
from copyir.errors import CopyIRError, Loc
from copyir.index import format_expr
from copyir.locations import loc_of
from copyir.names import FreshNames
from copyir.pallas import jaxpr_source
from copyir.pallas.symbols import Integer, as_expr, folded

Value = Any
"""What a jaxpr variable is bound to (see `values`)."""

_INDEX_NAMES = ("i", "j", "k", "l", "m", "n")


def unsupported(what: str, loc: Loc | None) -> CopyIRError:
    """`exp is not supported yet (kernel.py:22)`, located at the line."""
    where = f" ({loc.file}:{loc.line})" if loc is not None else ""
    return CopyIRError(errors.PALLAS_UNSUPPORTED.format(what=what, where=where), loc)


def dtype_name(dtype: Any) -> str:
    """copyir's name of a numpy dtype (`f32`); KeyError for one it lacks."""
    return BY_NAME[np.dtype(dtype).name].name


def element_of(dtype: Any) -> Any:
    return BY_NAME[np.dtype(dtype).name].ir


class Walker:
    """The block being built, the values met, and the walk itself."""

    def __init__(
        self,
        block: Block,
        location: FileLineColLoc,
        *,
        opaque_compute: bool = False,
        names: FreshNames | None = None,
    ):
        self.block = block
        self.location = location
        self.opaque_compute = opaque_compute
        self.dims: list[SSAValue] = []
        """The index values index expressions are over, in order met."""
        self.program_ids: list[Integer] = []
        self.grid: tuple[int, ...] = ()
        self.roots: dict[SSAValue, SSAValue] = {}
        """Each view's buffer (a parameter or an allocation)."""
        self.writes: dict[SSAValue, int] = {}
        """Per buffer, the ops emitted so far that write it."""
        self.names = names if names is not None else FreshNames()
        """The kernel's names: parameters, scratch, loop indices."""

    def emit(self, op: Operation) -> Operation:
        op.location = self.location
        self.block.add_op(op)
        return op

    def loc(self) -> Loc | None:
        return loc_of(self.location)

    def unsupported(self, what: str) -> CopyIRError:
        return unsupported(what, self.loc())

    def dim(self, value: SSAValue) -> AffineExpr:
        """An index value as a dimension of the importer's expressions."""
        self.dims.append(value)
        return AffineDimExpr(len(self.dims) - 1)

    def index_value(self, value: Integer) -> int | SSAValue:
        """An integer as a view start or an index operand: its int, the
        index value it is, or a new `copy.index`."""
        value = folded(as_expr(value))
        if isinstance(value, int):
            return value
        (expr,), dims = in_print_order([value], self.dims)
        if isinstance(expr, AffineDimExpr):
            return dims[expr.position]
        return self.emit(IndexOp(AffineMap(len(dims), 0, (expr,)), dims)).results[0]

    def text(self, value: Integer) -> str:
        """An index expression as the authoring syntax writes it."""
        if isinstance(value, int):
            return str(value)
        (expr,), dims = in_print_order([value], self.dims)
        return format_expr(expr, [describe(d) for d in dims])

    def index_name(self) -> str:
        """A fresh loop index name: i, j, k, ..., as kernels name them."""
        for base in _INDEX_NAMES:
            if base not in self.names.taken:
                return self.names(base)
        return self.names("i")

    def in_block(self, block: Block, walk: Callable[[], Any]) -> Any:
        outer, self.block = self.block, block
        try:
            return walk()
        finally:
            self.block = outer

    def run(self, jaxpr, consts: Sequence[Value], args: Sequence[Value]) -> list[Value]:
        """Walk `jaxpr` (a core `Jaxpr`) with its constvars and invars bound;
        the values of its outvars."""
        env: dict[Any, Value] = {}
        for var, value in zip(jaxpr.constvars, consts, strict=True):
            env[var] = value
        for var, value in zip(jaxpr.invars, args, strict=True):
            env[var] = value
        for eqn in jaxpr.eqns:
            outer = self.location
            self.location = jaxpr_source.location(eqn, outer)
            try:
                outs = self.equation(eqn, [read(env, v) for v in eqn.invars])
            finally:
                self.location = outer
            if not eqn.primitive.multiple_results:
                outs = [outs]
            for var, value in zip(eqn.outvars, outs, strict=False):
                env[var] = value
        return [read(env, v) for v in jaxpr.outvars]

    def equation(self, eqn, args: list[Value]) -> Any:
        """The values of one equation's results (`body.BodyImporter`)."""
        raise NotImplementedError

    def run_closed(self, closed, args: Sequence[Value]) -> list[Value]:
        jaxpr = getattr(closed, "jaxpr", closed)
        consts = list(getattr(closed, "consts", ()))
        return self.run(jaxpr, consts, args)

    def evaluate(self, eqn, args: list[Value]) -> Any:
        """An equation on known values only, evaluated by JAX now (also
        where the import runs while JAX lowers the call)."""
        import jax

        try:
            with jax.ensure_compile_time_eval():
                outs = eqn.primitive.bind(*args, **eqn.params)
        except NotImplementedError:  # a kernel-only primitive: `prng_seed`
            raise self.unsupported(f"`{eqn.primitive.name}`") from None
        if eqn.primitive.multiple_results:
            return [python_value(o) for o in outs]
        return python_value(outs)


def read(env: dict, var: Any) -> Value:
    """A variable's value, or a literal's."""
    if type(var).__name__ == "Literal":
        return python_value(var.val)
    return env[var]


def python_value(value: Any) -> Any:
    """A known scalar as a Python int, bool or float; arrays stay numpy."""
    array = np.asarray(value)
    if array.shape == ():
        item = array.item()
        if array.dtype.kind == "b":
            return bool(item)
        return item
    return array


def known(value: Any) -> bool:
    return isinstance(value, int | float | bool | np.ndarray | np.generic)


def is_integer(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(
        value, AffineExpr
    )


def is_array(eqn) -> bool:
    return any(getattr(v.aval, "shape", ()) != () for v in eqn.outvars)
