"""The limits of a run (copyir/limits.py): verify refuses, located and
before any work at every iteration, what a run cannot hold; what it
accepts lowers and runs; a MemoryError is the program's error, exit 1."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from conftest import EXAMPLES
from hypothesis import HealthCheck, example, given, settings
from loop_programs import loop_programs
from pipeline_programs import Pipeline, Spec, pipelines

import copyir
from copyir import errors, limits
from copyir.cli import main
from copyir.errors import CopyIRError
from copyir.stream import COMPUTE

KERNEL = """kernel k(x: f32[8] @hbm, y: f32[8] @hbm) {{
  buf = alloc f32[8] @vmem
  s = semaphore
{body}
}}
"""


def loop(header: str, start: str = "x", end: str = "buf", indent: str = "  ") -> str:
    """A loop of a DMA start and its wait."""
    return (
        f"{indent}{header} {{\n"
        f"{indent}  copy_start {start} -> {end}, s\n"
        f"{indent}  copy_wait {start} -> {end}, s\n"
        f"{indent}}}"
    )


def kernel(*parts: str) -> str:
    return KERNEL.format(body="\n".join(parts))


def verify_error(text: str) -> CopyIRError:
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text, "t.cpy"))
    return caught.value


def too_many(what: str, count: int) -> str:
    return errors.TOO_MANY_ITERATIONS.format(
        what=what, count=count, limit=limits.MAX_ITERATIONS
    )


def stream_events(stream) -> int:
    """The events a run expands: each instruction once per iteration of
    its loops, a computation weighed by its operands (`limits.weight`)."""
    runs = [1]
    for each in stream.loops:
        runs.append(each.trip_count * runs[each.parent])
    table = stream.instructions
    return sum(
        runs[int(loop)]
        * (
            limits.weight(len(stream.computes[int(number) - 1].operands))
            if op == COMPUTE
            else 1
        )
        for loop, op, number in zip(
            table["loop"], table["op"], table["compute"], strict=True
        )
    )


DYNAMIC_10_12 = kernel(
    loop("for i in range(1000000000000)", "x[ds(i % 8, 1)]", "buf[ds(i % 8, 1)]")
)


def test_a_loop_of_10_12_iterations_with_a_dynamic_view_is_refused_not_enumerated(
    tmp_path,
):
    # A hang (hours of checking each iteration) exceeds the timeout; the
    # refusal comes before any per-iteration work.
    path = tmp_path / "big.cpy"
    path.write_text(DYNAMIC_10_12)
    done = subprocess.run(
        [sys.executable, "-m", "copyir", "verify", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == (
        f"{path}:4:3: error: {too_many('Loop i', 10**12)}"
    )


def test_a_loop_of_10_12_iterations_without_dynamic_views_is_refused_by_verify():
    err = verify_error(kernel(loop("for i in range(1000000000000)")))
    assert str(err) == too_many("Loop i", 10**12)
    assert (err.loc.line, err.loc.col) == (4, 3)


def test_a_grid_of_2_62_by_4_is_refused_by_verify_with_its_exact_count():
    err = verify_error(kernel(loop("for i, j in grid(4611686018427387904, 4)")))
    assert str(err) == too_many("Loop i, j", 2**64)
    assert err.loc.line == 4


def test_a_nest_counts_its_enclosing_loops():
    inner = loop("for j in range(2049)", indent="    ")
    err = verify_error(kernel(f"  for i in range(4096) {{\n{inner}\n  }}"))
    assert str(err) == too_many("Loop j", 4096 * 2049)
    assert err.loc.line == 5


PIPELINE_2_62 = """kernel k(x: f32[8, 128] @hbm, y: f32[8, 128] @hbm) {
  pipeline grid=(4611686018427387904, 4)
      in  x block=(8, 128) index=(i, j) -> (0, 0)
      out y block=(8, 128) index=(i, j) -> (0, 0)
      (xw, yw) {
    yw[...] = xw
  }
}
"""


def test_a_pipeline_grid_of_2_62_by_4_is_refused_not_an_internal_error(capsys):
    err = verify_error(PIPELINE_2_62)
    assert str(err) == too_many("The pipeline", 2**64)
    assert err.loc.line == 2


def test_sibling_loops_within_the_limit_that_run_too_many_instructions_in_all():
    half = limits.MAX_EVENTS // 2  # a start and a wait per iteration
    err = verify_error(
        kernel(loop(f"for i in range({half})"), loop(f"for j in range({half})"))
    )
    assert str(err) == errors.TOO_MANY_EVENTS.format(
        what="Loop j", count=limits.MAX_EVENTS + half, limit=limits.MAX_EVENTS
    )
    assert err.loc.line == 8


def test_the_largest_int64_modulus_verifies_lowers_and_runs():
    text = kernel(
        loop(
            "for i in range(8)",
            "x[ds(i % 9223372036854775807, 1)]",
            "buf[ds(i, 1)]",
        )
        + "\n  copy_start buf -> y, s\n  copy_wait buf -> y, s"
    )
    x = np.arange(8, dtype=np.float32)
    out = copyir.run(text, {"x": x}, mode="eager")
    np.testing.assert_array_equal(out["y"], x)


def test_index_arithmetic_reaching_the_limit_is_refused_by_verify_first():
    view = "x[ds((i + 4611686018427387904) % 8, 1)]"
    err = verify_error(kernel(loop("for i in range(8)", view, "buf[ds(i, 1)]")))
    assert str(err) == errors.INDEX_OVER_LIMIT.format(
        name=view, limit=limits.LIMIT // 2
    )
    assert err.loc.line == 5


@pytest.fixture
def small_limits(monkeypatch):
    """Limits small enough to reach in a test."""
    monkeypatch.setattr(limits, "MAX_EVENTS", 64)
    monkeypatch.setattr(limits, "MAX_ITERATIONS", 32)


def test_exactly_at_the_limits_verify_lower_and_run_accept(small_limits):
    text = kernel(loop("for i in range(16)"), loop("for j in range(16)"))
    assert stream_events(copyir.to_stream(copyir.lower(text))) == 64
    copyir.run(text, {"x": np.zeros(8, np.float32)}, mode="eager")
    grid = kernel(loop("for i, j in grid(4, 8)"))
    copyir.run(grid, {"x": np.zeros(8, np.float32)}, mode="eager")


def test_one_past_the_limits_verify_refuses(small_limits):
    err = verify_error(kernel(loop("for i, j in grid(3, 11)")))
    assert str(err) == errors.TOO_MANY_ITERATIONS.format(
        what="Loop i, j", count=33, limit=32
    )
    err = verify_error(
        kernel(
            loop("for i in range(16)"),
            loop("for j in range(16)"),
            "  copy_start x -> buf, s",
        )
    )
    assert str(err) == errors.TOO_MANY_EVENTS.format(
        what="This statement", count=65, limit=64
    )


def test_the_stream_validator_counts_events_in_all(small_limits, monkeypatch):
    text = kernel(loop("for i in range(16)"), loop("for j in range(16)"))
    stream = copyir.to_stream(copyir.lower(text))
    monkeypatch.setattr(limits, "MAX_EVENTS", 63)
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(stream)
    assert str(caught.value) == errors.STREAM_MALFORMED.format(
        why="its instructions run 64 times in all, more than the limit of 63"
    )


def refused_one_below_its_events(text: str, filename: str, format=None) -> None:
    """What verify accepts, the run accepts: with the limit one below the
    stream's events, verify refuses the program."""
    module = copyir.parse(text, filename, format=format)
    events = [
        stream_events(copyir.to_stream(copyir.lower(module, k.kernel_name)))
        for k in copyir.api.kernels(module)
    ]
    saved = limits.MAX_EVENTS
    limits.MAX_EVENTS = max(events) - 1
    try:
        with pytest.raises(CopyIRError) as caught:
            copyir.verify(module)
    finally:
        limits.MAX_EVENTS = saved
    assert str(caught.value).startswith(("Loop ", "The pipeline ", "This statement "))


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.cpy")), ids=lambda p: p.stem)
def test_verify_counts_at_least_the_events_of_each_example(path):
    refused_one_below_its_events(path.read_text(), str(path))


