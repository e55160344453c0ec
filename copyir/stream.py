"""The DMA stream as data: numpy tables, and its text and binary files.

A `dma.program` (see `copyir.dialects.dma`) is the stream as IR. `Stream`
holds the same program as tables, which is what the interpreter executes
and what the binary form stores: one row per buffer and one row per
instruction, with shapes and strides padded to the stream's largest rank.

The text form (`.dma`) is the MLIR form of the dma dialect with each
instruction's origin as a trailing comment, `// prog.cpy:22:3 block (7, 2)
slot 0`; reading it back turns the comments into locations again, so the
text round-trips with its origins. The binary form (`.npz`) holds the tables
as numpy arrays, for streams too large to read as text quickly.
"""

from __future__ import annotations

import io
import json
import math
import re
import zipfile
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    FileLineColLoc,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    UnknownLoc,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region
from xdsl.ir.affine import AffineMap, AffineSet
from xdsl.printer import Printer

from copyir import errors
from copyir.attributes import i64_array, int_values
from copyir.dialects import dma
from copyir.dtypes import BY_IR, BY_NAME, DTYPES
from copyir.errors import CopyIRError, InternalError, Loc
from copyir.locations import detail_of, loc_of, with_detail
from copyir.machine import MAX_RANK, SPACES

START, WAIT, INVALIDATE, COMPUTE = 0, 1, 2, 3
OPS = (START, WAIT, INVALIDATE, COMPUTE)
FORMAT_VERSION = 2


@dataclass(frozen=True)
class Buffer:
    """A buffer of the program: a parameter (bound by name) or scratch."""

    name: str
    space: str
    address: int
    dtype: str
    shape: tuple[int, ...]
    param: bool
    loc: Loc | None = field(default=None, compare=False)
    """Where the program declares it (for warnings about a parameter)."""

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * BY_NAME[self.dtype].itemsize


