"""The claim of a parallel loop, checked.

`parallel=` says the iterations of a dimension are independent; the check
(`copyir.backends.parallel`) holds programs to it in every mode and in the
data-free check, deterministically, naming both iterations and both sites.
Rules tried here, each with a program that breaks it and one that keeps
it (and, at the end, an oracle over random bodies: one verdict in every
order): reads only of the iteration's own writes or of what was there before
the loop (carried VMEM state, a DMA that adds into VMEM, HBM written by
one iteration and read by another); no HBM element written by two
iterations; a DMA started and finished in one iteration (waited in
another iteration, started before the loop, waited after it). Scratch
that each iteration writes before it reads is reused freely, written whole
at once or in parts; a sequential dimension inside or outside a parallel
one carries state legally; sibling loops may share buffers.
"""

from __future__ import annotations

import numpy as np
import pytest
from copyir.backends.interpreter import MODES, fill_inputs
from hypothesis import given, settings
from hypothesis import strategies as st
from loop_programs import parallel_faults

import copyir
from copyir.errors import CopyIRError

RUNS = [("eager", 0), ("on_wait", 0)] + [("random", s) for s in range(5)]


def kernel(body: str, x=(4, 8), y=(4, 8), scratch="buf = alloc i32[8] @vmem") -> str:
    shape = lambda s: ", ".join(map(str, s))  # noqa: E731
    return (
        f"kernel k(x: i32[{shape(x)}] @hbm, y: i32[{shape(y)}] @hbm) {{\n"
        f"  {scratch}\n  s = semaphore\n{body}}}\n"
    )


def inputs(program: str) -> dict[str, np.ndarray]:
    """Every parameter bound to 0, 1, 2, ..."""
    return fill_inputs(copyir.to_stream(copyir.lower(program)), {}, "iota")


def errors_everywhere(program: str) -> str:
    """The one error every mode, seed and the data-free check report."""
    seen = set()
    for mode, seed in RUNS:
        with pytest.raises(CopyIRError) as err:
            copyir.run(program, inputs(program), mode=mode, seed=seed)
        seen.add(str(err.value))
    with pytest.raises(CopyIRError) as err:
        copyir.check_protocol(program)
    seen.add(str(err.value))
    assert len(seen) == 1, seen
    return seen.pop()


def runs_everywhere(program: str) -> None:
    copyir.check_protocol(program)
    first = None
    for mode, seed in RUNS:
        got = copyir.run(program, inputs(program), mode=mode, seed=seed)
        if first is None:
            first = got
        for name in got:
            assert np.array_equal(got[name], first[name]), (mode, seed)


def test_a_grid_whose_every_parallel_iteration_writes_all_of_y():
    program = kernel(
        "  for i, j in grid(4, 2), parallel=(0,) {\n    sync_copy x[i] -> y[0]\n  }\n"
    )
    assert errors_everywhere(program) == (
        "Parallel loop i: this DMA writes y[0:1, 0:8], which iteration i = 0, "
        "j = 0 writes too; two iterations of a parallel loop never write the same "
        "HBM element, at i = 1, j = 0"
    )


def test_a_dma_started_in_one_parallel_iteration_and_waited_in_another():
    program = kernel(
        "  for i in range(4), parallel=(0,) {\n"
        "    when i == 0 {\n      copy_start x[0] -> y[0], s\n    }\n"
        "    when i == 3 {\n      copy_wait x[0] -> y[0], s\n    }\n  }\n"
    )
    assert errors_everywhere(program) == (
        "Parallel loop i: this wait finishes the DMA started in iteration i = 0; "
        "a DMA is started and finished within one iteration of a parallel loop, "
        "at i = 3"
    )


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (
            "  copy_start x[0] -> y[0], s\n"
            "  for i in range(4), parallel=(0,) {\n"
            "    when i == 2 {\n      copy_wait x[0] -> y[0], s\n    }\n  }\n",
            "outside the loop",
        ),
        (
            "  for i in range(4), parallel=(0,) {\n"
            "    when i == 1 {\n      copy_start x[0] -> y[0], s\n    }\n  }\n"
            "  copy_wait x[0] -> y[0], s\n",
            "in iteration i = 1",
        ),
    ],
)
def test_a_dma_that_crosses_the_edge_of_a_parallel_loop(body, where):
    message = errors_everywhere(kernel(body))
    assert message.startswith(
        f"Parallel loop i: this wait finishes the DMA started {where}; "
    )


