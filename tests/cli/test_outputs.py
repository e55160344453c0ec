"""Output files: written through devices, FIFOs and symlinks, `-` for stdout,
the umask honoured, never over a file the command reads, no temporary file
left by SIGTERM, checked before the work, and only the written parameters on
request."""

from __future__ import annotations

import os
import select
import signal
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import EXAMPLES, ROOT

import copyir
from copyir import errors
from copyir.cli import main

MANUAL = str(EXAMPLES / "manual.cpy")
ROUNDTRIP = str(EXAMPLES / "roundtrip.cpy")


def leftovers(directory) -> list[str]:
    """Temporary files of an atomic write (`.name.XXXX`)."""
    return [p.name for p in directory.iterdir() if p.name.startswith(".")]


# -- devices, FIFOs, symlinks, stdout -------------------------------------------


def test_a_fifo_is_written_through_not_replaced(tmp_path, capsys):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # so the writer need not wait
    try:
        assert main(["opt", MANUAL, "-o", str(fifo)]) == 0
        assert stat.S_ISFIFO(os.stat(fifo).st_mode)
        chunks = []
        while select.select([reader], [], [], 1.0)[0]:
            chunk = os.read(reader, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(reader)
    assert b"".join(chunks).startswith(b"builtin.module")
    assert leftovers(tmp_path) == []


def test_a_character_device_is_written_through_not_replaced(tmp_path):
    null = tmp_path / "null"
    try:  # a private copy of /dev/null: the test never touches the real one
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("creating a device node needs privileges")
    assert main(["opt", MANUAL, "-o", str(null)]) == 0
    assert stat.S_ISCHR(os.stat(null).st_mode)
    assert os.stat(null).st_rdev == os.makedev(1, 3)


def test_a_symlink_stays_a_link_and_its_target_is_replaced(tmp_path):
    target = tmp_path / "real.mlir"
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.mlir"
    link.symlink_to(target.name)
    assert main(["opt", MANUAL, "-o", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == target.name
    assert target.read_text().startswith("builtin.module")
    assert (
        stat.S_IMODE(target.stat().st_mode) == 0o640
    )  # a replaced file keeps its mode
    assert leftovers(tmp_path) == []


def test_dash_is_stdout_for_every_output_option(capsys):
    assert main(["opt", MANUAL, "-o", "-"]) == 0
    assert capsys.readouterr().out.startswith("builtin.module")
    assert main(["verify", MANUAL, "--emit", "cpy", "-o", "-"]) == 0
    assert capsys.readouterr().out.startswith("kernel manual(")
    assert main(["lower", MANUAL, "-o", "-"]) == 0
    assert capsys.readouterr().out.startswith("// copyir DMA stream")


def test_dash_is_stdout_for_binary_outputs(capsysbinary):
    assert main(["lower", MANUAL, "--format", "npz", "-o", "-"]) == 0
    assert capsysbinary.readouterr().out.startswith(b"PK\x03\x04")
    args = ["run", ROUNDTRIP, "--fill-inputs", "iota", "--output", "-"]
    assert main(args) == 0
    assert capsysbinary.readouterr().out.startswith(b"PK\x03\x04")


# -- modes ----------------------------------------------------------------------


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_a_new_file_honours_the_umask(umask, mode, tmp_path):
    previous = os.umask(umask)
    try:
        out = tmp_path / "out.mlir"
        assert main(["opt", MANUAL, "-o", str(out)]) == 0
        npz = tmp_path / "out.npz"
        assert (
            main(["run", ROUNDTRIP, "--fill-inputs", "zeros", "--output", str(npz)])
            == 0
        )
    finally:
        os.umask(previous)
    assert stat.S_IMODE(out.stat().st_mode) == mode
    assert stat.S_IMODE(npz.stat().st_mode) == mode


def test_a_replaced_file_keeps_its_mode(tmp_path):
    out = tmp_path / "out.mlir"
    out.write_text("old\n")
    out.chmod(0o664)
    assert main(["opt", MANUAL, "-o", str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o664


# -- never over an input ----------------------------------------------------------

TARGET = """\
name = "mine"
[hbm]
capacity = "1 GiB"
alignment = 512
[vmem]
capacity = "1 MiB"
alignment = 512
[smem]
capacity = "16 KiB"
alignment = 4
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["lower", MANUAL, "--target", "{toml}", "-o", "{toml}"],
        ["verify", MANUAL, "--target", "{toml}", "--emit", "cpy", "-o", "{toml}"],
        [
            "opt",
            MANUAL,
            "-p",
            "expand-windows,assign-addresses{{target={toml}}}",
            "-o",
            "{toml}",
        ],
        [
            "run",
            MANUAL,
            "--fill-inputs",
            "zeros",
            "--target",
            "{toml}",
            "--output",
            "{link}",
        ],
    ],
    ids=["lower", "verify", "opt-pass-option", "run-through-a-link"],
)
def test_a_target_toml_is_never_overwritten(argv, tmp_path, capsys):
    toml = tmp_path / "t.toml"
    toml.write_text(TARGET)
    link = tmp_path / "t.npz"
    link.symlink_to(toml)
    argv = [a.format(toml=toml, link=link) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"copyir: error: {errors.OVERWRITES_INPUT.format(path=toml)}\n"
    assert toml.read_text() == TARGET


def test_an_input_array_is_never_overwritten_through_a_hard_link(tmp_path, capsys):
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((64, 128), np.float32))
    before = x.read_bytes()
    alias = tmp_path / "alias.npz"
    os.link(x, alias)
    argv = ["run", MANUAL, "--input", f"x={x}", "--output", str(alias)]
    assert main(argv) == 2
    assert "refusing to overwrite the input file" in capsys.readouterr().err
    assert x.read_bytes() == before


# -- SIGTERM ------------------------------------------------------------------------


def test_sigterm_while_writing_leaves_no_temporary_file(tmp_path):
    """SIGTERM arrives while the output is written (just before the rename):
    the temporary file is removed and the command ends with status 143."""
    out = tmp_path / "out.mlir"
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        real_replace = os.replace
        def replace(src, dst):
            os.kill(os.getpid(), signal.SIGTERM)
            real_replace(src, dst)
        os.replace = replace
        from copyir.cli import main
        sys.exit(main(["opt", {MANUAL!r}, "-o", {str(out)!r}]))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 128 + signal.SIGTERM, result.stderr
    assert leftovers(tmp_path) == []
    assert not out.exists()


# -- checked before the work ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["missing-directory", "a-directory"])
def test_an_unwritable_output_is_found_before_the_run(kind, tmp_path, capsys):
    """The program has a race (exit 1 if it ran); the output is checked first."""
    out = tmp_path / "no" / "out.npz"
    why = "No such file or directory"
    if kind == "a-directory":
        out = tmp_path / "out.npz"
        out.mkdir()
        why = "Is a directory"
    race = EXAMPLES / "invalid" / "run" / "race_write_write.cpy"
    assert main(["run", str(race), "--fill-inputs", "zeros", "--output", str(out)]) == 2
    assert capsys.readouterr().err == f"copyir: error: cannot write {out}: {why}\n"


def test_an_unwritable_output_is_found_before_lowering(tmp_path, capsys):
    out = tmp_path / "no" / "out.dma"
    bad = EXAMPLES / "invalid" / "neither_buffered.cpy"
    assert main(["lower", str(bad), "-o", str(out)]) == 2
    assert capsys.readouterr().err.startswith(f"copyir: error: cannot write {out}")


@pytest.mark.parametrize(
    "name, why",
    [
        ("new/", "Is a directory"),
        ("new/.", "No such file or directory"),
        ("dir/", "Is a directory"),
        ("dir", "Is a directory"),
        ("file/", "Not a directory"),
        ("file/.", "Not a directory"),
        ("new/..", "No such file or directory"),
        ("dir/..", "Is a directory"),
    ],
)
def test_an_output_that_names_a_directory_is_refused(name, why, tmp_path, capsys):
    """`-o new/` is a directory, as open(2) reads it: never a file `new`."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("kept")
    out = f"{tmp_path}/{name}"
    assert main(["lower", str(EXAMPLES / "roundtrip.cpy"), "-o", out]) == 2
    assert capsys.readouterr().err == f"copyir: error: cannot write {out}: {why}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "file"]
    assert (tmp_path / "file").read_text() == "kept"
    assert list((tmp_path / "dir").iterdir()) == []


def test_an_empty_output_path_is_no_such_file(tmp_path, capsys, monkeypatch):
    """As open(2) reads "" (found by review: it said "Is a directory")."""
    monkeypatch.chdir(tmp_path)
    assert main(["lower", str(EXAMPLES / "roundtrip.cpy"), "-o", ""]) == 2
    assert capsys.readouterr().err == (
        "copyir: error: cannot write : No such file or directory\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_write_output_refuses_a_directory_path_too(tmp_path):
    """The API's own writer, not only the command line's early check."""
    from copyir.files import FileError, write_output

    with pytest.raises(FileError) as caught:
        write_output(f"{tmp_path}/new/", "text")
    assert str(caught.value) == errors.CANNOT_WRITE.format(
        path=f"{tmp_path}/new/", why="Is a directory"
    )
    assert list(tmp_path.iterdir()) == []


# -- --output-params ------------------------------------------------------------------------


def test_output_params_written_holds_only_what_the_program_writes(tmp_path):
    out = tmp_path / "out.npz"
    argv = ["run", ROUNDTRIP, "--fill-inputs", "iota", "--output", str(out)]
    assert main([*argv, "--output-params", "written"]) == 0
    assert sorted(np.load(out).files) == ["out_a", "out_b"]
    assert main(argv) == 0  # the default: every parameter
    assert sorted(np.load(out).files) == ["a", "b", "out_a", "out_b"]
    assert main([*argv, "--output-params", "all"]) == 0
    assert sorted(np.load(out).files) == ["a", "b", "out_a", "out_b"]


def test_written_parameters_follow_the_destinations_of_the_starts():
    from copyir.files import written_parameters

    for name, written in [
        ("roundtrip.cpy", {"out_a", "out_b"}),
        ("manual.cpy", {"y"}),
        ("accumulate.cpy", {"out"}),
    ]:
        program = copyir.lower(EXAMPLES / name)
        stream = copyir.to_stream(program)
        assert written_parameters(stream) == written, name
