"""The authoring syntax of loops: each construct builds the IR the
README's loops section describes, prints back as authoring syntax,
and round-trips structurally, with and without debug info and through the
MLIR form; generated loop programs round-trip too. Errors of the new syntax
are exact and located."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.ir.affine import AffineDimExpr, AffineExpr

import copyir
from copyir import errors
from copyir.cli import main
from copyir.compute import format_prefix
from copyir.cpy.keywords import KEYWORDS
from copyir.dialects.copy import (
    ARBITRARY,
    DYNAMIC,
    PARALLEL,
    AsyncCopyOp,
    AsyncDmaOp,
    BufferedCopyOp,
    ComputeOp,
    DmaOp,
    ForOp,
    IndexOp,
    SemIndexOp,
    ViewOp,
    WhenOp,
)
from copyir.errors import CopyIRError
from copyir.index import format_expr
from copyir.testing import module_difference

HEADER = (
    "kernel k(x: f32[64, 16] @hbm, y: f32[64, 16] @hbm, z: i32[64, 16] @hbm) {\n"
    "  buf = alloc f32[2, 8, 16] @vmem\n"
    "  acc = alloc f32[8, 16] @vmem\n"
    "  ia = alloc i32[8, 16] @vmem\n"
    "  sm = alloc f32[4] @smem\n"
    "  sems = semaphore[2]\n"
    "  s = semaphore\n"
    "  bx = buffered_ref x, block=(8, 8), buffers=2\n"
)
HEADER_LINES = HEADER.count("\n")


def kernel(body: str) -> str:
    return HEADER + body.rstrip("\n") + "\n}\n"


def parse(text: str, filename: str = "loops.cpy"):
    return copyir.parse(text, filename=filename)


def assert_round_trips(module) -> None:
    """Every form: cpy with locations, cpy without (up to locations, and
    stable), MLIR, and cpy -> MLIR -> cpy."""
    text = copyir.to_text(module, "cpy", debuginfo=True)
    assert module_difference(module, parse(text, "printed.cpy")) is None, text
    plain = copyir.to_text(module, "cpy")
    again = parse(plain, "plain.cpy")
    assert module_difference(module, again, locations=False) is None, plain
    assert copyir.to_text(again, "cpy") == plain
    mlir = copyir.to_text(module, "mlir")
    from_mlir = parse(mlir, "printed.mlir")
    assert module_difference(module, from_mlir) is None, mlir
    assert copyir.to_text(from_mlir, "cpy") == plain


def ops_of(module, op_type) -> list:
    return [op for op in module.walk() if isinstance(op, op_type)]


def error_of(text: str, verify: bool = True) -> CopyIRError:
    with pytest.raises(CopyIRError) as caught:
        module = parse(text)
        if verify:
            copyir.verify(module)
    return caught.value


def body_line(k: int) -> int:
    """The file line of the body's k-th line (from 1)."""
    return HEADER_LINES + k


# -- loops ----------------------------------------------------------------


@pytest.mark.parametrize(
    "head, lower, upper, grid, names",
    [
        ("for i in range(8)", [0], [8], False, ["i"]),
        ("for i in range(2, 5)", [2], [5], False, ["i"]),
        ("for i, j in grid(8, 3)", [0, 0], [8, 3], True, ["i", "j"]),
        ("for i in grid(4)", [0], [4], True, ["i"]),
        ("for i in range(2 * 4 - 1)", [0], [7], False, ["i"]),
    ],
)
def test_loop_forms(head, lower, upper, grid, names):
    module = parse(kernel(f"  {head} {{\n  }}"))
    (loop,) = ops_of(module, ForOp)
    assert [b for b, _ in loop.bounds] == lower
    assert [b for _, b in loop.bounds] == upper
    assert (loop.grid is not None) == grid
    assert [i.name_hint for i in loop.indices] == names
    assert_round_trips(module)


def test_range_prints_its_short_form():
    module = parse(
        kernel("  for i in range(0, 8) {\n  }\n  for i in range(1, 8) {\n  }")
    )
    text = copyir.to_text(module)
    assert "for i in range(8) {" in text and "for i in range(1, 8) {" in text


def test_parallel_dimensions():
    module = parse(kernel("  for i, j in grid(8, 3), parallel=(0,) {\n  }"))
    (loop,) = ops_of(module, ForOp)
    assert loop.parallel_dims == (0,)
    assert "for i, j in grid(8, 3), parallel=(0,) {" in copyir.to_text(module)
    assert_round_trips(module)


def test_dimension_semantics_are_enum_attributes_in_the_mlir_form():
    """`parallel=(0,)` is one `#copy<dim ...>` per dimension, printed after
    the grid in the custom form and read back from the generic one."""
    module = parse(kernel("  for i, j in grid(8, 3), parallel=(0,) {\n  }"))
    (loop,) = ops_of(module, ForOp)
    assert [s.data for s in loop.dimension_semantics.data] == [PARALLEL, ARBITRARY]
    mlir = copyir.to_text(module, "mlir", debuginfo=False)
    assert "grid(8, 3) dimension_semantics [parallel, arbitrary] {" in mlir
    generic = (
        '"copy.kernel"() <{sym_name = "k"}> ({\n'
        '  "copy.for"() <{lower = array<i64: 0, 0>, upper = array<i64: 8, 3>, '
        "grid, dimension_semantics = [#copy<dim parallel>, #copy<dim arbitrary>]}> "
        "({\n  ^bb0(%i: index, %j: index):\n  }) : () -> ()\n}) : () -> ()\n"
    )
    (from_generic,) = ops_of(parse(generic, "k.mlir"), ForOp)
    assert from_generic.dimension_semantics == loop.dimension_semantics
    assert from_generic.parallel_dims == (0,)
    misspelt = generic.replace("dim arbitrary", "dim arbitary")
    with pytest.raises(CopyIRError) as caught:
        parse(misspelt, "k.mlir")
    assert caught.value.message == errors.DIMENSION_SEMANTICS.format(name="arbitary")
    assert caught.value.loc.line == 2


