"""The habits of mlir-opt and xdsl-opt: stdin, every
command with --split-input-file and --verify-diagnostics, any program form
(`--input-format dma`, detection), expected-warning/-remark, @above/@below,
mismatches as `file:line:col: error:`, --target for every pass, pass
options, --list-passes, help for every flag, did-you-means, one exit-code
rule, warnings, the xdsl.universe entry point, start-up imports."""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest
from conftest import EXAMPLES, ROOT

import copyir
from copyir import errors
from copyir.cli import _argument_parser, main
from copyir.errors import CopyIRWarning, InvocationError, Loc, Note

MANUAL = EXAMPLES / "manual.cpy"
ROUNDTRIP = EXAMPLES / "roundtrip.cpy"
COPY = "kernel k(x: f32[8, 128], y: f32[8, 128]) {\n  sync_copy x -> y\n}\n"


def run(argv, capsys, monkeypatch=None, stdin: bytes | None = None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


# -- stdin and program forms ---------------------------------------------------------


def test_opt_without_a_file_reads_stdin(capsys, monkeypatch):
    status, out, _ = run(["opt", "--emit", "cpy"], capsys, monkeypatch, COPY.encode())
    assert status == 0
    assert out.startswith(
        '// copyir DMA stream: kernel k, target default\ndma.program "k"'
    )


def test_lower_then_run_through_a_pipe():
    lower = subprocess.run(
        [sys.executable, "-m", "copyir", "lower", str(MANUAL)],
        capture_output=True,
        check=True,
    )
    result = subprocess.run(
        [sys.executable, "-m", "copyir", "run", "-", "--fill-inputs", "zeros"],
        input=lower.stdout,
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(b"ran manual: 3 DMAs, random mode")


@pytest.mark.parametrize(
    "lowering",
    [
        ["lower"],
        ["lower", "--no-origins"],
        ["opt"],  # MLIR with a module around the dma.program
        ["opt", "--no-debuginfo"],
        ["lower", "--format", "npz", "-o", "-"],
    ],
    ids=["dma", "dma-bare", "opt-mlir", "opt-mlir-bare", "npz"],
)
def test_every_lowered_form_runs_and_verifies_from_stdin(
    lowering, capsysbinary, monkeypatch
):
    assert main([*lowering, str(MANUAL)]) == 0
    lowered = capsysbinary.readouterr().out
    for command in (["run", "-", "--fill-inputs", "iota"], ["verify", "-"]):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lowered)))
        assert main(command) == 0, command
    assert capsysbinary.readouterr().out.startswith(b"ran manual: 3 DMAs")


def test_opt_output_after_convert_copy_to_dma_runs_from_a_file(tmp_path, capsys):
    opt = tmp_path / "m.mlir"
    assert main(["opt", str(MANUAL), "-o", str(opt)]) == 0
    x = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out.npz"
    argv = ["run", str(opt), "--input", f"x={tmp_path / 'x.npy'}", "--output", str(out)]
    assert main(argv) == 0
    assert np.array_equal(np.load(out)["y"], x)
    assert main(["verify", str(opt)]) == 0


def test_input_format_dma_names_the_form(tmp_path, capsys):
    stream = tmp_path / "stream.txt"
    assert main(["lower", str(MANUAL), "--no-origins", "-o", str(stream)]) == 0
    stream.write_text("// a comment first\n" + stream.read_text())
    assert main(["verify", "--input-format", "dma", str(stream)]) == 0
    assert main(["verify", str(stream)]) == 0  # detected from its content
    status, _, err = run(["verify", "--input-format", "cpy", str(stream)], capsys)
    assert status == 1 and err.startswith(f"{stream}:")


def test_verify_of_a_stream_validates_it(tmp_path, capsys):
    text = copyir.dma_text(copyir.lower(MANUAL))
    bad = write(tmp_path, "bad.dma", text.replace("sem 0", "sem 7", 1))
    status, _, err = run(["verify", bad], capsys)
    assert status == 1
    assert "Malformed DMA stream: semaphore 7 in a program of 1" in err


# -- --split-input-file and --verify-diagnostics on every command -------------------------

STATIC = """\
kernel ok(x: f32[8], y: f32[8]) {
  sync_copy x -> y
}

# -----

kernel bad(x: f32[8]) {
  # expected-error@below {{alloc b must be in vmem or smem, got f32[8] @hbm}}
  b = alloc f32[8] @hbm
}

# -----

kernel bad_too(x: f32[8]) {
  c = alloc f32[8] @hbm
  # expected-error@above {{alloc c must be in vmem or smem}}
}
"""