def test_state_carried_in_vmem_across_a_parallel_dimension():
    program = kernel(
        "  sync_copy x[0] -> buf\n"
        "  for i in range(4), parallel=(0,) {\n"
        "    sync_copy buf -> y[i]\n    sync_copy x[i] -> buf\n  }\n"
    )
    assert errors_everywhere(program) == (
        "Parallel loop i: this DMA reads buf[0:8], which iteration i = 0 writes; "
        "an iteration of a parallel loop reads only what it wrote itself or what "
        "was there before the loop, at i = 1"
    )


def test_a_dma_that_adds_into_vmem_across_a_parallel_dimension():
    program = kernel(
        "  sync_copy x[0] -> buf\n"
        "  for i in range(4), parallel=(0,) {\n"
        "    copy_start x[i] -> buf, s, add\n    copy_wait x[i] -> buf, s\n"
        "    sync_copy buf -> y[i]\n  }\n"
    )
    assert errors_everywhere(program).startswith(
        "Parallel loop i: this DMA reads buf[0:8], which iteration i = 0 writes;"
    )


def test_hbm_written_by_one_iteration_and_read_by_another():
    program = kernel(
        "  for i in range(3), parallel=(0,) {\n"
        "    sync_copy x[i] -> y[i]\n"
        "    when i >= 1 {\n      sync_copy y[i - 1] -> buf\n      sync_copy buf -> y[3]\n    }\n"
        "  }\n"
    )
    message = errors_everywhere(program)
    assert message.startswith(
        "Parallel loop i: this DMA reads y[0:1, 0:8], which iteration i = 0 writes;"
    )


def test_a_read_of_what_a_later_iteration_writes():
    """In program order iteration 0 reads y[1] before iteration 1 writes it;
    in another order it would not: a broken claim at the write."""
    program = kernel(
        "  for i in range(2), parallel=(0,) {\n"
        "    when i == 0 {\n      sync_copy y[1] -> buf\n    }\n"
        "    sync_copy x[i] -> y[i]\n  }\n"
    )
    assert errors_everywhere(program).startswith(
        "Parallel loop i: this DMA writes y[1:2, 0:8], which iteration i = 0 reads;"
    )


@pytest.mark.parametrize(
    "body",
    [
        # Scratch written whole before it is read, in every iteration.
        "  for i in range(4), parallel=(0,) {\n"
        "    sync_copy x[i] -> buf\n    sync_copy buf -> y[i]\n  }\n",
        # ... written in two halves, then read whole.
        "  for i in range(4), parallel=(0,) {\n"
        "    sync_copy x[i, 0:4] -> buf[0:4]\n    sync_copy x[i, 4:8] -> buf[4:8]\n"
        "    sync_copy buf -> y[i]\n  }\n",
        # Read-only data from before the loop, in VMEM and in HBM.
        "  sync_copy x[0] -> buf\n"
        "  for i in range(4), parallel=(0,) {\n    sync_copy buf -> y[i]\n  }\n",
        # A sequential dimension inside a parallel one carries state.
        "  for i, j in grid(4, 3), parallel=(0,) {\n"
        "    when j == 0 {\n      sync_copy x[i] -> buf\n    }\n"
        "    when j == 2 {\n      sync_copy buf -> y[i]\n    }\n  }\n",
        # A parallel dimension inside a sequential one: state across i.
        "  for i, j in grid(4, 2), parallel=(1,) {\n"
        "    sync_copy x[i, 4 * j:4 * j + 4] -> y[i, 4 * j:4 * j + 4]\n  }\n",
        # Sibling loops share y: one writes, the next reads.
        "  for i in range(4), parallel=(0,) {\n    sync_copy x[i] -> y[i]\n  }\n"
        "  for i in range(4), parallel=(0,) {\n"
        "    sync_copy y[(i + 1) % 4] -> buf\n    sync_copy buf -> x[i]\n  }\n",
    ],
)
def test_programs_that_keep_the_claim_run_alike_in_every_order(body):
    runs_everywhere(kernel(body))


