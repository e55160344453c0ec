"""convert-copy-to-dma: lower an address-assigned copy kernel to a DMA program.

Each kernel becomes a `dma.program`: a `dma.buffer` per parameter and per
scratch buffer and a `dma.semaphore` per named semaphore, all at the top,
then a `dma.start` or `dma.wait` per DMA, a `dma.invalidate` per
invalidation, a `dma.compute` per computation and a `dma.opaque` per ref
of an opaque computation (its reads, then its writes), in program order. A
scope's buffers and semaphores are declared with the rest; the scope
becomes an invalidation of each of its buffers where it starts and a
`dma.release` of each buffer and `dma.release_sem` of each semaphore
where it ends.
Views disappear here: a DMA end is the root buffer's address plus the view's
element offset times the element size, the view's shape, and its strides in
elements, as `copyir.access` folds them (each view once per pass run). A
semaphore is its id plus its flat index into its semaphore array, folded the
same way. A wait lowers its semaphore by the bytes of its descriptor. Every
instruction keeps the location of the DMA it came from.

Loops stay loops: a `copy.for` becomes nested `dma.loop`s (one per grid
dimension), and an address or semaphore id that depends on loop indices
becomes an affine map of the enclosing loops' indices (d0 the outermost);
a `copy.when` disappears into the predicate of each instruction inside it
(the conjunction of the enclosing conditions, an `or` of affine sets). A
descriptor's start and wait are DMAs of its three values; a computation
becomes a `dma.compute` over the boxes of its destination and inputs, its
region of scalar ops written in the stream's prefix form.

Needs expand-pipelines, expand-pytree-copies, expand-windows and
assign-addresses first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from copyir.passes.assign_addresses import (
    ADDRESS,
    PARAM_ADDRESSES,
    SEM_ID,
    TARGET,
)
from xdsl.context import Context
from xdsl.dialects.builtin import (
    I64,
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import (
    Attribute,
    Block,
    BlockArgument,
    Operation,
    OpResult,
    Region,
    SSAValue,
)
from xdsl.ir.affine import (
    AffineConstantExpr,
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineExpr,
    AffineMap,
    AffineSet,
)
from xdsl.ir.affine.affine_expr import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineSymExpr,
)
from xdsl.passes import ModulePass

from copyir import dma_schema as schema
from copyir import errors
from copyir.access import Access, Accesses
from copyir.attributes import i64_array, i64_attr, int_values, string_attr
from copyir.compute import format_prefix
from copyir.dialects import dma
from copyir.dialects.copy import (
    AllocOp,
    AsyncCopyOp,
    AsyncDmaOp,
    ComputeOp,
    DmaOp,
    ForOp,
    IndexOp,
    InvalidateOp,
    KernelOp,
    OpaqueOp,
    RefType,
    ScopeOp,
    SemaphoreArrayType,
    SemaphoreOp,
    SemIndexOp,
    ViewOp,
    WhenOp,
    describe,
)
from copyir.dma_schema import EndAttributes, Value
from copyir.errors import CopyIRError
from copyir.index import substitute
from copyir.locations import loc_of
from copyir.names import FreshNames


@dataclass(frozen=True)
class _Context:
    """Where an instruction is: the kernel-wide numbers of its enclosing
    loops' dimensions (outermost first) and the conditions it runs under
    (each an `or` of sets over those numbers)."""

    dims: tuple[int, ...] = ()
    conditions: tuple[tuple[AffineSet, ...], ...] = field(default=())
    lowers: tuple[int, ...] = ()
    """Each loop's lower bound: a dma.loop counts from 0."""
    trips: tuple[int, ...] = ()
    """Each loop's trip count: its dma.loop index is below it."""

    def slots(self) -> list[AffineExpr]:
        """Per kernel-wide dimension, its expression over this instruction's
        loops (d0 the outermost, counting from the loop's lower bound)."""
        width = max(self.dims, default=-1) + 1
        slots = [AffineExpr.constant(0)] * width
        for position, (dim, lower) in enumerate(
            zip(self.dims, self.lowers, strict=True)
        ):
            slots[dim] = AffineExpr.dimension(position) + lower
        return slots

    def value(self, value: int | AffineExpr) -> Value:
        """A field: an integer when static, else an affine map."""
        if isinstance(value, AffineExpr) and not isinstance(value, AffineConstantExpr):
            local = value.replace_dims_and_symbols(self.slots(), [])
            return AffineMapAttr(AffineMap(len(self.dims), 0, (local,)))
        return i64_attr(value if isinstance(value, int) else value.value)

    def predicate(self) -> Attribute | None:
        """The conjunction of the conditions, as an `or` of sets.

        Nested conditions multiply: `when i != 3 { when i != 5 {...} }` is
        (i < 3 or i > 3) and (i < 5 or i > 5), four conjunctions, and 2**n
        for n levels. The product is taken one condition at a time, and a
        conjunction that holds nowhere in the loops' domain is dropped as
        it is made (`i > 3 and i < 3`), so that the sets stay as many as
        the regions the conditions cut the domain into. The `or` holds at
        the same points."""
        if not self.conditions:
            return None
        slots, width = self.slots(), len(self.dims)
        conjunctions: list[tuple] = [()]
        for condition in self.conditions:
            options = [substitute(s, slots, width).constraints for s in condition]
            grown = {
                a + b: None
                for a in conjunctions
                for b in options
                if possible(a + b, self.trips)
            }
            # None can hold: keep one, so that the predicate still says so.
            conjunctions = list(grown) or [conjunctions[0] + options[0]]
        return ArrayAttr([AffineSetAttr(AffineSet(width, 0, c)) for c in conjunctions])

    def instruction(
        self, kind: type[dma.InstructionOp], properties: dict, op: Operation
    ) -> Operation:
        """An instruction located at its copy op, guarded by the conditions."""
        if (predicate := self.predicate()) is not None:
            properties["predicate"] = predicate
        return kind.create(properties=properties, location=op.location)