@dataclass(frozen=True)
class SemaphoreName:
    """The name a user gave a semaphore, or an array of them from `first` on."""

    name: str
    first: int
    shape: tuple[int, ...]

    @property
    def count(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Origin:
    """Where an instruction came from: a source position and a note."""

    loc: Loc | None
    detail: str = ""

    def __str__(self) -> str:
        where = str(self.loc) if self.loc is not None else "?"
        return f"{where} {self.detail}".rstrip()


@dataclass(frozen=True)
class Loop:
    """A counted loop: instructions whose `loop` column names it (or a loop
    inside it) run once per index 0 .. trip_count - 1."""

    name: str
    trip_count: int
    parallel: bool = False
    parent: int = 0
    """The enclosing loop, 1-based; 0 at the top level."""


@dataclass(frozen=True)
class Operand:
    """One operand box of a computation (the destination's shape and dtype)."""

    space: str
    address: int
    map: int
    """1-based into `Stream.maps` when the address is affine; else 0."""
    strides: tuple[int, ...]


@dataclass(frozen=True)
class Compute:
    """What a `dma.compute` evaluates (see `copyir.compute`) and over what."""

    expression: str
    operands: tuple[Operand, ...]


def row_major(shape) -> tuple[int, ...]:
    """Strides in elements of a dense row-major array of this shape."""
    strides, step = [], 1
    for extent in reversed(tuple(shape)):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def instruction_dtype(rank: int) -> np.dtype:
    """One row of the instruction table; shapes are padded to `rank`."""
    vector = ("<i8", (rank,))
    return np.dtype(
        [
            ("op", "u1"),
            ("sem", "<i8"),
            ("bytes", "<i8"),
            ("src_space", "u1"),
            ("src_address", "<i8"),
            ("dst_space", "u1"),
            ("dst_address", "<i8"),
            ("dtype", "u1"),
            ("rank", "u1"),
            ("shape", *vector),
            ("src_strides", *vector),
            ("dst_strides", *vector),
            ("add", "?"),
            ("priority", "u1"),
            ("origin", "<i4"),
            ("loop", "<i4"),
            ("predicate", "<i4"),
            ("src_map", "<i4"),
            ("dst_map", "<i4"),
            ("sem_map", "<i4"),
            ("compute", "<i4"),
        ]
    )


"""The last six columns are 1-based references, 0 meaning none: the
innermost enclosing loop (`Stream.loops`), the predicate (`predicates`),
the affine maps that replace the source address, destination address and
semaphore id (`maps`), and a computation (`computes`). A zeroed row is an
instruction at the top level, static, unguarded."""


@dataclass
class Stream:
    """A DMA program as tables: the interpreter's input and the binary form."""

    kernel: str
    target: str
    semaphores: int
    buffers: list[Buffer]
    instructions: np.ndarray
    origins: list[Origin] = field(default_factory=list)
    semaphore_names: list[SemaphoreName] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    maps: list[AffineMap] = field(default_factory=list)
    """Affine maps of the enclosing loops' indices (d0 the outermost)."""
    predicates: list[tuple[AffineSet, ...]] = field(default_factory=list)
    """Each an `or` of affine sets over the enclosing loops' indices."""
    computes: list[Compute] = field(default_factory=list)
    source: str | None = None
    """The file the stream was read from, if any."""
    lines: list[Loc] | None = None
    """Where each instruction is written in that file (`.dma` text only), so
    that a malformed field is reported at its line."""
    lowered: bool = False
    """Made by copyir's own lowering of a verified program, not read or
    built by hand: a malformed field in it is copyir's bug, an
    `InternalError`, never `Malformed DMA stream`."""

    def written_at(self, row: int) -> Loc | None:
        if self.lines is not None and 0 <= row < len(self.lines):
            return self.lines[row]
        return None

    def sem_name(self, sem: int) -> str:
        """A semaphore as the program named it (`s`, `sems[1, 0]`), else its id."""
        for named in self.semaphore_names:
            if named.first <= sem < named.first + named.count:
                if not named.shape:
                    return named.name
                index = np.unravel_index(sem - named.first, named.shape)
                return f"{named.name}[{', '.join(str(int(i)) for i in index)}]"
        return str(sem)

    @property
    def rank(self) -> int:
        return self.instructions.dtype["shape"].shape[0]

    def origin(self, index: int) -> Origin:
        """The origin of instruction `index`."""
        position = int(self.instructions["origin"][index])
        return self.origins[position] if position >= 0 else Origin(None)

    def validate(self, name: str | None = None) -> None:
        """Check every field and every access (see `copyir.validate`); raise
        the first problem. `name` is the file it came from, if not known."""
        from copyir.validate import validate_stream

        if name is not None and self.source is None:
            self.source = name
        validate_stream(self)

    def depth(self, loop: int) -> int:
        """How many loops enclose an instruction whose innermost is `loop`."""
        depth = 0
        while loop:
            depth += 1
            loop = self.loops[loop - 1].parent
        return depth

    def _header(self) -> tuple:
        return (
            self.kernel,
            self.target,
            self.semaphores,
            self.buffers,
            self.origins,
            self.semaphore_names,
            self.loops,
            self.maps,
            self.predicates,
            self.computes,
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Stream)
            and self._header() == other._header()
            and self.instructions.dtype == other.instructions.dtype
            and np.array_equal(self.instructions, other.instructions)
        )


# -- IR <-> tables ------------------------------------------------------------


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
    return _Tables(written or {}, lowered).of(program)


