"""Both textual forms round-trip: parse(print(m)) has the same ops,
properties, types, names and locations as m, for every example and for
generated valid programs."""

from __future__ import annotations

import pytest
from conftest import INVALID_EXAMPLES, VALID_EXAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copyir
from copyir.errors import CopyIRError
from copyir.testing import module_difference


def parse_file(path):
    return copyir.parse(path.read_text(), filename=str(path))


def assert_round_trips(module, debuginfo_cpy=True, cpy=True):
    if cpy:
        text = copyir.to_text(module, "cpy", debuginfo=debuginfo_cpy)
        again = copyir.parse(text, filename="printed.cpy")
        assert module_difference(module, again) is None, text
    mlir = copyir.to_text(module, "mlir")
    again = copyir.parse(mlir, filename="printed.mlir")
    assert module_difference(module, again) is None, mlir


NOT_EXPRESSIBLE_IN_CPY = {
    "tree_leaf_count.mlir",  # the authoring syntax derives the tree from the leaves
    "used_before_defined.mlir",  # and resolves every name before its use
}


def parseable_invalid_examples():
    """Invalid examples that parse: their errors come from the verifier."""
    paths = []
    for path in INVALID_EXAMPLES:
        try:
            parse_file(path)
        except CopyIRError:
            continue
        paths.append(path)
    return paths


@pytest.mark.parametrize("path", VALID_EXAMPLES, ids=lambda p: p.name)
def test_example_round_trips(path):
    module = parse_file(path)
    copyir.verify(module)
    assert_round_trips(module)


@pytest.mark.parametrize("path", parseable_invalid_examples(), ids=lambda p: p.name)
def test_invalid_example_round_trips_to_the_same_error(path):
    module = parse_file(path)
    assert_round_trips(module, cpy=path.name not in NOT_EXPRESSIBLE_IN_CPY)
    with pytest.raises(CopyIRError) as first:
        copyir.verify(module)
    printed = copyir.parse(copyir.to_text(module, "mlir"), filename="again.mlir")
    with pytest.raises(CopyIRError) as second:
        copyir.verify(printed)
    assert str(first.value) == str(second.value)
    assert first.value.loc == second.value.loc


def test_printing_without_debuginfo_is_stable():
    for path in VALID_EXAMPLES:
        text = copyir.to_text(parse_file(path))
        assert copyir.to_text(copyir.parse(text)) == text


def test_ir_difference_sees_a_changed_location():
    path = VALID_EXAMPLES[0]
    module = parse_file(path)
    moved = copyir.parse("\n" + path.read_text(), filename=str(path))
    assert module_difference(module, moved) is not None


def test_ir_difference_sees_rewired_operands():
    a = copyir.parse("kernel k(x: f32[4], y: f32[4]) {\n  sync_copy x -> y\n}\n")
    b = copyir.parse("kernel k(x: f32[4], y: f32[4]) {\n  sync_copy y -> x\n}\n")
    assert "wired" in module_difference(a, b)


def test_names_keep_numeric_suffixes():
    text = "kernel k(out_1: f32[4], out_2: f32[4]) {\n  sync_copy out_1 -> out_2\n}\n"
    module = copyir.parse(text)
    assert module.ops.first.param_names == ["out_1", "out_2"]
    assert_round_trips(module)


# -- generated programs -------------------------------------------------------

DTYPES = ["f32", "i32", "bf16", "u8", "f64", "bool", "i16"]


@st.composite
def shapes(draw, max_rank=3):
    rank = draw(st.integers(1, max_rank))
    return [draw(st.integers(1, 12)) for _ in range(rank)]


@st.composite
def subviews(draw, shape):
    """A random static view of `shape`: (subscript text, resulting shape)."""
    parts, result = [], []
    count = draw(st.integers(0, len(shape)))
    for extent in shape[:count]:
        kind = draw(st.sampled_from(["index", "slice", "full"]))
        if kind == "index":
            parts.append(str(draw(st.integers(0, extent - 1))))
        elif kind == "full":
            parts.append(":")
            result.append(extent)
        else:
            lo = draw(st.integers(0, extent - 1))
            hi = draw(st.integers(lo + 1, extent))
            parts.append(f"{lo}:{hi}")
            result.append(hi - lo)
    result += shape[count:]
    if not parts or not result:
        return "", list(shape)
    return f"[{', '.join(parts)}]", result


