"""The one schema of a DMA instruction: each field listed once, as data.

An instruction (`dma.start`, `dma.wait`, `dma.invalidate`, `dma.compute`,
`dma.opaque`, `dma.release`, `dma.release_sem`) is a sequence of fields. A field says,
in one place, everything the project does with it: the op properties it
holds (`copyir.dialects.dma` builds each op's definition from its
fields), how the `.dma` text writes it (each op's parser and printer walk
its fields), and the columns of the
stream's instruction table that hold it (`copyir.stream` builds the numpy
dtype, fills rows from ops and ops from rows; the `.npz` form stores that
table as is, and `copyir.validate` checks it column by column).

A DMA end (memory space, byte address or affine map, strides in
elements: `"hbm" 458752 [384, 1]`) is one `End`, parsed and printed by
`parse_end` and `end_text` wherever it appears. Adding a field (a device
id on a start, say) is a new `Field` in an instruction's list here (and a
new `copyir.stream.npz.FORMAT_VERSION`, as the table's layout changes),
plus the code that gives it meaning: where the lowering takes it from,
validate's check beyond the field's own, the interpreter's use.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar, cast

import numpy as np
from xdsl.dialects.builtin import (
    I64,
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, Operation
from xdsl.ir.affine import AffineSet
from xdsl.irdl import opt_prop_def, prop_def
from xdsl.parser import Parser
from xdsl.utils.mlir_lexer import PunctuationSpelling

from copyir.attributes import i64_array, i64_attr, int_values, parse_i64
from copyir.compute import Expression, parse_expression
from copyir.dtypes import BY_IR, DTYPES
from copyir.machine import SPACES

Value = IntegerAttr | AffineMapAttr
"""A field that is static (an integer) or affine in the loop indices."""
Predicate = ArrayAttr[AffineSetAttr]
"""An instruction runs where any of these sets holds (an `or` of `and`s)."""
I64Array = DenseArrayBase[I64]
Strides = ArrayAttr[I64Array]
"""A computation's operand strides, one array per operand."""
MAX_I64 = 2**63 - 1


@dataclass(frozen=True)
class OperandBox:
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
    operands: tuple[OperandBox, ...]

    @functools.cached_property
    def tree(self) -> Expression:
        """The expression, parsed once for the validator and the executor;
        ValueError where the text is not one."""
        return parse_expression(self.expression)


@dataclass(frozen=True)
class Column:
    """A column of the instruction table: a numpy scalar type, or a vector
    of `rank` of them (shapes and strides, padded to the stream's rank)."""

    name: str
    dtype: str
    vector: bool = False
    refers: str | None = None
    """The stream's list a 1-based reference column numbers into (`maps`,
    `predicates`, `computes`, `labels`), 0 meaning none."""
    codes: int | None = None
    """A code column's bound: it holds 0 to `codes - 1` (an index into
    `SPACES`, `DTYPES`, ...); validate refuses any other value before a
    reader indexes with it."""
    meaning: str | None = None
    """What a code names (`memory space`), for the validator's message
    `unknown memory space code 7`; without it, `priority 7`."""

    def bad_code(self, value: int) -> str:
        """The validator's words for a value out of this column's codes."""
        if self.meaning is None:
            return f"{self.name} {value}"
        return f"unknown {self.meaning} code {value}"

    def numpy(self, rank: int) -> tuple:
        if self.vector:
            return (self.name, self.dtype, (rank,))
        return (self.name, self.dtype)


class Writer(Protocol):
    """What filling a table row from an op needs (`copyir.stream`'s builder):
    interned maps, predicates, computations and labels, checked space
    names."""

    def value(self, attribute: Value) -> tuple[int, int]: ...
    def space(self, op: Operation, attribute: StringAttr) -> int: ...
    def bad(self, op: Operation, why: str) -> Exception: ...
    def intern(self, table: str, key: object) -> int: ...


class Reader(Protocol):
    """What rebuilding an op from a table row needs: the stream's tables."""

    maps: list
    predicates: list
    computes: list[Compute]
    labels: list[str]


A = TypeVar("A", bound=Attribute)


def prop(op: Operation, name: str, kind: type[A]) -> A:
    """The instruction's property `name`, of the kind its field defines
    (`copyir.dialects.dma` builds the op's definition from the fields)."""
    return cast(A, op.properties[name])


