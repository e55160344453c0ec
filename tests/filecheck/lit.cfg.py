"""lit configuration for copyir's FileCheck tests (`# RUN:` lines in .cpy,
`// RUN:` in .mlir). `copyir` and `filecheck` come from the Python that runs
lit, so the suite tests the installed project."""

import os
import sys

import lit.formats

config.name = "copyir"  # noqa: F821
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".cpy", ".mlir"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.excludes = ["Inputs"]  # noqa: F821
bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")  # noqa: F821
