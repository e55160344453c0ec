"""A Pallas kernel's jaxpr, equation by equation, as copy-dialect ops.

`BodyImporter.run` walks a jaxpr with each variable bound to what it is
for copyir (`values`): refs become views and semaphore indices where they
are used, integers index expressions, `scan` and `while` loops `copy.for`,
`cond` on an index condition `copy.when`, `run_scoped` a `copy.scope`,
`dma_start` / `dma_wait` `copy.dma`, and stores of computed arrays
`copy.compute`. Every op carries the Python line of the statement that
made its equation. What has no copyir form yet is one `CopyIRError`
naming the construct and its line.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import FileLineColLoc
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr

from copyir import errors
from copyir.cpy.expressions import MAX_CONDITION_SETS, in_print_order
from copyir.dialects.copy import (
    DYNAMIC,
    AllocOp,
    ComputeOp,
    DmaOp,
    ForOp,
    IndexOp,
    SemaphoreOp,
    SemIndexOp,
    ViewOp,
    WhenOp,
    describe,
)
from copyir.dialects.copy.types import (
    RefType,
    SemaphoreArrayType,
    SemaphoreType,
    ref_type,
)
from copyir.dtypes import BY_NAME
from copyir.errors import CopyIRError, Loc
from copyir.index import format_expr
from copyir.locations import loc_of
from copyir.names import FreshNames
from copyir.pallas import jax_compat, jaxpr_source
from copyir.pallas.symbols import (
    COMPARISONS,
    Condition,
    Integer,
    TooManySets,
    as_condition,
    as_expr,
    compare,
    difference,
    folded,
    local_sets,
)
from copyir.pallas.values import Read, Vector

Value = Any
"""What a jaxpr variable is bound to (see `values`)."""

_VECTOR_OPS = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "max"}
_VECTOR_OPS |= {"min": "min", "neg": "neg"}
"""jaxpr primitives that are one `scalar` op of a computation."""

_INDEX_NAMES = ("i", "j", "k", "l", "m", "n")

_INLINED = ("jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "remat")
"""Call primitives whose jaxpr the importer walks in place."""


def unsupported(what: str, loc: Loc | None) -> CopyIRError:
    """`exp is not supported yet (kernel.py:22)`, located at the line."""
    where = f" ({loc.file}:{loc.line})" if loc is not None else ""
    return CopyIRError(errors.PALLAS_UNSUPPORTED.format(what=what, where=where), loc)


def dtype_name(dtype: Any) -> str:
    """copyir's name of a numpy dtype (`f32`); KeyError for one it lacks."""
    return BY_NAME[np.dtype(dtype).name].name


def element_of(dtype: Any) -> Any:
    return BY_NAME[np.dtype(dtype).name].ir


