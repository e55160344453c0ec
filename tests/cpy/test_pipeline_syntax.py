"""The authoring syntax of pipelines: `pipeline grid=(...) in x
block=(...) index=(i, j) -> (...) buffers=N out y ... (xw, yw[, i, j]) {
... }` builds the `copy.pipeline` the MLIR form writes, prints back in the
same syntax, and round-trips structurally (with and without debug info,
and through the MLIR form), on the examples and on generated pipelines
(tests/pipeline_programs.py writes MLIR; printed as cpy and parsed back,
it must give the same IR). Errors of the syntax are exact and located;
the verifier's pipeline errors keep their messages, at the pipeline."""

from __future__ import annotations

import re
import warnings

import pytest
from conftest import EXAMPLES, PIPELINE_EXAMPLES
from hypothesis import HealthCheck, given, settings
from pipeline_programs import pipelines
from test_loop_syntax import assert_round_trips, ops_of

import copyir
from copyir import errors
from copyir.dialects.copy import BLOCKED, ELEMENT, IN, OUT, SQUEEZED, PipelineOp
from copyir.errors import CopyIRError
from copyir.testing import module_difference

HEADER = (
    "kernel k(x: f32[32, 256] @hbm, y: f32[32, 256] @hbm, z: f32[4, 8, 256] @hbm) {\n"
)


def kernel(body: str) -> str:
    return HEADER + body.rstrip("\n") + "\n}\n"


def parse(text: str, filename: str = "pipelines.cpy"):
    return copyir.parse(text, filename=filename)


def pipeline_of(module) -> PipelineOp:
    (op,) = ops_of(module, PipelineOp)
    return op


def error_of(text: str, verify: bool = True) -> CopyIRError:
    with pytest.raises(CopyIRError) as caught:
        module = parse(text)
        if verify:
            copyir.verify(module)
    return caught.value


SCALE = (
    "  pipeline grid=(4, 2)\n"
    "      in  x block=(8, 128) index=(i, j) -> (i, j) buffers=3\n"
    "      out y block=(8, 128) index=(i, j) -> (i, j)\n"
    "      (xw, yw) {\n"
    "    yw[...] = 2.0 * xw + 1.0\n"
    "  }"
)


# -- the examples ---------------------------------------------------------------


def test_the_pipeline_examples_are_known():
    assert {p.name for p in EXAMPLES.glob("pipeline_*.cpy")} == PIPELINE_EXAMPLES


@pytest.mark.parametrize("name", sorted(PIPELINE_EXAMPLES))
def test_pipeline_examples_round_trip(name):
    path = EXAMPLES / name
    module = parse(path.read_text(), str(path))
    copyir.verify(module)
    assert_round_trips(module)


@pytest.mark.parametrize("name", sorted(PIPELINE_EXAMPLES))
def test_pipeline_examples_print_back_as_written(name):
    """The examples are written as the printer writes: each kernel prints
    back line for line (comments aside)."""
    text = (EXAMPLES / name).read_text()
    written = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert copyir.to_text(parse(text)).splitlines() == written


# -- what the syntax builds -----------------------------------------------------------