@pytest.mark.parametrize(
    "semantics, message, col",
    [
        (
            "[paralel, arbitrary]",
            errors.DIMENSION_SEMANTICS.format(name="paralel"),
            54,
        ),
        ("[parallel, 0]", "identifier expected for a dimension's semantics", 64),
        (
            "[parallel]",
            errors.MALFORMED_LOOP.format(
                why="its dimension semantics and indices disagree in number"
            ),
            3,
        ),
    ],
)
def test_a_dimension_semantics_in_the_mlir_form_is_checked(semantics, message, col):
    """An unknown word is one located parse error, DIMENSION_SEMANTICS
    quoting it; a count that is not the rank is the verifier's."""
    mlir = (
        "copy.kernel @k() {\n"
        f"  copy.for %i, %j in grid(8, 3) dimension_semantics {semantics} {{\n"
        "  }\n}\n"
    )
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(parse(mlir, "k.mlir"))
    err = caught.value
    assert err.message == message
    assert (err.loc.line, err.loc.col) == (2, col)


def test_a_parallel_dimension_out_of_range_is_located_at_the_loop():
    """`.cpy`'s `parallel=` names dimensions of the grid; a repeated one is
    one parallel dimension."""
    for dims in ("(2,)", "(-1,)"):
        err = error_of(kernel(f"  for i, j in grid(8, 3), parallel={dims} {{\n  }}"))
        assert err.message == errors.MALFORMED_LOOP.format(
            why="a parallel dimension out of range"
        )
        assert (err.loc.line, err.loc.col) == (body_line(1), 3)
    module = parse(kernel("  for i, j in grid(8, 3), parallel=(0, 0) {\n  }"))
    assert ops_of(module, ForOp)[0].parallel_dims == (0,)


def test_nested_loops_nest_ops_and_statements_keep_their_lines():
    module = parse(
        kernel(
            "  for i in range(4) {\n"
            "    for j in range(2) {\n"
            "      copy_start x[ds(8 * i + j, 8)] -> buf[j], sems[j]\n"
            "    }\n"
            "  }"
        )
    )
    outer, inner = ops_of(module, ForOp)
    assert inner.parent_op() is outer
    (dma,) = ops_of(module, DmaOp)
    assert dma.parent_op() is inner
    assert (dma.location.line.data, dma.location.column.data) == (body_line(3), 7)
    assert_round_trips(module)


def test_sibling_loops_may_reuse_names():
    body = (
        "  for i in range(2) {\n    t = i + 1\n  }\n"
        "  for i in range(3) {\n    t = 2 * i\n  }\n  t = alloc f32[4] @vmem"
    )
    module = parse(kernel(body))
    assert [op.body.block.args[0].name_hint for op in ops_of(module, ForOp)] == [
        "i",
        "i",
    ]
    assert_round_trips(module)


def test_a_body_brace_after_an_integer_opens_a_body():
    """`when i < 8 {` ends in an integer, not `)`: still a body, whose lines
    are statements; a `{` inside it in a sync_copy is still a record."""
    module = parse(
        kernel(
            "  for i in range(8) {\n"
            "    when i < 7 {\n"
            "      sync_copy {a: acc} -> {a: buf[0]}\n"
            "      copy_start x[0:8] -> buf[1], s\n"
            "    }\n"
            "  }"
        )
    )
    (when,) = ops_of(module, WhenOp)
    assert [op.name for op in when.body.block.ops] == [
        "copy.view",
        "copy.sync_copy",
        "copy.view",
        "copy.view",
        "copy.dma",
    ]
    assert_round_trips(module)


# -- conditions -------------------------------------------------------------


@pytest.mark.parametrize(
    "condition, sets, printed",
    [
        ("i + 1 < 8", ["(d0) : (((d0 * -1) + 6) >= 0)"], "i <= 6"),
        ("i % 2 == 0", ["(d0) : ((d0 mod 2) == 0)"], "i % 2 == 0"),
        ("i >= 1", ["(d0) : ((d0 + -1) >= 0)"], "i >= 1"),
        ("0 < i", ["(d0) : ((d0 + -1) >= 0)"], "i >= 1"),
        (
            "i != 3",
            ["(d0) : (((d0 * -1) + 2) >= 0)", "(d0) : ((d0 + -4) >= 0)"],
            "i <= 2 or i >= 4",
        ),
        ("not i < 3", ["(d0) : ((d0 + -3) >= 0)"], "i >= 3"),
        (
            "1 <= i < 7",
            ["(d0) : ((d0 + -1) >= 0, ((d0 * -1) + 6) >= 0)"],
            "i >= 1 and i <= 6",
        ),
        (
            "not (i < 3 and j >= 2) or i == 0",
            [
                "(d0, d1) : ((d0 + -3) >= 0)",
                "(d0, d1) : (((d1 * -1) + 1) >= 0)",
                "(d0, d1) : (d0 == 0)",
            ],
            "i >= 3 or j <= 1 or i == 0",
        ),
        (
            "(i < 2 or j < 2) and i == j",
            [
                "(d0, d1) : (((d0 * -1) + 1) >= 0, (d0 + (d1 * -1)) == 0)",
                "(d0, d1) : (((d1 * -1) + 1) >= 0, (d0 + (d1 * -1)) == 0)",
            ],
            "i <= 1 and i - j == 0 or j <= 1 and i - j == 0",
        ),
    ],
)
def test_when_conditions_are_or_of_and(condition, sets, printed):
    module = parse(
        kernel(f"  for i, j in grid(8, 4) {{\n    when {condition} {{\n    }}\n  }}")
    )
    (when,) = ops_of(module, WhenOp)
    assert [str(s.data) for s in when.condition.data] == sets
    assert f"when {printed} {{" in copyir.to_text(module)
    assert_round_trips(module)