@pytest.mark.parametrize(
    "command",
    [["verify"], ["opt"], ["lower"], ["run", "--fill-inputs", "zeros"]],
    ids=lambda c: c[0],
)
def test_every_command_splits_and_verifies_diagnostics(command, tmp_path, capsys):
    path = write(tmp_path, "static.cpy", STATIC)
    status, _, err = run(
        [*command, "--split-input-file", "--verify-diagnostics", path], capsys
    )
    assert (status, err) == (0, "")
    status, _, err = run([*command, "--split-input-file", path], capsys)
    assert status == 1
    assert err.count("error: alloc") == 2


def test_opt_with_split_input_file_prints_each_part(tmp_path, capsys):
    path = write(tmp_path, "two.cpy", COPY + "\n# -----\n" + COPY.replace("k(", "k2("))
    status, out, _ = run(["opt", "--split-input-file", "-p", "verify", path], capsys)
    assert status == 0
    assert out.count("copy.kernel @") == 2 and "// -----\n" in out


def test_run_verifies_runtime_diagnostics_in_every_mode(tmp_path, capsys):
    race = (EXAMPLES / "invalid" / "run" / "race_write_write.cpy").read_text()
    path = write(tmp_path, "runs.cpy", COPY + "\n# -----\n" + race)
    name = str(path)
    text = path.read_text().replace(
        "examples/invalid/run/race_write_write.cpy:8:3", f"{name}:13:3"
    )
    path.write_text(text)
    argv = [
        "run",
        "--split-input-file",
        "--verify-diagnostics",
        "--fill-inputs",
        "zeros",
    ]
    status, _, err = run([*argv, path], capsys)
    assert (status, err) == (0, "")


# -- expectations: severities, designators, how mismatches print ---------------------------


def test_an_expected_warning_that_is_never_produced_fails(tmp_path, capsys):
    path = write(
        tmp_path,
        "w.cpy",
        "kernel k(x: f32[8], y: f32[8]) {\n"
        "  # expected-warning@+1 {{y is only partly written}}\n"
        "  sync_copy x -> y\n"
        "}\n",
    )
    status, _, err = run(["verify", "--verify-diagnostics", path], capsys)
    assert status == 1
    assert err.splitlines() == [
        f'{path}:2:5: error: expected warning "y is only partly written" was not produced',
        "  # expected-warning@+1 {{y is only partly written}}",
        "    ^",
    ]


def test_an_expected_remark_that_is_never_produced_fails(tmp_path, capsys):
    path = write(
        tmp_path, "r.cpy", COPY.replace("{\n", "{  // expected-remark {{r}}\n", 1)
    )
    path.write_text(COPY.replace("{\n", "{  # expected-remark {{r}}\n", 1))
    status, _, err = run(["verify", "--verify-diagnostics", path], capsys)
    assert status == 1
    assert (
        err.splitlines()[0]
        == f'{path}:1:47: error: expected remark "r" was not produced'
    )


def test_an_unexpected_error_is_reported_at_its_line(tmp_path, capsys):
    path = write(
        tmp_path, "u.cpy", "kernel k(x: f32[8]) {\n  b = alloc f32[8] @hbm\n}\n"
    )
    status, _, err = run(["verify", "--verify-diagnostics", path], capsys)
    assert status == 1
    assert err.splitlines() == [
        f"{path}:2:3: error: unexpected error: alloc b must be in vmem or smem, got f32[8] @hbm",
        "  b = alloc f32[8] @hbm",
        "  ^",
    ]


def test_above_and_below_skip_other_expectation_lines():
    from copyir.expectations import expectations

    found = expectations(
        "plain one\n"  # 1
        "# expected-error@below {{a}}\n"  # 2
        "# expected-note@below {{b}}\n"  # 3
        "plain four\n"  # 4
        "# expected-error@above {{c}}\n"  # 5
        "# expected-warning@above {{d}}\n"  # 6
        "# expected-remark@unknown {{e}}\n",  # 7
        "f.cpy",
    )
    assert [(e.severity, e.line, e.text) for e in found] == [
        ("error", 4, "a"),
        ("note", 4, "b"),
        ("error", 4, "c"),
        ("warning", 4, "d"),
        ("remark", None, "e"),
    ]
    assert found[0].loc == Loc("f.cpy", 2, 3)


# -- warnings -------------------------------------------------------------------------------


@pytest.fixture
def warns_at_line_two(monkeypatch):
    """Every verification warns (with a note) at line 2, column 3 of its file."""
    import copyir.passes.verify as verify_pass

    original = verify_pass.verify

    def verify(module, target):
        name = module.location.filename.data
        warnings.warn(
            CopyIRWarning(
                "y is only partly written",
                Loc(name, 2, 3),
                (Note("the region: y[4:8]", Loc(name, 2, 3)),),
            ),
            stacklevel=2,
        )
        return original(module, target)

    monkeypatch.setattr(verify_pass, "verify", verify)