def test_the_sketch_builds_the_op_the_mlir_form_writes():
    op = pipeline_of(parse(kernel(SCALE)))
    assert op.grid_shape == (4, 2)
    specs = op.ref_specs.data
    assert [s.direction.data for s in specs] == [IN, OUT]
    assert [[(b.kind.data, b.size.data) for b in s.block.data] for s in specs] == [
        [(BLOCKED, 8), (BLOCKED, 128)]
    ] * 2
    assert [str(s.index_map.data) for s in specs] == ["(d0, d1) -> (d0, d1)"] * 2
    assert [s.buffers.data for s in specs] == [3, 2]
    assert op.dimension_semantics is None and op.no_pipelining is None
    assert [w.name_hint for w in op.windows] == ["xw", "yw"]
    assert [i.name_hint for i in op.indices] == [None, None]
    assert op.location.line.data == 2 and op.location.column.data == 3
    mlir = (
        "copy.kernel @k(%x: !copy.ref<32x256xf32, hbm>, %y: !copy.ref<32x256xf32, "
        "hbm>, %z: !copy.ref<4x8x256xf32, hbm>) {\n"
        "  copy.pipeline grid(4, 2) in %x : !copy.ref<32x256xf32, hbm> block [8, "
        "128] index affine_map<(d0, d1) -> (d0, d1)> buffers 3, out %y : "
        "!copy.ref<32x256xf32, hbm> block [8, 128] index affine_map<(d0, d1) -> "
        "(d0, d1)> buffers 2 (%xw, %yw, %0, %1) {\n"
        "    copy.compute %yw (%xw) : "
        "!copy.ref<8x128xf32, vmem>, !copy.ref<8x128xf32, vmem> {\n"
        "    ^bb0(%2: f32):\n"
        '      %3 = scalar.constant "2.0" : f32\n'
        "      %4 = scalar.mul %3, %2 : f32\n"
        '      %5 = scalar.constant "1.0" : f32\n'
        "      %6 = scalar.add %4, %5 : f32\n"
        "      scalar.yield %6 : f32\n"
        "    }\n"
        "  }\n}\n"
    )
    expected = copyir.parse(mlir, format="mlir")
    assert module_difference(parse(kernel(SCALE)), expected, locations=False) is None


def test_the_printer_writes_one_spec_per_line():
    text = copyir.to_text(parse(kernel(SCALE)))
    assert kernel(SCALE) == text


@pytest.mark.parametrize(
    "variant",
    [
        # All on one line.
        "  pipeline grid=(4, 2) in x block=(8, 128) index=(i, j) -> (i, j) "
        "buffers=3 out y block=(8, 128) index=(i, j) -> (i, j) (xw, yw) {",
        # Line breaks anywhere in the header, comments and blank lines too.
        "  pipeline\n    grid=(4, 2)  # the grid\n\n    in x\n      block=(8, 128)\n"
        "      index=(i, j)\n        -> (i, j)\n      buffers=3\n"
        "    out y block=(8, 128) index=(r, c) -> (r, c) buffers=2\n    (xw,\n yw)\n  {",
        # The lambda's names are its own; a trailing comma.
        "  pipeline grid=(4, 2,) in x block=(8, 128,) index=(a, b,) -> (a, b,) "
        "buffers=3 out y block=(8, 128) index=(i, j) -> (i, j) (xw, yw,) {",
    ],
)
def test_header_spellings_build_the_same_pipeline(variant):
    _, _, rest = SCALE.partition(" {\n")
    text = variant + "\n" + rest
    assert (
        module_difference(parse(kernel(text)), parse(kernel(SCALE)), locations=False)
        is None
    )


@pytest.mark.parametrize(
    "index", ["i -> (i, 0)", "(i) -> (i, 0)", "(i,) -> (i, 0)", "(x) -> (x, 0)"]
)
@pytest.mark.parametrize("grid", ["grid=(4,)", "grid=4", "grid=(2 * 2)"])
def test_one_dimensional_forms(index, grid):
    text = kernel(
        f"  pipeline {grid} in x block=(8, 256) index={index} "
        f"out y block=(8, 256) index=(i) -> (i, 0) (xw, yw) {{\n    yw[...] = xw\n  }}"
    )
    module = parse(text)
    op = pipeline_of(module)
    assert op.grid_shape == (4,)
    assert [str(s.index_map.data) for s in op.ref_specs] == ["(d0) -> (d0, 0)"] * 2
    printed = copyir.to_text(module)
    assert "  pipeline grid=(4,)\n" in printed
    assert "      in  x block=(8, 256) index=(i) -> (i, 0)\n" in printed
    assert_round_trips(module)
    copyir.verify(module)