@st.composite
def programs(draw):
    """A valid kernel: params, scratch, DMAs with views, pytree copies, windows."""
    params = []
    for i in range(draw(st.integers(1, 3))):
        params.append((f"p{i}", draw(st.sampled_from(DTYPES)), draw(shapes())))
    refs = list(params)
    lines, counter = [], 0

    def fresh(prefix):
        nonlocal counter
        counter += 1
        return f"{prefix}{counter}"

    def alloc(dtype, shape):
        name = fresh("buf")
        space = draw(st.sampled_from(["vmem", "smem"]))
        lines.append(f"{name} = alloc {dtype}[{', '.join(map(str, shape))}] @{space}")
        refs.append((name, dtype, shape))
        return name

    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["dma", "sync", "window", "view", "sems"]))
        src, dtype, shape = draw(st.sampled_from(refs))
        if kind == "dma":
            view, view_shape = draw(subviews(shape))
            dst = alloc(dtype, view_shape)
            sem = fresh("s")
            lines.append(f"{sem} = semaphore")
            add = ", add" if draw(st.booleans()) else ""
            prio = (
                f", priority={draw(st.integers(0, 1))}" if draw(st.booleans()) else ""
            )
            lines.append(f"copy_start {src}{view} -> {dst}, {sem}{add}{prio}")
            lines.append(f"dma wait {src}{view} -> {dst}, {sem}")
        elif kind == "sems":
            sems = fresh("sa")
            size = draw(st.integers(1, 4))
            lines.append(f"{sems} = semaphore[{size}]")
            dst = alloc(dtype, shape)
            index = draw(st.integers(0, size - 1))
            lines.append(f"copy_start {src} -> {dst}, {sems}[{index}]")
            lines.append(f"copy_wait {src} -> {dst}, {sems}[{index}]")
        elif kind == "view":
            view, view_shape = draw(subviews(shape))
            if view:
                name = fresh("v")
                lines.append(f"{name} = {src}{view}")
                refs.append((name, dtype, view_shape))
        elif kind == "sync":
            leaves = [
                draw(st.sampled_from(refs)) for _ in range(draw(st.integers(0, 4)))
            ]
            dsts = [alloc(d, s) for _, d, s in leaves]
            shape_kind = draw(st.sampled_from(["tuple", "list", "record", "nested"]))
            srcs = [name for name, _, _ in leaves]
            lines.append(
                f"sync_copy {tree_text(shape_kind, srcs)} -> {tree_text(shape_kind, dsts)}"
                + (", add" if draw(st.booleans()) else "")
            )
        elif kind == "window":
            name, dtype, shape = draw(st.sampled_from(params))
            block, grid = [], []
            for extent in shape:
                dim = draw(st.sampled_from(["blocked", "element", "none", "full"]))
                size = draw(st.integers(1, extent))
                if dim == "blocked":
                    block.append(str(size))
                    grid.append(-(-extent // size))
                elif dim == "full":
                    block.append(str(extent))
                    grid.append(1)
                elif dim == "element":
                    block.append(f"Element({size})")
                    grid.append(extent)
                else:
                    block.append("None")
                    grid.append(extent)
            buffers = draw(st.integers(1, 3))
            bref = fresh("br")
            trailing = "," if len(block) == 1 else ""
            # An Element or cut block rounds to the TPU tiling, which these
            # small arrays cannot hold, and Pallas has no tiling of 8-byte
            # elements in 2 or more dimensions: `padded` (a kernel grid's)
            # then.
            rounds = any(
                b.startswith("Element") or (b != "None" and extent % int(b) != 0)
                for b, extent in zip(block, shape, strict=True)
            ) or (dtype == "f64" and len(shape) > 1)
            padded = ", padded" if rounds or draw(st.booleans()) else ""
            lines.append(
                f"{bref} = buffered_ref {name}, block=({', '.join(block)}{trailing}), "
                f"buffers={buffers}{padded}"
            )
            out = draw(
                st.sampled_from(
                    params[:1] + [p for p in params if p[1:] == (dtype, shape)]
                )
            )
            for _ in range(draw(st.integers(1, 3))):
                index = ", ".join(str(draw(st.integers(0, g - 1))) for g in grid)
                slot = draw(st.integers(0, buffers - 1))
                lines.append(f"buffered_copy {name} -> {bref}[{index}], slot={slot}")
                if out[1:] == (dtype, shape):
                    lines.append(
                        f"buffered_copy {bref}[{index}] -> {out[0]}, slot={slot}"
                    )
    header = ", ".join(f"{n}: {d}[{', '.join(map(str, s))}] @hbm" for n, d, s in params)
    body = "\n".join(f"  {line}" for line in lines)
    return f"kernel generated({header}) {{\n{body}\n}}\n"


def tree_text(kind, leaves):
    if kind == "tuple":
        return "(" + ", ".join(leaves) + ("," if len(leaves) == 1 else "") + ")"
    if kind == "list":
        return "[" + ", ".join(leaves) + "]"
    if kind == "record":
        return (
            "{"
            + ", ".join(f"k{len(leaves) - i}: {x}" for i, x in enumerate(leaves))
            + "}"
        )
    half = len(leaves) // 2
    inner = "[" + ", ".join(leaves[half:]) + "]"
    return "{a: " + tree_text("tuple", leaves[:half]) + ", b: " + inner + "}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_generated_programs_round_trip(text):
    module = copyir.parse(text, filename="generated.cpy")
    copyir.verify(module)
    assert_round_trips(module)
