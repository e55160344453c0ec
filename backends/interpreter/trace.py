"""A stream's events as a user reads a schedule (`copyir run --trace`),
and its DMA starts and waits as data (`copyir check --compare`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np
from xdsl.dialects.builtin import StringAttr

from copyir.stream import (
    COMPUTE,
    INVALIDATE,
    OPAQUE,
    RELEASE,
    RELEASE_SEM,
    START,
    WAIT,
    Stream,
)
from copyir.validate import ResolvedEnds, validate_stream

from .naming import Namer


def trace_lines(stream: Stream) -> list[str]:
    """Every event of a stream in program order, one line each, as a user
    reads a schedule: `i = 1: start x[8:16, 0:128] -> buf[0:1, 0:8, 0:128]
    on sems[0]`, `wait sems[1] 4096`, `compute ...`, `invalidate ...`,
    `opaque "exp" reads ...`,
    `release buf[0:8, 0:128]`, `release sem` (a scope's end)."""
    validated = validate_stream(stream)
    trace = validated.trace
    namer = Namer(stream, trace)
    table = stream.instructions
    src, dst = validated.src, validated.dst
    src_at = dict(zip(src.events.tolist(), range(len(src.events)), strict=True))
    dst_at = dict(zip(dst.events.tolist(), range(len(dst.events)), strict=True))

    def box(access: ResolvedEnds, k: int) -> str:
        return namer.region(int(access.buffer[k]), access.lo[k], access.hi[k])

    lines = []
    for event, row in enumerate(trace.row.tolist()):
        op = int(table["op"][row])
        sem = stream.sem_name(int(trace.sem[event]))
        if op == START:
            text = (
                f"start {box(src, src_at[event])} -> {box(dst, dst_at[event])} on {sem}"
            )
        elif op == WAIT:
            text = f"wait {sem} {int(table['bytes'][row])}"
        elif op == COMPUTE:
            text = f"compute {box(dst, dst_at[event])}"
        elif op == OPAQUE:
            what = stream.labels[int(table["label"][row]) - 1]
            access = "writes" if table["writes"][row] else "reads"
            text = f"opaque {StringAttr(what)} {access} {box(dst, dst_at[event])}"
        elif op == INVALIDATE:
            stale = " stale" if table["stale"][row] else ""
            text = f"invalidate {box(dst, dst_at[event])}{stale}"
        elif op == RELEASE:
            text = f"release {box(dst, dst_at[event])}"
        else:
            text = f"release {sem}"
        iteration = trace.iteration(stream, event)
        lines.append(f"{iteration}: {text}" if iteration else text)
    return lines


def dma_events(
    stream: Stream, order: Mapping[int, np.ndarray] | None = None
) -> list[tuple]:
    """The DMA starts and waits of a stream in program order, as the
    differential harness compares them with Pallas' interpret mode:
    `("start", ((space, buffer), region), ((space, buffer), region), sem)`
    and `("wait", sem, bytes)`, a region being (start, stop) per dimension
    of the buffer, a semaphore its index. A scope's buffers and semaphores
    are new ones at each entry, as Pallas allocates them afresh: a buffer
    or semaphore released is `(name, n)` after its n-th release. The order
    does not depend on the completion mode: DMAs start and are waited in
    program order, parallel loops' iterations in `order` where given (as
    `validate_stream` takes it)."""
    validated = validate_stream(stream, order)
    trace = validated.trace
    table = stream.instructions
    src, dst = validated.src, validated.dst
    src_at = dict(zip(src.events.tolist(), range(len(src.events)), strict=True))
    dst_at = dict(zip(dst.events.tolist(), range(len(dst.events)), strict=True))

    released = Counter()

    def end(access: ResolvedEnds, k: int) -> tuple:
        index = int(access.buffer[k])
        buffer = stream.buffers[index]
        space = str(getattr(buffer.space, "value", buffer.space))
        rank = len(buffer.shape)
        lo, hi = access.lo[k][:rank].tolist(), access.hi[k][:rank].tolist()
        named = (space, _renewed(buffer.name, released[("buffer", index)]))
        return named, tuple(zip(lo, hi, strict=True))

    events: list[tuple] = []
    for event, row in enumerate(trace.row.tolist()):
        op = int(table["op"][row])
        sem = int(trace.sem[event])
        named_sem = _renewed(sem, released[("sem", sem)])
        if op == START:
            start = end(src, src_at[event]), end(dst, dst_at[event])
            events.append(("start", *start, named_sem))
        elif op == WAIT:
            events.append(("wait", named_sem, int(table["bytes"][row])))
        elif op == RELEASE:
            released[("buffer", int(dst.buffer[dst_at[event]]))] += 1
        elif op == RELEASE_SEM:
            released[("sem", sem)] += 1
    return events


def _renewed(name: str | int, releases: int) -> str | int | tuple:
    return (name, releases) if releases else name