def opt_prop(op: Operation, name: str, kind: type[A]) -> A | None:
    """The instruction's optional property `name` (see `prop`)."""
    return cast("A | None", op.properties.get(name))


def _attribute(reader: Reader, value: int, map_id: int) -> Value:
    """A static field, or its affine map (1-based into `reader.maps`)."""
    if map_id:
        return AffineMapAttr(reader.maps[map_id - 1])
    return i64_attr(value)


# -- the text's pieces ---------------------------------------------------------------


def parse_value(parser: Parser) -> Value:
    """`4096`, or `{(d0) -> (d0 * 4096)}`."""
    if parser.parse_optional_punctuation("{") is None:
        return i64_attr(parse_i64(parser))
    value = AffineMapAttr(parser.parse_affine_map())
    parser.parse_punctuation("}")
    return value


def value_text(value: Value) -> str:
    if isinstance(value, IntegerAttr):
        return str(value.value.data)
    return f"{{{value.data}}}"


def parse_ints(parser: Parser) -> DenseArrayBase[I64]:
    values = parser.parse_comma_separated_list(
        parser.Delimiter.SQUARE, lambda: parse_i64(parser)
    )
    return i64_array(tuple(values))


def ints_text(values: DenseArrayBase[I64]) -> str:
    return f"[{', '.join(map(str, int_values(values)))}]"


EndAttributes = tuple[StringAttr, Value, DenseArrayBase[I64]]
"""(space, address, strides) of a DMA end, as the op holds them."""


def parse_end(parser: Parser) -> EndAttributes:
    """`"hbm" 458752 [384, 1]`: space, address (or affine map), strides."""
    space = StringAttr(parser.parse_str_literal())
    return space, parse_value(parser), parse_ints(parser)


def end_text(end: EndAttributes) -> str:
    space, address, strides = end
    return f'"{space.data}" {value_text(address)} {ints_text(strides)}'


# -- fields --------------------------------------------------------------------------


class Field:
    """One piece of an instruction: op properties, text, table columns."""

    def columns(self) -> tuple[Column, ...]:
        """The instruction table's columns that hold this field."""
        return ()

    def properties(self) -> dict[str, Any]:
        """The op's property definitions (`prop_def`s) for this field."""
        return {}

    def parse(self, parser: Parser) -> dict[str, Attribute]:
        raise NotImplementedError

    def text(self, op: Operation) -> str | None:
        """How the field prints (after a space), or None when absent."""
        raise NotImplementedError

    def store(self, op: Operation, entry, writer: Writer) -> None:
        """Fill this field's columns of a table row from the op."""

    def load(self, entry, reader: Reader) -> dict[str, Attribute]:
        """The op's properties from a table row."""
        return {}

    def strides(self, op: Operation) -> list[DenseArrayBase[I64]]:
        """The strides this field gives, each as long as the op's shape."""
        return []


@dataclass(frozen=True)
class Punctuation(Field):
    """Text only: `->` between a start's ends."""

    mark: PunctuationSpelling

    def parse(self, parser: Parser) -> dict[str, Attribute]:
        parser.parse_punctuation(self.mark)
        return {}

    def text(self, op: Operation) -> str:
        return self.mark