GENERATED = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@GENERATED
@given(loop_programs())
def test_verify_counts_at_least_the_events_of_generated_loops(program):
    refused_one_below_its_events(program.text, program.filename)


def _spec(name: str, output: bool, results, out_buffers: int) -> Spec:
    return Spec(name, output, results, 1, (3,), "", "", out_buffers, False)


UNEVEN_CORES = Pipeline(
    grid=(3,),
    parallel=0,
    specs=(
        _spec("x0", False, (None, None), 0),
        _spec("y0", True, (0, None), 1),
    ),
    no_pipelining=True,
    copies=1,
    clash=True,
    kernel_grid=False,
    semantics=(True,),
    cores=2,
)
"""3 steps over 2 cores: groups of shares 2 and 1, each core running both
groups' schedules under `when`s (what hypothesis found: verify counted
the grid's steps once)."""


@GENERATED
@given(pipelines())
@example(UNEVEN_CORES)
def test_verify_counts_at_least_the_events_of_generated_pipelines(p):
    refused_one_below_its_events(p.mlir(), "p.mlir", format="mlir")


def test_a_memory_error_is_the_programs_error_in_the_cli(monkeypatch, capsys):
    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr("copyir.passes.verify.verify", exhausted)
    status = main(["verify", str(EXAMPLES / "roundtrip.cpy")])
    assert status == 1
    assert capsys.readouterr().err == (f"copyir: error: {limits.out_of_memory()}\n")


