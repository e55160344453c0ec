"""A whole `copy_start` / `copy_wait` line of names and integer subscripts
is one token (DMA_LINE), read as `dma_stmt` would read it: the same IR, the
same errors at the same columns, and no trace of the token in messages."""

from __future__ import annotations

import pytest

import copyir
from copyir.cpy.syntax import lark_parser
from copyir.errors import CopyIRError
from copyir.testing import module_difference

HEADER = (
    "kernel k(x: f32[4, 8, 128] @hbm) {\n"
    "  buf = alloc f32[2, 8, 128] @vmem\n"
    "  s = semaphore[2]\n"
)


def kernel(*lines: str) -> str:
    return HEADER + "".join(f"  {line}\n" for line in lines) + "}\n"


def token_types(text: str) -> list[str]:
    return [token.type for token in lark_parser().lex(text)]


def error_of(text: str) -> CopyIRError:
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text, "t.cpy"))
    return caught.value


@pytest.mark.parametrize(
    "line",
    [
        "copy_start x[0] -> buf[1], s[1]",
        "copy_wait x[3, 0:8] -> buf[0], s[0]  # a comment",
        "copy_start  x[1,:]  ->  buf[0,:,:] ,  s[0]",
        "copy_start x[2] -> buf[1], s[1]; copy_wait x[2] -> buf[1], s[1]",
    ],
)
def test_a_dma_line_is_one_token_and_the_same_ir(line):
    fast = kernel(line)
    assert "DMA_LINE" in token_types(fast)
    # A blank between a name and its subscripts takes the general rule.
    slow = kernel(line.replace("x[", "x ["))
    assert "DMA_LINE" not in token_types(slow)
    module = copyir.parse(fast, "t.cpy")
    assert (
        module_difference(module, copyir.parse(slow, "t.cpy"), locations=False) is None
    )


@pytest.mark.parametrize(
    "line",
    [
        "copy_start xs[0] -> buf[1], s[1]",
        "copy_start x[0] -> bf[1], s[1]",
        "copy_start x[0] -> buf[1], t[1]",
        "copy_start x[9] -> buf[1], s[1]",
        "copy_start x[0] -> buf[1, 0:9], s[1]",
        "copy_start x[0] -> buf[2], s[1]",
        "copy_start x[0] -> buf[1], s[2]",
        "copy_start x[0] -> buf[1], s[0:1]",
        "copy_start x[0, 0, 0, 0] -> buf[1], s[1]",
        "copy_start x[0] -> buf[1], s",
        "copy_start x[0] -> x[0], s[1]",
        "copy_start x[0] -> buf[99999999999999999999], s[1]",
    ],
)
def test_errors_in_a_dma_line_are_those_of_the_general_rule(line):
    fast = kernel(line)
    assert "DMA_LINE" in token_types(fast)
    slow = kernel(line + ", priority=0")
    assert "DMA_LINE" not in token_types(slow)
    got, expected = error_of(fast), error_of(slow)
    assert str(got) == str(expected)
    assert (got.loc.line, got.loc.col) == (expected.loc.line, expected.loc.col)
    assert [str(n) for n in got.notes] == [str(n) for n in expected.notes]


@pytest.mark.parametrize(
    "text, message",
    [
        (kernel("= 3"), "unexpected '='"),
        (kernel("copy_start x[0] -> buf[1]"), "unexpected end of line"),
        (kernel("copy_start x[0] -> buf[1], s[1] s"), "unexpected 's'"),
    ],
)
def test_syntax_errors_never_name_the_token(text, message):
    with pytest.raises(CopyIRError) as caught:
        copyir.parse(text, "t.cpy")
    assert str(caught.value).startswith(message)
    assert "dma_line" not in str(caught.value).lower()
