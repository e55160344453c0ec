"""`copyir.pallas.checking()` and the pytest plugin: a user's Pallas code,
unchanged, runs on copyir, eagerly and under `jax.jit`.

The routing follows how Pallas itself forces its interpret mode
(`force_tpu_interpret_mode` in jax's `interpret_pallas_call.py`, and
`_pallas_call_lowering` in `pallas_call.py`).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the Pallas frontend needs JAX")
jnp = pytest.importorskip("jax.numpy")
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

from copyir import errors  # noqa: E402
from copyir.errors import CopyIRError  # noqa: E402
from copyir.pallas.checking import checking  # noqa: E402
from copyir.pallas.jaxpr_source import shown  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "pallas"))
from pallas_calls import X, hbm_call  # noqa: E402
from race import racy_copy  # noqa: E402


def bump_kernel(x, y, buf, sem):
    pltpu.sync_copy(x, buf)
    buf[...] = buf[...] + 1.0
    pltpu.sync_copy(buf, y)


def bump(x, interpret=False):
    return hbm_call(bump_kernel, interpret=interpret)(x)


def runs_seen(f, *args, mode="eager"):
    """`f(*args)` inside `checking`, and the kernels copyir ran."""
    seen: list[str] = []
    with checking(mode, observe=lambda kernel, stream, outs: seen.append(kernel.name)):
        out = jax.block_until_ready(f(*args))
    return out, seen


@pytest.mark.parametrize("wrap", [lambda f: f, jax.jit], ids=["eager", "jit"])
def test_every_call_inside_runs_on_copyir(wrap):
    out, seen = runs_seen(wrap(lambda x: bump(bump(x) * 2.0)), X)
    assert np.array_equal(out, (np.asarray(X) + 1.0) * 2.0 + 1.0)
    assert seen == ["bump_kernel", "bump_kernel"]


def test_a_call_built_before_the_context_runs_on_copyir_too():
    """Pallas reads its interpret config when `pl.pallas_call` builds the
    call; one built outside still runs on copyir (`hook._lowering`)."""
    built = hbm_call(bump_kernel)
    out, seen = runs_seen(jax.jit(built), X)
    assert np.array_equal(out, np.asarray(X) + 1.0)
    assert seen == ["bump_kernel"]


def test_a_kernel_in_a_loop_of_the_caller_runs_at_every_iteration():
    f = jax.jit(lambda x: jax.lax.fori_loop(0, 3, lambda i, v: bump(v), x))
    out, seen = runs_seen(f, X)
    assert np.array_equal(out, np.asarray(X) + 3.0)
    assert seen == ["bump_kernel"] * 3


def race_line(text: str) -> int:
    lines = (ROOT / "examples/pallas/race.py").read_text().splitlines()
    return 1 + next(k for k, line in enumerate(lines) if text in line)


def race_message() -> str:
    return errors.RUN_ACCESS_RACE.format(
        what="computation",
        action="writes",
        region="buf[0:8, 0:128]",
        other=f"examples/pallas/race.py:{race_line('fill.start()')}:5",
        their="writes",
    )


@pytest.mark.parametrize("mode", ["eager", "on_wait", "random"])
def test_a_race_under_jit_raises_the_located_error_not_xlas(mode, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(CopyIRError) as caught, checking(mode):
        jax.jit(racy_copy)(jnp.ones((8, 128), jnp.float32)).block_until_ready()
    assert str(caught.value) == race_message()
    assert caught.value.loc is not None
    assert caught.value.loc.line == race_line("buf[...] = jnp.zeros_like")


def test_an_unsupported_construct_is_raised_when_jax_lowers_the_call():
    def exp_kernel(x, y, buf, sem):
        pltpu.sync_copy(x, buf)
        buf[...] = jnp.exp(buf[...])
        pltpu.sync_copy(buf, y)

    call = hbm_call(exp_kernel)
    with pytest.raises(CopyIRError) as caught, checking("eager"):
        jax.jit(call)(X)
    line = exp_kernel.__code__.co_firstlineno + 2
    where = f" ({shown(__file__)}:{line})"
    assert str(caught.value) == errors.PALLAS_UNSUPPORTED.format(
        what="`exp`", where=where
    )


def test_outside_the_context_pallas_runs_its_own_interpreter_again():
    """The race kernel, which copyir refuses, runs under Pallas' own
    interpret mode once the context has ended: in eager mode the DMA has
    landed when the kernel stores its zeros over it."""
    with pytest.raises(CopyIRError), checking("eager"):
        jax.jit(racy_copy)(jnp.ones((8, 128), jnp.float32)).block_until_ready()
    params = pltpu.InterpretParams(dma_execution_mode="eager")
    out = jax.jit(racy_copy, static_argnames="interpret")(
        jnp.ones((8, 128), jnp.float32), interpret=params
    )
    assert np.array_equal(out, np.zeros((8, 128), np.float32))


def test_an_unknown_mode_is_named():
    with pytest.raises(CopyIRError) as caught, checking("lazy"):
        pass
    assert str(caught.value) == errors.RUN_UNKNOWN_MODE.format(mode="lazy")


USER_TESTS = """
import unittest

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from race import racy_copy

