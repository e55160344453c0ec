"""Files named on the command line: outputs keep every parameter's name,
input files are re-read and never overwritten, an unwritable output is a
usage error, and a location naming a device is never read."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLES

from copyir.cli import main


@pytest.mark.parametrize("name", ["file", "allow_pickle", "args"])
def test_outputs_keep_every_parameter_name(name, tmp_path):
    path = tmp_path / "p.cpy"
    path.write_text(
        f"kernel k({name}: f32[8] @hbm, out: f32[8] @hbm) {{\n  sync_copy {name} -> out\n}}\n"
    )
    out = tmp_path / "o.npz"
    assert main(["run", str(path), "--fill-inputs", "iota", "--output", str(out)]) == 0
    assert sorted(np.load(out).files) == sorted([name, "out"])


def test_rerun_with_named_input_files(tmp_path, capsys):
    np.savez(
        tmp_path / "x.npz", x=np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    )
    out = tmp_path / "out.npz"
    args = ["run", str(EXAMPLES / "manual.cpy"), "--input", f"x={tmp_path / 'x.npy'}"]
    np.save(tmp_path / "x.npy", np.arange(64 * 128, dtype=np.float32).reshape(64, 128))
    assert main([*args, "--output", str(out)]) == 0
    assert main([*args, "--output", str(out)]) == 0  # the output exists now
    bundle = ["run", str(EXAMPLES / "manual.cpy"), "--input", str(tmp_path / "x.npz")]
    assert main([*bundle, "--output", str(tmp_path / "x.npz")]) == 2
    assert "refusing to overwrite the input file" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "lower"])
def test_unwritable_output_is_a_usage_error(command, capsys):
    args = [command, str(EXAMPLES / "manual.cpy"), "--fill-inputs", "zeros"]
    args = args[:2] + (
        ["--fill-inputs", "zeros", "--output"] if command == "run" else ["-o"]
    )
    assert main([*args, "/nonexistent/dir/out.npz"]) == 2
    assert capsys.readouterr().err == (
        "copyir: error: cannot write /nonexistent/dir/out.npz: No such file or directory\n"
    )


def test_a_location_naming_a_device_is_not_read(tmp_path, capsys):
    path = tmp_path / "p.cpy"
    path.write_text(
        'kernel k(x: f32[8], y: f32[4]) {\n  sync_copy x -> y loc("/dev/zero":1:1)\n}\n'
    )
    assert main(["verify", str(path)]) == 1
    assert capsys.readouterr().err.startswith(
        "/dev/zero:1:1: error: DMA source and target shape mismatch.\nnote:"
    )