def test_a_memory_error_is_the_programs_error_in_the_api(monkeypatch):
    def exhausted(*args, **kwargs):
        raise MemoryError("Unable to allocate 8.00 TiB for an array")

    monkeypatch.setattr("copyir.passes.verify.verify", exhausted)
    with pytest.raises(CopyIRError) as caught:
        copyir.run(EXAMPLES / "roundtrip.cpy", mode="eager")
    assert str(caught.value) == errors.OUT_OF_MEMORY.format(
        iterations=limits.MAX_ITERATIONS,
        events=limits.MAX_EVENTS,
        bytes=limits.BYTES_PER_EVENT,
    )


WINDOWED = """kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {{
  bx = buffered_ref x, block=(8, 128), buffers=2
  for i in range(8) {{
    buffered_copy x -> bx[{block}, 0], slot={slot}
  }}
}}
"""
BIG = "(i + 4611686018427387904)"


@pytest.mark.parametrize(
    "block, slot", [(f"{BIG} % 8", "0"), ("i", f"{BIG} % 2")], ids=["block", "slot"]
)
def test_window_index_arithmetic_reaching_the_limit_is_refused_by_verify(block, slot):
    err = verify_error(WINDOWED.format(block=block, slot=slot))
    assert str(err) == errors.INDEX_OVER_LIMIT.format(
        name="bx", limit=limits.LIMIT // 2
    )
    assert err.loc.line == 4


def test_a_pipeline_index_map_reaching_the_limit_is_refused_by_verify():
    text = PIPELINE_2_62.replace("4611686018427387904, 4", "8, 4").replace(
        "in  x block=(8, 128) index=(i, j) -> (0, 0)",
        f"in  x block=(8, 128) index=(i, j) -> ({BIG} % 1, 0)",
    )
    err = verify_error(text)
    assert str(err) == errors.INDEX_OVER_LIMIT.format(name="x", limit=limits.LIMIT // 2)
    assert err.loc.line == 2


def test_a_computation_weighs_one_event_per_operand_and_destination():
    """Found by review: a computation of 40 operands costs a run about 10 KB
    per execution, 40 times a DMA's; counted as one event, 2^23 of them
    passed verify and needed some 85 GB."""
    operands = " + ".join(f"buf[ds((i + {k}) % 8, 1)]" for k in range(40))
    text = f"""kernel k(x: f32[8] @hbm) {{
  buf = alloc f32[8] @vmem
  acc = alloc f32[1] @vmem
  sync_copy x -> buf
  for i in range(300000) {{
    acc[...] = {operands}
  }}
}}
"""
    with pytest.raises(CopyIRError) as err:
        copyir.verify(copyir.parse(text, "k.cpy"))
    assert str(err.value) == errors.TOO_MANY_EVENTS.format(
        what="Loop i", count=2 + 41 * 300000, limit=limits.MAX_EVENTS
    )
    assert limits.weight(40) == 41 and limits.weight(0) == 1


def test_limits_on_semaphores_and_ranks():
    many = "kernel k(x: f32[8]) {\n  s = semaphore[1000000000]\n}\n"
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(many))
    assert str(caught.value) == errors.TOO_MANY_SEMAPHORES.format(
        name="s", count=10**9, limit=1 << 20
    )
    deep = "kernel k(x: f32[" + ", ".join(["1"] * 33) + "]) {}\n"
    with pytest.raises(CopyIRError) as caught:
        copyir.parse(deep)
    assert str(caught.value) == errors.RANK_TOO_LARGE.format(limit=32, rank=33)