def possible(constraints: Sequence[AffineConstraintExpr], trips: Sequence[int]) -> bool:
    """False only where the constraints cannot all hold for loop indices
    0 <= d_k < trips[k]: each constraint on one index alone (`a * d + c >=
    0`, `== 0`, `<= 0`) narrows that index's range, and an empty range is a
    contradiction. Constraints on several indices narrow nothing (so the
    answer may be True where none holds: the caller only drops what this
    proves empty)."""
    ranges = [[0, trip - 1] for trip in trips]
    for constraint in constraints:
        expr = constraint.lhs - constraint.rhs  # e >= 0, e == 0, or e <= 0
        if constraint.kind == AffineConstraintKind.le:
            expr = -expr
        linear = _one_index(expr, len(trips))
        if linear is None:
            continue
        dim, a, c = linear
        equal = constraint.kind == AffineConstraintKind.eq
        if dim is None:  # a constant
            if (c != 0) if equal else (c < 0):
                return False
            continue
        bound = ranges[dim]
        if equal:  # a * d + c == 0
            if c % a:
                return False
            bound[0] = max(bound[0], -c // a)
            bound[1] = min(bound[1], -c // a)
        elif a > 0:  # d >= ceil(-c / a)
            bound[0] = max(bound[0], -(c // a))
        else:  # d <= floor(c / -a)
            bound[1] = min(bound[1], c // -a)
        if bound[0] > bound[1]:
            return False
    return True


def _one_index(expr: AffineExpr, dims: int) -> tuple[int | None, int, int] | None:
    """`a * d_k + c` as (k, a, c), a constant as (None, 0, c); None for an
    expression over several indices or with a division or modulo. Sums and
    products by constants are linear, so the coefficients are values of
    the expression at 0 and at each unit vector."""
    linear = (AffineBinaryOpKind.Add, AffineBinaryOpKind.Mul)
    for node in expr.dfs():
        if isinstance(node, AffineBinaryOpExpr) and node.kind not in linear:
            return None
        if isinstance(node, AffineSymExpr):
            return None
    origin = [0] * dims
    c = expr.eval(origin, [])
    used = []
    for k in sorted(expr.used_dims()):
        unit = origin.copy()
        unit[k] = 1
        if a := expr.eval(unit, []) - c:
            used.append((k, a))
    if not used:
        return None, 0, c
    if len(used) > 1:
        return None
    ((k, a),) = used
    return k, a, c


_EXPANDED_BY = {
    "copy.sync_copy": "expand-pytree-copies",
    "copy.buffered_ref": "expand-windows",
    "copy.buffered_copy": "expand-windows",
    "copy.window": "expand-windows",
    "copy.pipeline": "expand-pipelines",
}
"""The pass that turns each op without a DMA form into ops with one."""


class _Lowering:
    """The buffers and semaphores of one kernel, and its instructions."""

    def __init__(self, kernel: KernelOp):
        if not isinstance(kernel.attributes.get(PARAM_ADDRESSES), DenseArrayBase):
            raise self.needs("assign-addresses", "buffers have no addresses")
        self.kernel = kernel
        self.buffers: dict[SSAValue, tuple[str, int]] = {}
        self.sems: dict[SSAValue, int] = {}
        self.declarations: list[Operation] = []
        self.ops: list[Operation] = []
        self.semaphores = 0
        self.accesses = Accesses()
        self.names = FreshNames.of(kernel)
        """The kernel's names, and fresh ones for the rest."""
        self.claimed: set[str] = set()

    @staticmethod
    def needs(before: str, why: str, op: Operation | None = None) -> CopyIRError:
        return CopyIRError(
            errors.NEEDS_PASS.format(
                pass_name="convert-copy-to-dma", before=before, why=why
            ),
            loc_of(op.location) if op is not None else None,
        )

    def program(self) -> dma.ProgramOp:
        kernel = self.kernel
        addresses = int_values(
            cast("DenseArrayBase[I64]", kernel.attributes[PARAM_ADDRESSES])
        )
        for arg, name, address in zip(
            kernel.params, kernel.param_names, addresses, strict=True
        ):
            self.buffer(arg, self.declared_name(name, "arg"), "hbm", address, True)
        for op in kernel.body.block.ops:
            self.lower(op, self.ops, _Context())
        target = kernel.attributes.get(TARGET)
        if not isinstance(target, StringAttr):
            raise self.needs("assign-addresses", "the kernel has no target", kernel)
        # Buffers, then semaphores, as a stream's tables hold them (a kernel
        # may declare them interleaved: an expanded pipeline does).
        buffers = [d for d in self.declarations if isinstance(d, dma.BufferOp)]
        sems = [d for d in self.declarations if not isinstance(d, dma.BufferOp)]
        body = Block([*buffers, *sems, *self.ops])
        return dma.ProgramOp(
            kernel.kernel_name, target.data, self.semaphores, Region(body)
        )

    def declared_name(self, name: str | None, fallback: str) -> str:
        """The stream's name of a buffer or semaphore: its own if no other
        declaration has it, else a fresh one (the stream identifies
        buffers by name; an unnamed `buffer2` must not take a user's)."""
        if name and name not in self.claimed:
            self.claimed.add(name)
            return name
        return self.names(name or fallback)

    def buffer(
        self, value: SSAValue, name: str, space: str, address: int, param: bool
    ) -> None:
        type = _ref_type(value)
        self.buffers[value] = (space, address)
        properties = {
            "buffer_name": string_attr(name),
            "space": string_attr(space),
            "address": i64_attr(address),
            "element_type": type.element_type,
            "shape": i64_array(type.get_shape()),
        }
        if param:
            properties["param"] = UnitAttr()
        location = (
            value.op.location
            if isinstance(value, OpResult)
            else cast(BlockArgument, value).location
        )
        self.declarations.append(
            dma.BufferOp.create(properties=properties, location=location)
        )

    def lower(self, op: Operation, out: list[Operation], context: _Context) -> None:
        if op.__class__ in _FOLDED:  # most ops of a large kernel: decided first
            return
        if isinstance(op, ForOp):
            out.append(self.loop(op, context))
            return
        if isinstance(op, WhenOp):
            # expand-min-max left no pieces: every index is one expression.
            args = cast(list[AffineExpr], [self.accesses.index(a) for a in op.args])
            sets = tuple(substitute(s.data, args) for s in op.condition.data)
            inner = _Context(
                context.dims,
                (*context.conditions, sets),
                context.lowers,
                context.trips,
            )
            for child in op.body.block.ops:
                self.lower(child, out, inner)
            return
        if isinstance(op, DmaOp | AsyncDmaOp):
            out.append(self.transfer(op, context))
            return
        if isinstance(op, ComputeOp):
            out.append(self.compute(op, context))
            return
        if isinstance(op, OpaqueOp):
            out.extend(self.opaque(op, context))
            return
        if isinstance(op, InvalidateOp):
            out.append(self.invalidate(op, context))
            return
        if isinstance(op, ScopeOp):
            self.scope(op, out, context)
            return
        if isinstance(op, AllocOp):
            address = op.attributes.get(ADDRESS)
            if not isinstance(address, IntegerAttr):
                raise self.needs("assign-addresses", "an alloc has no address", op)
            name = self.declared_name(op.result.name_hint, f"buffer{len(self.buffers)}")
            space = _ref_type(op.result).space_name
            self.buffer(op.result, name, space, address.value.data, False)
        elif isinstance(op, SemaphoreOp):
            sem_id = op.attributes.get(SEM_ID)
            if not isinstance(sem_id, IntegerAttr):
                raise self.needs("assign-addresses", "a semaphore has no id", op)
            first = sem_id.value.data
            self.sems[op.result] = first
            type = op.result.type
            shape = type.get_shape() if isinstance(type, SemaphoreArrayType) else ()
            self.semaphores = max(self.semaphores, first + op.count)
            if op.result.name_hint:  # named by the user: named in messages too
                properties = {
                    "sem_name": string_attr(
                        self.declared_name(op.result.name_hint, "sem")
                    ),
                    "first": i64_attr(first),
                    "shape": i64_array(shape),
                }
                self.declarations.append(
                    dma.SemaphoreDeclOp.create(
                        properties=properties, location=op.location
                    )
                )
        elif not isinstance(op, ViewOp | SemIndexOp | IndexOp | AsyncCopyOp):
            raise self.needs(
                _EXPANDED_BY.get(op.name, "expand-pytree-copies and expand-windows"),
                f"{op.name} has no DMA form yet",
                op,
            )

    def loop(self, op: ForOp, context: _Context) -> Operation:
        """Nested dma.loops, one per dimension, around the lowered body."""
        dims = tuple(self.accesses.dim(index) for index in op.indices)
        lowers = tuple(lower for lower, _ in op.bounds)
        trips = tuple(upper - lower for lower, upper in op.bounds)
        inner = _Context(
            (*context.dims, *dims),
            context.conditions,
            (*context.lowers, *lowers),
            (*context.trips, *trips),
        )
        body: list[Operation] = []
        for child in op.body.block.ops:
            self.lower(child, body, inner)
        for position in reversed(range(len(dims))):
            lower, upper = op.bounds[position]
            loop_body = body
            properties = {
                "iv_name": string_attr(describe(op.indices[position])),
                "trip_count": i64_attr(upper - lower),
            }
            if position in op.parallel_dims:
                properties["parallel"] = UnitAttr()
            body = [
                dma.LoopOp.create(
                    properties=properties,
                    regions=[Region(Block(loop_body))],
                    location=op.location,
                )
            ]
        return body[0]

    def transfer(self, op: DmaOp | AsyncDmaOp, context: _Context) -> Operation:
        """A start or wait of a DMA, written out (`copy.dma`) or through its
        descriptor (`copy.async_dma`): its ends and semaphore are the
        descriptor's."""
        copy = (
            cast(AsyncCopyOp, op.descriptor.owner)  # verified: a descriptor's op
            if isinstance(op, AsyncDmaOp)
            else op
        )
        properties: dict[str, Attribute] = {"sem": context.value(self.sem_id(copy.sem))}
        if not op.is_start:  # a wait needs its semaphore and byte count only
            properties["bytes"] = i64_attr(_ref_type(copy.src).nbytes)
            return context.instruction(dma.WaitOp, properties, op)
        properties |= (
            schema.SRC.make(self.end(copy.src, context))
            | schema.DST.make(self.end(copy.dst, context))
            | self.box(copy.src)
        )
        if op.add is not None:
            properties["add"] = UnitAttr()
        if op.priority_value:
            properties["priority"] = i64_attr(op.priority_value)
        return context.instruction(dma.StartOp, properties, op)

    def scope(self, op: ScopeOp, out: list[Operation], context: _Context) -> None:
        """A scope's buffers and semaphores declared once; where it starts,
        an invalidation of each buffer (fresh poison on every entry);
        where it ends, a release of each buffer and semaphore (no DMA
        still in flight on them, so each semaphore is back at zero for the
        next entry). All located at the scope, so a loop around it stays a
        loop."""
        made = op.allocations()
        for each in made:
            self.lower(each, out, context)
        buffers = [a.result for a in made if isinstance(a, AllocOp)]
        for buffer in buffers:
            properties = schema.OWN.make(self.end(buffer, context)) | self.box(buffer)
            out.append(context.instruction(dma.InvalidateOp, properties, op))
        for child in op.body.block.ops:
            if not isinstance(child, AllocOp | SemaphoreOp):
                self.lower(child, out, context)
        for buffer in buffers:
            properties = schema.OWN.make(self.end(buffer, context)) | self.box(buffer)
            out.append(context.instruction(dma.ReleaseOp, properties, op))
        for sem in made:
            if isinstance(sem, SemaphoreOp):
                first = self.sems[sem.result]
                for sem_id in range(first, first + sem.count):
                    properties = {"sem": i64_attr(sem_id)}
                    out.append(context.instruction(dma.ReleaseSemOp, properties, op))

    def invalidate(self, op: InvalidateOp, context: _Context) -> Operation:
        properties = schema.OWN.make(self.end(op.ref, context)) | self.box(op.ref)
        if op.stale is not None:
            properties["stale"] = UnitAttr()
        return context.instruction(dma.InvalidateOp, properties, op)

    def compute(self, op: ComputeOp, context: _Context) -> Operation:
        inputs = [self.end(value, context) for value in op.inputs]
        properties = (
            schema.OWN.make(self.end(op.dst, context))
            | self.box(op.dst)
            | schema.COMPUTATION.make(format_prefix(op.expression()), inputs)
        )
        return context.instruction(dma.ComputeOp, properties, op)

    def opaque(self, op: OpaqueOp, context: _Context) -> list[Operation]:
        """One instruction per ref, the reads first: at one instant, an
        update in place reads its ref before it writes it."""
        out = []
        for writes, values in ((False, op.reads), (True, op.writes)):
            for value in values:
                properties = (
                    {"what": op.what}
                    | schema.OWN.make(self.end(value, context))
                    | self.box(value)
                )
                if writes:
                    properties["writes"] = UnitAttr()
                    if op.keeps is not None:
                        properties["keeps"] = UnitAttr()
                out.append(context.instruction(dma.OpaqueOp, properties, op))
        return out

    def end(self, value: SSAValue, context: _Context) -> EndAttributes:
        """A DMA end: the root buffer's space, its address plus the view's
        element offset in bytes, and the view's strides in elements."""
        access = self.access(value)
        space, address = self.buffers[access.root]
        offset = cast(int | AffineExpr, access.offset)  # no pieces left here
        address += offset * _ref_type(value).dtype.itemsize
        return (
            string_attr(space),
            context.value(address),
            i64_array(tuple(access.strides)),
        )

    def box(self, value: SSAValue) -> dict[str, Attribute]:
        """The element type and shape of a view, as the DMA moves it."""
        return {
            "element_type": _ref_type(value).element_type,
            "shape": i64_array(tuple(self.access(value).shape)),
        }

    def sem_id(self, value: SSAValue) -> int | AffineExpr:
        access = self.access(value)
        return self.sems[access.root] + cast(int | AffineExpr, access.offset)

    def access(self, value: SSAValue) -> Access:
        """The access of a ref or semaphore (verified: every one has one)."""
        access = self.accesses(value)
        assert access is not None
        return access


_FOLDED = frozenset({ViewOp, SemIndexOp, IndexOp, AsyncCopyOp})
"""Ops that lower to no instruction: the instructions that use them fold
them in (views and indices into addresses, a descriptor into its DMAs)."""


def _ref_type(value: SSAValue) -> RefType:
    """A ref's type (verified: the value is a ref)."""
    return cast(RefType, value.type)


@dataclass(frozen=True)
class ConvertCopyToDmaPass(ModulePass):
    """Lower address-assigned kernels to DMA programs, loops kept as dma.loop."""

    name = "convert-copy-to-dma"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in list(op.ops):
            if isinstance(kernel, KernelOp):
                program = _Lowering(kernel).program()
                program.location = kernel.location
                op.body.block.insert_op_before(program, kernel)
                kernel.detach()
                kernel.erase(safe_erase=False)