def test_when_operands_are_the_names_in_print_order():
    module = parse(kernel("  for i, j in grid(8, 4) {\n    when j < i {\n    }\n  }"))
    (when,) = ops_of(module, WhenOp)
    assert [a.name_hint for a in when.args] == ["i", "j"]  # `i - j >= 1`
    assert_round_trips(module)


def test_a_condition_too_large_is_refused():
    cond = " and ".join(f"i != {n}" for n in range(9))
    err = error_of(kernel(f"  for i in range(8) {{\n    when {cond} {{\n    }}\n  }}"))
    assert str(err) == errors.CONDITION_TOO_LARGE.format(expr=cond, limit=256)
    assert (err.loc.line, err.loc.col) == (body_line(2), 10)


@pytest.mark.parametrize("n", [100, 1000])
@pytest.mark.parametrize(
    "op, term, sets", [("or", "i == {k}", None), ("and", "i >= -{k}", 1)]
)
def test_a_flat_chain_of_terms_is_one_level_of_nesting(op, term, sets, n):
    """`a or b or c ...` nests one level per term in the grammar; the
    nesting limit is for parentheses and `not`."""
    cond = f" {op} ".join(term.format(k=k) for k in range(n))
    module = parse(kernel(f"  for i in range(8) {{\n    when {cond} {{\n    }}\n  }}"))
    copyir.verify(module)
    (when,) = ops_of(module, WhenOp)
    assert len(when.condition.data) == (sets or n)
    assert_round_trips(module)


def test_deeply_parenthesised_conditions_are_still_too_deep():
    cond = "i == 0"
    for k in range(1, 100):
        cond = f"i == {k} or ({cond})"
    err = error_of(kernel(f"  for i in range(8) {{\n    when {cond} {{\n    }}\n  }}"))
    assert str(err) == errors.NESTED_TOO_DEEP.format(limit=64)


# -- index expressions --------------------------------------------------------


@pytest.mark.parametrize(
    "expr, map_text, printed",
    [
        ("i % 2", "(d0) -> ((d0 mod 2))", "i % 2"),
        ("8 * (i + 1)", "(d0) -> (((d0 * 8) + 8))", "8 * i + 8"),
        ("(i + 1) % 2", "(d0) -> (((d0 + 1) mod 2))", "(i + 1) % 2"),
        ("i // 4 * 3", "(d0) -> (((d0 floordiv 4) * 3))", "3 * (i // 4)"),
        ("j - 2 * i", "(d0, d1) -> ((d0 + (d1 * -2)))", "j - 2 * i"),
        ("i - (j - 1)", "(d0, d1) -> ((d0 + ((d1 * -1) + 1)))", "i + (-j + 1)"),
        ("-i", "(d0) -> ((d0 * -1))", "-i"),
        ("i + 0", "(d0) -> (d0)", "i + 0"),
        ("3 * 4", "() -> (12)", "12"),
        ("ceildiv(i, 3)", "(d0) -> ((d0 ceildiv 3))", "ceildiv(i, 3)"),
    ],
)
def test_named_index_values(expr, map_text, printed):
    module = parse(kernel(f"  for i, j in grid(8, 4) {{\n    t = {expr}\n  }}"))
    (index,) = ops_of(module, IndexOp)
    assert index.result.name_hint == "t"
    assert str(index.map.data) == map_text
    assert f"t = {printed}\n" in copyir.to_text(module)
    assert_round_trips(module)


def test_a_name_for_an_index_value_is_an_alias():
    module = parse(kernel("  for i in range(8) {\n    t = i\n    u = (t)\n  }"))
    assert ops_of(module, IndexOp) == []
    assert_round_trips(module)


def test_i_minus_1_is_a_subtraction():
    """`-1` is not one token, so `i -1` subtracts."""
    module = parse(kernel("  for i in range(8) {\n    t = i -1\n  }"))
    (index,) = ops_of(module, IndexOp)
    assert str(index.map.data) == "(d0) -> ((d0 + -1))"


@pytest.mark.parametrize(
    "subscripts, message",
    [
        ("x[-1]", errors.NEGATIVE_INDEX.format(index=-1, expr="x[-1]")),
        ("x[i, -1]", errors.NEGATIVE_INDEX.format(index=-1, expr="x[i, -1]")),
        ("x[-1:8]", errors.NEGATIVE_INDEX.format(index=-1, expr="x[-1:8]")),
        # The verifier writes the view from the IR: the folded -1.
        ("x[(-1)]", errors.NEGATIVE_INDEX.format(index=-1, expr="x[-1]")),
    ],
)
def test_negative_indices_stay_errors(subscripts, message):
    err = error_of(
        kernel(f"  for i in range(8) {{\n    copy_start {subscripts} -> y, s\n  }}")
    )
    assert str(err) == message


def test_constant_expressions_fold_to_static_subscripts():
    module = parse(kernel("  copy_start x[2 * 3 + 1] -> y[7], s"))
    assert ops_of(module, IndexOp) == []
    src, dst = ops_of(module, ViewOp)
    assert src.properties == dst.properties


def test_ds_and_an_affine_slice_build_the_same_view():
    a = parse(
        kernel("  for i in range(8) {\n    copy_start x[ds(8 * i, 8)] -> y, s\n  }")
    )
    b = parse(
        kernel("  for i in range(8) {\n    copy_start x[8 * i:8 * i + 8] -> y, s\n  }")
    )
    assert module_difference(a, b, locations=False) is None
    (view,) = ops_of(a, ViewOp)
    assert view.offsets.get_values() == (DYNAMIC,)
    assert view.sizes.get_values() == (8,)
    assert copyir.to_text(b).count("x[ds(8 * i, 8)]") == 1
    assert_round_trips(a)


def test_a_static_ds_is_a_static_slice():
    a = parse(kernel("  copy_start x[ds(8, 8)] -> y[8:16], s"))
    src, dst = ops_of(a, ViewOp)
    assert src.properties == dst.properties


