"""`copyir import` and `copyir check` on a Python file: the imported
`.cpy` runs to the outputs `copyir.pallas.run` gives, and a broken kernel
is one located diagnostic."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("jax", reason="the Pallas frontend needs JAX")

import copyir
from copyir import errors

KERNEL = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu


    def doubled(x, y, buf, sem):
        copy = pltpu.make_async_copy(x, buf, sem)
        copy.start()
        copy.wait()
        buf[...] = buf[...] * 2.0
        out = pltpu.make_async_copy(buf, y, sem)
        out.start()
        RACE


    def main():
        x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
        return pl.pallas_call(
            doubled,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA],
        )(x)
    """
)


def copyir_command(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "copyir", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def kernel_file(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text(KERNEL.replace("RACE", "out.wait()"))
    return path


def test_import_writes_a_kernel_that_runs_as_pallas_run(kernel_file, tmp_path):
    done = copyir_command(
        "import", "kernel.py", "--call", "main", "-o", "k.cpy", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "k.cpy").read_text()
    assert 'loc("kernel.py":' in text  # the statements' Python lines
    assert (tmp_path / "k.doubled.inputs.npz").exists()
    done = copyir_command(
        "run", "k.cpy", "--kernel", "doubled", "--mode", "eager",
        "--input", "k.doubled.inputs.npz", "--output", "out.npz",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    outputs = copyir.load_outputs(tmp_path / "out.npz")
    expected = np.arange(8 * 128, dtype=np.float32).reshape(8, 128) * 2.0
    assert np.array_equal(outputs["y"], expected)


def test_check_reports_like_run(kernel_file, tmp_path):
    done = copyir_command("check", "kernel.py", "--call", "main", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ran doubled: 2 DMAs, random mode; final values:")


def test_check_locates_a_dma_never_waited(tmp_path):
    (tmp_path / "kernel.py").write_text(KERNEL.replace("RACE", "pass"))
    done = copyir_command(
        "check", "kernel.py", "--call", "main", "--mode", "eager", cwd=tmp_path
    )
    assert done.returncode == 1
    line = KERNEL.splitlines().index("    out.start()") + 1
    assert done.stderr.startswith(f"kernel.py:{line}:5: error: ")
    assert "    out.start()\n" in done.stderr  # the Python line, shown


def test_check_names_a_missing_function(kernel_file, tmp_path):
    done = copyir_command("check", "kernel.py", "--call", "nope", cwd=tmp_path)
    assert done.returncode == 2
    message = errors.PALLAS_NO_FUNCTION.format(path="kernel.py", name="nope")
    assert done.stderr == f"copyir: error: {message}\n"


def test_check_reports_the_users_exception_in_one_line(tmp_path):
    (tmp_path / "kernel.py").write_text("def main():\n    raise KeyError('x')\n")
    done = copyir_command("check", "kernel.py", "--call", "main", cwd=tmp_path)
    assert done.returncode == 1
    message = errors.PALLAS_USER_ERROR.format(
        path="kernel.py", name="main", kind="KeyError", message="'x'"
    )
    assert done.stderr == f"copyir: error: {message}\n"


def test_without_jax_the_commands_say_how_to_install_it(monkeypatch):
    import importlib.util

    from copyir.pallas import require_jax

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "jax" else real(name, *a),
    )
    with pytest.raises(copyir.InvocationError) as caught:
        require_jax()
    assert str(caught.value) == errors.PALLAS_NEEDS_JAX


def test_an_imported_kernel_gives_the_verdict_check_gives(tmp_path):
    """The `.cpy` that `copyir import` writes fails where `copyir check`
    does, located at the same Python line."""
    (tmp_path / "kernel.py").write_text(KERNEL.replace("RACE", "pass"))
    checked = copyir_command(
        "check", "kernel.py", "--call", "main", "--mode", "eager", cwd=tmp_path
    )
    done = copyir_command(
        "import", "kernel.py", "--call", "main", "-o", "k.cpy", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    ran = copyir_command(
        "run", "k.cpy", "--mode", "eager", "--input", "k.doubled.inputs.npz",
        cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == checked.returncode == 1
    first = checked.stderr.splitlines()[0]
    assert first.startswith("kernel.py:")
    assert ran.stderr.splitlines()[0] == first


def test_a_bug_of_copyirs_is_an_internal_error_not_the_users(
    kernel_file, tmp_path, monkeypatch, capsys
):
    """Only the traced function's own exceptions are the user's: one from
    copyir's import after tracing is exit 3, a bug to report."""
    from copyir import cli
    from copyir.pallas import checking

    def broken(*args, **kwargs):
        raise RuntimeError("copyir's own bug")

    monkeypatch.setattr(checking, "import_call", broken)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check", "kernel.py", "--call", "main"]) == cli.EXIT_INTERNAL
    assert "internal error: RuntimeError: copyir's own bug" in capsys.readouterr().err


def test_a_missing_file_and_a_function_without_kernels_are_named(tmp_path):
    done = copyir_command("check", "nope.py", "--call", "main", cwd=tmp_path)
    assert done.returncode == 2
    message = errors.PALLAS_NO_FILE.format(path="nope.py")
    assert done.stderr == f"copyir: error: {message}\n"
    (tmp_path / "plain.py").write_text(
        "import jax.numpy as jnp\n\ndef main():\n    return jnp.ones(3) * 2\n"
    )
    done = copyir_command("import", "plain.py", "--call", "main", cwd=tmp_path)
    assert done.returncode == 1
    message = errors.PALLAS_NO_KERNEL.format(name="main")
    assert done.stderr == f"copyir: error: {message}\n"