class _Tables:
    """Builds a stream's tables from its ops, interning maps and predicates."""

    def __init__(self, written: dict[Operation, Loc | None], lowered: bool = False):
        self.written = written
        self.lowered = lowered
        self.loops: list[Loop] = []
        self.instructions: list[tuple[Operation, int]] = []
        self.maps: dict[AffineMap, int] = {}
        self.predicates: dict[tuple[AffineSet, ...], int] = {}
        self.computes: dict[Compute, int] = {}
        self.origins: dict[Origin, int] = {}

    def bad(self, op: Operation, why: str) -> Exception:
        where = self.written.get(op) or loc_of(op.location)
        if self.lowered:
            return lowering_bug(why, where)
        return CopyIRError(errors.STREAM_MALFORMED.format(why=why), where)

    def of(self, program: dma.ProgramOp) -> Stream:
        ops = [op for block in program.body.blocks for op in block.ops]
        for op in ops:
            if not isinstance(op, dma.BufferOp | dma.SemaphoreDeclOp):
                self.walk(op, 0)
        rank = 1
        for op, _ in self.instructions:
            if not isinstance(op, dma.WaitOp):
                rank = max(rank, self.check_shape(op))
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
            predicates=list(self.predicates),
            computes=list(self.computes),
            lines=lines,
            lowered=self.lowered,
        )

    def walk(self, op: Operation, loop: int) -> None:
        if isinstance(op, dma.LoopOp):
            self.loops.append(
                Loop(
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

    def check_shape(self, op: Operation) -> int:
        shape = int_values(op.shape)
        if len(shape) > MAX_RANK:
            raise self.bad(op, f"bad shape {list(shape)}")
        if isinstance(op, dma.StartOp):
            strides = [op.src_strides, op.dst_strides]
        elif isinstance(op, dma.ComputeOp):
            strides = [op.strides, *op.operand_strides.data]
        else:
            strides = [op.strides]
        for each in strides:
            if len(int_values(each)) != len(shape):
                raise self.bad(
                    op, f"strides {list(int_values(each))} for shape {list(shape)}"
                )
        if op.element_type not in BY_IR:
            raise self.bad(op, f"unknown element type {op.element_type}")
        return len(shape)

    def value(self, attribute: Attribute) -> tuple[int, int]:
        """(static value, 1-based map) of a field."""
        if isinstance(attribute, AffineMapAttr):
            return 0, self.maps.setdefault(attribute.data, len(self.maps) + 1)
        return attribute.value.data, 0

    def space(self, op: Operation, attribute: StringAttr) -> int:
        if attribute.data not in SPACES:
            raise self.bad(op, f"unknown memory space {attribute.data!r}")
        return SPACES.index(attribute.data)

    def fill(self, entry, op: Operation, loop: int) -> None:
        origin = Origin(loc_of(op.location), detail_of(op.location))
        entry["origin"] = self.origins.setdefault(origin, len(self.origins))
        entry["loop"] = loop
        if op.predicate is not None:
            sets = tuple(s.data for s in op.predicate.data)
            entry["predicate"] = self.predicates.setdefault(
                sets, len(self.predicates) + 1
            )
        if isinstance(op, dma.WaitOp):
            entry["op"] = WAIT
            entry["sem"], entry["sem_map"] = self.value(op.sem)
            entry["bytes"] = op.bytes.value.data
            return
        shape = int_values(op.shape)
        dtype = DTYPES.index(BY_IR[op.element_type])
        entry["dtype"] = dtype
        entry["rank"] = len(shape)
        entry["shape"][: len(shape)] = shape
        entry["bytes"] = min(math.prod(shape) * DTYPES[dtype].itemsize, 2**63 - 1)
        if isinstance(op, dma.StartOp):
            entry["op"] = START
            entry["sem"], entry["sem_map"] = self.value(op.sem)
            for end in ("src", "dst"):
                entry[f"{end}_space"] = self.space(op, getattr(op, f"{end}_space"))
                address, entry[f"{end}_map"] = self.value(getattr(op, f"{end}_address"))
                entry[f"{end}_address"] = address
                strides = int_values(getattr(op, f"{end}_strides"))
                entry[f"{end}_strides"][: len(shape)] = strides
            entry["add"] = op.add is not None
            priority = op.priority.value.data if op.priority is not None else 0
            if not 0 <= priority <= 255:
                raise self.bad(op, f"priority {priority}")
            entry["priority"] = priority
            return
        entry["op"] = INVALIDATE if isinstance(op, dma.InvalidateOp) else COMPUTE
        entry["dst_space"] = self.space(op, op.space)
        entry["dst_address"], entry["dst_map"] = self.value(op.address)
        entry["dst_strides"][: len(shape)] = int_values(op.strides)
        if isinstance(op, dma.ComputeOp):
            operands = []
            for space, address, strides in op.operand_ends():
                value, map_id = self.value(address)
                operands.append(Operand(space.data, value, map_id, int_values(strides)))
                self.space(op, space)
            compute = Compute(op.expression.data, tuple(operands))
            entry["compute"] = self.computes.setdefault(compute, len(self.computes) + 1)

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


def lowering_bug(why: str, where: Loc | None) -> InternalError:
    """A problem in a stream copyir's lowering made: copyir's bug."""
    return InternalError(
        errors.LOWERED_STREAM_INVALID.format(why=why, where=where or "an unknown place")
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
    def value(column: str, map_column: str) -> Attribute:
        if entry[map_column]:
            return AffineMapAttr(stream.maps[int(entry[map_column]) - 1])
        return IntegerAttr(int(entry[column]), i64)

    def ints(column: str) -> Attribute:
        return i64_array(tuple(int(x) for x in entry[column][:rank]))

    properties: dict[str, Attribute] = {}
    if entry["predicate"]:
        sets = stream.predicates[int(entry["predicate"]) - 1]
        properties["predicate"] = ArrayAttr(AffineSetAttr(s) for s in sets)
    if entry["op"] == WAIT:
        properties["sem"] = value("sem", "sem_map")
        properties["bytes"] = IntegerAttr(int(entry["bytes"]), i64)
        return dma.WaitOp.create(properties=properties, location=location)
    rank = int(entry["rank"])
    properties["element_type"] = DTYPES[entry["dtype"]].ir
    properties["shape"] = ints("shape")
    if entry["op"] == START:
        for end in ("src", "dst"):
            properties[f"{end}_space"] = StringAttr(SPACES[entry[f"{end}_space"]])
            properties[f"{end}_address"] = value(f"{end}_address", f"{end}_map")
            properties[f"{end}_strides"] = ints(f"{end}_strides")
        properties["sem"] = value("sem", "sem_map")
        if entry["add"]:
            properties["add"] = UnitAttr()
        if entry["priority"]:
            properties["priority"] = IntegerAttr(int(entry["priority"]), i64)
        return dma.StartOp.create(properties=properties, location=location)
    properties["space"] = StringAttr(SPACES[entry["dst_space"]])
    properties["address"] = value("dst_address", "dst_map")
    properties["strides"] = ints("dst_strides")
    if entry["op"] == INVALIDATE:
        return dma.InvalidateOp.create(properties=properties, location=location)
    compute = stream.computes[int(entry["compute"]) - 1]
    properties["expression"] = StringAttr(compute.expression)
    properties["operand_spaces"] = ArrayAttr(
        StringAttr(o.space) for o in compute.operands
    )
    properties["operand_addresses"] = ArrayAttr(
        AffineMapAttr(stream.maps[o.map - 1]) if o.map else IntegerAttr(o.address, i64)
        for o in compute.operands
    )
    properties["operand_strides"] = ArrayAttr(
        i64_array(o.strides) for o in compute.operands
    )
    return dma.ComputeOp.create(properties=properties, location=location)


def _location(origin: Origin) -> Attribute | None:
    if origin.loc is None:
        return UnknownLoc()
    location = FileLineColLoc(
        StringAttr(origin.loc.file), IntAttr(origin.loc.line), IntAttr(origin.loc.col)
    )
    return with_detail(location, origin.detail) if origin.detail else location


# -- text ---------------------------------------------------------------------

_ORIGIN = re.compile(
    r"//\s*(?P<file>.+?):(?P<line>\d{1,9}):(?P<col>\d{1,9})(?: (?P<detail>.*))?$"
)


def print_dma(program: dma.ProgramOp, origins: bool = True) -> str:
    """The `.dma` text: one line per buffer and instruction, origins trailing,
    loop bodies indented."""
    out = io.StringIO()
    out.write(
        f"// copyir DMA stream: kernel {program.sym_name.data}, "
        f"target {program.target.data}\n"
    )
    out.write(
        f'dma.program "{program.sym_name.data}" target "{program.target.data}" '
        f"semaphores {program.semaphores.value.data} {{\n"
    )
    ops = [op for block in program.body.blocks for op in block.ops]
    _print_ops(out, Printer(stream=out), ops, "  ", origins)
    out.write("}\n")
    return out.getvalue()


def _print_ops(out, printer: Printer, ops, indent: str, origins: bool) -> None:
    for op in ops:
        if isinstance(op, dma.LoopOp):
            parallel = " parallel" if op.parallel is not None else ""
            out.write(
                f'{indent}dma.loop "{op.iv_name.data}" '
                f"{op.trip_count.value.data}{parallel} {{\n"
            )
            inner = [child for block in op.body.blocks for child in block.ops]
            _print_ops(out, printer, inner, indent + "  ", origins)
            out.write(f"{indent}}}\n")
            continue
        line = io.StringIO()
        printer.stream = line
        printer.print_op(op)
        out.write(indent + line.getvalue())
        loc = loc_of(op.location)
        if origins and loc is not None and not isinstance(op, dma.SemaphoreDeclOp):
            detail = detail_of(op.location)
            out.write(f"  // {loc}{' ' + detail if detail else ''}")
        out.write("\n")


def parse_dma(text: str, filename: str = "<input>") -> dma.ProgramOp:
    """Read the `.dma` text; trailing `// file:line:col note` comments become
    the ops' locations again."""
    program, _ = _parse_dma(text, filename)
    return program


def read_dma(text: str, filename: str = "<input>") -> Stream:
    """The stream of a `.dma` text, remembering where each instruction is
    written so that a malformed field is reported at its line."""
    program, written = _parse_dma(text, filename)
    stream = from_program(program, written)
    stream.source = filename
    return stream


def _parse_dma(
    text: str, filename: str
) -> tuple[dma.ProgramOp, dict[Operation, Loc | None]]:
    from copyir.mlir import parse_mlir

    module: ModuleOp = parse_mlir(text, filename)
    programs = [op for op in module.ops if isinstance(op, dma.ProgramOp)]
    if len(programs) != 1 or len(list(module.ops)) != 1:
        raise CopyIRError(
            "A .dma file holds exactly one dma.program", Loc(filename, 1, 1)
        )
    program = programs[0]
    lines = text.splitlines()
    written = {}
    for op in program.walk():
        if op is program or isinstance(op, dma.LoopOp):
            continue
        loc = loc_of(op.location)
        written[op] = loc
        if loc is None or loc.file != filename or not 1 <= loc.line <= len(lines):
            continue
        line = lines[loc.line - 1]
        comment = line.find("//")
        if comment < 0:
            continue
        match = _ORIGIN.match(line[comment:])
        if match is None:
            continue
        location = FileLineColLoc(
            StringAttr(match["file"]),
            IntAttr(int(match["line"])),
            IntAttr(int(match["col"])),
        )
        op.location = (
            with_detail(location, match["detail"]) if match["detail"] else location
        )
    program.detach()
    return program, written


# -- binary -------------------------------------------------------------------


def save_npz(stream: Stream, file) -> None:
    """The binary form: the tables as numpy arrays in one `.npz`."""
    meta = {
        "format": "copyir-dma",
        "version": FORMAT_VERSION,
        "kernel": stream.kernel,
        "target": stream.target,
        "semaphores": stream.semaphores,
        "buffers": [
            [b.name, b.space, b.address, b.dtype, list(b.shape), b.param]
            + ([b.loc.file, b.loc.line, b.loc.col] if b.loc else [])
            for b in stream.buffers
        ],
        "semaphore_names": [
            [n.name, n.first, list(n.shape)] for n in stream.semaphore_names
        ],
        "origins": [
            [o.loc.file, o.loc.line, o.loc.col, o.detail]
            if o.loc
            else [None, 0, 0, o.detail]
            for o in stream.origins
        ],
        "loops": [[x.name, x.trip_count, x.parallel, x.parent] for x in stream.loops],
        "maps": [str(m) for m in stream.maps],
        "predicates": [[str(s) for s in sets] for sets in stream.predicates],
        "computes": [
            [
                c.expression,
                [[o.space, o.address, o.map, list(o.strides)] for o in c.operands],
            ]
            for c in stream.computes
        ],
    }
    np.savez_compressed(
        file,
        meta=np.array(json.dumps(meta)),
        instructions=stream.instructions,
    )


def load_npz(file, name: str = "<input>") -> Stream:
    """A stream from its binary form; what cannot be decoded is one located
    error. Its fields are checked by `copyir.validate` before it runs."""
    try:
        with np.load(file, allow_pickle=False) as data:
            if set(data.files) != {"meta", "instructions"}:
                raise ValueError("it is not a copyir DMA stream")
            meta = json.loads(str(data["meta"]))
            instructions = data["instructions"]
        stream = _decode(meta, instructions)
    except (  # what malformed data makes numpy, json and the unpacking raise
        OSError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        RecursionError,
        zipfile.BadZipFile,
    ) as err:
        raise CopyIRError(
            errors.CANNOT_READ_STREAM.format(name=name, why=err), Loc(name, 1, 1)
        ) from None
    stream.source = name
    return stream


def _decode(meta: object, instructions: np.ndarray) -> Stream:
    """The stream from the JSON header and the table, every field's type
    checked: a header of the wrong shape raises ValueError."""
    if (
        not isinstance(meta, dict)
        or meta.get("format") != "copyir-dma"
        or meta.get("version") != FORMAT_VERSION
    ):
        raise ValueError("not a copyir DMA stream of this version")
    if instructions.ndim != 1 or instructions.dtype.names is None:
        raise ValueError("its instruction table is not a table")
    shape = (
        instructions.dtype.fields.get("shape") if instructions.dtype.fields else None
    )
    rank = shape[0].shape[0] if shape is not None and shape[0].shape else 0
    if rank < 1 or instructions.dtype != instruction_dtype(rank):
        raise ValueError("unexpected instruction table layout")
    buffers = []
    for entry in _list(meta, "buffers"):
        if not isinstance(entry, list) or len(entry) not in (6, 9):
            raise ValueError("a buffer entry of the wrong shape")
        name, space, address, dtype, dims, param = entry[:6]
        loc = Loc(*_fields(entry[6:], (str, int, int))) if entry[6:] else None
        buffers.append(
            Buffer(
                *_fields([name, space, address, dtype], (str, str, int, str)),
                _ints(dims),
                _field(param, bool),
                loc,
            )
        )
    origins = []
    for entry in _list(meta, "origins"):
        if not isinstance(entry, list) or len(entry) != 4:
            raise ValueError("an origin entry of the wrong shape")
        file, line, col, detail = entry
        loc = (
            Loc(*_fields([file, line, col], (str, int, int)))
            if file is not None
            else None
        )
        origins.append(Origin(loc, _field(detail, str)))
    loops = []
    for entry in _list(meta, "loops", []):
        if not isinstance(entry, list) or len(entry) != 4:
            raise ValueError("a loop entry of the wrong shape")
        loops.append(Loop(*_fields(entry, (str, int, bool, int))))
    maps = [_affine("affine_map", _field(m, str)) for m in _list(meta, "maps", [])]
    predicates = []
    for entry in _list(meta, "predicates", []):
        if not isinstance(entry, list):
            raise ValueError("a predicate that is not a list")
        predicates.append(tuple(_affine("affine_set", _field(x, str)) for x in entry))
    computes = []
    for entry in _list(meta, "computes", []):
        if not isinstance(entry, list) or len(entry) != 2:
            raise ValueError("a compute entry of the wrong shape")
        expression, operands = entry
        if not isinstance(operands, list):
            raise ValueError("compute operands that are not a list")
        parts = []
        for operand in operands:
            if not isinstance(operand, list) or len(operand) != 4:
                raise ValueError("a compute operand of the wrong shape")
            space, address, map_id, strides = operand
            parts.append(
                Operand(
                    *_fields([space, address, map_id], (str, int, int)), _ints(strides)
                )
            )
        computes.append(Compute(_field(expression, str), tuple(parts)))
    names = []
    for entry in _list(meta, "semaphore_names", []):
        if not isinstance(entry, list) or len(entry) != 3:
            raise ValueError("a semaphore entry of the wrong shape")
        name, first, shape = entry
        names.append(SemaphoreName(_field(name, str), _field(first, int), _ints(shape)))
    return Stream(
        _field(meta.get("kernel"), str),
        _field(meta.get("target"), str),
        _field(meta.get("semaphores"), int),
        buffers,
        instructions,
        origins,
        names,
        loops=loops,
        maps=maps,
        predicates=predicates,
        computes=computes,
    )


def _affine(kind: str, text: str):
    """An affine map or set from its text, through xDSL's parser."""
    from xdsl.context import Context
    from xdsl.parser import Parser
    from xdsl.utils.exceptions import ParseError

    try:
        attribute = Parser(Context(), f"{kind}<{text}>").parse_attribute()
    except ParseError as err:
        raise ValueError(f"bad {kind} {text!r}: {err.msg}") from None
    except ZeroDivisionError:  # xDSL folds `1 mod 0` as it parses
        raise ValueError(f"bad {kind} {text!r}: {errors.DIVIDES_BY_ZERO}") from None
    except NotImplementedError:  # and refuses `d0 * d1`
        raise ValueError(f"bad {kind} {text!r}: {errors.SEMI_AFFINE}") from None
    if not isinstance(attribute, AffineMapAttr | AffineSetAttr):
        raise ValueError(f"bad {kind} {text!r}")
    return attribute.data


def _list(meta: dict, key: str, default=None) -> list:
    value = meta.get(key, default)
    if not isinstance(value, list):
        raise ValueError(f"its {key} are not a list")
    return value


def _field(value: object, kind: type):
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{value!r} is not a {kind.__name__}")
    return value


def _fields(values: list, kinds: tuple) -> list:
    return [_field(v, k) for v, k in zip(values, kinds, strict=True)]


def _ints(values: object) -> tuple[int, ...]:
    if not isinstance(values, list):
        raise ValueError(f"{values!r} is not a list of integers")
    return tuple(_field(v, int) for v in values)