def test_a_warning_prints_located_with_its_line_and_caret(
    warns_at_line_two, tmp_path, capsys
):
    path = write(tmp_path, "w.cpy", COPY)
    status, _, err = run(["verify", path], capsys)
    assert status == 0  # a warning does not fail the command
    assert err.splitlines() == [
        f"{path}:2:3: warning: y is only partly written",
        "  sync_copy x -> y",
        "  ^",
        f"{path}:2:3: note: the region: y[4:8]",
        "  sync_copy x -> y",
        "  ^",
    ]


@pytest.mark.parametrize("command", ["verify", "opt", "lower", "run"])
def test_every_command_prints_warnings(command, warns_at_line_two, tmp_path, capsys):
    path = write(tmp_path, "w.cpy", COPY)
    extra = ["--fill-inputs", "zeros"] if command == "run" else []
    status, _, err = run([command, path, *extra], capsys)
    assert status == 0
    assert err.startswith(f"{path}:2:3: warning: y is only partly written\n")


def test_verify_diagnostics_matches_warnings_and_their_notes(
    warns_at_line_two, tmp_path, capsys
):
    expected = write(
        tmp_path,
        "w.cpy",
        "kernel k(x: f32[8, 128], y: f32[8, 128]) {\n"
        "  sync_copy x -> y\n"
        "  # expected-warning@above {{y is only partly written}}\n"
        "  # expected-note@-2 {{the region: y[4:8]}}\n"
        "}\n",
    )
    assert run(["verify", "--verify-diagnostics", expected], capsys)[:3:2] == (0, "")
    unexpected = write(tmp_path, "u.cpy", COPY)
    status, _, err = run(["verify", "--verify-diagnostics", unexpected], capsys)
    assert status == 1
    assert err.splitlines()[0] == (
        f"{unexpected}:2:3: error: unexpected warning: y is only partly written"
    )


# -- targets and pass pipelines ---------------------------------------------------------------


def test_target_applies_to_every_pass_of_a_pipeline(capsys):
    argv = ["opt", "--target", "small", "-p", "expand-windows,assign-addresses"]
    status, out, _ = run([*argv, "--emit", "cpy", EXAMPLES / "windows.cpy"], capsys)
    assert status == 0
    assert "# target small:" in out


def test_a_pipeline_option_overrides_target(capsys):
    argv = [
        "opt",
        "--target",
        "small",
        "-p",
        "expand-windows,assign-addresses{target=default}",
    ]
    status, out, _ = run([*argv, "--emit", "cpy", EXAMPLES / "windows.cpy"], capsys)
    assert status == 0
    assert "# target default:" in out


def test_a_file_name_in_a_pass_option_needs_no_quotes(tmp_path, capsys, monkeypatch):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "my.chip.toml").write_text(
        'name = "chip"\n[hbm]\ncapacity = "1 GiB"\n[vmem]\ncapacity = "1 MiB"\n'
        '[smem]\ncapacity = "16 KiB"\n'
    )
    monkeypatch.chdir(tmp_path)
    spec = "expand-windows,assign-addresses{target=t/my.chip.toml}"
    status, out, err = run(["opt", "-p", spec, "--emit", "cpy", MANUAL], capsys)
    assert (status, err) == (0, "")
    assert "# target chip:" in out


def test_list_passes_shows_each_option(capsys):
    status, out, _ = run(["opt", "--list-passes"], capsys)
    assert status == 0
    lines = out.splitlines()
    at = lines.index(
        next(line for line in lines if line.startswith("assign-addresses"))
    )
    assert lines[at + 1].split() == ["target:", "str", "=", "default"]
    assert (
        lines[at + 2].strip()
        == "A built-in target's name (default, small) or a TOML file."
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "assign-adresses",
            "Unknown pass assign-adresses (did you mean assign-addresses?) (passes: "
            "verify, expand-pipelines, expand-pytree-copies, expand-min-max, "
            "expand-windows, assign-addresses, "
            "cse, convert-copy-to-dma)",
        ),
        (
            "expand-windows,assign-addresses{targt=small}",
            "Unknown option targt for pass assign-addresses (did you mean target?) "
            "(options: target)",
        ),
        (
            "expand-windows{target=small}",
            "Unknown option target for pass expand-windows (options: none)",
        ),
    ],
)
def test_an_unknown_pass_or_option_gets_a_did_you_mean(spec, message, capsys):
    status, _, err = run(["opt", "-p", spec, MANUAL], capsys)
    assert (status, err) == (2, f"copyir: error: {message}\n")


def test_every_flag_has_help_text():
    def parsers(parser):
        yield parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from parsers(sub)

    missing = [
        f"{parser.prog} {action.option_strings or action.dest}"
        for parser in parsers(_argument_parser())
        for action in parser._actions
        if not action.help and not isinstance(action, argparse._SubParsersAction)
    ]
    assert missing == []


