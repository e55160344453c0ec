"""Run the lit + FileCheck suite under tests/filecheck as part of `pytest`."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT


def test_lit_suite():
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from lit.main import main; main()",
            "-v",
            str(ROOT / "tests" / "filecheck"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    passed = re.search(r"Passed\s*:\s*(\d+)", output)
    assert passed is not None and int(passed.group(1)) >= 5, output