@dataclass(frozen=True)
class End(Field):
    """A DMA end: properties `{prefix}space`, `{prefix}address`,
    `{prefix}strides`; columns `{column}_space`, `_address`, `_map`,
    `_strides`."""

    prefix: str
    column: str

    def columns(self) -> tuple[Column, ...]:
        c = self.column
        return (
            Column(f"{c}_space", "u1", codes=len(SPACES), meaning="memory space"),
            Column(f"{c}_address", "<i8"),
            Column(f"{c}_map", "<i4", refers="maps"),
            Column(f"{c}_strides", "<i8", vector=True),
        )

    def names(self) -> tuple[str, str, str]:
        p = self.prefix
        return f"{p}space", f"{p}address", f"{p}strides"

    def properties(self) -> dict[str, Any]:
        space, address, strides = self.names()
        return {
            space: prop_def(StringAttr),
            address: prop_def(Value),
            strides: prop_def(DenseArrayBase[I64]),
        }

    def make(self, end: EndAttributes) -> dict[str, Attribute]:
        """The op's properties for an end."""
        return dict(zip(self.names(), end, strict=True))

    def of(self, op: Operation) -> EndAttributes:
        space, address, strides = (op.properties[n] for n in self.names())
        return cast(EndAttributes, (space, address, strides))

    def parse(self, parser: Parser) -> dict[str, Attribute]:
        return self.make(parse_end(parser))

    def text(self, op: Operation) -> str:
        return end_text(self.of(op))

    def store(self, op: Operation, entry, writer: Writer) -> None:
        space, address, strides = self.of(op)
        c = self.column
        entry[f"{c}_space"] = writer.space(op, space)
        entry[f"{c}_address"], entry[f"{c}_map"] = writer.value(address)
        values = int_values(strides)
        entry[f"{c}_strides"][: len(values)] = values

    def load(self, entry, reader: Reader) -> dict[str, Attribute]:
        c, rank = self.column, entry["rank"]
        return self.make(
            (
                StringAttr(SPACES[entry[f"{c}_space"]]),
                _attribute(reader, int(entry[f"{c}_address"]), int(entry[f"{c}_map"])),
                i64_array(tuple(int(x) for x in entry[f"{c}_strides"][:rank])),
            )
        )

    def strides(self, op: Operation) -> list[DenseArrayBase[I64]]:
        return [self.of(op)[2]]


@dataclass(frozen=True)
class Box(Field):
    """Element type and shape, `f32 [104, 128]`; the table also holds the
    box's size in bytes (saturated at 2**63 - 1; validate checks a start's)."""

    def columns(self) -> tuple[Column, ...]:
        return (
            Column("dtype", "u1", codes=len(DTYPES), meaning="element type"),
            Column("rank", "u1"),
            Column("shape", "<i8", vector=True),
            Column("bytes", "<i8"),
        )

    def properties(self) -> dict[str, Any]:
        return {
            "element_type": prop_def(Attribute),
            "shape": prop_def(DenseArrayBase[I64]),
        }

    def parse(self, parser: Parser) -> dict[str, Attribute]:
        return {"element_type": parser.parse_type(), "shape": parse_ints(parser)}

    def text(self, op: Operation) -> str:
        element_type = prop(op, "element_type", Attribute)
        return f"{element_type} {ints_text(prop(op, 'shape', I64Array))}"

    def store(self, op: Operation, entry, writer: Writer) -> None:
        shape = int_values(prop(op, "shape", I64Array))
        dtype = DTYPES.index(BY_IR[prop(op, "element_type", Attribute)])
        entry["dtype"] = dtype
        entry["rank"] = len(shape)
        entry["shape"][: len(shape)] = shape
        entry["bytes"] = min(math.prod(shape) * DTYPES[dtype].itemsize, MAX_I64)

    def load(self, entry, reader: Reader) -> dict[str, Attribute]:
        shape = tuple(int(x) for x in entry["shape"][: entry["rank"]])
        return {"element_type": DTYPES[entry["dtype"]].ir, "shape": i64_array(shape)}


@dataclass(frozen=True)
class Keyed(Field):
    """`keyword value`: a semaphore id (`sem 3`, or affine inside loops,
    column `{name}_map`) or a byte count (`bytes 4096`, static)."""

    name: str
    affine: bool

    def columns(self) -> tuple[Column, ...]:
        maps = (
            (Column(f"{self.name}_map", "<i4", refers="maps"),) if self.affine else ()
        )
        return (Column(self.name, "<i8"), *maps)

    def properties(self) -> dict[str, Any]:
        return {self.name: prop_def(Value if self.affine else IntegerAttr[I64])}

    def parse(self, parser: Parser) -> dict[str, Attribute]:
        parser.parse_keyword(self.name)
        value = parse_value(parser) if self.affine else i64_attr(parse_i64(parser))
        return {self.name: value}

    def text(self, op: Operation) -> str:
        return f"{self.name} {value_text(cast(Value, op.properties[self.name]))}"

    def store(self, op: Operation, entry, writer: Writer) -> None:
        if self.affine:
            entry[self.name], entry[f"{self.name}_map"] = writer.value(
                cast(Value, op.properties[self.name])
            )
        else:
            entry[self.name] = prop(op, self.name, IntegerAttr).value.data

    def load(self, entry, reader: Reader) -> dict[str, Attribute]:
        map_id = int(entry[f"{self.name}_map"]) if self.affine else 0
        return {self.name: _attribute(reader, int(entry[self.name]), map_id)}


