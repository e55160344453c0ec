"""The Pallas examples (`examples/pallas/*.py`) run on copyir in every
completion mode and give numpy's answer; the racy one gives its one located
error, through `copyir.pallas.run` and through `copyir check`."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest
from conftest import EXAMPLES, ROOT

jax = pytest.importorskip("jax", reason="the Pallas frontend needs JAX")

import copyir.pallas  # noqa: E402
from copyir import errors  # noqa: E402
from copyir.errors import CopyIRError  # noqa: E402
from copyir.pallas.jaxpr_source import shown  # noqa: E402

PALLAS = EXAMPLES / "pallas"
MODES = [("eager", 0), ("on_wait", 0), ("random", 0), ("random", 1)]


def example(name: str):
    """The example module `examples/pallas/NAME.py`, freshly loaded."""
    spec = importlib.util.spec_from_file_location(
        f"pallas_example_{name}", PALLAS / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _restore_jax_flags():
    """emit_pipeline.py turns a JAX flag on when loaded; other tests
    should not see it."""
    before = jax.config.jax_use_emit_pipeline_primitive
    yield
    jax.config.update("jax_use_emit_pipeline_primitive", before)


def rows(shape: tuple[int, int]) -> np.ndarray:
    """The examples' input: 0, 1, 2, ... in row-major order, f32."""
    return np.arange(shape[0] * shape[1], dtype=np.float32).reshape(shape)


EXPECTED = {
    "clamped_blocks": lambda: 2 * rows((100, 128)),
    "double_buffer": lambda: 2 * rows((64, 128)),
    "grid_blockspec": lambda: 2 * rows((32, 256)) + np.float32(0.5) - 1,
    "emit_pipeline": lambda: rows((32, 256)) + 1,
    "sync_copy_tree": lambda: 3 * rows((32, 128)) - 1,
}
"""Each example's result, computed by numpy."""


def test_every_example_is_tested():
    assert {p.stem for p in PALLAS.glob("*.py")} == {*EXPECTED, "race"}


@pytest.mark.parametrize("mode,seed", MODES)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_gives_numpys_answer(name, mode, seed):
    got = copyir.pallas.run(example(name).main, mode=mode, seed=seed)
    want = EXPECTED[name]()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), want)


def line_of(text: str) -> int:
    """The line of race.py that holds `text`."""
    lines = (PALLAS / "race.py").read_text().splitlines()
    return 1 + next(k for k, line in enumerate(lines) if text in line)


def race_message(path: str) -> str:
    """The error copyir gives at race.py's store, the file shown as `path`."""
    return errors.RUN_ACCESS_RACE.format(
        what="computation",
        action="writes",
        region="buf[0:8, 0:128]",
        other=f"{path}:{line_of('fill.start()')}:5",
        their="writes",
    )


@pytest.mark.parametrize("mode,seed", MODES)
def test_race_is_one_located_error(mode, seed):
    path = shown(str(PALLAS / "race.py"))
    with pytest.raises(CopyIRError) as caught:
        copyir.pallas.run(example("race").main, mode=mode, seed=seed)
    assert str(caught.value) == race_message(path)
    assert (caught.value.loc.file, caught.value.loc.line) == (path, line_of("buf[...]"))
    (note,) = caught.value.notes
    assert (note.loc.file, note.loc.line) == (path, line_of("fill.start()"))


def test_copyir_check_reports_the_race_at_its_line():
    path = "examples/pallas/race.py"
    result = subprocess.run(
        [sys.executable, "-m", "copyir", "check", path, "--call", "main"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = (PALLAS / "race.py").read_text().splitlines()
    store, start = line_of("buf[...]"), line_of("fill.start()")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{path}:{store}:5: error: {race_message(path)}",
        lines[store - 1],
        "    ^",
        f"{path}:{start}:5: note: the DMA in flight started here",
        lines[start - 1],
        "    ^",
    ]