class BodyImporter:
    """Walks jaxprs into the block being built (see the module docstring)."""

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

    # -- building -----------------------------------------------------------

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
        from xdsl.ir.affine import AffineMap

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

    # -- walking ------------------------------------------------------------

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
        name = eqn.primitive.name
        handler = _HANDLERS.get(name)
        if handler is not None:
            return handler(self, eqn, args)
        if name in _INLINED:
            closed = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr")
            if name in ("jit", "pjit") and eqn.params.get("name") in _NAMED_JITS:
                return _NAMED_JITS[eqn.params["name"]](self, eqn, args)
            return self.run_closed(closed, args)
        if all(_known(a) for a in args) and not _is_array(eqn):
            return self.evaluate(eqn, args)  # `div 0.5 0.5` is a number
        if name in _VECTOR_OPS or _is_array(eqn):
            return self.vector(eqn, args)
        raise self.unsupported(f"`{name}`")

    def run_closed(self, closed, args: Sequence[Value]) -> list[Value]:
        jaxpr = getattr(closed, "jaxpr", closed)
        consts = list(getattr(closed, "consts", ()))
        return self.run(jaxpr, consts, args)

    def evaluate(self, eqn, args: list[Value]) -> Any:
        """An equation on known values only, evaluated by JAX."""
        outs = eqn.primitive.bind(*args, **eqn.params)
        if eqn.primitive.multiple_results:
            return [_python(o) for o in outs]
        return _python(outs)

    # -- integers -----------------------------------------------------------

    def integer(self, eqn, args: list[Value]) -> Any:
        """`add`, `sub`, `mul`, `neg` of index values: affine expressions."""
        name = eqn.primitive.name
        if all(_known(a) for a in args):
            return self.evaluate(eqn, args)
        if any(isinstance(a, Vector | float) for a in args):
            return self.vector(eqn, args)
        exprs = [as_expr(a) for a in args]
        if name == "neg":
            return folded(-exprs[0])
        if name == "mul" and not any(isinstance(a, int) for a in args):
            raise self.not_affine("*", args)
        result = {"add": operator.add, "sub": operator.sub, "mul": operator.mul}[name](
            *exprs
        )
        return folded(result)

    def division(self, kind: str, args: list[Value]) -> Integer:
        """`a // b` or `a % b` (Python's, as jnp's floor_divide and
        remainder are) for a positive constant b."""
        a, b = args
        if isinstance(a, int) and isinstance(b, int):
            return a // b if kind == "//" else a % b
        if not isinstance(b, int) or b < 1 or not isinstance(a, int | AffineExpr):
            raise self.not_affine(kind, args)
        expr = as_expr(a)
        result = expr // b if kind == "//" else expr % b
        return folded(result)

    def not_affine(self, op: str, args: Sequence[Value]) -> CopyIRError:
        texts = [self.text(a) if _is_integer(a) else "a value" for a in args]
        return CopyIRError(
            errors.PALLAS_NOT_AFFINE.format(expr=f" {op} ".join(texts)), self.loc()
        )

    def comparison(self, eqn, args: list[Value]) -> Any:
        if all(_known(a) for a in args):
            return self.evaluate(eqn, args)
        if not all(_is_integer(a) for a in args):
            return self.vector(eqn, args)
        return self.condition(lambda: compare(eqn.primitive.name, *args))

    def logic(self, eqn, args: list[Value]) -> Any:
        if all(_known(a) for a in args):
            return self.evaluate(eqn, args)
        if not all(isinstance(a, bool | Condition) for a in args):
            return self.vector(eqn, args)
        conditions = [as_condition(a) for a in args]
        name = eqn.primitive.name
        if name == "not":
            return self.condition(lambda: ~conditions[0])
        if name == "and":
            return self.condition(lambda: conditions[0] & conditions[1])
        if name == "or":
            return self.condition(lambda: conditions[0] | conditions[1])
        raise self.unsupported(f"`{name}` of conditions")

    def condition(self, make: Callable[[], bool | Condition]) -> bool | Condition:
        try:
            return make()
        except TooManySets as err:
            raise CopyIRError(
                errors.PALLAS_CONDITION_TOO_LARGE.format(
                    count=err.args[0], limit=MAX_CONDITION_SETS
                ),
                self.loc(),
            ) from None

    def convert(self, eqn, args: list[Value]) -> Any:
        (value,) = args
        if _known(value):
            return self.evaluate(eqn, args)
        if isinstance(value, Condition) or _is_integer(value):
            return value  # bool to int for `cond`, int32 to int32
        return self.vector(eqn, args)

    def select(self, eqn, args: list[Value]) -> Any:
        which, *cases = args
        if isinstance(which, bool | int | np.integer | np.bool_):
            return cases[int(which)]
        if all(c is cases[0] for c in cases):
            return cases[0]
        if isinstance(which, Condition):
            raise self.unsupported("`select_n` on an index condition")
        return self.vector(eqn, args)

    def program_id(self, eqn, args: list[Value]) -> Integer:
        axis = eqn.params["axis"]
        if axis >= len(self.program_ids):
            raise self.unsupported(f"`program_id({axis})` outside the grid")
        return self.program_ids[axis]

    def num_programs(self, eqn, args: list[Value]) -> int:
        axis = eqn.params["axis"]
        if axis >= len(self.grid):
            raise self.unsupported(f"`num_programs({axis})` outside the grid")
        return self.grid[axis]

    # -- refs ---------------------------------------------------------------

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

    # -- DMAs ---------------------------------------------------------------

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

    # -- loads, stores and computations -------------------------------------

    def get(self, eqn, args: list[Value]) -> Vector:
        ref, *flat = args
        if not isinstance(ref, SSAValue):
            raise self.unsupported("an index read from memory (scalar prefetch)")
        view = self.transformed(ref, eqn.params["tree"].unflatten(flat))
        aval = eqn.outvars[0].aval
        root = self.roots.get(view, view)
        read = Read(view, root, self.writes.get(root, 0))
        return Vector.of_read(read, tuple(aval.shape), _dtype_of(self, aval.dtype))

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
            from copyir.dialects.copy import OpaqueOp

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
        if _known(value):
            return Vector.of_literal(_literal(value), _dtype_of(self, aval.dtype))
        raise self.unsupported("storing an index value into a ref")

    def vector(self, eqn, args: list[Value]) -> Vector:
        """An elementwise operation on arrays: a scalar op of the computation
        where copyir has one, else an opaque one (or an error)."""
        name = eqn.primitive.name
        aval = eqn.outvars[0].aval
        dtype = _dtype_of(self, aval.dtype)
        operands = []
        for var, arg in zip(eqn.invars, args, strict=False):
            if isinstance(arg, Vector):
                operands.append(arg)
            elif _known(arg):
                operands.append(
                    Vector.of_literal(_literal(arg), _dtype_of(self, var.aval.dtype))
                )
            elif any(isinstance(a, Vector) for a in args):
                raise self.unsupported(f"`{name}` of an index value and an array")
            else:
                raise self.unsupported(f"`{name}` of index values")
        same = all(o.dtype == dtype for o in operands)
        if name in _VECTOR_OPS and same:
            return Vector.apply(
                _VECTOR_OPS[name], tuple(operands), tuple(aval.shape), dtype
            )
        if name == "convert_element_type" and same:
            return operands[0]
        if name in ("broadcast_in_dim", "reshape", "squeeze") and operands[0].literal:
            return Vector.of_literal(operands[0].literal, dtype)
        return Vector.apply(
            name, tuple(operands), tuple(aval.shape), dtype, opaque=True
        )

    # -- scopes, loops and conditions ---------------------------------------

    def run_scoped(self, eqn, args: list[Value]) -> list[Value]:
        """`pl.run_scoped`: its allocations live for the body, fresh on
        every entry (a `copy.scope`)."""
        from copyir.dialects.copy import ScopeOp

        jaxpr = eqn.params["jaxpr"]
        scope = self.emit(ScopeOp())
        block = scope.regions[0].block

        def walk() -> list[Value]:
            allocated = [self.allocate(v, block) for v in jaxpr.invars]
            return self.run(jaxpr, args, allocated)

        outs = self.in_block(block, walk)
        if outs:
            raise self.unsupported("`run_scoped` that returns values")
        return outs

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

    def scan(self, eqn, args: list[Value]) -> list[Value]:
        """A `fori_loop` of static bounds: a carry incremented by 1 each
        step is the loop index; the other carries must pass through."""
        p = eqn.params
        if p["reverse"]:
            raise self.unsupported("a reversed `scan`")
        n_consts, n_carry = jax_compat.scan_counts(p)
        consts = args[:n_consts]
        carries = args[n_consts : n_consts + n_carry]
        if len(args) > n_consts + n_carry:
            raise self.unsupported("a `scan` over arrays")
        jaxpr = p["jaxpr"].jaxpr
        carry_vars = jaxpr.invars[n_consts : n_consts + n_carry]
        kinds = _carry_kinds(jaxpr, carry_vars, jaxpr.outvars[:n_carry])
        return self.loop(p["length"], kinds, carries, p["jaxpr"], [*consts], jaxpr)

    def loop(self, length: int, kinds, carries, closed, consts, jaxpr) -> list[Value]:
        for kind, value in zip(kinds, carries, strict=True):
            if kind == "carried" or (kind == "step" and not _is_integer(value)):
                what = "array" if isinstance(value, Vector) else "index"
                raise self.unsupported(f"a loop-carried {what} value")
        finals = [
            folded(as_expr(v) + length) if k == "step" else v
            for k, v in zip(kinds, carries, strict=True)
        ]
        if length <= 0:
            return finals
        loop = self.emit(ForOp([0], [length], [self.index_name()]))
        t = self.dim(loop.regions[0].block.args[0])
        bound = [
            folded(as_expr(v) + t) if k == "step" else v
            for k, v in zip(kinds, carries, strict=True)
        ]
        self.in_block(
            loop.regions[0].block,
            lambda: self.run(
                jaxpr, list(getattr(closed, "consts", ())), [*consts, *bound]
            ),
        )
        return finals

    def while_loop(self, eqn, args: list[Value]) -> list[Value]:
        """A `fori_loop` whose bounds JAX did not know: a `for` where they
        are static here (the condition `i < upper`, `i` stepping by 1)."""
        p = eqn.params
        cond_consts = args[: p["cond_nconsts"]]
        body_consts = args[p["cond_nconsts"] : p["cond_nconsts"] + p["body_nconsts"]]
        carries = args[p["cond_nconsts"] + p["body_nconsts"] :]
        body = p["body_jaxpr"].jaxpr
        nconsts = p["body_nconsts"]
        kinds = _carry_kinds(body, body.invars[nconsts:], body.outvars)
        steps = [k for k, kind in enumerate(kinds) if kind == "step"]
        bound = self.trip_count(p["cond_jaxpr"], cond_consts, carries, steps)
        return self.loop(bound, kinds, carries, p["body_jaxpr"], body_consts, body)

    def trip_count(self, cond, consts, carries, steps: list[int]) -> int:
        """The steps of `while i < upper` for a stepping carry `i` and an
        `upper` known here (or affine with a constant difference)."""
        jaxpr = cond.jaxpr
        nconsts = len(consts)
        if len(jaxpr.eqns) == 1 and jaxpr.eqns[0].primitive.name == "lt":
            lhs, rhs = jaxpr.eqns[0].invars
            values = dict(
                zip(jaxpr.invars[nconsts:], range(len(carries)), strict=False)
            )
            if lhs in values and values[lhs] in steps:
                env = dict(zip(jaxpr.invars, [*consts, *carries], strict=True))
                upper = read(env, rhs)
                if _is_integer(upper):
                    start = carries[values[lhs]]
                    count = difference(upper, start, len(self.dims))
                    if isinstance(count, int):
                        return max(count, 0)
        raise self.unsupported("a `while` loop whose trip count is not static")

    def cond(self, eqn, args: list[Value]) -> list[Value]:
        """`pl.when` (and `lax.cond` without results) on an index
        condition: one `copy.when` per branch that does anything."""
        which, *operands = args
        branches = eqn.params["branches"]
        if isinstance(which, bool | int | np.integer | np.bool_):
            index = min(max(int(which), 0), len(branches) - 1)
            return self.run_closed(branches[index], operands)
        if not isinstance(which, Condition) or len(branches) != 2:
            raise self.unsupported("`cond` on a value that is no index condition")
        if eqn.outvars:
            raise self.unsupported("`cond` with results")
        for holds, branch in ((True, branches[1]), (False, branches[0])):
            if not branch.jaxpr.eqns:
                continue
            condition = which if holds else as_condition(self.condition(lambda: ~which))
            if not condition.sets:
                continue
            sets, dims = local_sets(condition, self.dims)
            when = self.emit(WhenOp(sets, dims))
            self.in_block(
                when.regions[0].block, lambda b=branch: self.run_closed(b, operands)
            )
        return []

    def emit_pipeline(self, eqn, args: list[Value]) -> list:
        """`pltpu.emit_pipeline` traced as one equation (with
        `jax_use_emit_pipeline_primitive`): a `copy.pipeline` over its
        refs, the body its jaxpr on the windows. Without a core axis
        Pallas ignores `dimension_semantics` here (its prefetch crosses
        every dimension), so the pipeline gets none."""
        from copyir.dialects.copy import PipelineOp
        from copyir.pallas.blocks import block_spec

        p = eqn.params
        gm = p["grid_mapping"]
        if p.get("core_axis") is not None or p.get("core_axis_name") is not None:
            raise self.unsupported("`emit_pipeline` over cores (`core_axis`)")
        if p.get("tiling") is not None:
            raise self.unsupported("`emit_pipeline` with `tiling`")
        operands = jax_compat.pipeline_operands(p, args)
        if operands.core_id is not None:
            raise self.unsupported("`emit_pipeline` over cores (`core_axis`)")
        if operands.run_time_grid or any(d != 0 for d in operands.grid_offsets):
            raise self.unsupported("`emit_pipeline` with a grid known only at run time")
        if operands.index_map_consts:
            raise self.unsupported("`emit_pipeline` index maps that capture values")
        if operands.allocations is not None:
            raise self.unsupported("`emit_pipeline` with `allocations`")
        if p.get("output_wait_read_only"):
            raise self.unsupported("`emit_pipeline(output_wait_read_only=True)`")
        if p.get("_explicit_indices"):
            raise self.unsupported("an `emit_pipeline` body given its indices")
        body_consts = list(operands.body_consts)
        refs = [self.ref(r) for r in _leaves(operands.refs)]
        grid = tuple(gm.grid)
        specs = [
            block_spec(self, bm, k >= gm.num_inputs, len(grid))
            for k, bm in enumerate(gm.block_mappings)
        ]
        body_jaxpr = p["body_jaxpr"]
        names = [self.names(n) for n in _window_names(body_jaxpr, len(refs))]
        indices = [self.index_name() for _ in grid]
        pipe = self.emit(
            PipelineOp(
                grid,
                refs,
                specs,
                [*names, *indices],
                no_pipelining=bool(p.get("no_pipelining")),
            )
        )
        windows = list(pipe.regions[0].block.args[: len(refs)])
        for index in pipe.regions[0].block.args[len(refs) :]:
            self.dim(index)
        self.in_block(
            pipe.regions[0].block,
            lambda: self.run(body_jaxpr, body_consts, windows),
        )
        return []

    def semaphore_op(self, eqn, args: list[Value]) -> Any:
        raise self.unsupported(f"`{eqn.primitive.name}` (regular semaphores)")