@pytest.mark.parametrize(
    "results, map_text, printed",
    [
        ("(2 * i + 1, j // 2)", "(d0, d1) -> (((d0 * 2) + 1), (d1 floordiv 2))", None),
        ("(i % 2, 0)", "(d0, d1) -> ((d0 mod 2), 0)", None),
        ("(j, i)", "(d0, d1) -> (d1, d0)", None),
        ("(0, 0)", "(d0, d1) -> (0, 0)", None),
        ("(i + 0, (j))", "(d0, d1) -> (d0, d1)", "(i, j)"),
        ("(3 * (i + 1) - 3, ceildiv(j, 2))", None, "(3 * i, ceildiv(j, 2))"),
    ],
)
def test_index_maps_are_index_expressions(results, map_text, printed):
    text = kernel(
        f"  pipeline grid=(4, 2) in x block=(8, 128) index=(i, j) -> {results} "
        "(xw) {\n  }"
    )
    module = parse(text)
    index_map = pipeline_of(module).ref_specs.data[0].index_map.data
    if map_text is not None:
        assert str(index_map) == map_text
    assert f"index=(i, j) -> {printed or results}\n" in copyir.to_text(module)
    assert_round_trips(module)


def test_element_and_squeezed_block_dims():
    text = kernel(
        "  pipeline grid=(4,)\n"
        "      in  x block=(Element(16), 256) index=(i) -> (8 * i, 0)\n"
        "      out z block=(None, 8, 256) index=(i) -> (i, 0, 0) buffers=1\n"
        "      (xw, zw) {\n"
        "    zw[...] = xw[0:8] + xw[8:16]\n"
        "  }"
    )
    module = parse(text)
    op = pipeline_of(module)
    kinds = [[b.kind.data for b in s.block.data] for s in op.ref_specs]
    assert kinds == [[ELEMENT, BLOCKED], [SQUEEZED, BLOCKED, BLOCKED]]
    assert [w.type.get_shape() for w in op.windows] == [(16, 256), (8, 256)]
    assert copyir.to_text(module) == text
    assert_round_trips(module)
    copyir.verify(module)


@pytest.mark.parametrize(
    "semantics, parallel",
    [
        ("(parallel, arbitrary)", (0,)),
        ("(parallel, parallel)", (0, 1)),
        ("(arbitrary, arbitrary)", ()),
    ],
)
def test_dimension_semantics(semantics, parallel):
    text = kernel(
        f"  pipeline grid=(4, 2) dimension_semantics={semantics} no_pipelining\n"
        "      in  x block=(8, 128) index=(i, j) -> (i, j)\n"
        "      out y block=(8, 128) index=(i, j) -> (i, j)\n"
        "      (xw, yw) {\n"
        "    yw[...] = xw\n"
        "  }"
    )
    module = parse(text)
    op = pipeline_of(module)
    assert op.dimension_semantics is not None and op.parallel_dims == parallel
    assert op.no_pipelining is not None
    assert copyir.to_text(module) == text
    assert_round_trips(module)
    copyir.verify(module)


def test_grid_indices_named_in_the_body_header():
    text = kernel(
        "  pipeline grid=(4, 2)\n"
        "      in  x block=(8, 128) index=(i, j) -> (i, j)\n"
        "      out z block=(None, 8, 128) index=(i, j) -> (i, 0, j)\n"
        "      (xw, zw, r, c) {\n"
        "    when c == 0 {\n"
        "      zw[...] = xw\n"
        "    }\n"
        "  }"
    )
    module = parse(text)
    op = pipeline_of(module)
    assert [i.name_hint for i in op.indices] == ["r", "c"]
    printed = copyir.to_text(module)
    # The index maps take the body's names for the grid indices.
    assert "      in  x block=(8, 128) index=(r, c) -> (r, c)\n" in printed
    assert "      (xw, zw, r, c) {\n" in printed
    assert_round_trips(module)


def test_the_printer_names_grid_indices_the_body_uses():
    """MLIR gives no names to `%0`: used in the body, the printer names the
    grid indices; unused, it leaves them out."""
    mlir = (
        "copy.kernel @k(%x: !copy.ref<32x128xf32, hbm>, %y: !copy.ref<32x128xf32, "
        "hbm>) {\n  copy.pipeline grid(4) in %x : !copy.ref<32x128xf32, hbm> block "
        "[8, 128] index affine_map<(d0) -> (d0, 0)> buffers 2, out %y : "
        "!copy.ref<32x128xf32, hbm> block [8, 128] index affine_map<(d0) -> (d0, 0)> "
        "buffers 2 (%xw, %yw, %0) {\n"
        "    copy.when [affine_set<(d0) : (d0 == 0)>](%0) {\n"
        "      copy.compute %yw (%xw) : !copy.ref<8x128xf32, vmem>, "
        "!copy.ref<8x128xf32, vmem> {\n"
        "      ^bb0(%1: f32):\n"
        "        scalar.yield %1 : f32\n"
        "      }\n    }\n  }\n}\n"
    )
    printed = copyir.to_text(copyir.parse(mlir, format="mlir"))
    assert "index=(v0) -> (v0, 0)" in printed
    assert "      (xw, yw, v0) {\n" in printed
    unused = mlir.replace(
        "copy.when [affine_set<(d0) : (d0 == 0)>](%0)", "copy.when []()"
    )
    printed = copyir.to_text(copyir.parse(unused, format="mlir"))
    assert "index=(i) -> (i, 0)" in printed and "      (xw, yw) {\n" in printed


