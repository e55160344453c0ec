"""Work that must grow linearly with the program.

Each test counts work, never time: at N and at 2N the count may at most
(about) double. A quadratic check would quadruple it. `benchmarks/growth.py`
prints the times of the same shapes of program at larger sizes.
"""

from __future__ import annotations

import cProfile
import io
import pstats
from collections.abc import Callable, Iterator

import pytest
from xdsl.printer import Printer

import copyir
from copyir import pytree
from copyir.api import apply_passes, pipeline
from copyir.dialects.copy import ViewOp, _print_tree_side
from copyir.dialects.copy.generic import forget_verdicts

LINEAR = 2.2
"""The most that a count may grow by when the program doubles."""


def view_chain(n: int, sync_copy: bool = False) -> str:
    """A chain of n named views of x, its last view copied n times."""
    lines = [f"kernel chain(x: f32[{n + 1}, 16] @hbm) {{"]
    lines += ["  buf = alloc f32[1, 16] @vmem", "  s = semaphore", "  v0 = x[1:]"]
    lines += [f"  v{i} = v{i - 1}[1:]" for i in range(1, n)]
    for _ in range(n):
        if sync_copy:
            lines.append(f"  sync_copy (v{n - 1},) -> (buf,)")
        else:
            lines += [
                f"  copy_start v{n - 1} -> buf, s",
                f"  copy_wait v{n - 1} -> buf, s",
            ]
    return "\n".join([*lines, "}"]) + "\n"


def many_params(n: int) -> str:
    """A kernel of n parameters, each copied to VMEM and back out."""
    params = ", ".join(f"p{i}: f32[8] @hbm" for i in range(n))
    body = [f"  sync_copy p{i} -> buf\n  sync_copy buf -> p{i}" for i in range(n)]
    return (
        f"kernel k({params}) {{\n  buf = alloc f32[8] @vmem\n"
        + "\n".join(body)
        + "\n}\n"
    )


class ChainSteps:
    """Counts the steps taken along chains of views: each read of a view's
    source and each decoding of its subscripts."""

    def __init__(self) -> None:
        self.steps = 0

    def during(self, fn: Callable[[], object]) -> int:
        self.steps = 0
        fn()
        return self.steps


@pytest.fixture
def chain_steps() -> Iterator[ChainSteps]:
    """ViewOp's `source` and `subscripts`, counted while the test runs.

    Set and restored by hand: IRDL's operand accessor raises when read from
    the class, which `monkeypatch` mistakes for a missing attribute.
    """
    counter = ChainSteps()
    source, subscripts = ViewOp.__dict__["source"], ViewOp.__dict__["subscripts"]

    def counted_source(op: ViewOp):
        counter.steps += 1
        return source.__get__(op, ViewOp)

    def counted_subscripts(op: ViewOp):
        counter.steps += 1
        return subscripts(op)

    ViewOp.source = property(counted_source)
    ViewOp.subscripts = counted_subscripts
    try:
        yield counter
    finally:
        ViewOp.source = source
        ViewOp.subscripts = subscripts


def assert_linear(work: Callable[[int], int], n: int) -> None:
    small, large = work(n), work(2 * n)
    assert large <= LINEAR * small, f"work {small} at N={n}, {large} at 2N"


@pytest.mark.parametrize("sync_copy", [False, True])
def test_verify_walks_each_view_once(chain_steps, sync_copy):
    def work(n: int) -> int:
        module = copyir.parse(view_chain(n, sync_copy))
        forget_verdicts()  # each count a first verify, whatever ran before
        return chain_steps.during(lambda: copyir.verify(module))

    assert_linear(work, 200)


def test_lowering_walks_each_view_once(chain_steps):
    def work(n: int) -> int:
        module = copyir.parse(view_chain(n))
        copyir.verify(module)
        return chain_steps.during(lambda: apply_passes(module, pipeline()))

    assert_linear(work, 200)


def python_calls(fn: Callable[[], object]) -> int:
    """Function calls made by fn (Python and builtin): deterministic work."""
    profile = cProfile.Profile()
    profile.runcall(fn)
    return pstats.Stats(profile).total_calls


@pytest.mark.parametrize(
    "stage",
    [
        lambda text: copyir.verify(copyir.parse(text)),
        lambda text: copyir.lower(copyir.parse(text)),
        lambda text: copyir.to_text(copyir.parse(text), "mlir"),
        lambda text: copyir.verify(
            copyir.parse(copyir.to_text(copyir.parse(text), "mlir"), "k.mlir")
        ),
    ],
    ids=["parse-verify", "lower", "print-mlir", "mlir-parse-verify"],
)
def test_thousands_of_parameters_cost_linear_work(stage):
    stage(many_params(4))  # grammar, caches: the fixed costs, paid once
    assert_linear(lambda n: python_calls(lambda: stage(many_params(n))), 250)


class CountingStr(str):
    """A string that counts the comparisons and characters spent on it."""

    work = 0

    def __eq__(self, other):
        CountingStr.work += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__

    def rstrip(self, chars=None):
        CountingStr.work += len(self)
        return str.rstrip(self, chars)


def counted(fn: Callable[[], object]) -> int:
    CountingStr.work = 0
    fn()
    return CountingStr.work


