"""Run the lit + FileCheck suite under tests/filecheck as part of `pytest`.

Its files mirror the compiler's stages: `dialect/` (both textual forms
round-trip), `transforms/` (one file per pass), `verify/` (the verifier's
diagnostics) and `run/` (running programs and streams)."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT

FILECHECK = ROOT / "tests" / "filecheck"
STAGES = {"dialect", "transforms", "verify", "run"}


def test_lit_files_are_grouped_by_stage():
    found = {p.name for p in FILECHECK.iterdir() if p.is_dir()}
    assert found == STAGES
    for stage in STAGES:
        assert any((FILECHECK / stage).glob("*.cpy")), stage


def test_lit_suite():
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from lit.main import main; main()",
            "-v",
            str(FILECHECK),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    files = [p for p in FILECHECK.rglob("*") if p.suffix in (".cpy", ".mlir")]
    passed = re.search(r"Passed\s*:\s*(\d+)", output)
    assert passed is not None and int(passed.group(1)) == len(files), output
