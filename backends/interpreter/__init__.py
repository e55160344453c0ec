"""The checking interpreter: runs a DMA stream on numpy arenas.

Compiling a stream does, once, all the work that needs no data:

1. `copyir.validate` checks every field and resolves each DMA end to a box
   of one buffer (out of bounds, a dtype mismatch and a stride pattern that
   is not a box are reported here, before anything runs), and the loops
   are expanded into events (`program`: `prepare`, with the protocol's
   rows, and `naming`, which words its reports);
2. `backends.protocol` decides the DMA protocol for the whole program
   (races, reads of memory nobody wrote, unsatisfiable waits, DMAs never
   waited), whatever the completion mode, and `backends.parallel` holds
   each parallel loop to its claim; `check_stream` stops here
   (`verify --protocol`);
3. the completion model (`completion`) decides when, inside its in-flight
   window, each DMA moves its data: `eager` at its start, `on_wait` inside
   the wait that needs its bytes, `random` at a seeded random moment. A
   correct program gives the same result in every mode.

Executing (`execute`) is then a loop over prepared copies and computations
on fresh arenas (`memory`), with the inputs checked against the stream's
parameters (`inputs`). `trace` prints a stream's events as a schedule.
"""

from copyir.dtypes import DTYPES
from copyir.machine import MODES, poison
from copyir.stream import Buffer, Origin

from .completion import (
    MODELS,
    CompletionModel,
    Eager,
    OnWait,
    Random,
    Schedule,
    completion_model,
)
from .execute import Executable, compile_stream, run_stream
from .inputs import as_input, check_inputs, fill_inputs
from .program import Program, check_stream, prepare
from .trace import dma_events, trace_lines

__all__ = [
    "DTYPES",
    "MODELS",
    "MODES",
    "Buffer",
    "CompletionModel",
    "Eager",
    "Executable",
    "OnWait",
    "Origin",
    "Program",
    "Random",
    "Schedule",
    "as_input",
    "check_inputs",
    "check_stream",
    "compile_stream",
    "completion_model",
    "dma_events",
    "fill_inputs",
    "poison",
    "prepare",
    "run_stream",
    "trace_lines",
]
