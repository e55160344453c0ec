"""Run the lit + FileCheck suite under tests/filecheck as part of `pytest`.

Its files mirror the compiler's stages: `dialect/` (both textual forms
round-trip), `transforms/` (one file per pass), `verify/` (the verifier's
diagnostics) and `run/` (running programs and streams)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import ROOT

FILECHECK = ROOT / "tests" / "filecheck"
STAGES = {"dialect", "transforms", "verify", "run"}


def test_lit_files_are_grouped_by_stage():
    found = {p.name for p in FILECHECK.iterdir() if p.is_dir()}
    assert found == STAGES
    for stage in STAGES:
        assert any((FILECHECK / stage).glob("*.cpy")), stage


LIT_FILES = sorted(
    p
    for p in FILECHECK.rglob("*")
    if p.suffix in (".cpy", ".mlir")
    and "Output" not in p.parts  # lit's scratch
    and "Inputs" not in p.parts  # files the tests read, as lit's excludes say
)


def test_there_are_lit_files():
    assert len(LIT_FILES) >= 20


@pytest.mark.parametrize("path", LIT_FILES, ids=lambda p: str(p.relative_to(FILECHECK)))
def test_lit_file(path):
    """Each file on its own, so that pytest-xdist's workers share them out."""
    result = subprocess.run(
        [sys.executable, "-c", "from lit.main import main; main()", "-v", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    passed = re.search(r"Passed\s*:\s*(\d+)", output)
    assert passed is not None and int(passed.group(1)) == 1, output