def test_names_that_are_keywords_elsewhere():
    """`out` is a keyword only where a spec may start: a parameter and a
    window may be called `out`; `pipeline` names nothing."""
    text = (
        "kernel k(x: f32[32, 128] @hbm, out: f32[32, 128] @hbm) {\n"
        "  pipeline grid=(4,)\n"
        "      in  x block=(8, 128) index=(i) -> (i, 0)\n"
        "      out out block=(8, 128) index=(i) -> (i, 0)\n"
        "      (xw, outw) {\n"
        "    outw[...] = xw\n"
        "  }\n"
        "  out2 = alloc f32[8] @vmem\n"
        "}\n"
    )
    module = parse(text)
    assert copyir.to_text(module) == text
    assert_round_trips(module)
    mlir = copyir.to_text(module, "mlir").replace("%out2", "%pipeline")
    printed = copyir.to_text(copyir.parse(mlir, format="mlir"))
    assert re.search(r"\n  v\d+ = alloc f32\[8\] @vmem\n", printed), printed


def test_sibling_pipelines_may_reuse_names_and_nest_in_loops():
    body = (
        "  for t in range(2) {\n"
        "    pipeline grid=(4,)\n"
        "        in  x block=(8, 256) index=(i) -> (i, 0)\n"
        "        out y block=(8, 256) index=(i) -> (i, 0)\n"
        "        (xw, yw, i) {\n"
        "      for k in range(2) {\n"
        "        yw[...] = xw\n"
        "      }\n"
        "    }\n"
        "    pipeline grid=(4,)\n"
        "        in  y block=(8, 256) index=(i) -> (i, 0)\n"
        "        out x block=(8, 256) index=(i) -> (i, 0)\n"
        "        (xw, yw, i) {\n"
        "      yw[...] = xw\n"
        "    }\n"
        "  }"
    )
    module = parse(kernel(body))
    assert len(ops_of(module, PipelineOp)) == 2
    assert copyir.to_text(module) == kernel(body)
    assert_round_trips(module)


# -- generated pipelines ------------------------------------------------------------


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(pipelines())
def test_generated_pipelines_print_as_cpy_and_parse_back(p):
    """MLIR -> cpy -> IR is the IR (up to locations: the MLIR text has none),
    and the cpy form then round-trips in every form."""
    module = copyir.parse(p.mlir(), format="mlir")
    text = copyir.to_text(module, "cpy")
    assert f"pipeline{' kernel_grid' * p.kernel_grid} grid=" in text
    again = parse(text, "generated.cpy")
    assert module_difference(module, again, locations=False) is None, text
    assert_round_trips(again)


# -- errors ---------------------------------------------------------------------------


def spec_line(head: str = "grid=(4,)", specs: str = "", names: str = "(xw)") -> str:
    specs = specs or "in x block=(8, 256) index=(i) -> (i, 0)"
    return kernel(f"  pipeline {head} {specs} {names} {{\n  }}")