@pytest.mark.parametrize(
    ("body", "ending"),
    [
        # Scratch every iteration writes, read after the loop.
        (
            "  for i in range(4), parallel=(0,) {\n    sync_copy x[i] -> buf\n  }\n"
            "  sync_copy buf -> y[0]\n",
            "",
        ),
        # ... also when one iteration invalidates it.
        (
            "  for i in range(4), parallel=(0,) {\n    sync_copy x[i] -> buf\n"
            "    sync_copy buf -> y[i]\n"
            "    when i == 0 {\n      invalidate buf\n    }\n  }\n"
            "  sync_copy buf -> x[0]\n",
            "",
        ),
        # ... and by the next execution of an inner parallel loop.
        (
            "  for i, j in grid(2, 2), parallel=(1,) {\n"
            "    when i == 0 {\n      sync_copy x[j] -> buf\n    }\n"
            "    when i == 1 and j == 0 {\n      sync_copy buf -> y[0]\n    }\n  }\n",
            ", at i = 1, j = 0",
        ),
    ],
)
def test_scratch_two_iterations_write_is_order_dependent_after_the_loop(body, ending):
    """Found by review: what such scratch holds after the loop is whichever
    iteration ran last; random mode gave other results with exit 0."""
    message = errors_everywhere(kernel(body))
    assert message.startswith("Parallel loop ")
    assert "reads buf[0:8], whose element buf[0] iterations " in message
    assert message.endswith(
        "both write; after the loop it holds what the one that ran last wrote" + ending
    )


def test_a_leftover_in_scratch_next_to_other_scratch_is_found():
    """Found by the order oracle below: every iteration writes all of buf and
    the half of b2 that lies next to it, so their runs touch in memory; b2's
    leftover was looked for only in buf, and random mode gave other results
    with exit 0."""
    body = (
        "  b2 = alloc i32[8] @vmem\n"
        "  sync_copy x[1] -> b2\n"
        "  for i in range(4), parallel=(0,) {\n"
        "    sync_copy x[i, 0:4] -> b2[0:4]\n    sync_copy x[i] -> buf\n  }\n"
        "  sync_copy b2 -> y[3]\n"
    )
    message = errors_everywhere(kernel(body))
    assert message == (
        "Parallel loop i: this DMA reads b2[0:8], whose element b2[0] iterations "
        "i = 0 and i = 1 both write; after the loop it holds what the one that "
        "ran last wrote"
    )


@pytest.mark.parametrize(
    "body",
    [
        # Each iteration writes its own row of VMEM; the rows are read after.
        "  rows = alloc i32[4, 8] @vmem\n"
        "  for i in range(4), parallel=(0,) {\n    sync_copy x[i] -> rows[i]\n  }\n"
        "  sync_copy rows -> y\n",
        # Scratch written by every iteration, written again before it is read.
        "  for i in range(4), parallel=(0,) {\n    sync_copy x[i] -> buf\n  }\n"
        "  sync_copy x[2] -> buf\n  sync_copy buf -> y[0]\n",
        # Two parallel loops reuse one scratch, each writing before reading.
        "  for i in range(4), parallel=(0,) {\n"
        "    sync_copy x[i] -> buf\n    sync_copy buf -> y[i]\n  }\n"
        "  for i in range(4), parallel=(0,) {\n"
        "    sync_copy y[i] -> buf\n    sync_copy buf -> x[i]\n  }\n",
    ],
)
def test_scratch_left_by_one_writer_or_written_again_is_no_leftover(body):
    runs_everywhere(kernel(body))