def test_dynamic_indices_everywhere():
    module = parse(
        kernel(
            "  for i, j in grid(8, 2) {\n"
            "    slot = i % 2\n"
            "    copy_start x[ds(8 * i, 8), j] -> buf[slot, :, (j + 1) % 16], "
            "sems[(i + 1) % 2]\n"
            "    buffered_copy start x -> bx[i, j], sems[slot], slot=(i + 1) % 2\n"
            "    buffered_copy wait x -> bx[i, j], sems[slot], slot=(i + 1) % 2\n"
            "    buffered_copy bx[i, 1] -> y, slot=slot\n"
            "  }"
        )
    )
    start, wait, sync = ops_of(module, BufferedCopyOp)
    assert start.action_value == "start" and wait.action_value == "wait"
    assert sync.action_value is None and sync.sem is None
    assert sync.block_indices[1] == 1 and sync.slot_value.name_hint == "slot"
    (sem,) = [op for op in ops_of(module, SemIndexOp) if op.dynamic_indices][:1]
    assert sem.indices.get_values() == (DYNAMIC,)
    text = copyir.to_text(module)
    assert (
        "copy_start x[ds(8 * i, 8), j] -> buf[slot, :, (j + 1) % 16], "
        "sems[(i + 1) % 2]" in text
    )
    assert "buffered_copy start x -> bx[i, j], sems[slot], slot=(i + 1) % 2" in text
    assert "buffered_copy bx[i, 1] -> y, slot=slot" in text
    assert_round_trips(module)
    copyir.verify(module)  # block indices that are index values, too


def test_messages_write_an_index_value_as_its_expression():
    err = error_of(
        kernel(
            "  for i in range(8) {\n    copy_start x[0:8] -> acc, x[ds(8 * i, 8)]\n  }"
        )
    )
    assert str(err) == errors.EXPECTED_SEMAPHORE.format(
        op="copy_start", role="sem", name="x[ds(8 * i, 8)]", type="f32[8, 16] @hbm"
    )


def test_one_index_op_per_expression_over_the_names_it_mentions():
    module = parse(
        kernel(
            "  for i, j in grid(8, 2) {\n    copy_start x[ds(j + 2 * i, 8)] -> y, s\n  }"
        )
    )
    (index,) = ops_of(module, IndexOp)
    assert [a.name_hint for a in index.args] == ["j", "i"]
    assert str(index.map.data) == "(d0, d1) -> ((d0 + (d1 * 2)))"


# -- descriptors --------------------------------------------------------------


def test_descriptors():
    module = parse(
        kernel(
            "  for i in range(8) {\n"
            "    c = async_copy x[ds(8 * i, 8)] -> buf[i % 2], sems[i % 2]\n"
            "    c.start()\n"
            "    c.start(add)\n"
            "    c.start(priority=1)\n"
            "    c.start(add, priority=1)\n"
            "    c.wait()\n"
            "  }"
        )
    )
    (copy,) = ops_of(module, AsyncCopyOp)
    assert copy.result.name_hint == "c"
    dmas = ops_of(module, AsyncDmaOp)
    assert [d.action.data for d in dmas] == ["start"] * 4 + ["wait"]
    assert [d.add is not None for d in dmas] == [False, True, False, True, False]
    assert [d.priority_value for d in dmas] == [0, 0, 1, 1, 0]
    text = copyir.to_text(module)
    assert "c = async_copy x[ds(8 * i, 8)] -> buf[i % 2], sems[i % 2]\n" in text
    assert "c.start(add, priority=1)\n" in text and "c.wait()\n" in text
    assert_round_trips(module)
    copyir.verify(module)


def test_a_misspelt_method_reaches_the_verifier():
    text = kernel("  c = async_copy x[0:8] -> buf[0], s\n  c.Start()")
    err = error_of(text)
    assert str(err) == errors.UNKNOWN_ACTION.format(action="Start")
    assert (err.loc.line, err.loc.col) == (body_line(2), 3)
    assert_round_trips(parse(text))


# -- computations -------------------------------------------------------------


@pytest.mark.parametrize(
    "statement, expression, inputs, printed",
    [
        (
            "acc[...] = 2.0 * buf[0] + 1.0",
            "(add (mul 2.0 $0) 1.0)",
            1,
            "acc[...] = 2.0 * buf[0] + 1.0",
        ),
        ("acc += buf[1]", "(add $0 $1)", 2, "acc += buf[1]"),
        ("acc -= buf[1]", "(sub $0 $1)", 2, "acc -= buf[1]"),
        ("acc *= 2", "(mul $0 2)", 1, "acc *= 2"),
        ("acc /= buf[0] - 1e-3", "(div $0 (sub $1 1e-3))", 2, "acc /= buf[0] - 1e-3"),
        ("acc[...] = 0", "0", 0, "acc[...] = 0"),
        ("acc[...] = acc + acc", "(add $0 $0)", 1, "acc += acc"),
        ("sm[0] = max(sm[1], sm[2])", "(max $0 $1)", 2, "sm[0] = max(sm[1], sm[2])"),
        ("sm[0] = min(sm[1], -sm[2])", "(min $0 (neg $1))", 2, None),
        ("acc[...] = -2.0 * buf[0]", "(mul -2.0 $0)", 1, None),
        ("acc[...] = -(2.0) * buf[0]", "(mul (neg 2.0) $0)", 1, None),
        ("acc[...] = buf[0] / (buf[1] * 3.0)", "(div $0 (mul $1 3.0))", 2, None),
        ("buf[1] = buf[0] - (buf[1] - acc)", "(sub $0 (sub $1 $2))", 3, None),
        ("acc[0:4] += buf[0, 0:4]", "(add $0 $1)", 2, "acc[0:4] += buf[0, 0:4]"),
    ],
)
def test_computations(statement, expression, inputs, printed):
    module = parse(kernel(f"  {statement}"))
    (op,) = ops_of(module, ComputeOp)
    assert format_prefix(op.expression()) == expression
    assert len(op.inputs) == inputs
    assert f"  {printed or statement}\n" in copyir.to_text(module)
    assert_round_trips(module)


