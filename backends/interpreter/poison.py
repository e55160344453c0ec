"""Where the poison of opaque computations ends up.

An opaque computation (`dma.opaque ... writes`) writes poison: data that
stands for values copyir cannot compute. It counts as written, so a DMA
may copy it on, and a computation's result over it is poison too. A
kernel's output that still holds some at the end of a run would return
made-up data as if it were the kernel's, so it is reported, naming the
opaque computation that wrote it.

Which bytes hold it depends on the program and on when each DMA moves its
data, never on the data: the planned steps are replayed once per compile
on shadow memory, an element of marker per element of each buffer (0 for
real data, else the opaque computation that wrote it), with each copy,
addition and computation carrying the markers of what it reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from copyir.dtypes import BY_NAME
from copyir.stream import Stream

POISON_STEP = 4
"""The plan's kind of step that writes an opaque computation's poison:
(4, dtype code, instruction row, destination stack, its offset)."""
KEEP_STEP = 5
"""Likewise for an opaque write that `keeps` the bytes (the padding of a
block cut in a BufferedRef's slot): the data stays, the markers change."""


@dataclass(frozen=True)
class Found:
    """An output holding opaque poison at the end of a run."""

    buffer: int
    count: int
    """Its elements that hold opaque poison."""
    first: int
    """The first of them, a flat index into the output."""
    row: int
    """The instruction that wrote the poison the first element holds."""


def opaque_outputs(
    stream: Stream,
    steps: np.ndarray,
    operands: list[list[list[int]]],
    arities: list[int],
    stacks: Callable[[dict[int, np.ndarray]], list[np.ndarray]],
) -> list[Found]:
    """Replay `steps` (the plan: kind, a, b, c, d, n; a computation's
    operands in `operands`, the first `arities[function]` of them read) on
    shadow memory and return each parameter that ends holding opaque
    poison. `stacks` makes the plan's strided stacks over flat arrays, as
    for the data."""
    poisons = (steps[:, 0] == POISON_STEP) | (steps[:, 0] == KEEP_STEP)
    writers = np.unique(steps[poisons, 2])
    if not len(writers):
        return []
    # Before the first poison, every step moves markers of 0 onto 0s.
    steps = steps[int(np.argmax(poisons)) :]
    marker = np.min_scalar_type(len(writers))
    number = dict(zip(writers.tolist(), range(1, len(writers) + 1), strict=True))
    flats = {
        i: np.zeros(int(np.prod(b.shape, dtype=np.int64)), marker)
        for i, b in enumerate(stream.buffers)
    }
    shadow = stacks(flats)
    items = [BY_NAME[b.dtype].itemsize for b in stream.buffers]
    for kind, a, b, c, d, n in steps.tolist():
        if kind == 0:
            np.copyto(shadow[c][d], shadow[a][b])
        elif kind == 1:
            target = shadow[c][d]
            np.maximum(target, shadow[a][b], out=target)
        elif kind == 2:
            _carry(shadow, operands[b][: arities[a]], shadow[c][d])
        elif kind == 3:  # bytes between flat buffers
            at, to = b // items[a], d // items[c]
            flats[c][to : to + n // items[a]] = flats[a][at : at + n // items[a]]
        elif kind in (POISON_STEP, KEEP_STEP):
            shadow[c][d][...] = number[b]
    return _found(stream, flats, writers)


def _carry(
    shadow: list[np.ndarray], operands: list[tuple[int, int]], target: np.ndarray
) -> None:
    """A computation's result holds opaque poison where any operand does
    (the highest marker names it); none where it reads only literals. The
    operands are read before the result is written: one may be it."""
    result = np.zeros_like(target)
    for stack, offset in operands:
        np.maximum(result, shadow[stack][offset], out=result)
    np.copyto(target, result)


def _found(
    stream: Stream, flats: dict[int, np.ndarray], writers: np.ndarray
) -> list[Found]:
    found = []
    for i, buffer in enumerate(stream.buffers):
        if not buffer.param:
            continue
        held = np.flatnonzero(flats[i])
        if len(held):
            first = int(held[0])
            row = int(writers[int(flats[i][first]) - 1])
            found.append(Found(i, len(held), first, row))
    return found