def test_a_read_partly_covered_by_its_own_iteration_is_checked_by_the_rest():
    """Each iteration writes buf[0:4] and reads buf whole: buf[4:8] is from
    before the loop, so the program keeps its claim, until one iteration
    writes buf[4:8]. In two dimensions, the part left uncovered is bounded
    by a box (rows 2 and 3 here)."""
    body = (
        "  sync_copy x[0] -> buf\n"
        "  for i in range(4), parallel=(0,) {{\n"
        "    sync_copy x[i, 0:4] -> buf[0:4]\n{extra}"
        "    sync_copy buf -> y[i]\n  }}\n"
    )
    runs_everywhere(kernel(body.format(extra="")))
    extra = "    when i == 2 {\n      sync_copy x[i, 4:8] -> buf[4:8]\n    }\n"
    assert errors_everywhere(kernel(body.format(extra=extra))).startswith(
        "Parallel loop i: this DMA writes buf[4:8], which iteration i = 0 reads;"
    )
    rows = (
        "  sync_copy x -> tile\n"
        "  for i in range(4), parallel=(0,) {{\n"
        "    sync_copy x[0:2] -> tile[0:2]\n{extra}"
        "    sync_copy tile -> y[i]\n  }}\n"
    )
    scratch = "tile = alloc i32[4, 8] @vmem"
    runs_everywhere(kernel(rows.format(extra=""), y=(4, 4, 8), scratch=scratch))
    extra = "    when i == 1 {\n      sync_copy x[3] -> tile[3]\n    }\n"
    program = kernel(rows.format(extra=extra), y=(4, 4, 8), scratch=scratch)
    assert errors_everywhere(program).startswith(
        "Parallel loop i: this DMA writes tile[3:4, 0:8], which iteration i = 0 reads;"
    )


def test_nested_parallel_dimensions_are_each_checked():
    """With parallel=(0, 1), iterations (0, 0) and (0, 1) are independent
    too; with parallel=(0,) only, the same program is legal."""
    body = (
        "  for i, j in grid(2, 2), parallel={dims} {{\n"
        "    when j == 0 {{\n      sync_copy x[i] -> buf\n    }}\n"
        "    when j == 1 {{\n      sync_copy buf -> y[i]\n    }}\n  }}\n"
    )
    runs_everywhere(kernel(body.format(dims="(0,)")))
    assert errors_everywhere(kernel(body.format(dims="(0, 1)"))) == (
        "Parallel loop j: this DMA reads buf[0:8], which iteration i = 0, j = 0 "
        "writes; an iteration of a parallel loop reads only what it wrote itself "
        "or what was there before the loop, at i = 0, j = 1"
    )


def test_the_parallel_pipeline_example_keeps_its_claim():
    from conftest import EXAMPLES

    program = (EXAMPLES / "pipeline_parallel.cpy").read_text()
    copyir.check_protocol(program)


@settings(max_examples=40, deadline=None, database=None)
@given(parallel_faults())
def test_every_generated_broken_claim_is_reported_at_its_iteration(case):
    """The fault oracle: each fault is known by construction, and every mode
    and seed report it at its first broken access."""
    text = case.program.text
    module = case.program.parse()
    copyir.verify(module)
    x = case.program.random_inputs(0)
    for mode in MODES:
        with pytest.raises(CopyIRError) as err:
            copyir.run(text, x, mode=mode, seed=3)
        message = str(err.value)
        assert message.startswith(case.message), (case.fault, message)
        assert message.endswith(case.iteration), (case.fault, message)


# -- an oracle: a parallel loop's verdict does not depend on the order ----------

