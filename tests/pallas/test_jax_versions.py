"""The Pallas frontend reads JAX 0.10.2's and 0.12's jaxprs alike
(docs/pallas.md, "JAX versions").

The installed JAX exercises its own forms through real kernels; the other
version's forms of each difference are given to `jax_compat` as that
version writes them, so both are read on either version. Kernels with
constructs only 0.12 can trace run where the installed JAX has them.
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest

jax = pytest.importorskip("jax", reason="the Pallas frontend needs JAX")
jnp = pytest.importorskip("jax.numpy")
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402
from pallas_calls import X, hbm_call  # noqa: E402

import copyir  # noqa: E402
from copyir import errors  # noqa: E402
from copyir.pallas import import_kernels, jax_compat  # noqa: E402
from copyir.pallas.jaxpr_source import shown  # noqa: E402


def refused(what: str, kernel, line: int | None) -> str:
    """The message of a construct refused at `line` of `kernel`'s file."""
    file = shown(inspect.getsourcefile(kernel) or "")
    where = f" ({file}:{line})" if line is not None else ""
    return errors.PALLAS_UNSUPPORTED.format(what=what, where=where)


def import_error(f, *args) -> copyir.CopyIRError:
    with pytest.raises(copyir.CopyIRError) as caught:
        import_kernels(f, *args)
    return caught.value


def kernel_jaxpr(f, *args):
    return jax.make_jaxpr(f)(*args).jaxpr.eqns[0].params["jaxpr"]


def takes(function, keyword: str) -> bool:
    return keyword in inspect.signature(function).parameters


# -- scan: ft_in (0.12) or num_consts / num_carry (0.10) ---------------------


def test_scan_counts_of_the_installed_jax():
    def kernel(x, y, buf, sem):
        def body(i, carry):
            pltpu.make_async_copy(x.at[pl.ds(i, 1)], buf.at[pl.ds(i, 1)], sem).start()
            pltpu.make_async_copy(x.at[pl.ds(i, 1)], buf.at[pl.ds(i, 1)], sem).wait()
            return carry

        jax.lax.fori_loop(0, 16, body, 0)

    (scan,) = kernel_jaxpr(hbm_call(kernel), X).eqns
    assert scan.primitive.name == "scan"
    assert jax_compat.scan_counts(scan.params) == (3, 1)  # x, buf, sem; i


def test_scan_counts_of_both_layouts():
    groups = ([None] * 3, [None], [])
    ft_in = SimpleNamespace(unpack=lambda: groups)
    assert jax_compat.scan_counts({"ft_in": ft_in, "length": 4}) == (3, 1)
    assert jax_compat.scan_counts({"num_consts": 3, "num_carry": 1}) == (3, 1)


# -- dma_wait: is_wait_send (0.12) or insert_dummy_device (0.10) ------------


def test_waits_on_source_in_both_layouts():
    assert jax_compat.waits_on_source({"is_wait_send": True})
    assert not jax_compat.waits_on_source({"is_wait_send": False})
    assert jax_compat.waits_on_source({"insert_dummy_device": True})
    assert not jax_compat.waits_on_source({"insert_dummy_device": False})


@pytest.mark.skipif(
    not takes(pltpu.make_async_copy, "src_sem"),
    reason="a local DMA's source semaphore is JAX 0.12's",
)
def test_a_source_semaphore_is_refused_at_its_line():
    def kernel(x, y, buf, sem):
        copy = pltpu.make_async_copy(x, buf, src_sem=sem)
        copy.start()
        copy.wait()

    err = import_error(hbm_call(kernel), X)
    line = inspect.getsourcelines(kernel)[1] + 2
    assert str(err) == refused(
        "a DMA's source semaphore (`src_sem`, `wait_read`)", kernel, line
    )


@pytest.mark.skipif(
    inspect.signature(pltpu.make_async_copy).parameters["sem"].default
    is inspect.Parameter.empty,
    reason="a DMA without a semaphore is JAX 0.12's",
)
def test_a_dma_without_a_semaphore_is_refused_at_its_line():
    def kernel(x, y, buf, sem):
        copy = pltpu.make_async_copy(x, buf)
        copy.start()

    err = import_error(hbm_call(kernel), X)
    line = inspect.getsourcelines(kernel)[1] + 2
    assert str(err) == refused("a DMA without a semaphore", kernel, line)


# -- memory spaces: 0.12's pl.HOST is JAX's MemorySpace.Host ----------------


def test_memory_space_words():
    def kernel(x, y, buf, sem):
        pass

    avals = [v.aval for v in kernel_jaxpr(hbm_call(kernel), X).invars]
    words = [jax_compat.memory_space(a) for a in avals]
    assert words == ["any", "any", "vmem", "semaphore_mem"]
    assert jax_compat.memory_space(SimpleNamespace(memory_space=pl.HOST)) == "host"
    assert jax_compat.memory_space(SimpleNamespace()) == "default"


def test_a_host_memory_block_spec_is_refused():
    def kernel(x, y):
        y[...] = x[...]

    f = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(X.shape, X.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.HOST)],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
    )
    err = import_error(f, X)
    assert str(err) == refused("a `BlockSpec` in host memory (`pl.HOST`)", kernel, None)


