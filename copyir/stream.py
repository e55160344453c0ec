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
from xdsl.printer import Printer

from copyir import errors
from copyir.attributes import i64_array, int_values
from copyir.dialects import dma
from copyir.dtypes import BY_IR, BY_NAME, DTYPES
from copyir.errors import CopyIRError, Loc
from copyir.locations import detail_of, loc_of, with_detail
from copyir.machine import MAX_RANK, SPACES

START, WAIT = 0, 1
FORMAT_VERSION = 1


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
        ]
    )


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
    source: str | None = None
    """The file the stream was read from, if any."""
    lines: list[Loc] | None = None
    """Where each instruction is written in that file (`.dma` text only), so
    that a malformed field is reported at its line."""

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

    def validate(self) -> None:
        """Check every field (see `copyir.validate`); raise the first problem."""
        from copyir.validate import validate_stream

        validate_stream(self)

    def _header(self) -> tuple:
        return (
            self.kernel,
            self.target,
            self.semaphores,
            self.buffers,
            self.origins,
            self.semaphore_names,
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
    program: dma.ProgramOp, written: dict[Operation, Loc | None] | None = None
) -> Stream:
    """The tables of a `dma.program`.

    What the tables cannot hold (an unknown space or element type, strides
    that do not match the shape) is a `Malformed DMA stream` error at the
    op, located where `written` says it was written, else at the op; every
    other check is `copyir.validate`'s, on the tables.
    """
    written = written or {}

    def bad(op: Operation, why: str) -> CopyIRError:
        where = written.get(op) or loc_of(op.location)
        return CopyIRError(errors.STREAM_MALFORMED.format(why=why), where)

    ops = list(program.body.block.ops)
    instructions = []
    for op in ops:
        if isinstance(op, dma.StartOp | dma.WaitOp):
            instructions.append(op)
        elif not isinstance(op, dma.BufferOp | dma.SemaphoreDeclOp):
            raise bad(op, f"{op.name} in a dma.program")
    rank = 1
    for op in instructions:
        if isinstance(op, dma.StartOp):
            shape = int_values(op.shape)
            if len(shape) > MAX_RANK:
                raise bad(op, f"bad shape {list(shape)}")
            for strides in (op.src_strides, op.dst_strides):
                if len(int_values(strides)) != len(shape):
                    raise bad(
                        op,
                        f"strides {list(int_values(strides))} for shape {list(shape)}",
                    )
            rank = max(rank, len(shape))
    table = np.zeros(len(instructions), dtype=instruction_dtype(rank))
    origins: dict[Origin, int] = {}
    dtype_codes = {d.ir: i for i, d in enumerate(DTYPES)}
    for row, op in enumerate(instructions):
        entry = table[row]
        origin = Origin(loc_of(op.location), detail_of(op.location))
        entry["origin"] = origins.setdefault(origin, len(origins))
        entry["sem"] = op.sem.value.data
        if isinstance(op, dma.WaitOp):
            entry["op"] = WAIT
            entry["bytes"] = op.bytes.value.data
            continue
        shape = int_values(op.shape)
        if op.element_type not in dtype_codes:
            raise bad(op, f"unknown element type {op.element_type}")
        dtype = dtype_codes[op.element_type]
        entry["op"] = START
        entry["dtype"] = dtype
        entry["rank"] = len(shape)
        entry["bytes"] = min(math.prod(shape) * DTYPES[dtype].itemsize, 2**63 - 1)
        for end in ("src", "dst"):
            space = getattr(op, f"{end}_space").data
            if space not in SPACES:
                raise bad(op, f"unknown memory space {space!r}")
            entry[f"{end}_space"] = SPACES.index(space)
            entry[f"{end}_address"] = getattr(op, f"{end}_address").value.data
            entry[f"{end}_strides"][: len(shape)] = int_values(
                getattr(op, f"{end}_strides")
            )
        entry["shape"][: len(shape)] = shape
        entry["add"] = op.add is not None
        priority = op.priority.value.data if op.priority is not None else 0
        if not 0 <= priority <= 255:
            raise bad(op, f"priority {priority}")
        entry["priority"] = priority
    buffers = []
    for op in ops:
        if isinstance(op, dma.BufferOp):
            if op.element_type not in BY_IR:
                raise bad(op, f"unknown element type {op.element_type}")
            buffers.append(
                Buffer(
                    op.buffer_name.data,
                    op.space.data,
                    op.address.value.data,
                    BY_IR[op.element_type].name,
                    int_values(op.shape),
                    op.param is not None,
                    loc_of(op.location),
                )
            )
    names = [
        SemaphoreName(op.sem_name.data, op.first.value.data, int_values(op.shape))
        for op in ops
        if isinstance(op, dma.SemaphoreDeclOp)
    ]
    lines = [written.get(op) for op in instructions] if written else None
    return Stream(
        program.sym_name.data,
        program.target.data,
        program.semaphores.value.data,
        buffers,
        table,
        list(origins),
        names,
        lines=lines,
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
    for row in range(len(stream.instructions)):
        entry = stream.instructions[row]
        origin = int(entry["origin"])
        location = locations[origin] if origin >= 0 else None
        sem = IntegerAttr(int(entry["sem"]), i64)
        if entry["op"] == WAIT:
            properties = {"sem": sem, "bytes": IntegerAttr(int(entry["bytes"]), i64)}
            ops.append(dma.WaitOp.create(properties=properties, location=location))
            continue
        rank = int(entry["rank"])
        properties = {
            "src_space": StringAttr(SPACES[entry["src_space"]]),
            "src_address": IntegerAttr(int(entry["src_address"]), i64),
            "src_strides": i64_array(
                tuple(int(x) for x in entry["src_strides"][:rank])
            ),
            "dst_space": StringAttr(SPACES[entry["dst_space"]]),
            "dst_address": IntegerAttr(int(entry["dst_address"]), i64),
            "dst_strides": i64_array(
                tuple(int(x) for x in entry["dst_strides"][:rank])
            ),
            "element_type": DTYPES[entry["dtype"]].ir,
            "shape": i64_array(tuple(int(x) for x in entry["shape"][:rank])),
            "sem": sem,
        }
        if entry["add"]:
            properties["add"] = UnitAttr()
        if entry["priority"]:
            properties["priority"] = IntegerAttr(int(entry["priority"]), i64)
        ops.append(dma.StartOp.create(properties=properties, location=location))
    return dma.ProgramOp(
        stream.kernel, stream.target, stream.semaphores, Region(Block(ops))
    )


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
    """The `.dma` text: one line per buffer and instruction, origins trailing."""
    out = io.StringIO()
    printer = Printer(stream=out)
    out.write(
        f"// copyir DMA stream: kernel {program.sym_name.data}, "
        f"target {program.target.data}\n"
    )
    out.write(
        f'dma.program "{program.sym_name.data}" target "{program.target.data}" '
        f"semaphores {program.semaphores.value.data} {{\n"
    )
    for op in program.body.block.ops:
        line = io.StringIO()
        printer.stream = line
        printer.print_op(op)
        text = line.getvalue()
        out.write("  " + text)
        loc = loc_of(op.location)
        if origins and loc is not None and not isinstance(op, dma.SemaphoreDeclOp):
            detail = detail_of(op.location)
            out.write(f"  // {loc}{' ' + detail if detail else ''}")
        out.write("\n")
    out.write("}\n")
    return out.getvalue()


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
    for op in program.body.block.ops:
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
    )


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
