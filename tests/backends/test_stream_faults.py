"""Injected faults: mutants of correct streams, judged by an independent oracle.

The lowered streams of the examples are mutated the ways DMA programs go
wrong: a wait dropped, two semaphores swapped, a wait shrunk, two in-flight
DMAs made to overlap, a window shifted out of bounds. An oracle written
independently of the interpreter (plain sets of byte addresses, the rule
of docs/protocol.md followed literally; a computation reads its operands
and writes its destination at once, as the padding of a cut block does) decides what each
mutant is. The interpreter must
report every mutant that breaks the protocol, with the same kind of error,
and no mutant that is still correct; a mutant it accepts must give the same
outputs in every completion mode.
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from conftest import EXAMPLES
from copyir.backends.interpreter import MODES, fill_inputs

import copyir
from copyir.dtypes import BY_NAME, DTYPES
from copyir.errors import CopyIRError
from copyir.stream import COMPUTE, OPAQUE, SPACES, START, WAIT, Stream

EXAMPLE_NAMES = [
    "manual",
    "double_buffer",
    "roundtrip",
    "accumulate",
    "scalars",
    "element_squeezed",
    "windows",
]

# -- the oracle -------------------------------------------------------------------


def byte_addresses(entry, end: str) -> np.ndarray:
    """Every byte a DMA end touches, as sorted unique global addresses."""
    rank = int(entry["rank"])
    item = DTYPES[entry["dtype"]].itemsize
    offsets = np.zeros(1, dtype=np.int64)
    for n, s in zip(entry["shape"][:rank], entry[f"{end}_strides"][:rank], strict=True):
        offsets = (offsets[:, None] + np.arange(int(n)) * int(s) * item).reshape(-1)
    address = int(entry[f"{end}_address"])
    found = np.sort((address + offsets[:, None] + np.arange(item)).reshape(-1))
    return found[np.concatenate([[True], found[1:] != found[:-1]])]


def end_problem(stream: Stream, entry, end: str):
    """What is wrong with one DMA end by itself, or its (space, bytes)."""
    space = SPACES[entry[f"{end}_space"]]
    addresses = byte_addresses(entry, end)
    inside = [
        b
        for b in stream.buffers
        if b.space == space
        and b.address <= addresses[0]
        and addresses[-1] < b.address + b.nbytes
    ]
    if not inside:
        return "out of bounds"
    buffer = inside[0]
    if (
        BY_NAME[buffer.dtype].name != DTYPES[entry["dtype"]].name
        or (int(entry[f"{end}_address"]) - buffer.address)
        % DTYPES[entry["dtype"]].itemsize
    ):
        return "mismatched buffer"
    item = BY_NAME[buffer.dtype].itemsize
    elements = (addresses[::item] - buffer.address) // item
    count = int(np.prod(entry["shape"][: int(entry["rank"])]))
    index = np.array(np.unravel_index(elements, buffer.shape)).reshape(
        len(buffer.shape), -1
    )
    box = np.prod(index.max(axis=1) - index.min(axis=1) + 1) if index.size else 1
    if len(elements) != count or box != count:
        return "not a box"  # elements repeat, or do not fill their bounding box
    return space, addresses


def oracle(stream: Stream, provided: set[str]) -> str | None:
    """The first problem of a stream by the rules of docs/protocol.md, or None.

    A stream is checked before it runs: first every DMA end by itself, in
    instruction order (inside a buffer, of its dtype, a box of it), then
    the protocol, instruction by instruction, on plain sets of bytes.
    """
    for a in stream.buffers:
        for b in stream.buffers:
            if (
                a is not b
                and a.space == b.space
                and a.address <= b.address < a.address + a.nbytes
            ):
                return "overlapping buffers"
    ends_of = {}
    for row, entry in enumerate(stream.instructions):
        if entry["op"] == WAIT:
            continue
        if entry["op"] == COMPUTE:  # its operands' boxes, then its destination
            ends = [
                end_problem(stream, operand_entry(entry, operand), "src")
                for operand in stream.computes[int(entry["compute"]) - 1].operands
            ]
            ends.append(end_problem(stream, entry, "dst"))
        elif entry["op"] == OPAQUE:  # one box, read or written
            ends = [end_problem(stream, entry, "dst")]
        else:
            ends = [end_problem(stream, entry, end) for end in ("src", "dst")]
        for problem in ends:
            if isinstance(problem, str):
                return problem
        ends_of[row] = ends
    spaces = {}
    for b in stream.buffers:
        spaces.setdefault(b.space, []).append(b)
    written = {
        space: np.zeros(max(b.address + b.nbytes for b in bs), bool)
        for space, bs in spaces.items()
    }
    for b in stream.buffers:
        if b.param and b.name in provided:
            written[b.space][b.address : b.address + b.nbytes] = True
    started = [0] * stream.semaphores
    consumed = [0] * stream.semaphores
    in_flight = []  # (sem, src space, src bytes, dst space, dst bytes)
    for row, entry in enumerate(stream.instructions):
        if entry["op"] == WAIT:
            sem, need = int(entry["sem"]), int(entry["bytes"])
            if need > started[sem] - consumed[sem]:
                return "unsatisfiable"
            consumed[sem] += need
            if consumed[sem] >= started[sem]:
                for dma in [d for d in in_flight if d[0] == sem]:
                    in_flight.remove(dma)
                    written[dma[3]][dma[4]] = True
            continue
        if entry["op"] in (COMPUTE, OPAQUE):  # at once: reads operands, writes
            *operands, (dst_space, dst) = ends_of[row]
            if entry["op"] == OPAQUE and not entry["writes"]:  # its box is read
                operands, (dst_space, dst) = [(dst_space, dst)], (dst_space, dst[:0])
            for space, addresses in [*operands, (dst_space, dst)]:
                for dma in in_flight:  # nothing in flight may touch them
                    if (dma[3] == space and np.intersect1d(dma[4], addresses).size) or (
                        (space, addresses) == (dst_space, dst)
                        and dma[1] == space
                        and np.intersect1d(dma[2], addresses).size
                    ):
                        return "race"
            for space, addresses in operands:
                if not written[space][addresses].all():
                    return "uninitialized"
            written[dst_space][dst] = True
            continue
        (src_space, src), (dst_space, dst) = ends_of[row]
        if src_space == dst_space and np.intersect1d(src, dst).size:
            return "self overlap"
        for _, other_src_space, other_src, other_dst_space, other_dst in in_flight:
            for space_a, a, space_b, b in (
                (dst_space, dst, other_dst_space, other_dst),
                (dst_space, dst, other_src_space, other_src),
                (src_space, src, other_dst_space, other_dst),
            ):
                if space_a == space_b and np.intersect1d(a, b).size:
                    return "race"
        reads = [(src_space, src)] + ([(dst_space, dst)] if entry["add"] else [])
        for space, addresses in reads:
            if not written[space][addresses].all():
                return "uninitialized"
        sem = int(entry["sem"])
        started[sem] += int(entry["bytes"])
        in_flight.append((sem, src_space, src, dst_space, dst))
    return "leftovers" if in_flight else None


def operand_entry(entry, operand) -> np.ndarray:
    """A computation's operand as an instruction's source end."""
    fake = entry.copy()
    fake["src_space"] = SPACES.index(operand.space)
    fake["src_address"] = operand.address
    fake["src_strides"][: len(operand.strides)] = operand.strides
    return fake


def category(err: CopyIRError) -> str:
    text = str(err)
    for prefix, name in (
        ("Race", "race"),
        ("Wait on semaphore", "unsatisfiable"),
        ("The program ends", "leftovers"),
        ("DMA reads", "uninitialized"),
        ("Computation reads", "uninitialized"),
    ):
        if text.startswith(prefix):
            return name
    if "elements, but buffer" in text:
        return "mismatched buffer"
    if "is not a box of buffer" in text:
        return "not a box"
    if text.startswith("Malformed DMA stream: buffers "):
        return "overlapping buffers"
    if "out of bounds" in text:
        return "out of bounds"
    if "overlap" in text:
        return "self overlap"
    return f"unexpected: {text}"


# -- mutations ---------------------------------------------------------------------


def with_table(stream: Stream, table: np.ndarray) -> Stream:
    return replace(stream, instructions=table)


def drop_wait(stream, rng):
    waits = np.flatnonzero(stream.instructions["op"] == WAIT)
    i = rng.choice(waits)
    return with_table(stream, np.delete(stream.instructions, i)), f"drop wait {i}"


def swap_semaphores(stream, rng):
    table = stream.instructions.copy()
    i, j = rng.sample(range(len(table)), 2)
    table["sem"][i], table["sem"][j] = table["sem"][j], table["sem"][i]
    return with_table(stream, table), f"swap semaphores of {i} and {j}"


def shrink_wait(stream, rng):
    table = stream.instructions.copy()
    i = rng.choice(np.flatnonzero(table["op"] == WAIT))
    table["bytes"][i] -= rng.choice([4, table["bytes"][i] // 2])
    return with_table(stream, table), f"shrink wait {i}"


def grow_wait(stream, rng):
    table = stream.instructions.copy()
    i = rng.choice(np.flatnonzero(table["op"] == WAIT))
    table["bytes"][i] += rng.choice([4, 4096])
    return with_table(stream, table), f"grow wait {i}"


def overlap_in_flight(stream, rng):
    """Point a start's destination at another start's destination or source."""
    table = stream.instructions.copy()
    starts = list(np.flatnonzero(table["op"] == START))
    i, j = rng.sample(starts, 2)
    end = rng.choice(["dst", "src"])
    table["dst_space"][i] = table[f"{end}_space"][j]
    table["dst_address"][i] = table[f"{end}_address"][j]
    table["dst_strides"][i] = table[f"{end}_strides"][j]
    return with_table(stream, table), f"start {i} writes the {end} of {j}"


def shift_out_of_bounds(stream, rng):
    table = stream.instructions.copy()
    i = rng.choice(np.flatnonzero(table["op"] == START))
    end = rng.choice(["src", "dst"])
    space = SPACES[table[f"{end}_space"][i]]
    top = max(b.address + b.nbytes for b in stream.buffers if b.space == space)
    table[f"{end}_address"][i] += rng.choice([top, int(table["bytes"][i]) // 2 + 4])
    return with_table(stream, table), f"shift the {end} of start {i}"


def reorder(stream, rng):
    """Move a wait earlier: sometimes harmless, sometimes not."""
    table = stream.instructions
    i = rng.choice(np.flatnonzero(table["op"] == WAIT))
    j = rng.randrange(0, i + 1)
    order = list(range(len(table)))
    order.insert(j, order.pop(i))
    return with_table(stream, table[order]), f"move wait {i} to {j}"


def same_buffer(stream, rng):
    """Make one start copy within its source's buffer, and point a later
    start's destination at that start's source: the race of a source that
    is written while its same-buffer DMA is in flight."""
    table = stream.instructions.copy()
    starts = list(np.flatnonzero(table["op"] == START))
    i = rng.choice(starts)
    space = SPACES[table["src_space"][i]]
    buffer = rng.choice([b for b in stream.buffers if b.space == space])
    item = BY_NAME[buffer.dtype].itemsize
    table["dst_space"][i] = table["src_space"][i]
    table["dst_strides"][i] = table["src_strides"][i]
    rows = max(1, buffer.shape[0]) if buffer.shape else 1
    step = buffer.nbytes // rows
    table["dst_address"][i] = buffer.address + step * rng.randrange(rows)
    later = [j for j in starts if j > i]
    how = f"start {i} copies within {buffer.name}"
    if later and rng.random() < 0.7:
        j = rng.choice(later)
        table["dst_space"][j] = table["src_space"][i]
        table["dst_address"][j] = table["src_address"][i]
        table["dst_strides"][j] = table["src_strides"][i]
        how += f", and start {j} writes its source"
    del item
    return with_table(stream, table), how


def overlap_buffers(stream, rng):
    """Move a buffer so that it shares bytes with another of its space."""
    pairs = [
        (a, b)
        for a in stream.buffers
        for b in stream.buffers
        if a is not b and a.space == b.space
    ]
    if not pairs:
        return stream, "no two buffers share a space"
    a, b = rng.choice(pairs)
    moved = replace(a, address=b.address + rng.randrange(0, b.nbytes, 4))
    buffers = [moved if x is a else x for x in stream.buffers]
    return replace(stream, buffers=buffers), f"move {a.name} into {b.name}"


MUTATIONS = [
    same_buffer,
    overlap_buffers,
    drop_wait,
    swap_semaphores,
    shrink_wait,
    grow_wait,
    overlap_in_flight,
    shift_out_of_bounds,
    reorder,
]


def lowered(name: str) -> tuple[Stream, dict]:
    path = EXAMPLES / f"{name}.cpy"
    stream = copyir.to_stream(copyir.lower(copyir.parse(path.read_text(), str(path))))
    return stream, fill_inputs(stream, {}, "random", seed=1)


def outputs_agree(stream: Stream, inputs: dict) -> bool:
    runs = [
        copyir.run(stream, inputs, mode=m, seed=s) for m in MODES for s in (0, 1, 2)
    ]
    return all(
        np.ascontiguousarray(run[k]).tobytes()
        == np.ascontiguousarray(runs[0][k]).tobytes()
        for run in runs
        for k in run
    )


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_correct_examples_are_not_reported(name):
    stream, inputs = lowered(name)
    assert oracle(stream, set(inputs)) is None
    assert outputs_agree(stream, inputs)


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_injected_faults_are_caught(name):
    stream, inputs = lowered(name)
    rng = random.Random(name)
    verdicts = {"reported": 0, "correct": 0}
    count = 15 if name == "windows" else 60  # the oracle is slow on big DMAs
    for _ in range(count):
        mutate = rng.choice(MUTATIONS)
        mutant, how = mutate(stream, rng)
        expected = oracle(mutant, set(inputs))
        try:
            copyir.run(mutant, inputs, mode=rng.choice(MODES), seed=rng.randrange(99))
        except CopyIRError as err:
            assert category(err) == expected, (how, str(err))
            assert err.loc is not None and err.loc.file.endswith(f"{name}.cpy"), how
            verdicts["reported"] += 1
            continue
        assert expected is None, (how, expected)
        assert outputs_agree(mutant, inputs), how
        verdicts["correct"] += 1
    assert verdicts["reported"] >= count // 3  # the mutations do break programs


def test_oracle_sees_each_kind_of_fault():
    stream, inputs = lowered("manual")
    kinds = set()
    rng = random.Random(0)
    for _ in range(300):
        mutant, _ = rng.choice(MUTATIONS)(stream, rng)
        kinds.add(oracle(mutant, set(inputs)))
    assert {
        "race",
        "unsatisfiable",
        "leftovers",
        "out of bounds",
        "overlapping buffers",
        "not a box",
        "self overlap",
        None,
    } <= kinds


def test_same_buffer_mutants_reach_the_missed_race():
    """A class once missed: a DMA within one buffer whose source
    a later DMA writes while it is in flight. The mutation makes it, the
    oracle calls it a race, and so does the interpreter."""
    stream, inputs = lowered("manual")
    rng = random.Random(3)
    raced = 0
    for _ in range(200):
        mutant, how = same_buffer(stream, rng)
        if "writes its source" not in how or oracle(mutant, set(inputs)) != "race":
            continue
        with pytest.raises(CopyIRError) as caught:
            copyir.run(mutant, inputs)
        assert category(caught.value) == "race", how
        raced += 1
    assert raced >= 5


def test_dtype_codes_cover_every_dtype():
    assert {d.name for d in DTYPES} == {d.name for d in BY_NAME.values()}