@pytest.mark.parametrize(
    "text, message, at",
    [
        (
            spec_line(specs="in w block=(8, 256) index=(i) -> (i, 0)"),
            errors.UNDEFINED.format(name="w"),
            "w block",
        ),
        (
            spec_line(names="(x)"),
            errors.DEFINED_TWICE.format(name="x", line=1),
            "x) {",
        ),
        (
            spec_line(
                specs="in x block=(8, 256) index=(i) -> (i, 0) "
                "out y block=(8, 256) index=(i) -> (i, 0)",
                names="(xw, xw)",
            ),
            errors.DEFINED_TWICE.format(name="xw", line=2),
            "xw) {",
        ),
        (
            spec_line(names="(xw, i, j)"),
            errors.PIPELINE_BODY_NAMES.format(count=3, windows=1, rank=1),
            "xw, i, j",
        ),
        (
            spec_line(names="()"),
            errors.PIPELINE_BODY_NAMES.format(count=0, windows=1, rank=1),
            "pipeline",
        ),
        (
            spec_line(head="grid=(4, 2)"),
            errors.INDEX_MAP_ARITY.format(name="x", count=1, rank=2),
            "i) -> (i, 0)",
        ),
        (
            spec_line(
                head="grid=(4, 2)", specs="in x block=(8, 128) index=i -> (i, 0)"
            ),
            errors.INDEX_MAP_ARITY.format(name="x", count=1, rank=2),
            "i -> ",
        ),
        (
            spec_line(specs="in x block=(8, 256) index=() -> (0, 0)"),
            errors.INDEX_MAP_ARITY.format(name="x", count=0, rank=1),
            "index",
        ),
        (
            spec_line(
                head="grid=(4, 2)",
                specs="in x block=(8, 128) index=(i, j) -> (i * j, 0)",
            ),
            errors.INDEX_NOT_AFFINE.format(expr="i * j", why=errors.INDEX_MULTIPLIES),
            "i * j",
        ),
        (
            spec_line(
                head="grid=(4, 2)",
                specs="in x block=(8, 128) index=(i, j) -> (i // j, 0)",
            ),
            errors.INDEX_NOT_AFFINE.format(expr="i // j", why=errors.INDEX_DIVIDES),
            "i // j",
        ),
        (
            spec_line(specs="in x block=(8, 256) index=(i) -> (i / 2, 0)"),
            errors.INDEX_OPERATOR.format(
                expr="i / 2", what="/ (write // to divide integers)"
            ),
            "i / 2",
        ),
        (
            spec_line(specs="in x block=(8, 256) index=(i) -> (k, 0)"),
            errors.UNDEFINED.format(name="k"),
            "k, 0",
        ),
        (
            spec_line(specs="in x block=(8, 256) index=(i) -> (y, 0)"),
            None,  # the kernel's names are not the index map's
            None,
        ),
        (
            spec_line(
                head="grid=(4, 2)", specs="in x block=(8, 128) index=(i, i) -> (i, 0)"
            ),
            errors.INDEX_MAP_TWICE.format(name="x", param="i"),
            "i) -> (i, 0)",
        ),
        (
            spec_line(specs="in x block=(8, 256) index=(2) -> (0, 0)"),
            errors.INDEX_MAP_PARAMETER.format(expr="(2)"),
            "2) ->",
        ),
        (
            spec_line(specs="in x block=(8, 256) index=(i, 0)"),
            errors.OPTION_VALUE.format(
                option="index",
                stmt="in x",
                why="takes an index map such as (i, j) -> (i, j)",
            ),
            "index",
        ),
        (  # a fuzz mutant: `index` as a flag (a BoundedSlice's check read it)
            spec_line(specs="in x block=(BoundedSlice(8), 256) index"),
            errors.OPTION_VALUE.format(
                option="index",
                stmt="in x",
                why="takes an index map such as (i, j) -> (i, j)",
            ),
            "index",
        ),
        (
            spec_line(specs="in x block=(i) -> (8, 256) index=(i) -> (i, 0)"),
            errors.OPTION_VALUE.format(
                option="block",
                stmt="in x",
                why="takes a block shape such as (128, 128)",
            ),
            "block",
        ),
        (
            spec_line(specs="in x block=(0, 256) index=(i) -> (i, 0)"),
            errors.BLOCK_SIZE.format(size=0, dim=0, extent=32),
            "x block",
        ),
        (
            spec_line(specs="in x index=(i) -> (i, 0)"),
            errors.OPTION_VALUE.format(option="block", stmt="in x", why="is required"),
            "x index",
        ),
        (
            spec_line(specs="out y block=(8, 256)"),
            errors.OPTION_VALUE.format(option="index", stmt="out y", why="is required"),
            "y block",
        ),
        (
            spec_line(specs="in x block=(8, 256) index=(i) -> (i, 0) bufers=3"),
            errors.UNKNOWN_OPTION.format(
                option="bufers",
                stmt="in x",
                known="block, buffers, index, lookahead or revisit",
            ),
            "bufers",
        ),
        (
            spec_line(specs="in x block=(8, 256) index=(i) -> (i, 0) buffers=(3, 1)"),
            errors.OPTION_VALUE.format(
                option="buffers", stmt="in x", why="takes an integer"
            ),
            "buffers",
        ),
        (
            spec_line(head=""),
            errors.OPTION_VALUE.format(
                option="grid", stmt="pipeline", why="is required"
            ),
            "pipeline",
        ),
        (
            spec_line(head="grid=(4,) grid=(4,)"),
            errors.DUPLICATE_OPTION.format(option="grid"),
            "grid=(4,) in",
        ),
        (
            spec_line(head="grid=(n,)"),
            errors.UNDEFINED.format(name="n"),
            "n,)",
        ),
        (
            spec_line(head="grid=(4,) no_pipelining=1"),
            errors.OPTION_VALUE.format(
                option="no_pipelining",
                stmt="pipeline",
                why="is a flag and takes no value",
            ),
            "no_pipelining",
        ),
        (
            spec_line(head="grid=(4,) dimension_semantics=(paralel,)"),
            errors.DIMENSION_SEMANTICS.format(name="paralel"),
            "paralel",
        ),
        (
            spec_line(head="grid=(4,) dimension_semantics=(parallel, arbitrary)"),
            errors.DIMENSION_SEMANTICS_COUNT.format(count=2, rank=1),
            "parallel, arbitrary",
        ),
        (
            spec_line(head="grid=(4,) dimension_semantics=(1,)"),
            errors.OPTION_VALUE.format(
                option="dimension_semantics",
                stmt="pipeline",
                why="takes dimension semantics such as (parallel, arbitrary)",
            ),
            "dimension_semantics",
        ),
        (
            spec_line(head="grid=(4,) prefetch"),
            errors.UNKNOWN_OPTION.format(
                option="prefetch",
                stmt="pipeline",
                known="cores, dimension_semantics, grid, kernel_grid or no_pipelining",
            ),
            "prefetch",
        ),
    ],
)
def test_syntax_errors_are_exact_and_located(text, message, at):
    """`at` is where the caret points: the first occurrence of that text."""
    err = error_of(text, verify=False)
    if message is None:
        assert str(err) == errors.UNDEFINED.format(name="y")
        assert [n.message for n in err.notes] == [
            errors.INDEX_MAP_SCOPE.format(params="(i)")
        ]
        return
    assert str(err) == message
    line = text.splitlines()[1]
    assert (err.loc.line, err.loc.col) == (2, line.index(at) + 1), err.loc


