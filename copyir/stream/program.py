"""A `dma.program` as a stream's tables, and back.

Each instruction row is filled, and each op rebuilt, field by field from
`copyir.dma_schema`: nothing here names an instruction's fields.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    FileLineColLoc,
    IntAttr,
    IntegerAttr,
    LocationAttr,
    StringAttr,
    UnitAttr,
    UnknownLoc,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region
from xdsl.ir.affine import AffineMap

from copyir import errors
from copyir.attributes import i64_array, int_values
from copyir.dialects import dma
from copyir.dma_schema import I64Array, Value, instruction_dtype, prop
from copyir.dtypes import BY_IR, BY_NAME
from copyir.errors import CopyIRError, Loc
from copyir.index import MAX_DEPTH, too_deep
from copyir.locations import detail_of, loc_of, with_detail
from copyir.machine import MAX_RANK, SPACES
from copyir.stream.model import (
    Buffer,
    CountedLoop,
    Origin,
    SemaphoreName,
    Stream,
    lowering_bug,
)


def from_program(
    program: dma.ProgramOp,
    written: dict[Operation, Loc | None] | None = None,
    lowered: bool = False,
) -> Stream:
    """The tables of a `dma.program`.

    What the tables cannot hold (an unknown space or element type, strides
    that do not match the shape) is a `Malformed DMA stream` error at the
    op, located where `written` says it was written, else at the op; every
    other check is `copyir.validate`'s, on the tables. A program that
    copyir's lowering just made is `lowered` (see `Stream.lowered`).
    """
    return _TableWriter(written or {}, lowered).of(program)


class _TableWriter:
    """Builds a stream's tables from its ops, interning maps, predicates,
    computations, labels and origins (the `dma_schema.Writer` its fields use)."""

    def __init__(self, written: dict[Operation, Loc | None], lowered: bool = False):
        self.written = written
        self.lowered = lowered
        self.loops: list[CountedLoop] = []
        self.instructions: list[tuple[dma.InstructionOp, int]] = []
        self.maps: dict[AffineMap, int] = {}
        self.interned: dict[str, dict] = {
            "predicates": {},
            "computes": {},
            "labels": {},
        }
        self.origins: dict[Origin, int] = {}

    def bad(self, op: Operation, why: str) -> Exception:
        where = self.written.get(op) or loc_of(op.location)
        if self.lowered:
            return lowering_bug(why, where)
        return CopyIRError(errors.STREAM_MALFORMED.format(why=why), where)

    def value(self, attribute: Value) -> tuple[int, int]:
        """(static value, 1-based map) of a field."""
        if isinstance(attribute, AffineMapAttr):
            return 0, self.maps.setdefault(attribute.data, len(self.maps) + 1)
        return attribute.value.data, 0

    def space(self, op: Operation, attribute: StringAttr) -> int:
        if attribute.data not in SPACES:
            raise self.bad(op, f"unknown memory space {attribute.data!r}")
        return SPACES.index(attribute.data)

    def intern(self, table: str, key: object) -> int:
        """The 1-based number of `key` in one of the stream's tables."""
        found = self.interned[table]
        return found.setdefault(key, len(found) + 1)

    def of(self, program: dma.ProgramOp) -> Stream:
        ops = [op for block in program.body.blocks for op in block.ops]
        for op in ops:
            if not isinstance(op, dma.BufferOp | dma.SemaphoreDeclOp):
                self.walk(op, 0)
        rank = max([1] + [self.check_shape(op) for op, _ in self.instructions])
        table = np.zeros(len(self.instructions), dtype=instruction_dtype(rank))
        for row, (op, loop) in enumerate(self.instructions):
            self.fill(table[row], op, loop)
        buffers = [self.buffer(op) for op in ops if isinstance(op, dma.BufferOp)]
        names = [
            SemaphoreName(op.sem_name.data, op.first.value.data, int_values(op.shape))
            for op in ops
            if isinstance(op, dma.SemaphoreDeclOp)
        ]
        lines = None
        if self.written:
            lines = [self.written.get(op) for op, _ in self.instructions]
        return Stream(
            program.sym_name.data,
            program.target.data,
            program.semaphores.value.data,
            buffers,
            table,
            list(self.origins),
            names,
            loops=self.loops,
            maps=list(self.maps),
            predicates=list(self.interned["predicates"]),
            computes=list(self.interned["computes"]),
            labels=list(self.interned["labels"]),
            lines=lines,
            lowered=self.lowered,
        )

    def walk(self, op: Operation, loop: int) -> None:
        if isinstance(op, dma.LoopOp):
            self.loops.append(
                CountedLoop(
                    op.iv_name.data,
                    op.trip_count.value.data,
                    op.parallel is not None,
                    loop,
                )
            )
            inner = len(self.loops)
            for block in op.body.blocks:  # none when the body is empty
                for child in block.ops:
                    self.walk(child, inner)
        elif isinstance(op, dma.INSTRUCTIONS):
            self.instructions.append((op, loop))
        else:
            raise self.bad(op, f"{op.name} in a dma.program")

    def check_shape(self, op: dma.InstructionOp) -> int:
        """The rank of a box's shape (0 without one), which every stride
        list of the op matches, and its element type known."""
        if "shape" not in op.properties:
            return 0
        shape = int_values(prop(op, "shape", I64Array))
        if len(shape) > MAX_RANK:
            raise self.bad(op, f"bad shape {list(shape)}")
        for field in op.FIELDS:
            for each in field.strides(op):
                if len(int_values(each)) != len(shape):
                    raise self.bad(
                        op, f"strides {list(int_values(each))} for shape {list(shape)}"
                    )
        element_type = prop(op, "element_type", Attribute)
        if element_type not in BY_IR:
            raise self.bad(op, f"unknown element type {element_type}")
        return len(shape)

    def fill(self, entry, op: dma.InstructionOp, loop: int) -> None:
        self.check_depth(op)
        origin = Origin(loc_of(op.location), detail_of(op.location))
        entry["origin"] = self.origins.setdefault(origin, len(self.origins))
        entry["loop"] = loop
        entry["op"] = dma.INSTRUCTIONS.index(type(op))
        for field in op.FIELDS:
            field.store(op, entry, self)

    def check_depth(self, op: Operation) -> None:
        """Its maps and conditions nest no deeper than `MAX_DEPTH` (tables
        key on them, and hashing recurses)."""
        for value in op.properties.values():
            exprs = []
            if isinstance(value, AffineMapAttr):
                exprs = value.data.results
            elif isinstance(value, AffineSetAttr):
                exprs = [c.lhs for c in value.data.constraints]
            elif isinstance(value, ArrayAttr):
                exprs = [
                    c.lhs
                    for case in value.data
                    if isinstance(case, AffineSetAttr)
                    for c in case.data.constraints
                ]
            if too_deep(exprs) is not None:
                where = self.written.get(op) or loc_of(op.location)
                raise CopyIRError(errors.INDEX_TOO_DEEP.format(limit=MAX_DEPTH), where)

    def buffer(self, op: dma.BufferOp) -> Buffer:
        if op.element_type not in BY_IR:
            raise self.bad(op, f"unknown element type {op.element_type}")
        return Buffer(
            op.buffer_name.data,
            op.space.data,
            op.address.value.data,
            BY_IR[op.element_type].name,
            int_values(op.shape),
            op.param is not None,
            loc_of(op.location),
        )