PARTS = ("0:4", "4:8", "0:8", "2:6")


def _size(part: str) -> int:
    start, stop = part.split(":")
    return int(stop) - int(start)


@st.composite
def statements(draw, two: bool) -> str:
    """One statement of a parallel body over x, y (HBM), buf, b2 (VMEM) and
    sm (SMEM): copies in and out, between scratch, adds, computations."""
    part = draw(st.sampled_from(PARTS))
    other = draw(st.sampled_from([p for p in PARTS if _size(p) == _size(part)]))
    row = draw(st.sampled_from(["i", "0", "(i + 1) % 4", "3"]))
    a, b = draw(st.sampled_from(["buf", "b2"])), draw(st.sampled_from(["buf", "b2"]))
    text = draw(
        st.sampled_from(
            [
                f"sync_copy x[{row}, {part}] -> {a}[{other}]",
                f"sync_copy {a}[{part}] -> y[{row}, {other}]",
                f"sync_copy {a}[{part}] -> {b}[{other}]",
                f"{a}[{part}] = {b}[{other}] + 1",
                f"sync_copy x[{row}, {part}] -> {a}[{other}], add",
                f"sync_copy y[{row}, {part}] -> {a}[{other}]",
                f"{a}[{part}] = 7",
                f"sm[{draw(st.integers(0, 3))}] = sm[{draw(st.integers(0, 3))}] + 1",
            ]
        )
    )
    conditions = ["i == 0", "i >= 2", "i != 3"] + (["j == 0", "j == 1"] if two else [])
    if draw(st.booleans()):
        return (
            f"    when {draw(st.sampled_from(conditions))} {{\n      {text}\n    }}\n"
        )
    return f"    {text}\n"


@st.composite
def parallel_programs(draw) -> str:
    """A kernel whose scratch starts written, a loop marked parallel over a
    random body, then perhaps reads of the scratch after the loop."""
    two = draw(st.booleans())
    head = "  for i in range(4), parallel=(0,) {\n"
    if two:
        dims = draw(st.sampled_from(["(0,)", "(1,)", "(0, 1)"]))
        head = f"  for i, j in grid(4, 2), parallel={dims} {{\n"
    body = "".join(draw(st.lists(statements(two), min_size=1, max_size=4)))
    after = draw(
        st.sampled_from(["", "  sync_copy buf -> y[0]\n", "  sync_copy b2 -> y[3]\n"])
    )
    return (
        "kernel k(x: i32[4, 8] @hbm, y: i32[4, 8] @hbm) {\n"
        "  buf = alloc i32[8] @vmem\n  b2 = alloc i32[8] @vmem\n"
        "  sm = alloc i32[4] @smem\n"
        "  sync_copy x[0] -> buf\n  sync_copy x[1] -> b2\n"
        "  sync_copy x[2, 0:4] -> sm\n"
        f"{head}{body}  }}\n{after}}}\n"
    )


@settings(max_examples=60, deadline=None, database=None)
@given(parallel_programs())
def test_a_parallel_loop_that_keeps_its_claim_gives_one_result_in_every_order(text):
    """Whatever the body, the data-free check, every mode and every seed
    agree: one error, or one result (the claim makes the order moot)."""
    try:
        x = inputs(text)
    except CopyIRError:
        return  # not a program (a copy's shapes differ, say): no claim to test
    verdicts = set()
    for mode, seed in RUNS:
        try:
            got = copyir.run(text, x, mode=mode, seed=seed)
            verdicts.add(("ok", got["x"].tobytes(), got["y"].tobytes()))
        except CopyIRError as err:
            verdicts.add(("error", str(err)))
    try:
        copyir.check_protocol(text)
        checked = "ok"
    except CopyIRError as err:
        checked = str(err)
    assert len(verdicts) == 1, verdicts
    (verdict,) = verdicts
    assert verdict[0] == "ok" if checked == "ok" else verdict == ("error", checked)