# -- one exit-code rule -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "status"),
    [
        (["verify", ROUNDTRIP], 0),
        (["verify", EXAMPLES / "invalid" / "neither_buffered.cpy"], 1),
        (
            [
                "run",
                EXAMPLES / "invalid" / "run" / "never_waited.cpy",
                "--fill-inputs",
                "zeros",
            ],
            1,
        ),
        (["opt", "-p", "no-such-pass", MANUAL], 2),
        (["opt", "-p", "assign-addresses{{colour=red}}", MANUAL], 2),
        (["run", MANUAL, "--input", "{npz}"], 2),
        (["verify", "--kernel", "nope", MANUAL], 2),
        (["run", "--kernel", "nope", "{dma}"], 2),
        (["verify", "{missing}"], 2),
        (["run", MANUAL, "--input", "x={missing}"], 2),
        (["verify", "--target", "tpu9000", MANUAL], 2),
    ],
)
def test_the_exit_code_rule(argv, status, tmp_path, capsys):
    np.savez(tmp_path / "in.npz", nope=np.zeros(3))
    assert main(["lower", str(MANUAL), "-o", str(tmp_path / "m.dma")]) == 0
    paths = {
        "npz": tmp_path / "in.npz",
        "dma": tmp_path / "m.dma",
        "missing": tmp_path / "missing.cpy",
    }
    argv = [str(a).format(**paths) for a in argv]
    assert main(argv) == status
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if status == 2:
        assert err.startswith("copyir: error: ") and err.count("\n") == 1


def test_an_internal_error_exits_three(capsys, monkeypatch):
    import copyir.passes.verify as verify_pass

    def broken(module, target):
        raise RuntimeError("boom")

    monkeypatch.setattr(verify_pass, "verify", broken)
    status, _, err = run(["verify", ROUNDTRIP], capsys)
    assert status == 3
    assert err.startswith("copyir: internal error: RuntimeError: boom\n")


def test_select_kernel_naming_no_kernel_is_an_invocation_error():
    module = copyir.parse(MANUAL.read_text())
    with pytest.raises(InvocationError) as caught:
        copyir.select_kernel(module, "nope")
    assert str(caught.value) == errors.NO_KERNEL.format(name="nope", names="manual")


# -- xdsl-opt and start-up --------------------------------------------------------------------


def test_xdsl_opt_loads_the_copy_and_dma_dialects(tmp_path):
    xdsl_opt = shutil.which("xdsl-opt", path=os.path.dirname(sys.executable))
    assert xdsl_opt is not None
    mlir = tmp_path / "prog.mlir"
    assert main(["verify", str(MANUAL), "--emit", "mlir", "-o", str(mlir)]) == 0
    result = subprocess.run(
        [xdsl_opt, str(mlir)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "copy.kernel @manual" in result.stdout
    lowered = subprocess.run(
        [
            xdsl_opt,
            str(mlir),
            "-p",
            "expand-pytree-copies,assign-addresses,convert-copy-to-dma",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert lowered.returncode == 0, lowered.stderr
    assert 'dma.program "manual"' in lowered.stdout


def imported_by(argv: list[str]) -> set[str]:
    script = (
        "import sys\nfrom copyir.cli import main\n"
        f"main({argv!r})\nprint(' '.join(sorted(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return set(result.stdout.split())


def test_verify_does_not_import_ml_dtypes_or_the_backends():
    modules = imported_by(["verify", str(EXAMPLES / "scalars.cpy")])  # bf16 inside
    assert "copyir.dialects.copy" in modules
    assert "ml_dtypes" not in modules
    assert not any(m.startswith("copyir.backends") for m in modules)


def test_running_a_bfloat16_program_imports_ml_dtypes():
    modules = imported_by(
        ["run", str(EXAMPLES / "scalars.cpy"), "--fill-inputs", "zeros"]
    )
    assert "ml_dtypes" in modules


def test_the_grammar_cache_lives_in_a_private_directory(tmp_path, monkeypatch):
    from copyir.cpy.grammar_cache import grammar_cache

    monkeypatch.delenv("COPYIR_NO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = grammar_cache("start: 'x'")
    assert path == str(tmp_path / "copyir" / os.path.basename(path))
    assert (tmp_path / "copyir").stat().st_mode & 0o077 == 0
    (tmp_path / "copyir").chmod(0o777)  # others could plant a pickle there
    assert grammar_cache("start: 'x'") is False
    monkeypatch.setenv("COPYIR_NO_CACHE", "1")
    (tmp_path / "copyir").chmod(0o700)
    assert grammar_cache("start: 'x'") is False