def test_an_unknown_name_in_an_index_map_says_what_it_sees():
    err = error_of(
        spec_line(
            head="grid=(4, 2)", specs="in x block=(8, 128) index=(i, j) -> (k, 0)"
        ),
        verify=False,
    )
    assert [n.message for n in err.notes] == [
        errors.INDEX_MAP_SCOPE.format(params="(i, j)")
    ]


@pytest.mark.parametrize(
    "head, specs, message",
    [
        (
            "grid=(0, 3)",
            "in x block=(8, 128) index=(i, j) -> (i, j)",
            "All elements in the grid must be strictly positive, but got grid=(0, 3)",
        ),
        (
            "kernel_grid grid=(4,)",
            "in x block=(8, 256) index=(i) -> (i, 0) "
            "out y block=(8, 256) index=(i) -> (i, 0) buffers=3",
            "Buffer count >2 not supported for output buffered refs.",
        ),
        (
            "kernel_grid grid=(4, 2) dimension_semantics=(arbitrary, parallel)",
            "in x block=(8, 128) index=(i, j) -> (i, j)",
            "Dimensions with parallel semantics must form a prefix of the grid.",
        ),
        (
            "kernel_grid grid=(2, 2)",
            "in x block=(8, 128) index=(i, j) -> (i, j) "
            "out y block=(8, 128) index=(i, j) -> (j, 0)",
            "Revisited block (0, 0) of output 0 in iteration (1, 0). The block was "
            "previously visited in iterations (0, 0) through (0, 0) .",
        ),
        (
            "kernel_grid grid=(2, 2) dimension_semantics=(parallel, arbitrary)",
            "in x block=(8, 128) index=(i, j) -> (i, j) "
            "out y block=(8, 128) index=(i, j) -> (0, j)",
            errors.PARALLEL_REVISIT.format(
                output=0,
                name="y",
                block="(0, 0)",
                first="(0, 0)",
                second="(1, 0)",
                dim=0,
            ),
        ),
        (
            "grid=(4,)",
            "in x block=(8, 256) index=(i) -> (i)",
            errors.INDEX_MAP_RANK.format(name="x", map="(d0) -> (d0)", grid=1, rank=2),
        ),
        (
            "grid=(4,)",
            "in x block=(8, 256) index=(i) -> (i, 0) buffers=0",
            "buffers must be >= 1, got 0",
        ),
        (
            "grid=(4,) dimension_semantics=(parallel,) cores=0",
            "in x block=(8, 256) index=(i) -> (i, 0)",
            "cores= must be at least 1, got 0",
        ),
        (
            "grid=(4,) cores=2",
            "in x block=(8, 256) index=(i) -> (i, 0)",
            "Cannot partition over cores without parallel grid dimensions: "
            "dimension_semantics=(<GridDimensionSemantics.ARBITRARY: 'arbitrary'>,)",
        ),
    ],
)
def test_the_verifier_reports_pipeline_errors_at_the_pipeline(head, specs, message):
    names = "(xw, yw)" if " out " in specs else "(xw)"
    err = error_of(
        kernel(f"  # a comment\n  pipeline {head}\n    {specs}\n    {names} {{\n  }}")
    )
    assert str(err) == message
    assert (err.loc.line, err.loc.col) == (3, 3)


