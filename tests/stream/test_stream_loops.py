"""Loops kept in the DMA stream: text and binary round trips, the order in
which events run against a plain nested walk, every check at every
iteration (errors name it), computations and invalidations, and parallel
loops run permuted."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pytest
from conftest import EXAMPLES
from copyir.backends.interpreter import MODES, Executable, check_stream

import copyir
from copyir import errors
from copyir.errors import CopyIRError
from copyir.expand import expand
from copyir.index import evaluate, holds
from copyir.stream import (
    WAIT,
    from_program,
    load_npz,
    parse_dma,
    print_dma,
    read_dma,
    save_npz,
    to_program,
)


def double_buffer(n: int, last: int | None = None, rows: int = 8) -> str:
    """A prefetching double buffer over n blocks of (rows, 128) f32: the
    fetch of block i + 1 is guarded by `i <= last` (n - 2 when correct)."""
    last = n - 2 if last is None else last
    block = rows * 128 * 4
    y = n * block
    return f"""dma.program "db" target "default" semaphores 4 {{
  dma.buffer "x" "hbm" 0 f32 [{n * rows}, 128] param
  dma.buffer "y" "hbm" {y} f32 [{n * rows}, 128] param
  dma.buffer "buf" "vmem" 0 f32 [2, {rows}, 128]
  dma.semaphore "sin" 0 [2]
  dma.semaphore "sout" 2 [2]
  dma.start "hbm" 0 [128, 1] -> "vmem" 0 [128, 1] f32 [{rows}, 128] sem 0
  dma.loop "i" {n} {{
    dma.start "hbm" {{(d0) -> (d0 * {block} + {block})}} [128, 1] -> "vmem" {{(d0) -> (((d0 + 1) mod 2) * {block})}} [128, 1] f32 [{rows}, 128] sem {{(d0) -> ((d0 + 1) mod 2)}} if {{(d0) : ({last} - d0 >= 0)}}
    dma.wait sem {{(d0) -> (d0 mod 2)}} bytes {block}
    dma.start "vmem" {{(d0) -> ((d0 mod 2) * {block})}} [128, 1] -> "hbm" {{(d0) -> (d0 * {block} + {y})}} [128, 1] f32 [{rows}, 128] sem {{(d0) -> (d0 mod 2 + 2)}}
    dma.wait sem {{(d0) -> (d0 mod 2 + 2)}} bytes {block}
  }}
}}
"""


def x_of(n: int, rows: int = 8) -> np.ndarray:
    return np.arange(n * rows * 128, dtype=np.float32).reshape(n * rows, 128)


def test_a_loop_runs_every_iteration_in_every_mode():
    stream = read_dma(double_buffer(16), "db.dma")
    x = x_of(16)
    for mode in MODES:
        for seed in (0, 1):
            out = copyir.run(stream, {"x": x}, mode=mode, seed=seed)
            assert np.array_equal(out["y"], x)


def test_the_stream_size_does_not_grow_with_the_trip_count():
    small, large = double_buffer(2_000), double_buffer(200_000)
    assert abs(len(large) - len(small)) < 64  # only the numbers' digits differ
    for text in (small, large):
        stream = read_dma(text, "db.dma")
        assert len(stream.instructions) == 5


def test_loops_round_trip_through_text_and_binary():
    stream = read_dma(double_buffer(6), "db.dma")
    program = to_program(stream)
    text = print_dma(program)
    again = from_program(parse_dma(text, "again.dma"))
    assert again == stream
    assert print_dma(to_program(again)) == text
    binary = io.BytesIO()
    save_npz(stream, binary)
    binary.seek(0)
    assert load_npz(binary, "db.npz") == stream


def nested(n: int, m: int) -> str:
    """Two nested loops and instructions around them, each event's order
    visible in which element of y it writes (one f32 per DMA)."""
    return f"""dma.program "nest" target "default" semaphores 1 {{
  dma.buffer "x" "hbm" 0 f32 [{n * m}] param
  dma.buffer "y" "hbm" 4096 f32 [{n * m}] param
  dma.start "hbm" 0 [1] -> "hbm" 4096 [1] f32 [1] sem 0
  dma.wait sem 0 bytes 4
  dma.loop "i" {n} {{
    dma.loop "j" {m} parallel {{
      dma.start "hbm" {{(d0, d1) -> (d0 * {4 * m} + d1 * 4)}} [1] -> "hbm" {{(d0, d1) -> (d0 * {4 * m} + d1 * 4 + 4096)}} [1] f32 [1] sem 0 if {{(d0, d1) : (d0 + d1 - 1 >= 0)}}
      dma.wait sem 0 bytes 4 if {{(d0, d1) : (d0 + d1 - 1 >= 0)}}
    }}
    dma.wait sem 0 bytes 0
  }}
}}
"""


def test_events_run_in_program_order_as_a_nested_walk():
    n, m = 3, 4
    stream = read_dma(nested(n, m), "nest.dma")
    trace = expand(stream)
    walk = [(0, ()), (1, ())]
    for i in range(n):
        for j in range(m):
            if i + j >= 1:
                walk += [(2, (i, j)), (3, (i, j))]
        walk.append((4, (i,)))
    got = [
        (
            int(r),
            tuple(
                int(v)
                for v in trace.indices[e][
                    : stream.depth(int(stream.instructions["loop"][r]))
                ]
            ),
        )
        for e, r in enumerate(trace.row)
    ]
    assert got == walk


def test_a_parallel_loop_runs_permuted_in_random_mode_only():
    stream = read_dma(nested(2, 6), "nest.dma")
    x = np.arange(12, dtype=np.float32)
    orders = set()
    for seed in range(6):
        program = Executable(stream, {"x"}, "random", seed)
        starts = [start for _, start in program.completions]
        orders.add(tuple(int(program.trace.indices[s][1]) for s in starts))
        assert np.array_equal(program.run({"x": x})["y"], x)
    assert len(orders) > 1
    eager = Executable(stream, {"x"}, "eager")
    columns = [int(eager.trace.indices[s][1]) for _, s in eager.completions][1:]
    assert columns == list(range(1, 6)) + list(range(6))


def test_two_seeds_complete_the_dmas_of_one_loop_in_different_orders():
    """Random mode draws each DMA's moment inside its in-flight window in
    every iteration: the prefetch of block i + 1 lands before or after the
    write-back of block i, differently per seed; the values never differ."""
    stream = read_dma(double_buffer(16), "db.dma")
    x = x_of(16)
    orders = set()
    for seed in range(6):
        program = Executable(stream, {"x"}, "random", seed)
        orders.add(tuple(start for _, start in program.completions))
        assert np.array_equal(program.run({"x": x})["y"], x)
    assert len(orders) > 1


def test_on_wait_completes_the_most_recently_started_dma_first():
    """As Pallas' interpret mode pops its list of pending DMAs: one wait for
    two DMAs on one semaphore moves the second one first, in every
    iteration of a loop."""
    text = """dma.program "lifo" target "default" semaphores 1 {
  dma.buffer "x" "hbm" 0 f32 [16, 128] param
  dma.buffer "buf" "vmem" 0 f32 [8, 128]
  dma.semaphore "s" 0 []
  dma.loop "i" 2 {
    dma.start "hbm" {(d0) -> (d0 * 4096)} [128, 1] -> "vmem" 0 [128, 1] f32 [4, 128] sem 0
    dma.start "hbm" {(d0) -> (d0 * 4096 + 2048)} [128, 1] -> "vmem" 2048 [128, 1] f32 [4, 128] sem 0
    dma.wait sem 0 bytes 4096
  }
}
"""
    program = Executable(read_dma(text, "lifo.dma"), {"x"}, "on_wait")
    # events: 0, 1 the starts of i = 0, 2 its wait; 3, 4, 5 likewise for i = 1
    assert program.completions == [(2, 1), (2, 0), (5, 4), (5, 3)]


def test_a_prefetch_past_the_end_is_reported_at_its_iteration():
    text = double_buffer(8, last=7).replace(
        'f32 [64, 128] param\n  dma.buffer "y"',
        'f32 [64, 128] param\n  dma.buffer "z" "hbm" 65536 f32 [8, 128]\n  dma.buffer "y"',
        1,
    )
    text = text.replace('"y" "hbm" 32768', '"y" "hbm" 131072').replace(
        "+ 32768)", "+ 131072)"
    )
    with pytest.raises(CopyIRError) as caught:
        copyir.run(read_dma(text, "db.dma"), {"x": x_of(8)})
    assert str(caught.value) == (
        errors.RUN_OUT_OF_BOUNDS.format(
            end="source",
            region="hbm[32768:36864]",
            why="it lies outside every hbm buffer",
        )
        + ", at i = 7"
    )


def test_a_wait_skipped_in_one_iteration_is_reported():
    text = double_buffer(8).replace(
        "dma.wait sem {(d0) -> (d0 mod 2 + 2)} bytes 4096",
        "dma.wait sem {(d0) -> (d0 mod 2 + 2)} bytes 4096 if {(d0) : (d0 - 3 == 0)} or {(d0) : (d0 - 4 >= 0)} or {(d0) : (2 - d0 >= 0)}",
    )
    text = text.replace("(d0 - 3 == 0)", "(d0 - 9 == 0)")  # i = 3 never waits
    with pytest.raises(CopyIRError) as caught:
        check_stream(read_dma(text, "db.dma"))
    message = str(caught.value)
    # At i = 4 the prefetch into slot 1 overwrites what iteration 3's
    # write-back, never waited, may still be reading.
    assert message.startswith("Race: this DMA writes buf[1:2, 0:8, 0:128]")
    assert message.endswith("at i = 3 is in flight and reads it, at i = 4")


def test_a_slot_reused_one_iteration_too_early_is_a_race():
    text = double_buffer(8).replace(
        "{(d0) -> (((d0 + 1) mod 2) * 4096)}", "{(d0) -> ((d0 mod 2) * 4096)}"
    )
    with pytest.raises(CopyIRError) as caught:
        check_stream(read_dma(text, "db.dma"))
    assert str(caught.value) == (
        "Race: this DMA writes buf[0:1, 0:8, 0:128] while the DMA started at "
        "db.dma:7:3 is in flight and writes it, at i = 0"
    )


def test_a_race_only_at_the_last_iteration():
    n = 50
    text = double_buffer(n).replace(
        "dma.wait sem {(d0) -> (d0 mod 2 + 2)} bytes 4096",
        f"dma.wait sem {{(d0) -> (d0 mod 2 + 2)}} bytes 4096 if {{(d0) : ({n - 2} - d0 >= 0)}}\n"
        f'    dma.start "hbm" 0 [128, 1] -> "vmem" {{(d0) -> ((d0 mod 2) * 4096)}} [128, 1] f32 [8, 128] sem 1 if {{(d0) : (d0 - {n - 1} == 0)}}\n'
        f"    dma.wait sem {{(d0) -> (d0 mod 2 + 2)}} bytes 4096 if {{(d0) : (d0 - {n - 1} == 0)}}\n"
        f"    dma.wait sem 1 bytes 4096 if {{(d0) : (d0 - {n - 1} == 0)}}",
    )
    with pytest.raises(CopyIRError) as caught:
        check_stream(read_dma(text, "db.dma"))
    assert str(caught.value).startswith(
        f"Race: this DMA writes buf[{(n - 1) % 2}:{(n - 1) % 2 + 1}, 0:8, 0:128]"
    )
    assert str(caught.value).endswith(f"reads it, at i = {n - 1}")


def test_a_semaphore_index_out_of_range_in_one_iteration():
    text = double_buffer(8).replace(
        "sem {(d0) -> (d0 mod 2 + 2)} bytes", "sem {(d0) -> (d0 + 2)} bytes"
    )
    with pytest.raises(CopyIRError) as caught:
        check_stream(read_dma(text, "db.dma"))
    assert (
        str(caught.value)
        == errors.RUN_SEMAPHORE_RANGE.format(sem=4, count=4) + ", at i = 2"
    )


COMPUTE = """dma.program "scale" target "default" semaphores 1 {
  dma.buffer "x" "hbm" 0 bf16 [4, 128] param
  dma.buffer "y" "hbm" 1024 bf16 [4, 128] param
  dma.buffer "xw" "vmem" 0 bf16 [128]
  dma.buffer "yw" "vmem" 512 bf16 [128]
  dma.loop "i" 4 {
    dma.start "hbm" {(d0) -> (d0 * 256)} [1] -> "vmem" 0 [1] bf16 [128] sem 0
    dma.wait sem 0 bytes 256
    dma.compute "vmem" 512 [1] bf16 [128] = "(add (mul 2.0 $0) 1.0)" ("vmem" 0 [1])
    dma.start "vmem" 512 [1] -> "hbm" {(d0) -> (d0 * 256 + 1024)} [1] bf16 [128] sem 0
    dma.wait sem 0 bytes 256
  }
}
"""


def test_computations_round_after_every_operation():
    import ml_dtypes

    bf16 = np.dtype(ml_dtypes.bfloat16)
    x = (np.arange(512) / 7).astype(bf16).reshape(4, 128)
    stream = read_dma(COMPUTE, "scale.dma")
    expected = (np.asarray(2.0, bf16) * x + np.asarray(1.0, bf16)).astype(bf16)
    for mode in MODES:
        out = copyir.run(stream, {"x": x}, mode=mode)["y"]
        assert out.dtype == bf16 and out.tobytes() == expected.tobytes()


def test_a_computation_reading_a_window_in_flight_is_a_race():
    text = COMPUTE.replace(
        "    dma.wait sem 0 bytes 256\n    dma.compute", "    dma.compute", 1
    )
    text = text.replace(
        "  dma.wait sem 0 bytes 256\n  }",
        "  dma.wait sem 0 bytes 256\n    dma.wait sem 0 bytes 256\n  }",
    )
    with pytest.raises(CopyIRError) as caught:
        check_stream(read_dma(text, "scale.dma"))
    assert str(caught.value).startswith(
        "Race: this computation reads xw[0:128] while the DMA started at "
    )
    assert str(caught.value).endswith("is in flight and writes it, at i = 0")


def test_an_invalidated_window_must_be_written_again_before_it_is_read():
    text = COMPUTE.replace(
        '    dma.compute "vmem" 512',
        '    dma.invalidate "vmem" 0 [1] bf16 [128] if {(d0) : (d0 - 2 == 0)}\n    dma.compute "vmem" 512',
    )
    with pytest.raises(CopyIRError) as caught:
        check_stream(read_dma(text, "scale.dma"))
    assert (
        str(caught.value)
        == errors.RUN_COMPUTE_UNINITIALIZED.format(region="xw[0:128]", first="xw[0]")
        + ", at i = 2"
    )
    ok = COMPUTE.replace(
        '    dma.start "hbm" {(d0) -> (d0 * 256)}',
        '    dma.invalidate "vmem" 0 [1] bf16 [128]\n    dma.start "hbm" {(d0) -> (d0 * 256)}',
    )
    assert len(check_stream(read_dma(ok, "scale.dma")).starts) == 8


@pytest.mark.parametrize(
    ("expr", "point"),
    [
        ("((d0 + 1) mod 2) * 4096", (5,)),
        ("d0 floordiv 3 + d0 ceildiv 4", (7,)),
        ("d0 * 8 + d1 mod 3", (2, 11)),
    ],
)
def test_affine_evaluation_agrees_with_xdsl(expr, point):
    from xdsl.context import Context
    from xdsl.parser import Parser

    dims = ", ".join(f"d{k}" for k in range(len(point)))
    affine_map = (
        Parser(Context(), f"affine_map<({dims}) -> ({expr})>").parse_attribute().data
    )
    grids = np.indices([p + 1 for p in point]).reshape(len(point), -1)
    values = evaluate(affine_map.results[0], list(grids))
    for at, combo in enumerate(itertools.product(*[range(p + 1) for p in point])):
        assert values[at] == affine_map.eval(list(combo), [])[0]


def test_predicates_hold_where_their_constraints_do():
    from xdsl.context import Context
    from xdsl.parser import Parser

    sets = [
        Parser(Context(), text).parse_attribute().data
        for text in (
            "affine_set<(d0) : (d0 - 3 >= 0, 8 - d0 >= 0)>",
            "affine_set<(d0) : (d0 == 0)>",
        )
    ]
    inside = holds(sets, [np.arange(12)])
    assert list(np.flatnonzero(inside)) == [0, 3, 4, 5, 6, 7, 8]


def test_waits_are_counted_in_loops():
    stream = read_dma(double_buffer(10), "db.dma")
    trace = expand(stream)
    assert int((stream.instructions["op"][trace.row] == WAIT).sum()) == 20


# -- crafted streams with loops (found by the stream fuzzer) ------------------------


def test_an_empty_loop_body_runs_and_round_trips():
    program = (
        "copy.kernel @k(%x: !copy.ref<8x128xf32, hbm>) {\n"
        "  copy.for %i in range(0, 4) {\n  }\n}\n"
    )
    x = np.ones((8, 128), np.float32)
    assert np.array_equal(copyir.run(program, {"x": x})["x"], x)
    text = copyir.dma_text(copyir.lower(program))
    assert 'dma.loop "i" 4 {\n  }' in text
    stream = read_dma(text, "empty.dma")
    assert len(stream.loops) == 1 and len(stream.instructions) == 0
    assert np.array_equal(copyir.run(stream, {"x": x})["x"], x)


def sum_stream(**replace: str) -> str:
    text = copyir.dma_text(copyir.lower((EXAMPLES / "loop_sum.cpy").read_text()))
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    return text


def stream_error(text: str) -> CopyIRError:
    with pytest.raises(CopyIRError) as caught:
        copyir.run(
            read_dma(text, "crafted.dma"), {"x": np.zeros((256, 512), np.float32)}
        )
    return caught.value


def test_a_map_over_more_loops_than_enclose_it_is_malformed():
    text = sum_stream()
    lines = text.splitlines()
    inner = next(k for k, line in enumerate(lines) if 'dma.loop "j"' in line)
    moved = lines[:inner] + lines[inner + 1 : -3] + [lines[inner], *lines[-3:]]
    err = stream_error("\n".join(moved) + "\n")
    assert err.message.startswith("Malformed DMA stream: ")
    assert err.message.endswith("does not fit 1 enclosing loops")


@pytest.mark.parametrize(
    "constant",
    ["10000000000000000000000000000000000000000524288", "4611686018427387904"],
)
def test_an_address_map_beyond_64_bits_is_malformed(constant):
    err = stream_error(sum_stream(**{"+ 524288)": f"+ {constant})"}))
    assert err.message == (
        "Malformed DMA stream: dst_map 2 takes values beyond 64 bits, or divides "
        "by zero or by an index"
    )
    assert err.loc.line == 14


def test_a_map_dividing_by_zero_is_malformed():
    err = stream_error(sum_stream(**{"(d1 * 512)": "(d1 floordiv 0)"}))
    assert err.message.startswith("Malformed DMA stream: src_map 1 takes values")


def test_a_map_whose_parts_overflow_is_malformed_though_its_value_fits():
    """`(i + 2**70) mod 2` is 0 or 1, but numpy cannot add 2**70."""
    err = stream_error(sum_stream(**{"(d1 * 512)": f"((d1 + {2**70}) mod 2)"}))
    assert err.message.startswith("Malformed DMA stream: src_map 1 takes values")
