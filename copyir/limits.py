"""How much one run may hold: the limits that verify, lower and run share.

`copyir run` expands a stream's loops into events, one per execution of an
instruction (a DMA start or wait, a computation, an invalidation), and
keeps every event's fields (its row, loop indices, addresses, semaphore,
resolved boxes, protocol state) in numpy arrays. Measured with
`/usr/bin/time -v copyir run`: about 250 bytes per DMA event (loops of
2^20, 2^21 and 2^22 iterations of a start and a wait through dynamic
views, and pipelines of as many steps: 2.1 GB at 2^23 events), and about
250 bytes per operand and destination of a computation (0.9 GB at 2^20
computations of three operands, 1.4 GB at 2^17 of forty). So a computation
weighs one event per operand and one for its destination (`weight`), and
at `MAX_EVENTS` a run holds about 2 GiB, whatever it runs: it fits
comfortably on a 24 GiB machine.

`verify` refuses a program beyond these limits, at the loop or pipeline,
before it checks anything at every point of a loop's domain, so that what
it accepts lowers and runs; the stream validator refuses a stream read
from a file beyond them. One limit, three places: this module.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from copyir import errors
from copyir.errors import CopyIRError

LIMIT = 1 << 62
"""Byte addresses, sizes and element counts, and every part of the index
arithmetic that computes them, stay below this in magnitude, so that sums
of a few of them never overflow numpy's 64-bit integers."""

MAX_OFFSET = LIMIT // 2
"""An access's index arithmetic (every part of it, over its loops' ranges)
and a target space's capacity each stay below this, so that a buffer's
address plus an offset into it stays below LIMIT."""

MAX_PIECES = 256
"""The most affine pieces an index of mins and maxes may split a loop
nest's domain into (`copyir.index.Pieces`; each is a copy of every op that
reads it): a min of n affine expressions is n pieces, but mins of mins
multiply them."""

MAX_EVENTS = 1 << 23
"""Events a run may hold: the sum, over a kernel's instructions, of the
iterations of the loops around each (conditions not counted), each
computation weighed by its operands (`weight`)."""


def weight(operands: int) -> int:
    """The events one execution of an instruction counts for: a DMA, a wait
    or an invalidation one; a computation one per operand and one for its
    destination, since a run keeps a box and an address per end (measured:
    about 10 KB per event of a computation of 40 operands)."""
    return operands + 1


MAX_ITERATIONS = MAX_EVENTS
"""Iterations of one loop nest or pipeline grid (the verifier checks what
depends on loop indices at each of them; the run expands each of them)."""

BYTES_PER_EVENT = 250
"""What one weighed event costs `copyir run`, as measured (see above)."""


def iterations(extents: Iterable[int]) -> int:
    """The points of a nest or grid, exact however large (numpy's product
    wraps at 64 bits)."""
    return math.prod(max(int(e), 0) for e in extents)


def out_of_memory() -> CopyIRError:
    """The error for a `MemoryError`: a program too large for the machine is
    the program's problem (exit 1), never an internal error."""
    return CopyIRError(
        errors.OUT_OF_MEMORY.format(
            iterations=MAX_ITERATIONS, events=MAX_EVENTS, bytes=BYTES_PER_EVENT
        )
    )
