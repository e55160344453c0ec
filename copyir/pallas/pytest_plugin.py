"""copyir's pytest plugin: run a Pallas test file's kernels on copyir.

Loaded by pytest wherever copyir is installed (a `pytest11` entry point).
It imports nothing heavy until used. One line in a test file,

    pytestmark = pytest.mark.usefixtures("copyir_checking")

runs every `pallas_call` of its tests (functions and `unittest` classes,
eager or under `jax.jit`) inside `copyir.pallas.checking()`, in the mode
and seed given by `--copyir-mode` and `--copyir-seed`. A run-time check
that fails inside a kernel reaches the test as XLA's `JaxRuntimeError`;
the report shows the located `CopyIRError` behind it instead.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from copyir.machine import MODES


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("copyir", "Pallas kernels on copyir")
    group.addoption(
        "--copyir-mode",
        choices=MODES,
        default="random",
        help="completion mode of the DMAs in copyir_checking (default: random)",
    )
    group.addoption(
        "--copyir-seed",
        type=int,
        default=0,
        help="seed of the random completion mode (default: 0)",
    )


@pytest.fixture
def copyir_checking(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every `pallas_call` of the test runs on copyir."""
    from copyir.pallas.checking import checking

    mode = str(request.config.getoption("copyir_mode"))
    seed = int(request.config.getoption("copyir_seed") or 0)
    with checking(mode, seed):
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """Report the `CopyIRError` behind a `JaxRuntimeError`, located. After
    the report is made: pytest's `unittest` support puts a `TestCase`'s
    exception into `call.excinfo` only then."""
    report = yield
    checking = sys.modules.get("copyir.pallas.checking")
    if checking is not None and call.excinfo is not None and report.failed:
        original = checking.failure_behind(call.excinfo.value)
        if original is not None:
            call.excinfo = pytest.ExceptionInfo.from_exception(original)
            report.longrepr = item.repr_failure(call.excinfo)
    return report