def test_a_computation_in_a_loop():
    text = kernel(
        "  for i in range(8) {\n"
        "    copy_start x[ds(8 * i, 8)] -> buf[i % 2], s\n"
        "    copy_wait x[ds(8 * i, 8)] -> buf[i % 2], s\n"
        "    buf[i % 2] = 2.0 * buf[i % 2] + 1.0\n"
        "    acc += buf[i % 2]\n"
        "  }"
    )
    module = parse(text)
    copyir.verify(module)
    assert_round_trips(module)


# -- scoping ------------------------------------------------------------------


def test_a_loop_index_outside_its_loop():
    err = error_of(
        kernel("  for i in range(4) {\n  }\n  copy_start x[ds(i, 8)] -> buf[0], s"),
        False,
    )
    assert str(err) == errors.UNDEFINED.format(name="i")
    assert (err.loc.line, err.loc.col) == (body_line(3), 19)
    assert [n.message for n in err.notes] == [
        errors.OUT_OF_SCOPE_INDEX.format(name="i", line=body_line(1), construct="loop")
    ]


def test_a_name_defined_in_a_body_outside_it():
    err = error_of(
        kernel(
            "  for i in range(4) {\n    when i > 1 {\n      t = i + 1\n    }\n"
            "    copy_start x[ds(t, 8)] -> buf[0], s\n  }"
        ),
        False,
    )
    assert str(err) == errors.UNDEFINED.format(name="t")
    assert [n.message for n in err.notes] == [
        errors.OUT_OF_SCOPE_NAME.format(
            name="t", line=body_line(3), construct="when", body=body_line(2)
        )
    ]


@pytest.mark.parametrize(
    "body, col",
    [
        ("  for i in range(4) {\n    i = 3\n  }", 5),
        ("  for i in range(4) {\n    for i in range(2) {\n    }\n  }", 9),
        ("  for i, i in grid(4, 2) {\n  }", None),
    ],
)
def test_a_loop_index_cannot_be_rebound(body, col):
    err = error_of(kernel(body), False)
    assert str(err) == errors.LOOP_INDEX_REBOUND.format(
        name="i", line=body_line(1), construct="loop"
    )
    if col is not None:
        assert (err.loc.line, err.loc.col) == (body_line(2), col)


def test_a_loop_index_cannot_shadow_a_name():
    err = error_of(kernel("  for s in range(4) {\n  }"), False)
    assert str(err) == errors.DEFINED_TWICE.format(name="s", line=7)


# -- errors of the new syntax ---------------------------------------------------


def _in_loop(statement: str) -> str:
    return kernel(f"  for i, j in grid(4, 2) {{\n    {statement}\n  }}")


@pytest.mark.parametrize(
    "statement, message, col",
    [
        (
            "copy_start x[ds(i * j, 8)] -> y, s",
            errors.INDEX_NOT_AFFINE.format(expr="i * j", why=errors.INDEX_MULTIPLIES),
            21,
        ),
        (
            "copy_start x[ds((i + 1) * (j + 1), 8)] -> y, s",
            errors.INDEX_NOT_AFFINE.format(
                expr="(i + 1) * (j + 1)", why=errors.INDEX_MULTIPLIES
            ),
            22,
        ),
        (
            "copy_start x[i // j] -> y, s",
            errors.INDEX_NOT_AFFINE.format(expr="i // j", why=errors.INDEX_DIVIDES),
            18,
        ),
        (
            "copy_start x[i % 0] -> y, s",
            errors.INDEX_DIVISOR.format(expr="i % 0", divisor=0),
            18,
        ),
        (
            "copy_start x[i // -2] -> y, s",
            errors.INDEX_DIVISOR.format(expr="i // -2", divisor=-2),
            18,
        ),
        (
            "copy_start x[i / 2] -> y, s",
            errors.INDEX_OPERATOR.format(
                expr="i / 2", what="/ (write // to divide integers)"
            ),
            18,
        ),
        (
            "copy_start x[2.0] -> y, s",
            errors.INDEX_OPERATOR.format(expr="2.0", what="the float 2.0"),
            18,
        ),
        (
            "copy_start x[buf[0]] -> y, s",
            errors.INDEX_OPERATOR.format(expr="buf[0]", what="a view"),
            18,
        ),
        (
            "copy_start x[acc] -> y, s",
            errors.NOT_AN_INDEX.format(name="acc", type="f32[8, 16] @vmem"),
            18,
        ),
        (
            "copy_start x[abs(i)] -> y, s",
            errors.INDEX_OPERATOR.format(expr="abs(i)", what="abs(...)"),
            18,
        ),
        (
            "copy_start x[max(i, 1) + 1] -> y, s",
            errors.INDEX_MIN_MAX_INSIDE.format(expr="max(i, 1)", name="max"),
            18,
        ),
        (
            "copy_start x[max(i)] -> y, s",
            errors.INDEX_MIN_MAX_ARGUMENTS.format(expr="max(i)", name="max", count=1),
            18,
        ),
        (
            "copy_start x[ds(0, 8) + 1] -> y, s",
            errors.DS_MISPLACED.format(expr="ds(0, 8)"),
            18,
        ),
        (
            "copy_start x[ds(i, 8, 1)] -> y, s",
            errors.DS_FORM.format(expr="ds(i, 8, 1)"),
            18,
        ),
        (
            "copy_start x[ds(8 * i, j)] -> y, s",
            errors.STATIC_INTEGER.format(what="The size of ds(8 * i, j)", expr="j"),
            28,
        ),
        (
            "copy_start x[i:i + j] -> y, s",
            errors.SLICE_NOT_STATIC.format(
                slice="i:i + j", expr="x[i:i + j]", size="j"
            ),
            18,
        ),
        (
            "copy_start x[i:] -> y, s",
            errors.SLICE_NOT_STATIC.format(slice="i:", expr="x[i:]", size="-i + 64"),
            18,
        ),
        (
            "t = x + i",
            errors.NOT_AN_INDEX.format(name="x", type="f32[64, 16] @hbm"),
            9,
        ),
        (
            "buf[0] = alloc f32[4] @vmem",
            errors.DEFINITION_TARGET.format(what="alloc", target="buf[0]"),
            5,
        ),
        (
            "buf[...] = semaphore",
            errors.DEFINITION_TARGET.format(what="semaphore", target="buf[...]"),
            5,
        ),
        (
            "x.start()",
            errors.NOT_A_DESCRIPTOR.format(
                call="x.start()", name="x", type="f32[64, 16] @hbm"
            ),
            5,
        ),
        (
            "buffered_copy start x -> bx[i, j], slot=0",
            errors.WINDOW_NO_SEMAPHORE.format(action="start"),
            5,
        ),
        (
            "buffered_copy start x -> bx[i, j], s, s",
            errors.WINDOW_EXTRA_ITEM.format(expr="s"),
            43,
        ),
        (
            "buffered_copy start x -> bx[i, j], slot=0, s",
            errors.WINDOW_EXTRA_ITEM.format(expr="s"),
            48,
        ),
        (
            "acc[...] = acc // 2",
            errors.COMPUTE_OPERATOR.format(what="//", expr="acc // 2"),
            16,
        ),
        (
            "acc[...] = acc % 2",
            errors.COMPUTE_OPERATOR.format(what="%", expr="acc % 2"),
            16,
        ),
        (
            "acc[...] = exp(acc)",
            errors.COMPUTE_OPERATOR.format(what="exp(...)", expr="exp(acc)"),
            16,
        ),
        (
            "acc[...] = max(acc)",
            errors.COMPUTE_ARGUMENTS.format(name="max", count=1, expr="max(acc)"),
            16,
        ),
        (
            "acc += i",
            errors.COMPUTE_INDEX_VALUE.format(name="i"),
            12,
        ),
        (
            "for k in rnage(4) {\n    }",
            errors.LOOP_RANGE.format(expr="rnage(4)"),
            14,
        ),
        (
            "for k in range(1, 2, 3) {\n    }",
            errors.LOOP_RANGE.format(expr="range(1, 2, 3)"),
            14,
        ),
        (
            "for k, m in range(4) {\n    }",
            errors.LOOP_INDEX_COUNT.format(range="range(4)", dims=1, count=2),
            9,
        ),
        (
            "for k in range(i) {\n    }",
            errors.STATIC_INTEGER.format(what="A bound of range(i)", expr="i"),
            20,
        ),
    ],
)
def test_errors_of_the_new_syntax(statement, message, col):
    err = error_of(_in_loop(statement), False)
    assert str(err) == message
    assert (err.loc.line, err.loc.col) == (body_line(2), col)


