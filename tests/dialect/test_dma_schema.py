"""One schema for a DMA instruction: each field is
listed once in `copyir.dma_schema`, and the dma ops, the `.dma` text and
the stream's table derive from that list."""

from __future__ import annotations

import io
from typing import ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Dialect
from xdsl.parser import Parser
from xdsl.printer import Printer

from copyir import dma_schema as schema
from copyir.dialects import dma
from copyir.stream import (
    instruction_dtype,
    load_npz,
    parse_dma,
    print_dma,
    read_dma,
    save_npz,
    to_program,
)

PROGRAM = """\
dma.program "k" target "default" semaphores 2 {
  dma.buffer "x" "hbm" 0 f32 [4, 8] param
  dma.buffer "y" "vmem" 0 f32 [4, 8]
  dma.loop "i" 4 {
    dma.start "hbm" {(d0) -> (d0 * 32)} [1] -> "vmem" {(d0) -> (d0 * 32)} [1] \
f32 [8] sem {(d0) -> (d0 mod 2)} add priority 1 if {(d0) : (d0 - 1 >= 0)}
    dma.wait sem {(d0) -> (d0 mod 2)} bytes 32 if {(d0) : (d0 - 1 >= 0)}
    dma.invalidate "vmem" {(d0) -> (d0 * 32)} [1] f32 [8]
    dma.compute "vmem" 0 [1] f32 [8] = "(add $0 $1)" ("vmem" 32 [1], "vmem" 64 [1])
  }
}
"""


def test_each_op_holds_exactly_its_fields_properties():
    for code, op in enumerate(dma.INSTRUCTIONS):
        assert op.FIELDS is schema.INSTRUCTION_FIELDS[code]
        declared = set(op.get_irdl_definition().properties)
        assert declared == {name for field in op.FIELDS for name in field.properties()}


def test_the_table_holds_each_column_once_in_schema_order():
    names = list(instruction_dtype(3).names)
    assert names == [column.name for column in schema.columns()]
    assert len(set(names)) == len(names)
    assert names[: len(schema.CONTEXT)] == [c.name for c in schema.CONTEXT]


def test_every_field_round_trips_through_text_table_and_npz():
    program = parse_dma(PROGRAM, "k.dma")
    text = print_dma(program, origins=False)
    stream = read_dma(PROGRAM, "k.dma")
    binary = io.BytesIO()
    save_npz(stream, binary)
    binary.seek(0)
    loaded = load_npz(binary, "k.npz")
    assert loaded == stream
    assert print_dma(to_program(loaded), origins=False) == text
    starts = stream.instructions[stream.instructions["op"] == schema.START]
    assert list(starts["priority"]) == [1] and list(starts["add"]) == [True]


class _Writer:
    """Interns like the stream's table writer, for one row."""

    def __init__(self):
        self.maps, self.predicates, self.computes = [], [], []

    def value(self, attribute):
        return attribute.value.data, 0

    def space(self, op, attribute):
        return ("hbm", "vmem", "smem").index(attribute.data)

    def bad(self, op, why):
        return ValueError(why)

    def intern(self, table, key):
        getattr(self, table).append(key)
        return len(getattr(self, table))


def test_a_new_field_is_one_schema_entry():
    """A start with a device id (as a remote DMA will have): the field's
    entry alone gives the op its property, its text and its column."""
    device = schema.Keyed("device", affine=False)

    @dma.instruction
    class RemoteStartOp(dma.InstructionOp):
        name = "test.remote_start"
        FIELDS: ClassVar = (*schema.START_FIELDS, device)

    ctx = Context()
    ctx.load_dialect(Dialect("test", [RemoteStartOp]))
    line = 'test.remote_start "hbm" 0 [1] -> "vmem" 0 [1] f32 [8] sem 0 device 3'
    op = Parser(ctx, line).parse_op()
    assert op.properties["device"] == IntegerAttr(3, 64)
    out = io.StringIO()
    Printer(stream=out).print_op(op)
    assert out.getvalue() == line
    columns = [c for f in RemoteStartOp.FIELDS for c in f.columns()]
    row = np.zeros(1, np.dtype([c.numpy(1) for c in dict.fromkeys(columns)]))[0]
    for field in RemoteStartOp.FIELDS:
        field.store(op, row, _Writer())
    assert row["device"] == 3
    assert device.load(row, _Writer()) == {"device": op.properties["device"]}
