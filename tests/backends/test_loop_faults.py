"""Injected faults in the loop examples, each reported at its iteration.

The stream mutants of test_stream_faults.py change one instruction of an
unrolled stream; in a loop one instruction is every iteration, so here
the faults are made where a user makes them, in the source, and each
mutant carries what it must be reported as, known by construction:

- a wait dropped in one iteration k (the wait wrapped in `when` the
  iteration is not k): the block's next reader, in iteration k, reads it
  while its DMA is in flight, a race at k;
- a slot shifted by one (the prefetch into the current slot instead of the
  next): the prefetch writes the slot the current block is still arriving
  in, a race at the first iteration;
- a prefetch widened by one iteration (`<` made `<=`): the last iteration
  fetches past the array's end, a bounds error at the last iteration,
  found statically;
- the prefetch moved after the wait: still correct, so it must run with no
  report and give the reference path's values in every mode.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass

import numpy as np
import pytest
from conftest import EXAMPLES
from copyir.backends.interpreter import MODES, fill_inputs
from copyir.backends.reference import run_reference

import copyir
from copyir.errors import CopyIRError


@dataclass(frozen=True)
class LoopExample:
    name: str
    indices: tuple[str, ...]
    grid: tuple[int, ...]
    waits: tuple[str, ...]
    """Waits whose loss makes the next reader race in the same iteration."""
    prefetch_slot: tuple[str, str] | None
    """The prefetch's destination, and the same in the current slot."""
    prefetch_bound: tuple[str, str] | None
    """The prefetch's condition, and the same one iteration wider."""
    prefetch_block: str | None
    """The prefetch's whole `when` statement, to move after the wait."""


LOOP_EXAMPLES = [
    LoopExample(
        "loop_compute",
        ("i",),
        (8,),
        ("copy_wait x[ds(16 * i, 16)] -> xw[slot], sin[slot]",),
        ("-> xw[(i + 1) % 2]", "-> xw[slot]"),
        ("when i + 1 < 8 {", "when i + 1 <= 8 {"),
        "when i + 1 < 8 {",
    ),
    LoopExample(
        "loop_double_buffer",
        ("i",),
        (16,),
        ("c.wait()",),
        ("-> buf[(i + 1) % 2]", "-> buf[slot]"),
        ("when i + 1 < 16 {", "when i + 1 <= 16 {"),
        "when i + 1 < 16 {",
    ),
    LoopExample(
        "loop_prologue_epilogue",
        ("i",),
        (8,),
        ("copy_wait x[ds(8 * i, 8)] -> buf[slot], sin[slot]",),
        ("-> buf[other], sin", "-> buf[slot], sin"),
        ("when i < 7 {", "when i <= 7 {"),
        None,
    ),
    LoopExample(
        "loop_sum",
        ("i", "j"),
        (2, 4),
        ("copy_wait x[ds(128 * i, 128), ds(128 * j, 128)] -> xw, s",),
        None,
        None,
        None,
    ),
    LoopExample(
        "loop_windows",
        ("i", "j"),
        (8, 3),
        ("buffered_copy wait x -> bx[i, j], sems[slot], slot=slot",),
        ("slot=(step + 1) % 2", "slot=slot"),
        ("when step + 1 < 24 {", "when step + 1 <= 24 {"),
        "when step + 1 < 24 {",
    ),
]


def source(example: LoopExample) -> str:
    return (EXAMPLES / f"{example.name}.cpy").read_text()


def where(example: LoopExample, point: tuple[int, ...]) -> str:
    return ", ".join(f"{n} = {v}" for n, v in zip(example.indices, point, strict=True))