def test_record_keys_are_checked_for_duplicates_in_linear_work():
    def work(n: int) -> int:
        items = [(CountingStr(f"k{i}"), pytree.LEAF) for i in range(n)]
        return counted(lambda: pytree.record(items))

    assert_linear(work, 500)


def test_a_spec_is_read_in_linear_work():
    def work(n: int) -> int:
        spec = CountingStr("(" + ", ".join(["*"] * n) + ")")
        return counted(lambda: pytree.parse_spec(spec))

    assert_linear(work, 500)


class CountingList(list):
    """A list that counts the elements each `pop` moves."""

    work = 0

    def pop(self, index=-1):
        CountingList.work += len(self) if index == 0 else 1
        return super().pop(index)


def test_the_mlir_printer_takes_each_leaf_once():
    def work(n: int) -> int:
        keys = ", ".join(f"k{i}: x[{i}]" for i in range(n))
        text = (
            f"kernel k(x: f32[{n}] @hbm) {{\n  sync_copy {{{keys}}} -> {{{keys}}}\n}}\n"
        )
        op = copyir.parse(text).ops.first.body.block.ops.last
        leaves = CountingList(op.srcs)
        CountingList.work = 0
        _print_tree_side(Printer(stream=io.StringIO()), op.src_tree.data, leaves)
        return CountingList.work

    assert_linear(work, 500)


def sibling_loops(n: int) -> str:
    """n sibling loops, each with a dynamic view: the kernel numbers its
    loop dimensions 0 to n - 1."""
    loop = "  for i in range(4) {\n    sync_copy x[i] -> buf\n  }\n"
    return (
        "kernel k(x: f32[4, 8] @hbm) {\n  buf = alloc f32[8] @vmem\n" + loop * n + "}\n"
    )


def test_verify_checks_sibling_loops_in_linear_work():
    """Each loop's checks see its own dimensions, not one per loop of the
    kernel."""

    def work(n: int) -> int:
        module = copyir.parse(sibling_loops(n))
        return python_calls(lambda: copyir.verify(module))

    assert_linear(work, 250)


@pytest.mark.parametrize(
    ("grid", "body"),
    [
        # Scratch every iteration reuses, and a table all read.
        (
            "{n}, 4",
            "    sync_copy x[i] -> buf\n    buf[...] = buf + table\n"
            "    sync_copy buf -> y[i]\n",
        ),
        # One block of y written again at every step of a long sequential j.
        ("4, {n}", "    sync_copy x[i] -> buf\n    sync_copy buf -> y[i]\n"),
    ],
)
def test_the_parallel_claim_is_checked_in_linear_work(grid, body):
    """The parallel check's searches make candidate pairs in proportion to
    the accesses: VMEM writes never meet VMEM writes, and an iteration's
    repeated accesses to one box stand as one."""
    from copyir.backends import overlaps, parallel
    from copyir.backends.interpreter import prepare

    def work(n: int) -> int:
        text = (
            f"kernel par(x: f32[{n}, 128] @hbm, y: f32[{n}, 128] @hbm, "
            "t: f32[128] @hbm) {\n"
            "  buf = alloc f32[128] @vmem\n  table = alloc f32[128] @vmem\n"
            "  sync_copy t -> table\n"
            f"  for i, j in grid({grid.format(n=n)}), parallel=(0,) {{\n{body}  }}\n}}\n"
        )
        program = prepare(copyir.to_stream(copyir.lower(text)), frozenset({"x", "t"}))
        verdict = program.check(claims=False)
        stats = overlaps.Stats()
        found = parallel.first_violation(
            program.namer.stream,
            parallel.levels(
                program.namer.stream, program.trace.row, program.trace.indices
            ),
            program.events,
            program.ends,
            program.memory,
            verdict.starts,
            verdict.finish,
            program.namer,
            stats,
        )
        assert found is None
        return stats.accesses + stats.candidates

    assert_linear(work, 256)


def test_the_ends_of_scopes_are_checked_in_linear_work():
    """A scope in a loop of N steps (a fresh buffer and semaphore each):
    the search for DMAs in flight where a scope ends makes candidate pairs
    in proportion to the accesses, each release meeting only its own
    step's DMAs."""
    from copyir.backends import overlaps
    from copyir.backends.interpreter import prepare

    def work(n: int) -> int:
        text = (
            f"kernel scoped(x: f32[{8 * n}, 128] @hbm, y: f32[{8 * n}, 128] @hbm) {{\n"
            f"  for i in range({n}) {{\n    scope {{\n"
            "      buf = alloc f32[8, 128] @vmem\n      sem = semaphore\n"
            "      copy_start x[ds(8 * i, 8)] -> buf, sem\n"
            "      copy_wait x[ds(8 * i, 8)] -> buf, sem\n"
            "      copy_start buf -> y[ds(8 * i, 8)], sem\n"
            "      copy_wait buf -> y[ds(8 * i, 8)], sem\n"
            "    }\n  }\n}\n"
        )
        program = prepare(copyir.to_stream(copyir.lower(text)), frozenset({"x"}))
        stats = overlaps.Stats()
        assert program.protocol.released_in_flight(stats) is None
        # Per step: the 2 DMAs' 4 ends and 2 semaphores, 2 releases.
        assert stats.accesses == 8 * n
        return stats.accesses + stats.candidates

    assert_linear(work, 256)