# -- scope ------------------------------------------------------------------------


def test_windows_exist_inside_the_body_only():
    err = error_of(kernel(SCALE + "\n  sync_copy xw -> y"), verify=False)
    assert str(err) == errors.UNDEFINED.format(name="xw")
    assert (err.loc.line, err.loc.col) == (8, 13)
    assert [n.message for n in err.notes] == [
        errors.OUT_OF_SCOPE_NAME.format(name="xw", line=5, construct="pipeline", body=2)
    ]


def test_grid_indices_exist_inside_the_body_only_and_stay_put():
    named = SCALE.replace("(xw, yw)", "(xw, yw, i, j)")
    err = error_of(kernel(named + "\n  t = i + 1"), verify=False)
    assert str(err) == errors.UNDEFINED.format(name="i")
    assert [n.message for n in err.notes] == [
        errors.OUT_OF_SCOPE_INDEX.format(name="i", line=2, construct="pipeline")
    ]
    rebound = named.replace("    yw[...]", "    j = alloc f32[8] @vmem\n    yw[...]")
    err = error_of(kernel(rebound), verify=False)
    assert str(err) == errors.LOOP_INDEX_REBOUND.format(
        name="j", line=2, construct="pipeline"
    )
    assert (err.loc.line, err.loc.col) == (6, 5)


def test_the_index_map_does_not_see_the_body_nor_the_body_the_map():
    """The lambda's `i` is not the body's: with `(xw, yw)` the body names
    no grid index."""
    body = SCALE.replace("yw[...] = 2.0 * xw + 1.0", "t = i + 1")
    err = error_of(kernel(body), verify=False)
    assert str(err) == errors.UNDEFINED.format(name="i")
    assert (err.loc.line, err.loc.col) == (6, 9)


def test_scratch_for_the_body_is_an_alloc_of_the_kernel():
    body = (
        "  acc = alloc f32[8, 128] @vmem\n"
        "  acc[...] = 0\n"
        "  pipeline grid=(4, 2)\n"
        "      in  x block=(8, 128) index=(i, j) -> (i, j)\n"
        "      out y block=(8, 128) index=(i, j) -> (i, j)\n"
        "      (xw, yw) {\n"
        "    acc += xw\n"
        "    yw[...] = acc\n"
        "  }"
    )
    module = parse(kernel(body))
    copyir.verify(module)
    assert copyir.to_text(module) == kernel(body)
    assert_round_trips(module)