def _leaves(tree: Any) -> list:
    """The refs of an `args_tree`, in order (tuples and lists of them)."""
    if isinstance(tree, tuple | list):
        return [leaf for item in tree for leaf in _leaves(item)]
    return [tree]


def _window_names(jaxpr, count: int) -> list[str]:
    """The body's argument names, where JAX kept them, else `window`."""
    from copyir.pallas.calls import identifier

    info = getattr(jaxpr, "debug_info", None)
    names = list(getattr(info, "arg_names", None) or ())
    if len(names) != count:
        return ["window"] * count
    return [identifier(n) for n in names]


def read(env: dict, var: Any) -> Value:
    """A variable's value, or a literal's."""
    if type(var).__name__ == "Literal":
        return _python(var.val)
    return env[var]


def _python(value: Any) -> Any:
    """A known scalar as a Python int, bool or float; arrays stay numpy."""
    array = np.asarray(value)
    if array.shape == ():
        item = array.item()
        if array.dtype.kind == "b":
            return bool(item)
        return item
    return array


def _known(value: Any) -> bool:
    return isinstance(value, int | float | bool | np.ndarray | np.generic)


def _is_integer(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(
        value, AffineExpr
    )


def _is_array(eqn) -> bool:
    return any(getattr(v.aval, "shape", ()) != () for v in eqn.outvars)


def _literal(value: Any) -> str:
    if isinstance(value, bool | np.bool_):
        return "True" if value else "False"
    if isinstance(value, float | np.floating):
        return repr(float(value))
    if isinstance(value, np.ndarray):
        flat = np.unique(value)
        if flat.size == 1:
            return _literal(_python(flat[0]))
        raise ValueError("an array constant")
    return str(int(value))


def _dtype_of(importer: BodyImporter, dtype: Any) -> str:
    try:
        return dtype_name(dtype)
    except (KeyError, TypeError):
        raise importer.unsupported(f"the dtype {dtype}") from None


def dtype_name_of_ref(view: SSAValue) -> str:
    assert isinstance(view.type, RefType)
    from copyir.dtypes import BY_IR

    return BY_IR[view.type.element_type].name


def _carry_kinds(jaxpr, carry_vars: Sequence[Any], outvars: Sequence[Any]) -> list[str]:
    """Per carry of a loop body: `step` (its output is the carry plus 1),
    `same` (passed through) or `carried` (anything else)."""
    made = {}
    for eqn in jaxpr.eqns:
        for out in eqn.outvars:
            made[out] = eqn
    kinds = []
    for var, out in zip(carry_vars, outvars, strict=True):
        if out is var:
            kinds.append("same")
            continue
        eqn = made.get(out)
        if eqn is not None and eqn.primitive.name == "add":
            a, b = eqn.invars
            one = [x for x in (a, b) if x is not var]
            if len(one) == 1 and (a is var or b is var) and _is_one(one[0]):
                kinds.append("step")
                continue
        kinds.append("carried")
    return kinds


def _is_one(var: Any) -> bool:
    return type(var).__name__ == "Literal" and _python(var.val) == 1


def _named_division(kind: str) -> Callable:
    def handle(importer: BodyImporter, eqn, args: list[Value]) -> Any:
        if all(_known(a) for a in args) or not all(_is_integer(a) for a in args):
            return importer.run_closed(eqn.params["jaxpr"], args)
        return [importer.division(kind, args)]

    return handle


_NAMED_JITS: dict[str, Callable] = {
    "remainder": _named_division("%"),
    "floor_divide": _named_division("//"),
}
"""`jnp.remainder` and `jnp.floor_divide` (Python's `%` and `//` on
traced integers) are jits of these names: recognised whole."""

_HANDLERS: dict[str, Callable[[BodyImporter, Any, list], Any]] = {
    "add": BodyImporter.integer,
    "sub": BodyImporter.integer,
    "mul": BodyImporter.integer,
    "neg": BodyImporter.integer,
    "convert_element_type": BodyImporter.convert,
    "select_n": BodyImporter.select,
    "program_id": BodyImporter.program_id,
    "num_programs": BodyImporter.num_programs,
    "dma_start": BodyImporter.dma,
    "dma_wait": BodyImporter.dma,
    "get": BodyImporter.get,
    "swap": BodyImporter.swap,
    "addupdate": BodyImporter.swap,
    "run_scoped": BodyImporter.run_scoped,
    "scan": BodyImporter.scan,
    "while": BodyImporter.while_loop,
    "cond": BodyImporter.cond,
    "emit_pipeline": BodyImporter.emit_pipeline,
    "semaphore_signal": BodyImporter.semaphore_op,
    "semaphore_wait": BodyImporter.semaphore_op,
    "semaphore_read": BodyImporter.semaphore_op,
}
_HANDLERS |= {name: BodyImporter.comparison for name in COMPARISONS}
_HANDLERS |= {name: BodyImporter.logic for name in ("and", "or", "not")}

__all__ = ["BodyImporter", "unsupported"]