def last(example: LoopExample) -> tuple[int, ...]:
    return tuple(n - 1 for n in example.grid)


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def without_wait_at(text: str, wait: str, example: LoopExample, point) -> str:
    """The wait's line under `when` the iteration is not `point`."""
    (line,) = [line for line in text.splitlines() if line.strip().startswith(wait)]
    indent = line[: len(line) - len(line.lstrip())]
    equal = " and ".join(
        f"{n} == {v}" for n, v in zip(example.indices, point, strict=True)
    )
    guarded = f"{indent}when not ({equal}) {{\n{indent}  {line.strip()}\n{indent}}}"
    return replace_once(text, line, guarded)


def with_prefetch_after_wait(text: str, example: LoopExample) -> str:
    """The prefetch's `when` statement moved to just after the first wait."""
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if example.prefetch_block in line)
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next(
        k
        for k in range(start + 1, len(lines))
        if lines[k].strip() == "}" and len(lines[k]) - 1 == indent
    )
    block = lines[start : end + 1]
    rest = lines[:start] + lines[end + 1 :]
    wait = next(k for k, line in enumerate(rest) if example.waits[0] in line)
    return "\n".join(rest[: wait + 1] + block + rest[wait + 1 :]) + "\n"


def run_error(text: str, name: str) -> CopyIRError:
    stream = copyir.to_stream(copyir.lower(copyir.parse(text, f"{name}.cpy")))
    rng = random.Random(name)
    with pytest.raises(CopyIRError) as caught:
        copyir.run(
            stream, fill_inputs(stream, {}, "random"), mode=rng.choice(MODES), seed=1
        )
    return caught.value


def points(example: LoopExample) -> list[tuple[int, ...]]:
    """The first, the last and two drawn iterations."""
    every = list(itertools.product(*map(range, example.grid)))
    rng = random.Random(example.name)
    return sorted({every[0], every[-1], *rng.sample(every, 2)})


@pytest.mark.parametrize("example", LOOP_EXAMPLES, ids=lambda e: e.name)
def test_a_wait_dropped_in_one_iteration_is_a_race_at_that_iteration(example):
    text = source(example)
    for wait in example.waits:
        for point in points(example):
            err = run_error(without_wait_at(text, wait, example, point), example.name)
            message = str(err)
            assert message.startswith("Race: "), (point, message)
            assert " is in flight and writes it" in message, message
            assert message.endswith(f", at {where(example, point)}"), message


@pytest.mark.parametrize(
    "example", [e for e in LOOP_EXAMPLES if e.prefetch_slot], ids=lambda e: e.name
)
def test_a_slot_shifted_by_one_is_a_race_at_the_first_iteration(example):
    mutant = replace_once(source(example), *example.prefetch_slot)
    message = str(run_error(mutant, example.name))
    first = where(example, (0,) * len(example.grid))
    assert message.startswith("Race: this DMA writes "), message
    assert " is in flight and writes it" in message, message
    assert message.endswith(f", at {first}"), message


@pytest.mark.parametrize(
    "example", [e for e in LOOP_EXAMPLES if e.prefetch_bound], ids=lambda e: e.name
)
def test_a_prefetch_widened_by_one_fails_verification_at_the_last_iteration(example):
    mutant = replace_once(source(example), *example.prefetch_bound)
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(mutant, f"{example.name}.cpy"))
    message = str(caught.value)
    assert re.search(r"out of bounds", message), message
    assert message.endswith(f", at {where(example, last(example))}")


@pytest.mark.parametrize(
    "example", [e for e in LOOP_EXAMPLES if e.prefetch_block], ids=lambda e: e.name
)
def test_a_prefetch_moved_after_the_wait_is_still_correct(example):
    mutant = with_prefetch_after_wait(source(example), example)
    assert mutant != source(example)
    module = copyir.parse(mutant, f"{example.name}.cpy")
    copyir.verify(module)
    stream = copyir.to_stream(copyir.lower(module))
    inputs = fill_inputs(stream, {}, "random")
    want = run_reference(module.ops.first, inputs)
    for mode in MODES:
        got = copyir.run(stream, inputs, mode=mode, seed=2)
        for name, value in want.items():
            np.testing.assert_array_equal(got[name], value, err_msg=f"{name} {mode}")