# -- Buffered: 0.12's (in, out) buffer counts -------------------------------


def test_separate_input_and_output_buffer_counts_are_refused():
    def kernel(x, y):
        y[...] = x[...]

    f = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(X.shape, X.dtype),
        grid=(2,),
        in_specs=[
            pl.BlockSpec((8, 128), lambda i: (i, 0), pipeline_mode=pl.Buffered((2, 2)))
        ],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
    )
    err = import_error(f, X)
    assert str(err).startswith(
        "`pl.Buffered` with separate input and output buffer counts is not "
        "supported yet"
    )


@pytest.fixture
def pipeline_primitive():
    """`emit_pipeline` traced as one equation while the test runs."""
    old = jax.config.jax_use_emit_pipeline_primitive
    jax.config.update("jax_use_emit_pipeline_primitive", True)
    yield
    jax.config.update("jax_use_emit_pipeline_primitive", old)


# -- emit_pipeline: one EmitPipelinePrimitiveArgs (0.12) or a row (0.10) ----


def test_emit_pipeline_operands_of_the_0_10_layout():
    mapping = SimpleNamespace(index_map_jaxpr=SimpleNamespace(consts=["c"]))
    params = {
        "grid_mapping": SimpleNamespace(
            block_mappings=[mapping], num_dynamic_grid_bounds=1
        ),
        "_num_extra_dynamic": 1,
        "_static_grid_offsets": (0,),
        "body_consts_len": 1,
        "args_tree": jax.tree_util.tree_structure((0, 0)),
    }
    operands = jax_compat.pipeline_operands(
        params, ["map", "bound", "offset", "const", "x", "y"]
    )
    assert list(operands.index_map_consts) == ["map"]
    assert list(operands.run_time_grid) == ["bound", "offset"]
    assert operands.grid_offsets == (0,)
    assert list(operands.body_consts) == ["const"]
    assert operands.refs == ("x", "y")
    assert operands.core_id is None and operands.allocations is None


def test_emit_pipeline_operands_of_the_0_12_layout():
    packed = SimpleNamespace(
        all_index_map_consts=(),
        dynamic_grid_spec=(),
        core_id=None,
        body_consts=("const",),
        refs_flat=("x", "y"),
        allocations=None,
    )
    params = {
        "args_tree": SimpleNamespace(unflatten=lambda args: packed),
        "refs_tree": jax.tree_util.tree_structure((0, (0,))),
    }
    operands = jax_compat.pipeline_operands(params, ["const", "x", "y"])
    assert operands.refs == ("x", ("y",))
    assert list(operands.body_consts) == ["const"]
    assert operands.grid_offsets == ()


@pytest.mark.skipif(
    not takes(pltpu.emit_pipeline, "output_wait_read_only"),
    reason="output_wait_read_only is JAX 0.12's",
)
def test_emit_pipeline_that_awaits_only_output_reads_is_refused(pipeline_primitive):
    def inner(x, y):
        y[...] = x[...]

    def kernel(x, y):
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        pltpu.emit_pipeline(
            inner,
            grid=(2,),
            in_specs=[spec],
            out_specs=[spec],
            output_wait_read_only=True,
        )(x, y)

    err = import_error(hbm_call(kernel, []), X)
    line = inspect.getsourcelines(kernel)[1] + 2
    assert str(err) == refused(
        "`emit_pipeline(output_wait_read_only=True)`", kernel, line
    )


# -- interpret mode: how a race is reported, dma_start's cores ---------------

RACE = (
    "RACE DETECTED\n  write of ('vmem', 102, 0, 0)[()] from 0, 0, k.py:29:4 (k)\n"
    "  clock: [4 0]\n  write of ('vmem', 102, 0, 0)[()] from 100, 0, k.py:28:4 (k)\n"
    "  clock: [1 3]"
)


def test_interpret_race_in_both_reports():
    """0.12 raises the report (the caller's error text holds it after the
    callback's frames); 0.10 prints it and sets `races_found`."""
    raised = f'Traceback:\n  File "x.py", line 1, in f\nRuntimeError: {RACE}\n'
    assert jax_compat.interpret_race(None, "", raised[raised.index("RACE") :]) == RACE
    printed = f"{RACE}\n\nSemaphore 2000 has non-zero count\n"
    found = SimpleNamespace(races_found=True)
    assert jax_compat.interpret_race(found, printed, "") == RACE
    assert jax_compat.interpret_race(found, "", "") == "RACE DETECTED"
    calm = SimpleNamespace(races_found=False)
    assert jax_compat.interpret_race(calm, "Semaphore 2000 ...", "IndexError: x") == ""


def test_interpret_dma_cores_in_both_signatures():
    """0.12's `dma_start` callback takes `dst_local_core_id` (None for the
    source's core); 0.10's has none and writes on the source's core."""
    assert jax_compat.interpret_dma_cores({"src_local_core_id": 1}) == (1, 1)
    both = {"src_local_core_id": 1, "dst_local_core_id": None}
    assert jax_compat.interpret_dma_cores(both) == (1, 1)
    both["dst_local_core_id"] = 0
    assert jax_compat.interpret_dma_cores(both) == (1, 0)