def test_a_misspelt_pipeline_gets_a_did_you_mean():
    err = error_of(spec_line().replace("pipeline", "pipelne"), verify=False)
    assert [n.message for n in err.notes] == [
        errors.DID_YOU_MEAN.format(name="pipeline")
    ]


# -- the expansion in the authoring syntax ----------------------------------------


@pytest.mark.parametrize("name", sorted(PIPELINE_EXAMPLES))
def test_the_expansion_prints_as_cpy_that_parses_back_and_runs_alike(name):
    """`copyir opt -p expand-pipelines --emit cpy` writes windows
    (`w = window bx[s]`) and invalidations (`invalidate w`): the text parses
    back and prints the same (its conditions in the printer's normal form), and runs to the same values as the pipeline."""
    import numpy as np
    from copyir.backends.interpreter import fill_inputs

    from copyir.api import apply_passes
    from copyir.api import pipeline as passes

    source = (EXAMPLES / name).read_text()
    module = parse(source, name)
    apply_passes(module, passes("expand-pipelines"))
    text = copyir.to_text(module, "cpy", debuginfo=True)
    assert re.search(r"^ *\w+ = window \w+\[", text, re.M)
    back = parse(text, name)
    copyir.verify(back)
    assert copyir.to_text(back, "cpy", debuginfo=True) == text  # a fixpoint
    stream = copyir.to_stream(copyir.lower(parse(source, name)))
    inputs = fill_inputs(stream, {}, "random")
    with warnings.catch_warnings():  # pipeline_half.cpy's, tested on its own
        warnings.simplefilter("ignore", copyir.CopyIRWarning)
        want = copyir.run(stream, inputs, mode="eager")
        got = copyir.run(text, inputs, mode="eager")
    for param, value in want.items():
        np.testing.assert_array_equal(got[param], value, err_msg=param)


def test_an_invalidate_prints_and_parses_back():
    text = kernel(
        "  w = alloc f32[8, 128] @vmem\n"
        "  sync_copy x[0:8, 0:128] -> w\n"
        "  invalidate w\n"
        "  sync_copy x[8:16, 0:128] -> w\n"
        "  sync_copy w -> y[0:8, 0:128]"
    )
    module = parse(text)
    copyir.verify(module)
    assert "  invalidate w\n" in copyir.to_text(module, "cpy")


def test_a_stale_invalidate_prints_and_parses_back_and_stale_stays_a_name():
    """`invalidate w stale` (a pipeline's output window at a block's first
    visit) round-trips in both forms; elsewhere `stale` names a value."""
    text = kernel(
        "  stale = alloc f32[8, 128] @vmem\n"
        "  invalidate stale stale\n"
        "  sync_copy x[8:16, 0:128] -> stale\n"
        "  sync_copy stale -> y[0:8, 0:128]"
    )
    module = parse(text)
    copyir.verify(module)
    (op,) = [o for o in module.walk() if o.name == "copy.invalidate"]
    assert op.stale is not None
    assert "  invalidate stale stale\n" in copyir.to_text(module, "cpy")
    mlir = copyir.to_text(module, "mlir")
    assert "copy.invalidate %stale stale : " in mlir
    assert copyir.to_text(copyir.parse(mlir, format="mlir"), "cpy") == copyir.to_text(
        module, "cpy"
    )


def test_a_window_of_a_plain_ref_is_a_located_error():
    err = error_of(kernel("  w = window x[0]"))
    assert str(err) == (
        "window expects a BufferedRef as its window, but x is f32[32, 256] @hbm"
    )
    assert (err.loc.line, err.loc.col) == (2, 14)


def test_a_window_slot_out_of_range_keeps_the_verifiers_message():
    text = kernel(
        "  bx = buffered_ref x, block=(8, 128), buffers=2\n  w = window bx[2]"
    )
    err = error_of(text)
    assert str(err) == errors.SLOT_OUT_OF_RANGE.format(slot=2, bref="bx", buffers=2)
    assert err.loc.line == 3