def test_a_name_that_is_no_index_gets_a_hint_to_compute():
    err = error_of(_in_loop("t = x + i"), False)
    assert [n.message for n in err.notes] == [errors.HINT_COMPUTE.format(name="t")]


def test_a_misspelt_range_gets_a_did_you_mean():
    err = error_of(_in_loop("for k in rnage(4) {\n    }"), False)
    assert [n.message for n in err.notes] == [errors.DID_YOU_MEAN.format(name="range")]


# -- the printer ----------------------------------------------------------------


def test_keywords_are_not_printed_as_names():
    assert {"for", "in", "when", "and", "or", "not", "async_copy"} <= KEYWORDS
    mlir = (
        "copy.kernel @k(%x: !copy.ref<8xf32, hbm>) {\n"
        "  %when = copy.alloc : !copy.ref<8xf32, vmem>\n"
        "  %in = copy.semaphore : !copy.sem\n"
        '  copy.dma "start" %x, %when, %in : !copy.ref<8xf32, hbm>, '
        "!copy.ref<8xf32, vmem>, !copy.sem\n"
        "}\n"
    )
    text = copyir.to_text(parse(mlir, "k.mlir"))
    assert "when" not in text.replace("kernel", "") and " in " not in text
    copyir.verify(parse(text))


def test_function_names_stay_free_as_value_names():
    module = parse(
        kernel(
            "  ds = alloc f32[8, 16] @vmem\n  range = semaphore\n"
            "  copy_start x[0:8] -> ds, range\n  max = ds\n  max[...] = max(max, 1.0)"
        )
    )
    assert_round_trips(module)


def test_verify_emits_cpy_for_an_mlir_program_with_loops(tmp_path, capsys):
    text = kernel(
        "  for i in range(8) {\n"
        "    c = async_copy x[ds(8 * i, 8)] -> buf[i % 2], sems[i % 2]\n"
        "    c.start()\n    c.wait()\n"
        "    when i % 2 == 0 {\n      acc += buf[i % 2]\n    }\n"
        "  }"
    )
    path = tmp_path / "loops.mlir"
    path.write_text(copyir.to_text(parse(text), "mlir"))
    assert main(["verify", "--emit", "cpy", str(path)]) == 0
    out = capsys.readouterr().out
    assert "has no authoring syntax" not in out
    assert "for i in range(8) {" in out and "when i % 2 == 0 {" in out
    assert "acc += buf[i % 2]" in out
    assert copyir.to_text(parse(out)) == copyir.to_text(parse(text))


def test_debuginfo_locations_on_loops():
    module = parse(kernel("  for i in range(8) {\n    when i > 2 {\n    }\n  }"))
    text = copyir.to_text(module, debuginfo=True)
    assert f'for i in range(8) loc("loops.cpy":{body_line(1)}:3) {{' in text
    assert f'when i >= 3 loc("loops.cpy":{body_line(2)}:5) {{' in text


# -- generated programs ---------------------------------------------------------

INDEX_NAMES = ("i", "j", "k", "m")
STATEMENT_KINDS = (
    "for",
    "for",
    "when",
    "index",
    "dma",
    "slice",
    "desc",
    "window",
    "compute",
)