def to_program(stream: Stream) -> dma.ProgramOp:
    """The `dma.program` of a stream's tables (the inverse of `from_program`)."""
    ops = []
    for buffer in stream.buffers:
        properties = {
            "buffer_name": StringAttr(buffer.name),
            "space": StringAttr(buffer.space),
            "address": IntegerAttr(buffer.address, i64),
            "element_type": BY_NAME[buffer.dtype].ir,
            "shape": i64_array(buffer.shape),
        }
        if buffer.param:
            properties["param"] = UnitAttr()
        location = _location(Origin(buffer.loc))
        ops.append(dma.BufferOp.create(properties=properties, location=location))
    for named in stream.semaphore_names:
        properties = {
            "sem_name": StringAttr(named.name),
            "first": IntegerAttr(named.first, i64),
            "shape": i64_array(named.shape),
        }
        ops.append(dma.SemaphoreDeclOp.create(properties=properties))
    locations = [_location(origin) for origin in stream.origins]
    open_loops: list[tuple[int, list[Operation]]] = [(0, ops)]
    for row in range(len(stream.instructions)):
        entry = stream.instructions[row]
        chain = _chain(stream, int(entry["loop"]))
        while open_loops[-1][0] not in chain:
            _close(stream, open_loops)
        for loop in chain[chain.index(open_loops[-1][0]) + 1 :]:
            open_loops.append((loop, []))
        origin = int(entry["origin"])
        location = locations[origin] if origin >= 0 else None
        open_loops[-1][1].append(_instruction(stream, entry, location))
    while len(open_loops) > 1:
        _close(stream, open_loops)
    return dma.ProgramOp(
        stream.kernel, stream.target, stream.semaphores, Region(Block(ops))
    )


def _chain(stream: Stream, loop: int) -> list[int]:
    """The loops around an instruction, outermost first, after a 0."""
    chain = []
    while loop:
        chain.append(loop)
        loop = stream.loops[loop - 1].parent
    return [0, *reversed(chain)]


def _close(stream: Stream, open_loops: list[tuple[int, list[Operation]]]) -> None:
    loop, body = open_loops.pop()
    spec = stream.loops[loop - 1]
    properties = {
        "iv_name": StringAttr(spec.name),
        "trip_count": IntegerAttr(spec.trip_count, i64),
    }
    if spec.parallel:
        properties["parallel"] = UnitAttr()
    op = dma.LoopOp.create(properties=properties, regions=[Region(Block(body))])
    open_loops[-1][1].append(op)


def _instruction(stream: Stream, entry, location) -> Operation:
    """The op of one table row, its properties read field by field."""
    kind = dma.INSTRUCTIONS[entry["op"]]
    properties: dict[str, Attribute] = {}
    for field in kind.FIELDS:
        properties |= field.load(entry, stream)
    return kind.create(properties=properties, location=location)


def _location(origin: Origin) -> LocationAttr:
    if origin.loc is None:
        return UnknownLoc()
    location = FileLineColLoc(
        StringAttr(origin.loc.file), IntAttr(origin.loc.line), IntAttr(origin.loc.col)
    )
    return with_detail(location, origin.detail) if origin.detail else location
