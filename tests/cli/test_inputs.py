"""Crafted input files and programs: a clear error, never exit 3, never a
hang, never silent conversion (of input arrays, programs and diagnostics)."""

from __future__ import annotations

import io
import os
import resource
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from conftest import EXAMPLES, ROOT

import copyir
from copyir import errors
from copyir.cli import main
from copyir.errors import InvocationError
from copyir.target import get_target

MANUAL = str(EXAMPLES / "manual.cpy")  # x, y: f32[64, 128]
SCALARS = str(EXAMPLES / "scalars.cpy")  # bfloat16 parameters


def npy_header(shape, descr="<f4") -> bytes:
    """An `.npy` header alone, with no data after it."""
    out = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(out, header)
    return out.getvalue()


def run(argv, capsys):
    status = main(argv)
    return status, capsys.readouterr().err


# -- .npy and .npz headers ---------------------------------------------------------


def test_npy_shape_is_checked_from_the_header_before_the_data(tmp_path, capsys):
    """A header that promises 4 TiB, and no data: the mismatch is found from
    the header alone (numpy would first try to allocate the 4 TiB)."""
    path = tmp_path / "x.npy"
    path.write_bytes(npy_header((1 << 20, 1 << 20)))
    status, err = run(["run", MANUAL, "--input", f"x={path}"], capsys)
    assert status == 2
    message = errors.RUN_INPUT_MISMATCH.format(
        name="x", got="float32[1048576, 1048576]", want="f32[64, 128]"
    )
    assert err == f"copyir: error: {message}\n"


def test_npy_dtype_is_checked_from_the_header(tmp_path, capsys):
    path = tmp_path / "x.npy"
    path.write_bytes(npy_header((64, 128), "<i4"))
    status, err = run(["run", MANUAL, "--input", f"x={path}"], capsys)
    assert status == 2
    assert err == (
        "copyir: error: Input x is int32[64, 128], but parameter x is f32[64, 128]\n"
    )


def test_a_truncated_npy_is_a_one_line_error(tmp_path, capsys):
    path = tmp_path / "x.npy"
    path.write_bytes(npy_header((64, 128)) + b"\0" * 100)
    status, err = run(["run", MANUAL, "--input", f"x={path}"], capsys)
    assert status == 2
    assert (
        err
        == f"copyir: error: {errors.INPUT_TRUNCATED.format(path=path, nbytes=32768)}\n"
    )


def test_a_big_endian_npy_is_read_as_its_values(tmp_path, capsys):
    x = np.arange(64 * 128, dtype=">f4").reshape(64, 128)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out.npz"
    argv = ["run", MANUAL, "--input", f"x={tmp_path / 'x.npy'}", "--output", str(out)]
    assert main(argv) == 0
    assert np.array_equal(np.load(out)["y"], x.astype("<f4"))