@st.composite
def index_exprs(draw, names, depth=0):
    """An affine index expression over `names`, as text."""
    leaves = [st.integers(0, 9).map(str)]
    if names:
        leaves.append(st.sampled_from(names))
    if depth >= 3:
        return draw(st.one_of(leaves))
    kind = draw(
        st.sampled_from(["leaf", "leaf", "add", "sub", "mul", "div", "mod", "neg"])
    )
    if kind == "leaf":
        return draw(st.one_of(leaves))
    sub = index_exprs(names, depth + 1)
    if kind == "neg":
        return f"-({draw(sub)})"
    if kind in ("add", "sub"):
        op = "+" if kind == "add" else "-"
        return f"({draw(sub)} {op} {draw(sub)})"
    constant = draw(st.integers(1, 5))
    if kind == "mul":
        a, b = draw(sub), str(constant)
        return f"{a} * {b}" if draw(st.booleans()) else f"{b} * ({a})"
    op = "//" if kind == "div" else "%"
    return f"({draw(sub)}) {op} {constant}"


@st.composite
def conditions(draw, names, depth=0):
    if depth >= 2 or draw(st.booleans()):
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
        return f"{draw(index_exprs(names, 2))} {op} {draw(index_exprs(names, 2))}"
    kind = draw(st.sampled_from(["and", "or", "not", "parens"]))
    sub = conditions(names, depth + 1)
    if kind == "not":
        return f"not {draw(sub)}"
    if kind == "parens":
        return f"({draw(sub)})"
    return f"{draw(sub)} {kind} {draw(sub)}"


@st.composite
def compute_exprs(draw, operands, depth=0):
    leaves = [st.sampled_from(operands), st.sampled_from(["1.0", "2.5", "0", "3"])]
    if depth >= 2 or draw(st.booleans()):
        return draw(st.one_of(leaves))
    kind = draw(st.sampled_from(["+", "-", "*", "/", "max", "min", "neg"]))
    sub = compute_exprs(operands, depth + 1)
    if kind in ("max", "min"):
        return f"{kind}({draw(sub)}, {draw(sub)})"
    if kind == "neg":
        return f"-{draw(sub)}"
    return f"({draw(sub)} {kind} {draw(sub)})"


@st.composite
def loop_bodies(draw, names, depth, counter):
    """Statements over the visible loop indices `names`."""
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(STATEMENT_KINDS))
        pad = "  " * (depth + 1)

        def e():
            return draw(index_exprs(names))

        free = [n for n in INDEX_NAMES if n not in names]
        if kind == "for" and depth < 3 and free:
            count = draw(st.integers(1, min(2, len(free))))
            new = free[:count]
            extents = [draw(st.integers(1, 6)) for _ in new]
            form = draw(st.sampled_from(["range", "range2", "grid"]))
            if count == 1 and form == "range":
                head = f"range({extents[0]})"
            elif count == 1 and form == "range2":
                head = f"range({extents[0] - 1}, {extents[0] + 2})"
            else:
                head = f"grid({', '.join(map(str, extents))})"
            if draw(st.booleans()):
                head += f", parallel=({draw(st.integers(0, count - 1))},)"
            inner = draw(loop_bodies(names + new, depth + 1, counter))
            lines += [f"{pad}for {', '.join(new)} in {head} {{", *inner, f"{pad}}}"]
        elif kind == "when" and depth < 3:
            inner = draw(loop_bodies(names, depth + 1, counter))
            lines += [f"{pad}when {draw(conditions(names))} {{", *inner, f"{pad}}}"]
        elif kind == "index":
            counter[0] += 1
            lines.append(f"{pad}t{counter[0]} = {e()}")
        elif kind == "dma":
            head = draw(st.sampled_from(["copy_start", "copy_wait", "dma start"]))
            lines.append(  # a start that folds to a constant must not be < 0
                f"{pad}{head} x[ds({e()} % 57, 8)] -> buf[{e()}], sems[{e()}]"
                + draw(st.sampled_from(["", ", add", ", priority=1"]))
            )
        elif kind == "slice":
            start = f"({e()}) % 57"
            lines.append(f"{pad}copy_start x[{start}:{start} + 8, :] -> buf[{e()}], s")
        elif kind == "desc":
            counter[0] += 1
            c = f"c{counter[0]}"
            lines.append(f"{pad}{c} = async_copy x[ds({e()} % 57, 8)] -> buf[{e()}], s")
            options = draw(
                st.sampled_from(["", "add", "priority=1", "add, priority=1"])
            )
            lines += [f"{pad}{c}.start({options})", f"{pad}{c}.wait()"]
        elif kind == "window":
            action = draw(st.sampled_from(["start ", "wait ", ""]))
            sem = f", sems[{e()}]" if action else ""
            side = f"bx[{e()}, {e()}]"
            src, dst = ("x", side) if draw(st.booleans()) else (side, "y")
            lines.append(f"{pad}buffered_copy {action}{src} -> {dst}{sem}, slot={e()}")
        else:
            target = draw(st.sampled_from(["acc[...]", "acc", f"buf[{e()}]"]))
            operands = ["acc", f"buf[{e()}]", "buf[1]"]
            op = "=" if target != "acc" else draw(st.sampled_from(["+=", "-=", "*="]))
            lines.append(f"{pad}{target} {op} {draw(compute_exprs(operands))}")
    return lines


@st.composite
def loop_programs(draw):
    body = draw(loop_bodies([], 0, [0]))
    return kernel("\n".join(body))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(loop_programs())
def test_generated_loop_programs_round_trip(text):
    assert_round_trips(parse(text, "generated.cpy"))


