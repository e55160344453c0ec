"""Every example verifies; every invalid example gives its one documented error,
through the API and through the command line, verbatim and at its line."""

from __future__ import annotations

import re

import pytest
from conftest import INVALID_EXAMPLES, ROOT, VALID_EXAMPLES, expected_error

import copyir
from copyir.cli import main
from copyir.errors import CopyIRError


def check(path):
    copyir.verify(copyir.parse(path.read_text(), filename=str(path)))


def test_there_are_enough_examples():
    assert len(VALID_EXAMPLES) >= 6
    assert len(INVALID_EXAMPLES) >= 30


@pytest.mark.parametrize("path", VALID_EXAMPLES, ids=lambda p: p.name)
def test_example_verifies(path):
    check(path)


@pytest.mark.parametrize("path", VALID_EXAMPLES, ids=lambda p: p.name)
def test_example_verifies_from_the_command_line(path, capsys):
    assert main(["verify", str(path)]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("path", INVALID_EXAMPLES, ids=lambda p: p.name)
def test_invalid_example_through_the_api(path):
    line, message = expected_error(path)
    with pytest.raises(CopyIRError) as caught:
        check(path)
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)
    assert caught.value.loc.file == str(path)
    assert caught.value.loc.line == line


@pytest.mark.parametrize("path", INVALID_EXAMPLES, ids=lambda p: p.name)
def test_invalid_example_through_the_cli(path, capsys):
    line, message = expected_error(path)
    assert main(["verify", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    first, source, caret = err.splitlines()[:3]
    prefix = f"{path}:{line}:"
    assert first.startswith(prefix)
    col = int(first[len(prefix) :].split(":")[0])
    assert first == f"{path}:{line}:{col}: error: {message}"
    assert source == path.read_text().splitlines()[line - 1]
    assert caret == " " * (col - 1) + "^"
    assert "Traceback" not in err


@pytest.mark.parametrize("path", INVALID_EXAMPLES, ids=lambda p: p.name)
def test_the_error_catalogue_lists_each_error_with_its_example(path):
    catalogue = (ROOT / "docs" / "errors.md").read_text()
    _, message = expected_error(path)
    row = f"| [`{path.name}`](../examples/invalid/{path.name}) | `{message}` |"
    assert row in catalogue


def _program(text: str) -> str:
    """A program without its comments, kernel names and layout."""
    lines = [re.sub(r"\s*(#|//).*$", "", line) for line in text.splitlines()]
    code = " ".join(" ".join(lines).split())
    return re.sub(r"(kernel @?)\w+", r"\1k", code)


def test_no_lit_case_repeats_an_invalid_example():
    """Each invalid program exists once: in examples/invalid/ (which
    tests/filecheck/verify/examples.cpy checks) or as a lit case."""
    examples = {_program(p.read_text()): p.name for p in INVALID_EXAMPLES}
    repeated = []
    for path in sorted((ROOT / "tests" / "filecheck").rglob("*.*")):
        if path.suffix not in (".cpy", ".mlir") or "Output" in path.parts:
            continue
        for case in re.split(r"^(?:#|//) -----$", path.read_text(), flags=re.M):
            if (name := examples.get(_program(case))) is not None:
                repeated.append(f"{path.name} repeats {name}")
    assert not repeated
