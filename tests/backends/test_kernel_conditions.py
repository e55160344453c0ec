"""Conditions at kernel level, outside any loop.

A `when` (and a `.dma` instruction's `if` predicate) holds or not once per
run; a stream without loops must still read it. Before the fix a shortcut
for loop-free streams took every row as an event, so a copy under a false
condition ran, and a racy copy that never runs was reported as a race.
"""

from __future__ import annotations

import numpy as np
import pytest
from copyir.backends.interpreter import MODES

import copyir
from copyir.cli import main
from copyir.errors import CopyIRError

FALSE_CONDITION = """\
kernel k(x: i32[8] @hbm, y: i32[8] @hbm) {
  when 1 > 2 {
    sync_copy x -> y
  }
}
"""

RACY_DEBUG_COPY = """\
kernel k(x: i32[8] @hbm, y: i32[8] @hbm) {
  s = semaphore
  t = semaphore
  debug = 0
  sync_copy x -> y
  when debug == 1 {
    copy_start x[0:4] -> y[0:4], s
    copy_start x[0:4] -> y[0:4], t
    copy_wait x[0:4] -> y[0:4], s
    copy_wait x[0:4] -> y[0:4], t
  }
}
"""

STREAM = """\
dma.program "k" target "default" semaphores 1 {{
  dma.buffer "x" "hbm" 0 i32 [8] param
  dma.buffer "y" "hbm" 512 i32 [8] param
  dma.start "hbm" 0 [1] -> "hbm" 512 [1] i32 [8] sem 0 if {{() : ({c} >= 0)}}
  dma.wait sem 0 bytes 32 if {{() : ({c} >= 0)}}
}}
"""

X = np.arange(1, 9, dtype=np.int32)


@pytest.mark.parametrize("mode", MODES)
def test_a_copy_under_a_false_kernel_level_condition_never_runs(mode):
    y = np.zeros(8, np.int32)
    got = copyir.run(FALSE_CONDITION, {"x": X, "y": y}, mode=mode)
    assert np.array_equal(got["y"], y)
    holds = FALSE_CONDITION.replace("1 > 2", "2 > 1")
    assert np.array_equal(copyir.run(holds, {"x": X, "y": y}, mode=mode)["y"], X)


@pytest.mark.parametrize("mode", MODES)
def test_a_racy_copy_under_a_condition_that_never_holds_is_no_race(mode):
    copyir.check_protocol(RACY_DEBUG_COPY)
    got = copyir.run(RACY_DEBUG_COPY, {"x": X, "y": np.zeros(8, np.int32)}, mode=mode)
    assert np.array_equal(got["y"], X)
    with pytest.raises(CopyIRError) as err:
        copyir.check_protocol(RACY_DEBUG_COPY.replace("debug = 0", "debug = 1"))
    assert str(err.value) == (
        "Race: this DMA writes y[0:4] while the DMA started at <input>:7:5 is in "
        "flight and writes it"
    )


def test_verify_protocol_reads_a_kernel_level_condition(tmp_path, capsys):
    path = tmp_path / "debug.cpy"
    path.write_text(RACY_DEBUG_COPY)
    assert main(["verify", "--protocol", str(path)]) == 0
    path.write_text(RACY_DEBUG_COPY.replace("debug = 0", "debug = 1"))
    assert main(["verify", "--protocol", str(path)]) == 1
    assert "Race: this DMA writes y[0:4]" in capsys.readouterr().err


@pytest.mark.parametrize(("constant", "runs"), [(-1, False), (0, True)])
def test_a_dma_stream_reads_a_top_level_predicate(tmp_path, constant, runs):
    path = tmp_path / "k.dma"
    path.write_text(STREAM.format(c=constant))
    y = np.zeros(8, np.int32)
    out = tmp_path / "out.npz"
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", y)
    status = main(
        [
            "run",
            str(path),
            "--input",
            f"x={tmp_path / 'x.npy'}",
            "--input",
            f"y={tmp_path / 'y.npy'}",
            "--output",
            str(out),
        ]
    )
    assert status == 0
    assert np.array_equal(np.load(out)["y"], X if runs else y)
