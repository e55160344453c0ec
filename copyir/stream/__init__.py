"""The DMA stream as data: numpy tables, and its text and binary files.

A `dma.program` (see `copyir.dialects.dma`) is the stream as IR. `Stream`
holds the same program as tables, which is what the interpreter executes
and what the binary form stores: a record per buffer and a table row per
instruction, with shapes and strides padded to the stream's largest rank.
Every instruction field, its op property, its text and its table columns
are listed once, in `copyir.dma_schema`.

`program`: IR <-> tables. `text`: the `.dma` form, the MLIR form of the
dma dialect with each instruction's origin as a trailing comment, `//
prog.cpy:22:3 block (7, 2) slot 0`; reading it back turns the comments
into locations again, so the text round-trips with its origins. `npz`: the
binary form, the tables as numpy arrays with a format version, for streams
too large to read as text quickly.
"""

from copyir.dma_schema import (
    COMPUTE,
    INVALIDATE,
    OPAQUE,
    OPS,
    RELEASE,
    RELEASE_SEM,
    START,
    WAIT,
    Compute,
    OperandBox,
    instruction_dtype,
)
from copyir.machine import SPACES
from copyir.stream.model import (
    Buffer,
    CountedLoop,
    Origin,
    SemaphoreName,
    Stream,
    lowering_bug,
)
from copyir.stream.npz import FORMAT_VERSION, load_npz, save_npz
from copyir.stream.program import from_program, to_program
from copyir.stream.text import parse_dma, print_dma, read_dma

__all__ = [
    "COMPUTE",
    "FORMAT_VERSION",
    "INVALIDATE",
    "OPAQUE",
    "OPS",
    "RELEASE",
    "RELEASE_SEM",
    "SPACES",
    "START",
    "WAIT",
    "Buffer",
    "Compute",
    "CountedLoop",
    "OperandBox",
    "Origin",
    "SemaphoreName",
    "Stream",
    "from_program",
    "instruction_dtype",
    "load_npz",
    "lowering_bug",
    "parse_dma",
    "print_dma",
    "read_dma",
    "save_npz",
    "to_program",
]
