"""The verifier judges the values a program computes.

Computations: a literal fits its destination's dtype (a bool is 0 or 1, a
float literal does not overflow to infinity), and `-` is refused on bool
as numpy and JAX refuse it.

Index expressions and conditions are evaluated exactly: in int64 where the
loops' ranges prove no intermediate value wraps, in Python integers
otherwise, so that a condition that would overflow 64 bits neither hides an
out-of-bounds view nor an index the program never computes gets reported.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.ir.affine import AffineExpr, AffineSet

import copyir
from copyir import errors
from copyir.errors import CopyIRError
from copyir.index import comparison, evaluate, holds

BIG = 2**62
OVER_AT_7 = 2**63 // 7 + 1
"""7 times this is past 2**63 - 1; 6 times it is not."""


def verify_error(text: str, filename: str = "k.cpy") -> CopyIRError:
    with pytest.raises(CopyIRError) as info:
        copyir.verify(copyir.parse(text, filename))
    return info.value


def test_a_condition_that_would_overflow_still_holds():
    """`i * c >= 0` holds at i = 7, where 7 * c wraps negative in int64:
    the view out of bounds at i = 7 is reported there."""
    text = f"""kernel k(x: f32[8] @hbm, y: f32[8] @hbm) {{
  for i in range(8) {{
    when i * {OVER_AT_7} >= 0 {{
      sync_copy x[i + 1] -> y[0]
    }}
  }}
}}
"""
    err = verify_error(text)
    expected = errors.INDEX_OUT_OF_BOUNDS.format(index=8, dim=0, name="x", size=8)
    assert str(err) == f"{expected}, at i = 7"
    assert (err.loc.line, err.loc.col) == (4, 7)


def test_an_index_whose_product_would_overflow_is_refused_by_its_limit():
    """`(i * 2**62) // 2**62` is i, but a run computes addresses in 64 bits:
    verify refuses it at the view with the limit's message (what run
    refuses, verify refuses first, located), never with the
    `Negative index -2` of wrapped arithmetic."""
    text = f"""kernel k(x: f32[16] @hbm, y: f32[16] @hbm) {{
  for i in range(8) {{
    v = x[(i * {BIG}) // {BIG}]
    sync_copy v -> y[0]
  }}
}}
"""
    err = verify_error(text)
    assert str(err) == errors.INDEX_OVER_LIMIT.format(name="v", limit=2**61)
    assert (err.loc.line, err.loc.col) == (4, 5)  # the DMA that takes v


def test_an_out_of_bounds_index_past_64_bits_is_reported_with_its_value():
    text = f"""kernel k(x: f32[16] @hbm, y: f32[16] @hbm) {{
  for i in range(8) {{
    v = x[(i * {BIG}) // {BIG} + 9]
    sync_copy v -> y[0]
  }}
}}
"""
    err = verify_error(text)
    expected = errors.INDEX_OUT_OF_BOUNDS.format(index=16, dim=0, name="x", size=16)
    assert str(err) == f"{expected}, at i = 7"


def test_a_view_end_past_64_bits_is_out_of_bounds():
    """A start that fits in int64 whose end does not: `start + size` must
    not wrap back into the array."""
    start = 2**63 - 16
    text = f"""kernel k(x: f32[16] @hbm, y: f32[16] @hbm) {{
  for i in range(2) {{
    when i == 1 {{
      sync_copy x[ds(i * {start}, 16)] -> y
    }}
  }}
}}
"""
    err = verify_error(text)
    expected = errors.SLICE_OUT_OF_BOUNDS.format(
        start=start, stop=start + 16, dim=0, name="x", size=16
    )
    assert str(err) == f"{expected}, at i = 1"


def test_a_pipeline_index_map_past_the_limit_is_refused():
    text = f"""kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {{
  pipeline grid=(8,)
      in  x block=(8, 128) index=(i) -> ((i * {BIG}) // {BIG}, 0)
      out y block=(8, 128) index=(i) -> (i, 0)
      (xw, yw) {{
    yw[...] = xw
  }}
}}
"""
    err = verify_error(text)
    assert str(err) == errors.INDEX_OVER_LIMIT.format(name="x", limit=2**61)


def test_an_index_map_that_divides_by_zero_is_an_error():
    """MLIR leaves `mod 0` undefined: an error at the op, not a numpy
    warning and a guessed value."""
    text = """builtin.module {
  copy.kernel @k(%x: !copy.ref<16xf32, hbm>, %y: !copy.ref<16xf32, hbm>) {
    copy.for %i in range(0, 8) {
      %0 = copy.index affine_map<(d0) -> (d0 mod 0)>(%i)
      %v = copy.view %x[%0] : !copy.ref<16xf32, hbm>
      %1 = copy.view %y[0] : !copy.ref<16xf32, hbm>
      copy.sync_copy %v -> %1 : (!copy.ref<f32, hbm>) -> (!copy.ref<f32, hbm>)
    }
  }
}
"""
    err = verify_error(text, "k.mlir")
    assert str(err) == errors.DIVIDES_BY_ZERO
    assert err.loc.line == 4


def test_evaluate_is_int64_where_nothing_wraps_and_exact_elsewhere():
    i = AffineExpr.dimension(0)
    dims = [np.arange(8, dtype=np.int64)]
    small = evaluate(i * 3 + 1, dims)
    assert small.dtype == np.int64
    assert small.tolist() == [3 * k + 1 for k in range(8)]
    large = evaluate((i * BIG) // BIG, dims)
    assert [int(v) for v in large] == list(range(8))


def test_holds_compares_exactly():
    i = AffineExpr.dimension(0)
    sets = [
        AffineSet(1, 0, constraints)
        for constraints in comparison(">=", i * OVER_AT_7, AffineExpr.constant(0))
    ]
    assert holds(sets, [np.arange(8, dtype=np.int64)]).all()


def computation(dtype: str, statement: str) -> str:
    return (
        f"kernel k(x: f32[8] @hbm) {{\n  a = alloc {dtype}[8] @vmem\n"
        f"  b = alloc {dtype}[8] @vmem\n  {statement}\n}}\n"
    )


@pytest.mark.parametrize("statement", ["a[...] = -b", "a[...] = a - b", "a -= b"])
def test_minus_on_bool_is_a_located_error(statement):
    err = verify_error(computation("bool", statement))
    assert str(err) == errors.COMPUTE_BOOL_MINUS
    assert (err.loc.line, err.loc.col) == (4, 3)


@pytest.mark.parametrize(
    "dtype, literal",
    [
        ("bool", "2"),
        ("bool", "-1"),
        ("f16", "1e6"),
        ("f16", "65520.0"),
        ("f32", "1e39"),
        ("bf16", "-1e39"),
        ("f64", "1e400"),
    ],
)
def test_a_literal_out_of_its_dtype_is_a_located_error(dtype, literal, capfd):
    err = verify_error(computation(dtype, f"a[...] = {literal}"))
    assert str(err) == errors.COMPUTE_LITERAL_RANGE.format(literal=literal, dtype=dtype)
    assert (err.loc.line, err.loc.col) == (4, 3)
    assert capfd.readouterr().err == ""  # no numpy warning


@pytest.mark.parametrize(
    "dtype, statement",
    [
        ("bool", "a[...] = 1"),
        ("bool", "a[...] = a * b + 0"),
        ("f16", "a[...] = 65504.0"),
        ("f16", "a[...] = b * 1e-9"),
    ],
)
def test_literals_that_fit_are_accepted(dtype, statement, capfd):
    copyir.verify(copyir.parse(computation(dtype, statement), "k.cpy"))
    assert capfd.readouterr().err == ""


BOOL_STREAM = """\
dma.program "k" target "default" semaphores 1 {{
  dma.buffer "x" "hbm" 0 i1 [8] param
  dma.buffer "y" "hbm" 512 i1 [8] param
  dma.buffer "a" "vmem" 0 i1 [8]
  dma.buffer "b" "vmem" 512 i1 [8]
  dma.start "hbm" 0 [1] -> "vmem" 0 [1] i1 [8] sem 0
  dma.wait sem 0 bytes 8
  dma.compute "vmem" 512 [1] i1 [8] = "{expression}" ("vmem" 0 [1])
  dma.start "vmem" 512 [1] -> "hbm" 512 [1] i1 [8] sem 0
  dma.wait sem 0 bytes 8
}}
"""


def run_stream_text(tmp_path, capsys, text: str) -> tuple[int, str, str]:
    """`copyir run` of a hand-made `.dma`: its exit status, the first line it
    printed on stderr, and the file's path."""
    from copyir.cli import main

    path = tmp_path / "k.dma"
    path.write_text(text)
    status = main(["run", str(path), "--fill-inputs", "iota"])
    lines = capsys.readouterr().err.splitlines()
    return status, lines[0] if lines else "", str(path)


def malformed(path: str, line: int, col: int, why: str) -> str:
    return f"{path}:{line}:{col}: error: " + errors.STREAM_MALFORMED.format(why=why)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("(neg $0)", errors.COMPUTE_BOOL_MINUS),
        ("(sub $0 $0)", errors.COMPUTE_BOOL_MINUS),
        ("(add $0 2)", errors.COMPUTE_LITERAL_RANGE.format(literal="2", dtype="bool")),
        ("(add $0 $7)", errors.COMPUTE_MALFORMED.format(why="no operand $7")),
    ],
)
def test_a_hand_made_stream_holds_its_computations_to_the_verifiers_rules(
    tmp_path, capsys, expression, message
):
    """A `.dma` computation the verifier would refuse is a located error of
    the stream, never a numpy TypeError or IndexError (exit 3)."""
    text = BOOL_STREAM.format(expression=expression)
    status, first, path = run_stream_text(tmp_path, capsys, text)
    assert (status, first) == (1, malformed(path, 8, 3, message))
    text = BOOL_STREAM.format(expression="$0")
    assert run_stream_text(tmp_path, capsys, text)[:2] == (0, "")


SEMAPHORES = """\
dma.program "k" target "default" semaphores 2 {{
  dma.buffer "x" "hbm" 0 i32 [8] param
  dma.buffer "y" "hbm" 512 i32 [8] param
{names}  dma.start "hbm" 0 [1] -> "hbm" 512 [1] i32 [8] sem 1
  dma.wait sem 1 bytes 32
}}
"""


@pytest.mark.parametrize(
    ("names", "why"),
    [
        (
            '  dma.semaphore "s" 0 [1]\n  dma.semaphore "s" 1 [1]\n',
            "semaphore s is declared twice",
        ),
        (
            '  dma.semaphore "s" 0 [2]\n  dma.semaphore "t" 1 [1]\n',
            "semaphores s and t share semaphore 1",
        ),
    ],
)
def test_a_hand_made_stream_names_each_semaphore_once(tmp_path, capsys, names, why):
    """Found by review: two names for one semaphore made reports that
    contradicted themselves (`Wait on semaphore x[0]`, `x[0] has 32 bytes
    in flight`)."""
    text = SEMAPHORES.format(names=names)
    status, first, path = run_stream_text(tmp_path, capsys, text)
    assert (status, first) == (1, malformed(path, 1, 1, why))
    names = '  dma.semaphore "s" 0 [1]\n  dma.semaphore "t" 1 [1]\n'
    text = SEMAPHORES.format(names=names)
    assert run_stream_text(tmp_path, capsys, text)[:2] == (0, "")


def test_a_constant_that_divides_by_zero_in_a_stream_is_located(tmp_path, capsys):
    """xDSL's affine parser folds `1 mod 0` as it reads (ZeroDivisionError,
    exit 3 before)."""
    text = SEMAPHORES.format(names="").replace(
        "sem 1\n", "sem 1 if {() : (1 mod 0 >= 0)}\n", 1
    )
    status, first, path = run_stream_text(tmp_path, capsys, text)
    assert (status, first) == (1, f"{path}:4:74: error: {errors.DIVIDES_BY_ZERO}")


@pytest.mark.parametrize(
    ("compute", "message"),
    [
        (
            'dma.compute "vmem" 512 [1] i1 [8] = "$0" ("hbm" 0 [1])',
            errors.HBM_LOAD,
        ),
        (
            'dma.compute "hbm" 512 [1] i1 [8] = "$0" ("vmem" 0 [1])',
            errors.HBM_STORE,
        ),
    ],
)
def test_a_hand_made_computation_never_touches_hbm(tmp_path, capsys, compute, message):
    """Pallas' rule, as the verifier applies it to the authoring syntax
    (found by review: a `.dma` computation on HBM ran)."""
    text = BOOL_STREAM.format(expression="$0").replace(
        'dma.compute "vmem" 512 [1] i1 [8] = "$0" ("vmem" 0 [1])', compute
    )
    status, first, path = run_stream_text(tmp_path, capsys, text)
    assert (status, first) == (1, malformed(path, 8, 3, message))


def test_a_misaligned_hand_made_end_says_so(tmp_path, capsys):
    """Found by review: it read `DMA source moves f32 elements, but buffer x
    holds f32`."""
    text = (
        'dma.program "k" target "default" semaphores 1 {\n'
        '  dma.buffer "x" "hbm" 0 f32 [8] param\n'
        '  dma.buffer "y" "hbm" 32 f32 [8] param\n'
        '  dma.start "hbm" 2 [1] -> "hbm" 32 [1] f32 [1] sem 0\n'
        "  dma.wait sem 0 bytes 4\n}\n"
    )
    status, first, path = run_stream_text(tmp_path, capsys, text)
    message = errors.RUN_MISALIGNED.format(
        end="source", region="hbm[2:6]", name="x", offset=2, item=4
    )
    assert (status, first) == (1, f"{path}:4:3: error: {message}")
