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
    i64,
)
from xdsl.ir import Attribute, Block, Region
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from copyir.attributes import i64_array, int_values
from copyir.dialects import dma
from copyir.dtypes import BY_IR, BY_NAME, DTYPES
from copyir.errors import CopyIRError, Loc
from copyir.locations import detail_of, loc_of, with_detail
from copyir.machine import MAX_RANK, SPACES
from copyir.target import BUILTIN

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
        """Check that every code and index in the tables is in range, so that
        a stream from a file cannot send the interpreter out of its tables."""
        table = self.instructions
        problems = []
        if table.ndim != 1:
            problems.append("an instruction table that is not one row each")
            table = table.reshape(-1)
        if self.semaphores < 0:
            problems.append("a negative semaphore count")
        if len({b.name for b in self.buffers}) != len(self.buffers):
            problems.append("a buffer declared twice")
        for buffer in self.buffers:
            if buffer.space not in SPACES or buffer.dtype not in BY_NAME:
                problems.append(f"buffer {buffer.name} has an unknown space or dtype")
            elif (
                buffer.address < 0
                or len(buffer.shape) > MAX_RANK
                or any(d < 1 for d in buffer.shape)
                or buffer.address + buffer.nbytes >= 1 << 62
            ):
                problems.append(f"buffer {buffer.name} has a bad address or shape")
            elif self.target in BUILTIN:
                capacity = BUILTIN[self.target].capacity(buffer.space)
                if buffer.address + buffer.nbytes > capacity:
                    problems.append(
                        f"buffer {buffer.name} ends past the {buffer.space} capacity "
                        f"of target {self.target} ({capacity} bytes)"
                    )
        checks = {
            "an unknown instruction": table["op"] > WAIT,
            "a semaphore id out of range": (table["sem"] < 0)
            | (table["sem"] >= self.semaphores),
            "a negative byte count": table["bytes"] < 0,
            "an origin out of range": (table["origin"] < -1)
            | (table["origin"] >= len(self.origins)),
        }
        starts = table[table["op"] == START]
        checks["an unknown memory space"] = np.zeros(len(table), bool)
        bad_start = (
            (starts["src_space"] >= len(SPACES))
            | (starts["dst_space"] >= len(SPACES))
            | (starts["dtype"] >= len(DTYPES))
            | (starts["rank"] > self.rank)
            | (starts["priority"] > 1)
        )
        problems += [what for what, bad in checks.items() if bad.any()]
        if bad_start.any():
            problems.append("a start with an out-of-range field")
        if problems:
            where = f" {name}" if name else ""
            raise CopyIRError(
                f"Cannot read DMA stream{where}: {problems[0]}",
                Loc(name, 1, 1) if name else None,
            )

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


