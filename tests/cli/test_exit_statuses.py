"""The command line: exit statuses, one-line errors, no tracebacks."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from conftest import EXAMPLES

from copyir.cli import main

ROUNDTRIP = EXAMPLES / "roundtrip.cpy"
TWO_KERNELS = "kernel a(x: f32[4]) {\n}\n\nkernel b(y: i32[2]) {\n}\n"


def run(argv, capsys, stdin=None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def test_valid_program_exits_zero(capsys):
    assert run(["verify", str(ROUNDTRIP)], capsys) == (0, "", "")


def test_version(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["--version"])
    assert caught.value.code == 0
    assert capsys.readouterr().out.strip() == "copyir 0.1.0"


def test_missing_file_is_a_one_line_usage_error(capsys, tmp_path):
    status, _out, err = run(["verify", str(tmp_path / "nope.cpy")], capsys)
    assert status == 2
    assert (
        err
        == f"copyir: error: cannot read {tmp_path / 'nope.cpy'}: No such file or directory\n"
    )


def test_directory_is_a_one_line_usage_error(capsys, tmp_path):
    status, _, err = run(["verify", str(tmp_path)], capsys)
    assert (status, err) == (2, f"copyir: error: {tmp_path} is a directory\n")


def test_usage_error_exits_two(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["verify"])
    assert caught.value.code == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "1:1: error: The file has no kernel"),
        (b"\n\n# only a comment\n", "1:1: error: The file has no kernel"),
        (
            b"\xff\xfe\x00garbage",
            "1:1: error: Input is not UTF-8 text: byte 0xff at offset 0",
        ),
        (b"kernel k() {\n  \x00\n}\n", "2:3: error: unexpected character '\\x00'"),
        (
            b"kernel k() {\n  frobnicate x\n}\n",
            "2:14: error: unexpected 'x'; expected '.', '=', '[', an augmented "
            "assignment such as '+=' or subscripts",
        ),
        (
            b"kernel k(x: f32[99999999999999]) {\n}\n",
            "1:10: error: x needs 399999999999996 bytes of hbm",
        ),
    ],
)
def test_bad_content_gets_a_diagnostic(capsys, tmp_path, content, message):
    path = tmp_path / "bad.cpy"
    path.write_bytes(content)
    status, out, err = run(["verify", str(path)], capsys)
    assert status == 1
    assert err.startswith(f"{path}:{message}")
    assert "Traceback" not in err and out == ""


def test_stdin_is_read_with_dash(capsys, monkeypatch):
    status, out, _ = run(
        ["verify", "--emit", "cpy", "-"], capsys, ROUNDTRIP.read_bytes(), monkeypatch
    )
    assert status == 0
    assert out.startswith("kernel roundtrip(")


def test_stdin_errors_name_stdin(capsys, monkeypatch):
    status, _, err = run(
        ["verify", "-"], capsys, b"kernel k() {\n  x\n}\n", monkeypatch
    )
    assert status == 1
    assert err.startswith("<stdin>:2:4: error:")


def test_kernel_picks_one_of_several(capsys, tmp_path):
    path = tmp_path / "two.cpy"
    path.write_text(TWO_KERNELS)
    status, out, _ = run(
        ["verify", "--kernel", "b", "--emit", "cpy", str(path)], capsys
    )
    assert status == 0
    assert out == "kernel b(y: i32[2] @hbm) {\n}\n"
    status, _, err = run(["verify", "--kernel", "c", str(path)], capsys)
    assert status == 2  # the command line is wrong, not the program
    assert err == "copyir: error: No kernel named c; the file has: a, b\n"


def test_emit_mlir_reads_back(capsys, tmp_path):
    status, out, _ = run(["verify", "--emit", "mlir", str(ROUNDTRIP)], capsys)
    assert status == 0 and "copy.kernel @roundtrip" in out and "loc(" in out
    mlir = tmp_path / "prog.mlir"
    mlir.write_text(out)
    status, again, _ = run(["verify", "--emit", "cpy", str(mlir)], capsys)
    assert status == 0
    assert again == run(["verify", "--emit", "cpy", str(ROUNDTRIP)], capsys)[1]


def test_output_file_is_written_and_input_untouched(capsys, tmp_path):
    source = tmp_path / "prog.cpy"
    source.write_text(ROUNDTRIP.read_text())
    before = source.read_bytes()
    out_path = tmp_path / "out.mlir"
    assert (
        run(["verify", "--emit", "mlir", "-o", str(out_path), str(source)], capsys)[0]
        == 0
    )
    assert out_path.read_text().startswith("builtin.module")
    assert source.read_bytes() == before
    # No temporary file is left behind by the atomic write.
    assert {p.name for p in tmp_path.iterdir()} == {"prog.cpy", "out.mlir"}


def test_refuses_to_overwrite_the_input(capsys, tmp_path):
    source = tmp_path / "prog.cpy"
    source.write_text(ROUNDTRIP.read_text())
    before = source.read_bytes()
    status, _, err = run(
        ["verify", "--emit", "cpy", "-o", str(source), str(source)], capsys
    )
    assert status == 2 and "refusing to overwrite the input file" in err
    assert source.read_bytes() == before


def test_several_files_report_each(capsys, tmp_path):
    bad = tmp_path / "bad.cpy"
    bad.write_text("kernel k(x: f32[4]) {\n  y = alloc f32[4] @hbm\n}\n")
    status, _, err = run(["verify", str(ROUNDTRIP), str(bad), str(bad)], capsys)
    assert status == 1
    assert err.count("error: alloc y must be in vmem or smem") == 2


def test_console_script_runs_without_traceback(tmp_path):
    bad = tmp_path / "bad.cpy"
    bad.write_text("kernel k(x: f32[4]) {\n  copy_start x -> x, x\n}\n")
    result = subprocess.run(
        [sys.executable, "-m", "copyir", "verify", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"{bad}:2:3: error: copy_start expects a semaphore")


@pytest.mark.parametrize("name", ["window", "invalidate", "nan", "inf"])
def test_a_printed_kernel_keeps_its_interface(capsys, tmp_path, name):
    """Parameters bind inputs and outputs by name: a kernel printed as .cpy
    runs with the names its source gave them, even keywords."""
    import numpy as np

    source = tmp_path / "k.cpy"
    source.write_text(
        f"kernel k({name}: f32[8] @hbm, y: f32[8] @hbm) {{\n"
        f"  sync_copy {name} -> y\n}}\n"
    )
    status, printed, _ = run(["verify", "--emit", "cpy", str(source)], capsys)
    assert status == 0 and printed.startswith(f"kernel k({name}: f32[8] @hbm")
    (tmp_path / "printed.cpy").write_text(printed)
    np.save(tmp_path / "a.npy", np.arange(8, dtype=np.float32))
    out = tmp_path / "out.npz"
    argv = ["run", str(tmp_path / "printed.cpy"), "--output", str(out)]
    argv += ["--input", f"{name}={tmp_path / 'a.npy'}"]
    assert run(argv, capsys)[0] == 0
    assert np.array_equal(np.load(out)["y"], np.arange(8, dtype=np.float32))
