"""The Python API takes a program in any form: source
text, a file, a module (and a lowered program); a wrong type is a clear
TypeError; `to_text` knows its formats and prints a dma.program; `dir`
lists the API."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES

import copyir
from copyir import errors
from copyir.dialects.dma import ProgramOp
from copyir.errors import CopyIRError, InvocationError

MANUAL = EXAMPLES / "manual.cpy"
X = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)


def forms(tmp_path: Path) -> dict[str, object]:
    """The manual example in every form the API takes."""
    mlir = tmp_path / "manual.mlir"
    mlir.write_text(copyir.to_text(copyir.parse(MANUAL.read_text()), "mlir"))
    program = copyir.lower(copyir.parse(MANUAL.read_text(), str(MANUAL)))
    dma = tmp_path / "manual.dma"
    dma.write_text(copyir.dma_text(program))
    return {
        "text": MANUAL.read_text(),
        "path": MANUAL,
        "mlir-path": mlir,
        "mlir-text": mlir.read_text(),
        "module": copyir.parse(MANUAL.read_text()),
        "dma-path": dma,
        "dma-text": dma.read_text(),
        "program": program,
        "stream": copyir.to_stream(program),
    }


def test_verify_lower_and_run_take_every_form(tmp_path):
    for name, program in forms(tmp_path).items():
        assert copyir.verify(program) is None, name
        assert isinstance(copyir.lower(program), ProgramOp), name
        assert np.array_equal(copyir.run(program, {"x": X})["y"], X), name


def test_a_str_is_source_text_and_its_errors_are_located():
    with pytest.raises(CopyIRError) as caught:
        copyir.verify("kernel k(x: f32[4]) {\n  y = alloc f32[4] @hbm\n}\n")
    assert str(caught.value) == "alloc y must be in vmem or smem, got f32[4] @hbm"
    assert (caught.value.loc.line, caught.value.loc.col) == (2, 3)


def test_a_path_names_its_file_in_errors(tmp_path):
    path = tmp_path / "bad.cpy"
    path.write_text("kernel k(x: f32[4]) {\n  y = alloc f32[4] @hbm\n}\n")
    with pytest.raises(CopyIRError) as caught:
        copyir.lower(path)
    assert caught.value.loc.file == str(path)


def test_a_missing_path_is_an_invocation_error(tmp_path):
    with pytest.raises(InvocationError) as caught:
        copyir.verify(tmp_path / "nope.cpy")
    assert str(caught.value) == errors.CANNOT_READ.format(
        path=tmp_path / "nope.cpy", why="No such file or directory"
    )


@pytest.mark.parametrize(
    ("function", "accepted"),
    [
        (
            "verify",
            "a ModuleOp, a dma.program, a Stream, source text (str) or a file (pathlib.Path)",
        ),
        (
            "lower",
            "a ModuleOp, a dma.program, a Stream, source text (str) or a file (pathlib.Path)",
        ),
        (
            "run",
            "a ModuleOp, a dma.program, a Stream, source text (str) or a file (pathlib.Path)",
        ),
    ],
)
@pytest.mark.parametrize("wrong", [42, b"kernel k() {}", None])
def test_a_wrong_type_is_a_type_error_naming_what_is_accepted(
    function, accepted, wrong
):
    with pytest.raises(TypeError) as caught:
        getattr(copyir, function)(wrong)
    assert str(caught.value) == errors.API_TYPE.format(
        function=function, accepted=accepted, got=type(wrong).__name__
    )


def test_to_text_rejects_an_unknown_format():
    module = copyir.parse(MANUAL.read_text())
    with pytest.raises(ValueError) as caught:
        copyir.to_text(module, "xml")
    assert str(caught.value) == errors.UNKNOWN_FORMAT.format(
        format="xml", formats="cpy, mlir or dma"
    )


def test_to_text_prints_a_dma_program():
    program = copyir.lower(MANUAL)
    text = copyir.to_text(program)
    assert text == copyir.dma_text(program) == copyir.to_text(program, "dma")
    assert text.startswith(
        '// copyir DMA stream: kernel manual, target default\ndma.program "manual"'
    )
    assert copyir.to_text(program, "mlir").startswith('dma.program "manual"')


def test_to_text_dma_of_an_unlowered_module_says_to_lower_it():
    with pytest.raises(ValueError) as caught:
        copyir.to_text(copyir.parse(MANUAL.read_text()), "dma")
    assert str(caught.value) == errors.DMA_FORM_NEEDS_PROGRAM


def test_dir_lists_the_api():
    listed = dir(copyir)
    for name in [*copyir.__all__, "load_outputs", "run", "verify", "lower", "parse"]:
        assert name in listed
    assert listed == sorted(listed)