@dataclass(frozen=True)
class Flag(Field):
    """A word present or not: `add` (a start that adds into its
    destination), `stale` (an invalidation that keeps the bytes), `keeps`
    (an opaque write that keeps them)."""

    name: str

    def columns(self) -> tuple[Column, ...]:
        return (Column(self.name, "?"),)

    def properties(self) -> dict[str, Any]:
        return {self.name: opt_prop_def(UnitAttr)}

    def parse(self, parser: Parser) -> dict[str, Attribute]:
        present = parser.parse_optional_keyword(self.name) is not None
        return {self.name: UnitAttr()} if present else {}

    def text(self, op: Operation) -> str | None:
        return self.name if self.name in op.properties else None

    def store(self, op: Operation, entry, writer: Writer) -> None:
        entry[self.name] = self.name in op.properties

    def load(self, entry, reader: Reader) -> dict[str, Attribute]:
        return {self.name: UnitAttr()} if entry[self.name] else {}


@dataclass(frozen=True)
class Small(Field):
    """`priority 1`, or nothing for 0: an optional small count, one byte in
    the table; validate refuses a value above `most`."""

    name: str
    most: int

    def columns(self) -> tuple[Column, ...]:
        return (Column(self.name, "u1", codes=self.most + 1),)

    def properties(self) -> dict[str, Any]:
        return {self.name: opt_prop_def(IntegerAttr[I64])}

    def parse(self, parser: Parser) -> dict[str, Attribute]:
        if parser.parse_optional_keyword(self.name) is None:
            return {}
        return {self.name: i64_attr(parse_i64(parser))}

    def text(self, op: Operation) -> str | None:
        value = opt_prop(op, self.name, IntegerAttr)
        return None if value is None else f"{self.name} {value.value.data}"

    def store(self, op: Operation, entry, writer: Writer) -> None:
        value = opt_prop(op, self.name, IntegerAttr)
        number = value.value.data if value is not None else 0
        if not 0 <= number <= 255:
            raise writer.bad(op, f"{self.name} {number}")
        entry[self.name] = number

    def load(self, entry, reader: Reader) -> dict[str, Attribute]:
        number = int(entry[self.name])
        return {self.name: i64_attr(number)} if number else {}


@dataclass(frozen=True)
class Computation(Field):
    """`= "(add $0 1.0)" ("vmem" 0 [1], ...)`: an expression over operand
    boxes, interned in `Stream.computes` (column `compute`, 1-based)."""

    NAMES: ClassVar = ("operand_spaces", "operand_addresses", "operand_strides")
    """The operand ends' properties: one array each, k-th entry operand k."""

    def columns(self) -> tuple[Column, ...]:
        return (Column("compute", "<i4", refers="computes"),)

    def properties(self) -> dict[str, Any]:
        return {
            "expression": prop_def(StringAttr),
            "operand_spaces": prop_def(ArrayAttr[StringAttr]),
            "operand_addresses": prop_def(ArrayAttr[Value]),
            "operand_strides": prop_def(ArrayAttr[DenseArrayBase[I64]]),
        }

    def make(self, expression: str, ends: Sequence[EndAttributes]) -> dict:
        """The op's properties for an expression over operand ends."""
        columns = zip(*ends, strict=True) if ends else ((), (), ())
        return {"expression": StringAttr(expression)} | {
            name: ArrayAttr(values)
            for name, values in zip(self.NAMES, columns, strict=True)
        }

    def ends(self, op: Operation) -> list[EndAttributes]:
        columns = (prop(op, name, ArrayAttr).data for name in self.NAMES)
        return cast(list[EndAttributes], list(zip(*columns, strict=True)))

    def parse(self, parser: Parser) -> dict[str, Attribute]:
        parser.parse_punctuation("=")
        expression = parser.parse_str_literal()
        ends = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parse_end(parser)
        )
        return self.make(expression, ends)

    def text(self, op: Operation) -> str:
        ends = ", ".join(end_text(end) for end in self.ends(op))
        return f"= {StringAttr(prop(op, 'expression', StringAttr).data)} ({ends})"

    def store(self, op: Operation, entry, writer: Writer) -> None:
        operands = []
        for space, address, strides in self.ends(op):
            writer.space(op, space)
            value, map_id = writer.value(address)
            operands.append(OperandBox(space.data, value, map_id, int_values(strides)))
        entry["compute"] = writer.intern(
            "computes",
            Compute(prop(op, "expression", StringAttr).data, tuple(operands)),
        )

    def load(self, entry, reader: Reader) -> dict[str, Attribute]:
        compute = reader.computes[int(entry["compute"]) - 1]
        ends = [
            (
                StringAttr(o.space),
                _attribute(reader, o.address, o.map),
                i64_array(o.strides),
            )
            for o in compute.operands
        ]
        return self.make(compute.expression, ends)

    def strides(self, op: Operation) -> list[DenseArrayBase[I64]]:
        return list(prop(op, "operand_strides", Strides).data)