pytestmark = pytest.mark.usefixtures("copyir_checking")


def add_one_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


@jax.jit
def add_one(x):
    return pl.pallas_call(
        add_one_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=True,
    )(x)


def test_add_one():
    x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
    np.testing.assert_array_equal(add_one(x), x + 1.0)


def test_racy_copy():
    jax.jit(racy_copy)(jnp.ones((8, 128), jnp.float32)).block_until_ready()


class AddOneTest(unittest.TestCase):
    def test_add_one(self):
        x = jnp.zeros((8, 128), jnp.float32)
        np.testing.assert_array_equal(add_one(x), x + 1.0)

    def test_racy_copy(self):
        jax.jit(racy_copy)(jnp.ones((8, 128), jnp.float32)).block_until_ready()
"""


def test_an_existing_test_file_runs_under_copyir_with_one_added_line(tmp_path):
    """The README's recipe: `pytestmark = pytest.mark.usefixtures(
    "copyir_checking")` in a Pallas test file. Its passing tests pass (the
    jitted kernel ran on copyir: it rejects `interpret=True`'s HLO path
    nowhere), its racy test fails with copyir's located error."""
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS))
    done = subprocess.run(
        [
            sys.executable,
            *("-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"),
            *("-W", "ignore::RuntimeWarning", "--copyir-mode", "on_wait"),
            "test_user.py",
        ],
        cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "examples/pallas")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout
    assert "2 failed, 2 passed" in out, out
    assert "FAILED test_user.py::test_racy_copy - copyir.errors.CopyIRError" in out
    assert (
        "FAILED test_user.py::AddOneTest::test_racy_copy - copyir.errors.CopyIRError"
    ) in out
    assert race_message().split(" while ")[0] in out, out
    assert "JaxRuntimeError" not in out


def test_a_warning_made_an_error_is_raised_located_too():
    """An output written only in part is a `CopyIRWarning`; where warnings
    are errors (this suite's `filterwarnings = error`) it stops the kernel
    inside the callback, and `checking` raises it, not XLA's error."""
    from copyir.errors import CopyIRWarning

    def half_kernel(x, y, buf, sem):
        pltpu.sync_copy(x.at[0:8], y.at[0:8])

    call = hbm_call(half_kernel)
    with pytest.raises(CopyIRWarning) as caught, checking("eager"):
        jax.jit(call)(X).block_until_ready()
    assert str(caught.value) == errors.RUN_PARTLY_WRITTEN.format(
        name="y", unwritten=1024, size=2048, first="y[8, 0]"
    )


def test_nested_contexts_with_the_same_arguments_keep_their_own_errors():
    with pytest.raises(CopyIRError) as caught, checking("eager"):
        with checking("eager"):
            pass
        jax.jit(racy_copy)(jnp.ones((8, 128), jnp.float32)).block_until_ready()
    assert str(caught.value).startswith("Race: this computation writes buf")


def test_a_bad_seed_is_refused_at_the_start():
    with pytest.raises(CopyIRError) as caught, checking("random", seed=-1):
        pass
    assert str(caught.value) == errors.RUN_BAD_SEED.format(seed=-1)


def test_another_thread_meanwhile_runs_pallas_not_copyir():
    """JAX's config is per thread, and so is what `checking` forces: a
    kernel another thread runs meanwhile runs in Pallas' interpret mode
    (the race kernel, which copyir refuses, gives an answer), and is not
    cached as copyir's."""
    import threading

    racy = jax.jit(racy_copy)
    x = jnp.ones((8, 128), jnp.float32)
    answers: list = []

    def elsewhere():
        answers.append(np.asarray(racy(x, interpret=pltpu.InterpretParams())))

    racy = jax.jit(racy_copy, static_argnames="interpret")
    with checking("eager"):
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
    assert len(answers) == 1 and answers[0].shape == (8, 128)
    again = racy(x, interpret=pltpu.InterpretParams())
    assert np.array_equal(np.asarray(again), answers[0])