def zip_bomb(path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def test_an_npz_member_of_the_wrong_size_is_rejected_before_decompressing(
    tmp_path, capsys
):
    """The header is right, but the member unpacks to 64 MiB more: rejected
    from the zip directory's sizes, before its data is decompressed."""
    path = tmp_path / "bomb.npz"
    header = npy_header((64, 128))
    zip_bomb(path, {"x.npy": header + bytes(32768 + (64 << 20))})
    assert path.stat().st_size < 1 << 20
    status, err = run(["run", MANUAL, "--input", str(path)], capsys)
    assert status == 2
    message = errors.INPUT_SIZE_MISMATCH.format(
        name="x",
        path=path,
        size=len(header) + 32768 + (64 << 20),
        want="f32[64, 128]",
        expected=32768,
    )
    assert err == f"copyir: error: {message}\n"


def test_an_npz_member_is_not_decompressed_past_its_header_when_wrong(
    tmp_path, capsys, monkeypatch
):
    path = tmp_path / "bomb.npz"
    zip_bomb(path, {"x.npy": npy_header((64, 128)) + bytes(16 << 20)})
    read = []
    original = zipfile.ZipExtFile.read

    def counting_read(self, n=-1):
        data = original(self, n)
        read.append(len(data))
        return data

    monkeypatch.setattr(zipfile.ZipExtFile, "read", counting_read)
    assert main(["run", MANUAL, "--input", str(path)]) == 2
    assert sum(read) < 1 << 16


def test_an_npz_names_are_checked_before_any_data(tmp_path, capsys):
    path = tmp_path / "in.npz"
    np.savez(path, x=np.zeros((64, 128), np.float32), zz=np.zeros(3))
    status, err = run(["run", MANUAL, "--input", str(path)], capsys)
    assert status == 2
    assert err == (
        "copyir: error: Input zz matches no parameter of kernel manual "
        "(parameters: x, y)\n"
    )


def test_running_out_of_memory_while_reading_is_a_clear_error(
    tmp_path, capsys, monkeypatch
):
    np.save(tmp_path / "x.npy", np.zeros((64, 128), np.float32))
    real_empty = np.empty

    def empty(shape, *args, **kwargs):
        if shape == 64 * 128:  # the input's buffer
            raise MemoryError("Unable to allocate 32.0 KiB")
        return real_empty(shape, *args, **kwargs)

    monkeypatch.setattr(np, "empty", empty)
    status, err = run(["run", MANUAL, "--input", f"x={tmp_path / 'x.npy'}"], capsys)
    assert status == 1
    message = errors.CANNOT_ALLOCATE_INPUT.format(
        size=32768, name="x", why="Unable to allocate 32.0 KiB"
    )
    assert err == f"copyir: error: {message}\n"


# -- what outputs read back as -------------------------------------------------------

SCALAR_PROGRAM = """\
kernel scalar(x: f32[] @hbm, y: f32[] @hbm) {
  sync_copy x -> y
}
"""


def test_a_0d_array_round_trips_with_shape_empty(tmp_path):
    program = tmp_path / "scalar.cpy"
    program.write_text(SCALAR_PROGRAM)
    np.save(tmp_path / "x.npy", np.array(2.5, np.float32))
    out = tmp_path / "out.npz"
    argv = ["run", str(program), "--input", f"x={tmp_path / 'x.npy'}"]
    assert main([*argv, "--output", str(out)]) == 0
    assert np.load(out)["y"].shape == ()
    assert copyir.load_outputs(out)["y"].shape == ()
    assert float(copyir.load_outputs(out)["y"]) == 2.5
    again = tmp_path / "again.npz"  # and read back as an input
    assert main(["run", str(program), "--input", str(out), "--output", str(again)]) == 0
    assert np.load(again)["y"].shape == ()


def test_bfloat16_outputs_read_back_as_bfloat16(tmp_path):
    import ml_dtypes

    out = tmp_path / "out.npz"
    assert main(["run", SCALARS, "--fill-inputs", "iota", "--output", str(out)]) == 0
    loaded = copyir.load_outputs(out)
    assert loaded["weights_out"].dtype == np.dtype(ml_dtypes.bfloat16)
    assert loaded["table_out"].dtype == np.int32
    assert np.load(out)["weights_out"].dtype == np.dtype("V2")  # numpy still reads it
    expected = copyir.run(
        EXAMPLES / "scalars.cpy",
        {k: v for k, v in loaded.items() if k in ("table", "weights")},
    )
    assert np.array_equal(loaded["weights_out"], expected["weights_out"])
    again = tmp_path / "again.npz"  # and the file is a valid --input
    assert main(["run", SCALARS, "--input", str(out), "--output", str(again)]) == 0
    assert copyir.load_outputs(again)["weights"].dtype == np.dtype(ml_dtypes.bfloat16)


def test_load_outputs_of_a_missing_file_is_an_invocation_error(tmp_path):
    with pytest.raises(InvocationError) as caught:
        copyir.load_outputs(tmp_path / "nope.npz")
    assert str(caught.value) == errors.CANNOT_READ.format(
        path=tmp_path / "nope.npz", why="No such file or directory"
    )


# -- programs that are not regular files ------------------------------------------------


def limited(argv, timeout=30):
    """Run copyir in a process that cannot take more than 1 GiB or hang."""

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return subprocess.run(
        [sys.executable, "-m", "copyir", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        preexec_fn=limit,
        timeout=timeout,
    )


def test_a_device_as_the_program_is_a_one_line_error():
    result = limited(["verify", "/dev/zero"])
    assert (result.returncode, result.stderr) == (
        2,
        "copyir: error: cannot read /dev/zero: not a regular file\n",
    )


def test_a_fifo_as_the_program_is_a_one_line_error_not_a_hang(tmp_path):
    fifo = tmp_path / "prog.cpy"
    os.mkfifo(fifo)
    result = limited(["verify", str(fifo)], timeout=20)
    assert (result.returncode, result.stderr) == (
        2,
        f"copyir: error: cannot read {fifo}: not a regular file\n",
    )


@pytest.mark.parametrize("value", ["-1", str(2**63), "ten"])
def test_a_bad_seed_is_a_clear_usage_error(value, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["run", MANUAL, "--fill-inputs", "random", "--seed", value])
    assert caught.value.code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert (
        err
        == f"copyir run: error: argument --seed: {errors.BAD_SEED.format(value=value)}"
    )


def test_the_largest_seed_runs(capsys):
    assert (
        main(["run", MANUAL, "--fill-inputs", "random", "--seed", str(2**63 - 1)]) == 0
    )


# -- targets ----------------------------------------------------------------------------

TARGET = """\
[hbm]
capacity = {hbm}
alignment = 512
[vmem]
capacity = "1 MiB"
[smem]
capacity = "16 KiB"
"""


@pytest.mark.parametrize(
    ("hbm", "shown"),
    [
        ("1000000000000000000000000000000", "1000000000000000000000000000000"),
        ('"99999999999999999999 GiB"', str(99999999999999999999 << 30)),
    ],
)
def test_a_huge_target_capacity_is_a_clear_error(hbm, shown, tmp_path):
    path = tmp_path / "big.toml"
    path.write_text(TARGET.format(hbm=hbm))
    with pytest.raises(InvocationError) as caught:
        get_target(str(path))
    assert str(caught.value) == errors.TARGET_TOO_LARGE.format(
        what="hbm.capacity", limit=2**61, value=shown
    )


def test_a_target_integer_of_thousands_of_digits_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "big.toml"
    path.write_text(TARGET.format(hbm="9" * 5000))
    status, err = run(["verify", MANUAL, "--target", str(path)], capsys)
    assert status == 2
    assert err == (
        f"copyir: error: Cannot read target {path}: an integer has too many digits\n"
    )


def test_a_huge_target_capacity_from_the_cli_exits_two(tmp_path, capsys):
    path = tmp_path / "big.toml"
    path.write_text(TARGET.format(hbm=10**30))
    status, err = run(["lower", MANUAL, "--target", str(path)], capsys)
    assert status == 2
    assert err.startswith("copyir: error: Target field hbm.capacity must be at most")


# -- expected-error offsets ---------------------------------------------------------------


def test_an_expectation_offset_of_thousands_of_digits_is_a_clear_error(
    tmp_path, capsys
):
    path = tmp_path / "huge.cpy"
    path.write_text(
        "kernel k(x: f32[4]) {\n"
        f"  # expected-error@+{'9' * 5000} {{{{x}}}}\n"
        "  y = alloc f32[4] @hbm\n"
        "}\n"
    )
    status, err = run(["verify", "--verify-diagnostics", str(path)], capsys)
    assert status == 1
    first = err.splitlines()[0]
    message = errors.EXPECTATION_OFFSET.format(severity="error")
    assert first == f"{path}:2:5: error: {message}"


# -- diagnostics echo only the files being read ----------------------------------------------


def test_a_loc_naming_another_file_does_not_echo_it(tmp_path, capsys):
    secret = tmp_path / "secret.txt"
    secret.write_text("line one\nthe secret line\n")
    program = tmp_path / "prog.mlir"
    program.write_text(
        "copy.kernel @k(%x : !copy.ref<8xf32, hbm>) {\n"
        f'  %b = copy.alloc : !copy.ref<8xf32, hbm> loc("{secret}":2:1)\n'
        "}\n"
    )
    status, err = run(["verify", str(program)], capsys)
    assert status == 1
    assert err.startswith(f"{secret}:2:1: error: alloc b must be in vmem or smem")
    assert "the secret line" not in err


def test_the_file_being_read_is_echoed(tmp_path, capsys):
    program = tmp_path / "prog.cpy"
    program.write_text("kernel k(x: f32[4]) {\n  y = alloc f32[4] @hbm\n}\n")
    status, err = run(["verify", str(program)], capsys)
    assert status == 1
    assert err.splitlines()[1:] == ["  y = alloc f32[4] @hbm", "  ^"]


def test_run_echoes_a_source_the_user_names(tmp_path, capsys):
    race = EXAMPLES / "invalid" / "run" / "race_write_write.cpy"
    stream = tmp_path / "race.dma"
    assert main(["lower", str(race), "-o", str(stream)]) == 0
    status, err = run(["run", str(stream), "--fill-inputs", "zeros"], capsys)
    assert status == 1 and len(err.splitlines()) == 2  # the error and its note
    status, err = run(
        ["run", str(stream), "--fill-inputs", "zeros", "--source", str(race)], capsys
    )
    assert status == 1 and len(err.splitlines()) == 6  # each with its line and caret


# -- inputs that used to be internal errors -------------------------------------


@pytest.mark.parametrize("suffix", [".dma", ".npz"])
def test_emit_on_a_stream_prints_the_stream(suffix, tmp_path, capsys):
    """`verify --emit` on a lowered program prints its dma.program (the
    .dma text for cpy, as `to_text` does), never an AttributeError."""
    stream, dma = tmp_path / f"m{suffix}", tmp_path / "expected.dma"
    assert main(["lower", MANUAL, "-o", str(stream)]) == 0
    assert main(["lower", MANUAL, "-o", str(dma)]) == 0
    capsys.readouterr()
    assert main(["verify", "--emit", "cpy", str(stream)]) == 0
    assert capsys.readouterr().out == dma.read_text()
    mlir = tmp_path / "m.mlir"
    assert main(["verify", "--emit", "mlir", str(stream), "-o", str(mlir)]) == 0
    assert "dma.program" in mlir.read_text()
    assert run(["run", "--fill-inputs", "iota", str(mlir)], capsys) == (0, "")


@pytest.mark.parametrize("second", ["^bb1:\n", "^bb1:\n  ^bb2:\n"])
def test_a_module_of_several_blocks_is_one_error(second, tmp_path, capsys):
    program = tmp_path / "two.mlir"
    program.write_text(
        '"builtin.module"() ({\n'
        '  "copy.kernel"() <{sym_name = "k"}> ({\n'
        "  ^bb0(%x: !copy.ref<8xf32, hbm>):\n"
        "  }) : () -> ()\n"
        f"{second}"
        "}) : () -> ()\n"
    )
    status, err = run(["verify", str(program)], capsys)
    count = 1 + second.count("^")
    assert status == 1
    assert err.startswith(
        f"{program}:1:1: error: " + errors.MODULE_BLOCKS.format(count=count)
    )


def test_a_numeric_block_label_is_a_parse_error(tmp_path, capsys):
    program = tmp_path / "label.mlir"
    program.write_text(
        "copy.kernel @k(%x: !copy.ref<8xf32, hbm>) {\n"
        '  "copy.for"() <{lower = array<i64: 0>, upper = array<i64: 3>}> ({\n'
        "  ^7(%i: index):\n"
        "  }) : () -> ()\n"
        "}\n"
    )
    status, err = run(["verify", str(program)], capsys)
    assert status == 1
    assert err.startswith(
        f"{program}:3:3: error: " + errors.BLOCK_LABEL.format(label="^7")
    )
