"""Malformed DMA streams, in text and binary form: each a located error."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES

import copyir
from copyir import errors
from copyir.cli import main
from copyir.errors import CopyIRError
from copyir.stream import read_dma


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            '"vmem" 0 [128, 1] f32 [32, 128] sem 0',
            '"vram" 0 [128, 1] f32 [32, 128] sem 0',
            "Malformed DMA stream: unknown memory space 'vram'",
        ),
        (
            "f32 [32, 128] sem 0",
            "i7 [32, 128] sem 0",
            "Malformed DMA stream: unknown element type i7",
        ),
        (
            "[128, 1] f32 [32, 128] sem 0",
            "[128, 1, 1] f32 [32, 128] sem 0",
            "Malformed DMA stream: strides [128, 1, 1] for shape [32, 128]",
        ),
        (
            "f32 [32, 128] sem 0",
            "f32 [0, 128] sem 0",
            "Malformed DMA stream: bad shape [0, 128]",
        ),
        ("sem 0", "sem 7", "Malformed DMA stream: semaphore 7 in a program of 1"),
    ],
)
def test_malformed_dma_text_is_a_located_error(old, new, message, tmp_path, capsys):
    text = copyir.dma_text(
        copyir.lower(copyir.parse((EXAMPLES / "manual.cpy").read_text()))
    )
    assert old in text
    bad = tmp_path / "bad.dma"
    bad.write_text(text.replace(old, new, 1))
    assert main(["run", str(bad), "--fill-inputs", "zeros"]) == 1
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith(f"{bad}:") and first.endswith(f"error: {message}")


def test_huge_buffers_in_a_binary_stream_are_refused(tmp_path):
    from copyir.stream import Buffer, load_npz, save_npz

    stream = copyir.to_stream(
        copyir.lower(copyir.parse((EXAMPLES / "manual.cpy").read_text()))
    )
    stream.buffers[0] = Buffer("x", "hbm", 0, "f32", (2**40, 2**40), True)
    path = tmp_path / "s.npz"
    save_npz(stream, path)
    loaded = load_npz(str(path), "s.npz")
    with pytest.raises(CopyIRError) as caught:
        loaded.validate()
    assert (
        str(caught.value) == "Malformed DMA stream: buffer x has a bad address or size"
    )
    assert str(caught.value.loc) == "s.npz:1:1"


def test_a_semi_affine_map_is_a_located_error():
    """xDSL's affine parser raises NotImplementedError on `d0 * d1` (found by
    the stream fuzzer): the MLIR form and the `.dma` text say so, located."""
    text = (
        "copy.kernel @k(%x: !copy.ref<32x128xf32, hbm>) {\n"
        "  copy.pipeline grid(4, 2) in %x : !copy.ref<32x128xf32, hbm> block "
        "[8, 128] index affine_map<(d0, d1) -> (d0 * d1, 0)> buffers 2 (%xw, "
        "%i, %j) {\n  }\n}\n"
    )
    with pytest.raises(CopyIRError) as caught:
        copyir.parse(text, filename="k.mlir", format="mlir")
    assert str(caught.value) == errors.SEMI_AFFINE
    assert caught.value.loc.line == 2
    path = EXAMPLES / "loop_windows.cpy"
    stream = copyir.dma_text(copyir.lower(copyir.parse(path.read_text(), str(path))))
    mutant = stream.replace("(d0 * 3)", "(d0 * d1)", 1)
    assert mutant != stream
    line = 1 + mutant[: mutant.index("(d0 * d1)")].count("\n")
    with pytest.raises(CopyIRError) as caught:
        read_dma(mutant, "k.dma")
    assert str(caught.value) == errors.SEMI_AFFINE
    assert caught.value.loc.line == line


def test_a_map_nested_too_deep_is_a_located_error():
    """A `.dma` map nested past `index.MAX_DEPTH` operations (the stream
    fuzzer's mutant repeated `mod 2` 600 times) is one located error, not
    a RecursionError while the tables key on it."""
    path = EXAMPLES / "loop_windows.cpy"
    stream = copyir.dma_text(copyir.lower(copyir.parse(path.read_text(), str(path))))
    deep = "(d0 * 3)" + " mod 7" * 150
    mutant = stream.replace("(d0 * 3)", deep, 1)
    assert mutant != stream
    line = 1 + mutant[: mutant.index(deep)].count("\n")
    with pytest.raises(CopyIRError) as caught:
        read_dma(mutant, "k.dma")
    assert str(caught.value) == errors.INDEX_TOO_DEEP.format(limit=100)
    assert caught.value.loc.line == line
