"""Parse errors of the authoring syntax: a name bound twice, and a syntax
error after a deep nest of brackets, each located."""

from __future__ import annotations

import pytest

import copyir
from copyir.errors import CopyIRError


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "buf = alloc f32[8] @vmem\n  buf = y",
            "buf is defined twice (first at line 2)",
        ),
        ("buf = alloc f32[8] @vmem\n  x = buf", "x is defined twice (first at line 1)"),
    ],
)
def test_a_name_cannot_be_rebound(body, message):
    text = f"kernel k(x: f32[8], y: f32[8]) {{\n  {body}\n}}\n"
    with pytest.raises(CopyIRError) as caught:
        copyir.parse(text)
    assert str(caught.value) == message
    assert caught.value.loc.line == 3


def test_a_syntax_error_after_a_deep_nest_is_a_diagnostic():
    """Found by the fuzzer: the trial parse behind the missing-semaphore
    note copied the parse stack deeply, and a 1000-deep nest of brackets
    before the error exhausted the recursion."""
    nest = "(" * 1000 + "0" + ")" * 1000
    text = (
        "kernel k(x: f32[8] @hbm) {\n  buf = alloc f32[8] @vmem\n  s = semaphore\n"
        f"  copy_start x[{nest}:8] -> buf ((\n}}\n"
    )
    with pytest.raises(CopyIRError) as caught:
        copyir.parse(text, "deep.cpy")
    assert str(caught.value) == "unexpected '('; expected ',', '[' or subscripts"
    assert caught.value.loc.line == 4