def _operator_exprs(dims: int):
    """Affine expressions built with xDSL's own arithmetic, as the builder
    builds them."""
    leaf = st.one_of(
        st.integers(-9, 9).map(AffineExpr.constant),
        st.integers(0, dims - 1).map(AffineDimExpr),
    )

    def extend(children):
        constant = st.integers(-4, 4).map(AffineExpr.constant)
        positive = st.integers(1, 5).map(AffineExpr.constant)
        return st.one_of(
            st.tuples(children, children).map(lambda p: p[0] + p[1]),
            st.tuples(children, children).map(lambda p: p[0] - p[1]),
            st.tuples(children, constant).map(lambda p: p[0] * p[1]),
            st.tuples(children, positive).map(lambda p: p[0] // p[1]),
            st.tuples(children, positive).map(lambda p: p[0] % p[1]),
            children.map(lambda e: -e),
        )

    return st.recursive(leaf, extend, max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(_operator_exprs(3))
def test_printed_index_expressions_build_back_the_same(expr):
    """format_expr writes what the parser builds back into the very same
    AffineExpr (so index values round-trip whatever their shape)."""
    text = format_expr(expr, ["i", "j", "k"])
    module = parse(kernel(f"  for i, j, k in grid(2, 2, 2) {{\n    t = {text}\n  }}"))
    (index,) = ops_of(module, IndexOp) or [None]
    if index is None:  # a bare dimension or constant: `t = i` is an alias
        return
    names = [a.name_hint for a in index.args]
    built = index.map.data.results[0]
    rebuilt = built.replace_dims_and_symbols(
        [AffineDimExpr("ijk".index(n)) for n in names], ()
    )
    assert rebuilt == expr, text


@pytest.mark.parametrize(
    "body, message, suggestion",
    [
        ("  for i inn range(8) {\n  }", "unexpected 'inn'; expected ',' or 'in'", "in"),
        (
            "  for i in range(8) {\n    when i < 3 andj > 2 {\n    }\n  }",
            "unexpected 'andj'; expected '%', '*', '+', '-', '/', '//', 'and', "
            "'loc', 'or', '{' or a comparison",
            "and",
        ),
    ],
)
def test_a_keyword_ends_at_a_word_end(body, message, suggestion):
    """`inn` is not `in` followed by `n`, and `andj` not `and j`."""
    err = error_of(kernel(body), False)
    assert str(err) == message
    assert [n.message for n in err.notes] == [
        errors.DID_YOU_MEAN.format(name=suggestion)
    ]


def test_names_that_start_like_keywords():
    body = (
        "  for index in range(8) {\n    nothing = index + 1\n    order = 2 * index\n"
        "    when not nothing < 3 or order > 2 and index < 7 {\n    }\n  }"
    )
    assert_round_trips(parse(kernel(body)))


# -- a view written again is a view of its own ------------------------------


def test_a_view_written_again_is_another_view():
    """The parser makes the ops the text writes: a wait's views are not its
    start's (the `cse` pass merges them, tests/passes/test_cse.py)."""
    module = parse(
        kernel(
            "  copy_start x[0:8] -> buf[0], sems[0]\n"
            "  copy_wait x[0:8] -> buf[0], sems[0]\n"
            "  copy_start x[8:16] -> buf[0], sems[0]\n"
            "  copy_wait x[ 8 : 16 ] -> buf[0], sems[0]"
        )
    )
    assert len(ops_of(module, ViewOp)) == 8  # x[...] and buf[0] for each DMA
    assert len(ops_of(module, SemIndexOp)) == 4
    start, wait, *_ = ops_of(module, DmaOp)
    assert not set(start.operands) & set(wait.operands)
    text = copyir.to_text(module, "cpy")
    assert "  copy_wait x[0:8] -> buf[0], sems[0]\n" in text
    assert "  copy_wait x[8:16] -> buf[0], sems[0]\n" in text
    assert_round_trips(module)


def test_index_values_written_again_are_other_values():
    module = parse(
        kernel(
            "  for i in range(8) {\n"
            "    copy_start x[ds(8 * i, 8)] -> buf[i % 2], sems[i % 2]\n"
            "    when i < 7 {\n"
            "      copy_wait x[ds(8 * i, 8)] -> buf[i % 2], sems[i % 2]\n"
            "    }\n"
            "    copy_wait x[ds(8 * i, 8)] -> buf[i % 2], sems[i % 2]\n"
            "  }"
        )
    )
    # Per DMA: 3 index values (8 * i, and i % 2 twice), a view of x, a view
    # of buf and a semaphore index.
    assert len(ops_of(module, IndexOp)) == 9
    assert len(ops_of(module, ViewOp)) == 6
    assert len(ops_of(module, SemIndexOp)) == 3
    start, inner, outer = ops_of(module, DmaOp)
    assert not set(start.operands) & (set(inner.operands) | set(outer.operands))
    text = copyir.to_text(module)
    assert text.count("x[ds(8 * i, 8)] -> buf[i % 2], sems[i % 2]") == 3
    assert_round_trips(module)


def test_a_named_view_is_its_own():
    module = parse(
        kernel(
            "  copy_start x[0:8] -> buf[0], s\n  v = x[0:8]\n  copy_wait v -> buf[0], s"
        )
    )
    views = ops_of(module, ViewOp)
    assert [v.result.name_hint for v in views] == [None, None, "v", None]
    start, wait = ops_of(module, DmaOp)
    assert start.operands[0] is not wait.operands[0]
    assert start.operands[1] is not wait.operands[1]
    assert_round_trips(module)


def test_a_computation_names_each_view_it_writes():
    """`$k` numbers a computation's distinct input values, so each view a
    computation names is its own, as it was written (no sharing there)."""
    module = parse(
        kernel(
            "  copy_start x[0:8] -> buf[1], s\n"
            "  copy_wait x[0:8] -> buf[1], s\n"
            "  buf[1] = buf[1] * buf[1]"
        )
    )
    (op,) = ops_of(module, ComputeOp)
    assert format_prefix(op.expression()) == "(mul $0 $1)"
    assert len(set(op.operands)) == 3
    assert "  buf[1] = buf[1] * buf[1]\n" in copyir.to_text(module)
    assert_round_trips(module)