def from_program(program: dma.ProgramOp) -> Stream:
    """The tables of a `dma.program`."""
    ops = list(program.body.block.ops)
    instructions = [op for op in ops if isinstance(op, dma.StartOp | dma.WaitOp)]
    rank = max(
        (len(op.shape) for op in instructions if isinstance(op, dma.StartOp)),
        default=1,
    )
    table = np.zeros(len(instructions), dtype=instruction_dtype(max(rank, 1)))
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
        dtype = dtype_codes[op.element_type]
        entry["op"] = START
        entry["dtype"] = dtype
        entry["rank"] = len(shape)
        entry["bytes"] = int(np.prod(shape, dtype=np.int64)) * DTYPES[dtype].itemsize
        entry["src_space"] = SPACES.index(op.src_space.data)
        entry["src_address"] = op.src_address.value.data
        entry["dst_space"] = SPACES.index(op.dst_space.data)
        entry["dst_address"] = op.dst_address.value.data
        entry["shape"][: len(shape)] = shape
        entry["src_strides"][: len(shape)] = int_values(op.src_strides)
        entry["dst_strides"][: len(shape)] = int_values(op.dst_strides)
        entry["add"] = op.add is not None
        entry["priority"] = op.priority.value.data if op.priority is not None else 0
    buffers = [
        Buffer(
            op.buffer_name.data,
            op.space.data,
            op.address.value.data,
            BY_IR[op.element_type].name,
            int_values(op.shape),
            op.param is not None,
        )
        for op in ops
        if isinstance(op, dma.BufferOp)
    ]
    names = [
        SemaphoreName(op.sem_name.data, op.first.value.data, int_values(op.shape))
        for op in ops
        if isinstance(op, dma.SemaphoreDeclOp)
    ]
    return Stream(
        program.sym_name.data,
        program.target.data,
        program.semaphores.value.data,
        buffers,
        table,
        list(origins),
        names,
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
        ops.append(dma.BufferOp.create(properties=properties))
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
        return None
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
        instruction = isinstance(op, dma.StartOp | dma.WaitOp)
        if origins and loc is not None and instruction:
            detail = detail_of(op.location)
            out.write(f"  // {loc}{' ' + detail if detail else ''}")
        out.write("\n")
    out.write("}\n")
    return out.getvalue()


def parse_dma(text: str, filename: str = "<input>") -> dma.ProgramOp:
    """Read the `.dma` text; trailing `// file:line:col note` comments become
    the instructions' locations again."""
    from copyir.mlir import parse_mlir

    module: ModuleOp = parse_mlir(text, filename)
    programs = [op for op in module.ops if isinstance(op, dma.ProgramOp)]
    if len(programs) != 1 or len(list(module.ops)) != 1:
        raise CopyIRError(
            "A .dma file holds exactly one dma.program", Loc(filename, 1, 1)
        )
    program = programs[0]
    _verify_program(program)
    lines = text.splitlines()
    for op in program.body.block.ops:
        loc = loc_of(op.location)
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
    return program


def _verify_program(program: dma.ProgramOp) -> None:
    """Each op's own checks, the first error located in the .dma file."""
    for op in [program, *program.body.block.ops]:
        try:
            op.verify_()
        except VerifyException as err:
            raise CopyIRError(str(err), loc_of(op.location)) from None
        except CopyIRError as err:
            raise err.at(loc_of(op.location)) from None


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
    """A stream from its binary form; anything malformed is one located error."""
    try:
        with np.load(file, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            instructions = data["instructions"]
        if (
            not isinstance(meta, dict)
            or meta.get("format") != "copyir-dma"
            or meta.get("version") != FORMAT_VERSION
        ):
            raise ValueError("not a copyir DMA stream of this version")
        if instructions.ndim != 1 or instructions.dtype.names is None:
            raise ValueError("its instruction table is not a table")
        buffers = [
            Buffer(n, s, int(a), d, tuple(int(x) for x in shape), bool(p))
            for n, s, a, d, shape, p in meta["buffers"]
        ]
        origins = [
            Origin(Loc(f, int(line), int(col)) if f is not None else None, detail)
            for f, line, col, detail in meta["origins"]
        ]
        rank = instructions.dtype["shape"].shape[0]
        if instructions.dtype != instruction_dtype(rank):
            raise ValueError("unexpected instruction table layout")
        if not isinstance(meta["kernel"], str) or not isinstance(meta["target"], str):
            raise ValueError("its kernel and target must be names")
        names = [
            SemaphoreName(str(n), int(first), tuple(int(x) for x in shape))
            for n, first, shape in meta.get("semaphore_names", [])
        ]
        stream = Stream(
            str(meta["kernel"]),
            str(meta["target"]),
            int(meta["semaphores"]),
            buffers,
            instructions,
            origins,
            names,
        )
    except (  # what malformed data makes numpy, json and the unpacking raise
        OSError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        zipfile.BadZipFile,
    ) as err:
        raise CopyIRError(
            f"Cannot read DMA stream {name}: {err}", Loc(name, 1, 1)
        ) from None
    stream.validate(name)
    return stream