@dataclass(frozen=True)
class Label(Field):
    """`"dot_general, exp"`: what an opaque computation computes, for
    messages; interned in `Stream.labels` (column `label`, 1-based)."""

    def columns(self) -> tuple[Column, ...]:
        return (Column("label", "<i4", refers="labels"),)

    def properties(self) -> dict[str, Any]:
        return {"what": prop_def(StringAttr)}

    def parse(self, parser: Parser) -> dict[str, Attribute]:
        return {"what": StringAttr(parser.parse_str_literal())}

    def text(self, op: Operation) -> str:
        return str(StringAttr(prop(op, "what", StringAttr).data))

    def store(self, op: Operation, entry, writer: Writer) -> None:
        entry["label"] = writer.intern("labels", prop(op, "what", StringAttr).data)

    def load(self, entry, reader: Reader) -> dict[str, Attribute]:
        return {"what": StringAttr(reader.labels[int(entry["label"]) - 1])}


@dataclass(frozen=True)
class Access(Flag):
    """`reads` or `writes`: what an opaque computation does to its box (a
    flag, `writes`, in the op and the table)."""

    name: str = "writes"

    def parse(self, parser: Parser) -> dict[str, Attribute]:
        if parser.parse_optional_keyword("reads") is not None:
            return {}
        if parser.parse_optional_keyword(self.name) is None:
            parser.raise_error(f"Expected 'reads' or '{self.name}'")
        return {self.name: UnitAttr()}

    def text(self, op: Operation) -> str:
        return self.name if self.name in op.properties else "reads"


@dataclass(frozen=True)
class Guard(Field):
    """`if {(d0) : (d0 - 1 >= 0)} or {...}`, or nothing: the instruction runs
    where any set holds; interned in `Stream.predicates` (1-based)."""

    def columns(self) -> tuple[Column, ...]:
        return (Column("predicate", "<i4", refers="predicates"),)

    def properties(self) -> dict[str, Any]:
        return {"predicate": opt_prop_def(Predicate)}

    def parse(self, parser: Parser) -> dict[str, Attribute]:
        if parser.parse_optional_keyword("if") is None:
            return {}
        sets = []
        while True:
            parser.parse_punctuation("{")
            sets.append(AffineSetAttr(parser.parse_affine_set()))
            parser.parse_punctuation("}")
            if parser.parse_optional_keyword("or") is None:
                return {"predicate": ArrayAttr(sets)}

    def text(self, op: Operation) -> str | None:
        predicate = opt_prop(op, "predicate", Predicate)
        if predicate is None:
            return None
        return "if " + " or ".join(f"{{{s.data}}}" for s in predicate.data)

    def store(self, op: Operation, entry, writer: Writer) -> None:
        predicate = opt_prop(op, "predicate", Predicate)
        if predicate is not None:
            sets: tuple[AffineSet, ...] = tuple(s.data for s in predicate.data)
            entry["predicate"] = writer.intern("predicates", sets)

    def load(self, entry, reader: Reader) -> dict[str, Attribute]:
        if not entry["predicate"]:
            return {}
        sets = reader.predicates[int(entry["predicate"]) - 1]
        return {"predicate": ArrayAttr(AffineSetAttr(s) for s in sets)}


