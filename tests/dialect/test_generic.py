"""xDSL's generic machinery made cheap (`copyir.dialects.copy.generic`):
the accessors return what xDSL's return, and a remembered verdict never
hides a change."""

from __future__ import annotations

import pytest
from conftest import INVALID_EXAMPLES, VALID_EXAMPLES
from xdsl.dialects.builtin import StringAttr

import copyir
from copyir.attributes import i64_array
from copyir.dialects.copy import CopyOp, DmaOp, ViewOp
from copyir.dialects.copy.generic import forget_verdicts, verify_generic
from copyir.errors import CopyIRError


def accessors(op):
    """(name, ours) for each accessor of the op's class that replaced xDSL's."""
    for name, value in vars(type(op)).items():
        if hasattr(value, "xdsl"):
            yield name, value


def modules(path):
    try:
        module = copyir.parse(path.read_text(), filename=str(path))
    except CopyIRError:
        return []
    return [module, copyir.parse(copyir.to_text(module, "mlir"), "t.mlir")]


def read(accessor, op):
    try:
        return accessor(op)
    except Exception as err:  # a malformed op: both must fail alike
        return type(err)


@pytest.mark.parametrize(
    "path", VALID_EXAMPLES + INVALID_EXAMPLES, ids=lambda p: p.parent.name + p.name
)
def test_the_accessors_return_what_xdsls_return(path):
    for module in modules(path):
        for op in module.walk():
            for name, ours in accessors(op):
                expected = read(lambda o, a=ours: a.xdsl.__get__(o, type(o)), op)
                assert read(lambda o, a=ours: a.__get__(o, type(o)), op) == expected
                assert getattr(op, name) == expected, name


def kernel_text(statements: list[str]) -> str:
    body = "".join(f"  {s}\n" for s in statements)
    return (
        "kernel k(x: f32[1024, 128] @hbm) {\n  b = alloc f32[8, 128] @vmem\n"
        f"  s = semaphore\n{body}}}\n"
    )


def test_a_remembered_shape_changed_afterwards_is_checked_again():
    module = copyir.parse(
        kernel_text(["copy_start x[0:8] -> b, s", "copy_wait x[0:8] -> b, s"] * 2)
    )
    copyir.verify(module)
    copyir.verify(module)  # now every DMA's shape is remembered
    dma = next(op for op in module.walk() if isinstance(op, DmaOp))
    dma.properties["priority"] = StringAttr("1")
    with pytest.raises(CopyIRError, match="should be of base attribute"):
        copyir.verify(module)


def test_ops_whose_shapes_never_repeat_are_still_checked():
    """Views of distinct offsets are not remembered; the last one is wrong."""
    copies = [f"copy_start x[{i}:{i + 8}] -> b, s" for i in range(300)]
    module = copyir.parse(kernel_text(copies))
    copyir.verify(module)
    views = [op for op in module.walk() if isinstance(op, ViewOp)]
    views[-1].properties["sizes"] = StringAttr("8")
    with pytest.raises(CopyIRError, match="should be of base attribute"):
        copyir.verify(module)


def verdict(check, op):
    try:
        check(op)
    except Exception as err:
        return type(err), str(err)
    return None


@pytest.mark.parametrize(
    "path", VALID_EXAMPLES + INVALID_EXAMPLES, ids=lambda p: p.parent.name + p.name
)
def test_verify_generic_says_what_xdsl_says(path):
    for module in modules(path):
        for _ in range(2):  # the second time, from what it remembered
            for op in module.walk():
                if isinstance(op, CopyOp):
                    expected = verdict(op.get_irdl_definition().verify, op)
                    assert verdict(verify_generic, op) == expected


def test_verify_generic_says_what_xdsl_says_of_changed_ops():
    module = copyir.parse(
        kernel_text(["copy_start x[0:8] -> b, s", "copy_wait x[0:8] -> b, s"])
    )
    dmas = [op for op in module.walk() if isinstance(op, DmaOp)]
    for dma in dmas:
        verify_generic(dma)  # remembered
    first, second = dmas
    first.properties["priority"] = StringAttr("1")
    second.operands = [second.sem, second.dst, second.sem]
    for op in dmas:
        expected = verdict(op.get_irdl_definition().verify, op)
        assert expected is not None
        assert verdict(verify_generic, op) == expected


def cold_verdict(module):
    """The verify of a fresh process: nothing remembered."""
    forget_verdicts()
    return verdict(copyir.verify, module)


def test_a_remembered_view_check_changed_afterwards_is_checked_again():
    """A view's own check is remembered by its types and properties: a view
    changed to what its check rejects is rejected, as in a fresh process."""
    module = copyir.parse(kernel_text(["copy_start x[0:8] -> b, s"] * 3))
    copyir.verify(module)
    copyir.verify(module)  # now the view's check is remembered
    views = [op for op in module.walk() if isinstance(op, ViewOp)]
    views[1].properties["offsets"] = i64_array((1020,))
    alloc = next(op for op in module.walk() if op.name == "copy.alloc")
    views[2].operands = [alloc.results[0]]  # b[0:8] is no hbm ref
    got = verdict(copyir.verify, module)
    assert got is not None and "Slice 1020:1028" in got[1]
    assert got == cold_verdict(module)
    views[1].properties["offsets"] = i64_array((0,))
    got = verdict(copyir.verify, module)
    assert got is not None and got[1].startswith("Malformed view of b: its type")
    assert got == cold_verdict(module)


def test_a_property_value_remembered_valid_is_checked_against_each_constraint():
    """A value is remembered valid for one constraint: the same object in a
    property of another constraint is checked against that one."""
    module = copyir.parse(kernel_text(["copy_start x[0:8] -> b, s"] * 2))
    copyir.verify(module)  # the view's `sizes`, array<i64: 8>, remembered valid
    view = next(op for op in module.walk() if isinstance(op, ViewOp))
    dma = next(op for op in module.walk() if isinstance(op, DmaOp))
    dma.properties["priority"] = view.properties["sizes"]
    got = verdict(copyir.verify, module)
    assert got is not None
    assert got == cold_verdict(module)
