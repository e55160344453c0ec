"""Notes that help fix an error: the message stays
exactly what it was, and a note beside it names both types, the closest
name or keyword, or the habit from another language."""

from __future__ import annotations

import pytest

import copyir
from copyir import errors
from copyir.dtypes import KNOWN_NAMES
from copyir.errors import CopyIRError

KERNEL = "kernel k(x: f32[64, 128] @hbm, y: f32[64, 128] @hbm) {{\n{body}\n}}\n"


def error_of(text: str) -> CopyIRError:
    with pytest.raises(CopyIRError) as caught:
        copyir.verify(copyir.parse(text, "hints.cpy"))
    return caught.value


def notes_of(err: CopyIRError) -> list[str]:
    return [note.message for note in err.notes]


@pytest.mark.parametrize(
    "body, message, suggestion",
    [
        # An unknown statement, at a line's start or after `;`.
        ("  s = semaphore\n  copy_strat x -> y, s", None, "copy_start"),
        ("  s = semaphore; sync_cpy x -> y", None, "sync_copy"),
        # An unknown value after `name =`.
        ("  b = aloc f32[8] @vmem", None, "alloc"),
        ("  s = semaphor", errors.UNDEFINED.format(name="semaphor"), "semaphore"),
        # An undefined name close to a defined one.
        (
            "  bufs = alloc f32[64, 128] @vmem\n  s = semaphore\n"
            "  copy_start x -> buf, s",
            errors.UNDEFINED.format(name="buf"),
            "bufs",
        ),
        # An unknown dtype, and an unknown option.
        ("  b = alloc fp32[8] @vmem", None, "f32"),
        (
            "  s = semaphore\n  copy_start x -> y, s, priorty=1",
            "Unknown option priorty for copy_start (expected add or priority)",
            "priority",
        ),
    ],
)
def test_did_you_mean(body, message, suggestion):
    err = error_of(KERNEL.format(body=body))
    if message is not None:
        assert str(err) == message
    assert notes_of(err) == [errors.DID_YOU_MEAN.format(name=suggestion)]


def test_an_unknown_dtype_keeps_its_message():
    err = error_of(KERNEL.format(body="  b = alloc flaot32[8] @vmem"))
    assert str(err) == errors.UNKNOWN_DTYPE.format(dtype="flaot32", known=KNOWN_NAMES)
    assert notes_of(err) == [errors.DID_YOU_MEAN.format(name="float32")]


def test_a_misspelt_kernel_keyword():
    err = error_of("kernal k(x: f32[8]) {\n}\n")
    assert str(err) == "unexpected 'kernal'; expected ';', 'kernel' or end of line"
    assert notes_of(err) == [errors.DID_YOU_MEAN.format(name="kernel")]


def test_nothing_close_no_note():
    err = error_of(KERNEL.format(body="  s = semaphore\n  copy_start x -> zzz, s"))
    assert str(err) == errors.UNDEFINED.format(name="zzz")
    assert err.notes == ()


@pytest.mark.parametrize(
    "body, col, hint",
    [
        ("  // a C comment", 3, errors.HINT_COMMENT),
        (
            "  s = semaphore\n  copy_start x.at[0:8] -> y.at[0:8], s",
            15,
            errors.HINT_AT,
        ),
        (
            "  s = semaphore\n  copy_start x[pl.ds(0, 8)] -> y[0:8], s",
            18,
            errors.HINT_DS,
        ),
        # `//` where a statement could end is a comment, not floor division.
        ("  s = semaphore\n  copy_start x -> y, s  // C", 25, errors.HINT_COMMENT),
        ("  s = semaphore; // C", 18, errors.HINT_COMMENT),
        ("  n = 3 // a comment", 14, errors.HINT_COMMENT),
        ("  n = 3 // comment", 12, errors.HINT_COMMENT),
        ("  copy_start x -> y", 20, errors.HINT_NO_SEMAPHORE),
        ("  dma wait x[0:8] -> y[0:8]", 28, errors.HINT_NO_SEMAPHORE),
        ("  copy_start x -> y}", 20, errors.HINT_NO_SEMAPHORE),
    ],
)
def test_hints_for_habits_from_other_languages(body, col, hint):
    err = error_of(KERNEL.format(body=body))
    assert err.loc.col == col
    assert notes_of(err) == [hint]


def test_the_syntax_error_example_keeps_its_message():
    """examples/invalid/syntax_error.cpy documents this message verbatim."""
    err = error_of(KERNEL.format(body="  s = semaphore\n  copy_start x -> y"))
    assert str(err) == "unexpected end of line; expected ','"


def test_a_missing_comma_is_not_a_missing_semaphore():
    err = error_of(KERNEL.format(body="  s = semaphore\n  copy_start x -> y s"))
    assert errors.HINT_NO_SEMAPHORE not in notes_of(err)


def test_a_first_word_that_is_a_name_gets_no_keyword_suggestion():
    # `dmas` is close to `dma`, but here it is the destination of a DMA.
    err = error_of(
        KERNEL.format(
            body="  dmas = alloc f32[64, 128] @vmem\n  copy_start x -> dmas s"
        )
    )
    assert notes_of(err) == []


def test_ds_is_the_authoring_syntax_now():
    """`ds(start, size)` is how copyir writes a slice too; only `pl.ds` gets
    the hint."""
    text = KERNEL.format(body="  s = semaphore\n  copy_start x[ds(0, 8)] -> y[0:8], s")
    copyir.verify(copyir.parse(text))


def test_floor_division_gets_no_comment_hint():
    body = "  for i in range(4) {\n    n = i // 2 + zz\n  }"
    err = error_of(KERNEL.format(body=body))
    assert str(err) == errors.UNDEFINED.format(name="zz")
    assert errors.HINT_COMMENT not in notes_of(err)


def test_an_unfinished_floor_division_is_no_comment():
    err = error_of(KERNEL.format(body="  n = 3 //"))
    assert str(err).startswith("unexpected end of line")
    assert notes_of(err) == []