# -- the instructions ----------------------------------------------------------------

SRC, DST, OWN = End("src_", "src"), End("dst_", "dst"), End("", "dst")
"""A start's two ends; an invalidation's or computation's own end, which
the table holds as the destination."""
SEM = Keyed("sem", affine=True)
BOX, GUARD, COMPUTATION = Box(), Guard(), Computation()
LABEL, ACCESS = Label(), Access()

START_FIELDS = (
    SRC,
    Punctuation("->"),
    DST,
    BOX,
    SEM,
    Flag("add"),
    Small("priority", most=1),
    GUARD,
)
WAIT_FIELDS = (SEM, Keyed("bytes", affine=False), GUARD)
INVALIDATE_FIELDS = (OWN, BOX, Flag("stale"), GUARD)
"""`stale`: the box keeps its bytes (a pipeline's output window at a
block's first visit): a computation may not read it before a write, a DMA
copies it as it is (the write-back of a window the body wrote in part)."""
COMPUTE_FIELDS = (OWN, BOX, COMPUTATION, GUARD)
OPAQUE_FIELDS = (LABEL, ACCESS, OWN, BOX, Flag("keeps"), GUARD)
"""One of the refs an opaque computation reads or writes: an opaque
computation is one such instruction per ref, its reads first. `keeps`: a
write that leaves the bytes as they are (the padding of a block cut in a
BufferedRef's slot keeps what the slot held)."""
RELEASE_FIELDS = (OWN, BOX, GUARD)
RELEASE_SEM_FIELDS = (SEM, GUARD)
"""A scope's end: a buffer's box, or one semaphore, that no DMA in flight
may still use."""
INSTRUCTION_FIELDS = (
    START_FIELDS,
    WAIT_FIELDS,
    INVALIDATE_FIELDS,
    COMPUTE_FIELDS,
    OPAQUE_FIELDS,
    RELEASE_FIELDS,
    RELEASE_SEM_FIELDS,
)
"""Per instruction code (`START`, `WAIT`, `INVALIDATE`, `COMPUTE`,
`OPAQUE`, `RELEASE`, `RELEASE_SEM`), its fields."""
START, WAIT, INVALIDATE, COMPUTE, OPAQUE, RELEASE, RELEASE_SEM = range(
    len(INSTRUCTION_FIELDS)
)
OPS = tuple(range(len(INSTRUCTION_FIELDS)))

CONTEXT = (
    Column("op", "u1", codes=len(INSTRUCTION_FIELDS), meaning="instruction"),
    Column("origin", "<i4"),
    Column("loop", "<i4"),
)
"""Columns of every row: the instruction code, the origin (index into
`Stream.origins`, -1 for none) and the innermost enclosing loop (1-based
into `Stream.loops`, 0 at the top level)."""


def columns() -> tuple[Column, ...]:
    """Every column of the instruction table, each once, in schema order."""
    seen: dict[str, Column] = {c.name: c for c in CONTEXT}
    for fields in INSTRUCTION_FIELDS:
        for each in fields:
            for column in each.columns():
                assert seen.setdefault(column.name, column) == column, column
    return tuple(seen.values())


def instruction_dtype(rank: int) -> np.dtype:
    """One row of the instruction table; shapes are padded to `rank`. A
    zeroed row is an instruction at the top level, static, unguarded."""
    return np.dtype([column.numpy(rank) for column in columns()])


def having(column: str) -> tuple[int, ...]:
    """The instruction codes whose fields hold this column."""
    return tuple(
        code
        for code, fields in enumerate(INSTRUCTION_FIELDS)
        if any(c.name == column for f in fields for c in f.columns())
    )


F = TypeVar("F", bound=Field)


def fields_of(kind: type[F]) -> tuple[F, ...]:
    """The distinct fields of one kind, over every instruction."""
    return tuple(
        dict.fromkeys(f for fs in INSTRUCTION_FIELDS for f in fs if isinstance(f, kind))
    )


END_COLUMNS = tuple(dict.fromkeys(end.column for end in fields_of(End)))
"""The ends the table holds (`src`, `dst`), each as four columns."""
MAP_COLUMNS = tuple(c.name for c in columns() if c.refers == "maps")
"""The columns that reference `Stream.maps` (1-based, 0 for static)."""
