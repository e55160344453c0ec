"""One `pallas_call` equation as a copy-dialect kernel.

The call's operands become HBM parameters, named after the kernel's
arguments. An operand with `memory_space=pl.ANY` is the parameter itself
inside the kernel; an operand with a `BlockSpec` in VMEM is an operand of
a `copy.pipeline` over the call's grid (block shape, index map, buffer
count, the grid's dimension semantics), its window taking the kernel
argument's name and the parameter `<name>_hbm`. Scratch is allocated at
the kernel's top, alive for the whole grid as Pallas' is; scalar-prefetch
operands are copied to SMEM before it. The kernel's jaxpr becomes the body
(`BodyImporter`), inside the pipeline, a `copy.for` grid (a grid with no
blocked operand) or the kernel itself (no grid).
"""

from __future__ import annotations

import dataclasses
import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, SSAValue

from copyir import pytree
from copyir.cpy.keywords import FLOAT_WORDS, GRAMMAR_WORDS
from copyir.dialects.copy import (
    AllocOp,
    ForOp,
    KernelOp,
    PipelineOp,
    SyncCopyOp,
)
from copyir.dialects.copy.pipeline import default_index_name
from copyir.dialects.copy.types import ref_type
from copyir.names import FreshNames
from copyir.pallas import jax_compat, jaxpr_source
from copyir.pallas.blocks import block_spec
from copyir.pallas.body import BodyImporter
from copyir.pallas.walker import element_of, unsupported


@dataclass
class ImportedKernel:
    """A `pallas_call` as copyir sees it: the module holding its kernel,
    the inputs it received (by parameter name), and which parameter each of
    the call's results is."""

    module: ModuleOp
    name: str
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    operands: list[str] = field(default_factory=list)
    """The parameter each of the call's operands is, in order."""
    grid_copies: bool = False
    """Whether operands are copied in blocks by the grid (`BlockSpec`s in
    VMEM): Pallas' interpret mode copies those without DMA events."""
    order: dict[int, np.ndarray] = field(default_factory=dict)
    """Of a run: the order its parallel loops' iterations ran in, by loop
    number (`validate_stream`'s `order`); empty: program order."""

    def called_on(self, values: Sequence[Any]) -> ImportedKernel:
        """This kernel (the same module) with `values` as its inputs."""
        inputs = {
            name: np.asarray(value)
            for name, value in zip(self.operands, values, strict=True)
        }
        return dataclasses.replace(self, inputs=inputs)

    @property
    def kernel(self) -> KernelOp:
        op = self.module.body.block.first_op
        assert isinstance(op, KernelOp)
        return op


def kernel_name(eqn, taken: FreshNames) -> str:
    """The kernel function's name, unique among the kernels of one import."""
    return taken(identifier(call_name(eqn.params)))


def call_name(params: dict[str, Any]) -> str:
    """A `pallas_call`'s name: its `name=`, else its kernel function's."""
    name = params.get("name")
    if not name:
        info = getattr(params["jaxpr"], "debug_info", None)
        text = getattr(info, "func_src_info", None) or "kernel"
        name = text.split(" at ")[0] or "kernel"
    return name


def identifier(name: str) -> str:
    """A name the authoring syntax takes: `args[0]` becomes `args_0`."""
    text = re.sub(r"\W+", "_", name).strip("_") or "arg"
    if text[0].isdigit() or keyword.iskeyword(text):
        text = "_" + text
    if text in GRAMMAR_WORDS or text in FLOAT_WORDS:
        text += "_"
    return text


def arg_names(jaxpr, count: int) -> list[str]:
    info = getattr(jaxpr, "debug_info", None)
    names = list(getattr(info, "arg_names", None) or ())
    if len(names) != count:
        names = [f"arg{k}" for k in range(count)]
    return [identifier(n) for n in names]


def import_call(
    eqn,
    values: Sequence[Any] | None,
    taken_kernels: FreshNames,
    *,
    opaque_compute: bool = False,
) -> ImportedKernel:
    """The kernel of one `pallas_call` equation, called on `values` (or
    with no inputs yet, where they are known only when it runs)."""
    params = eqn.params
    jaxpr = params["jaxpr"]
    gm = params["grid_mapping"]
    location = jaxpr_source.function_location(getattr(jaxpr, "debug_info", None))
    name = kernel_name(eqn, taken_kernels)
    if params.get("mesh") is not None:
        raise unsupported("a `pallas_call` over a mesh (`pl.core_map`)", None)
    if getattr(gm, "vmapped_dims", ()):
        raise unsupported("a `pallas_call` under `jax.vmap`", None)
    grid = tuple(gm.grid)
    if not all(isinstance(g, int) for g in grid):
        raise unsupported("a grid of a size known only at run time", None)

    n_index, n_in, n_out = gm.num_index_operands, gm.num_inputs, gm.num_outputs
    names = arg_names(jaxpr, len(jaxpr.invars))
    kernel_vars = jaxpr.invars
    aliases = {o: i for i, o in dict(params.get("input_output_aliases", ())).items()}
    blocked = [_is_blocked(kernel_vars[n_index + k]) for k in range(n_in + n_out)]

    taken = FreshNames()
    params_list: list[tuple[str, Any]] = []
    operand_avals = [v.aval for v in eqn.invars]
    for k, aval in enumerate(operand_avals):
        base = names[k] + ("_hbm" if k >= n_index and blocked[k - n_index] else "")
        params_list.append((taken(base), _hbm_type(aval)))
    output_params: list[int] = []
    for k, aval in enumerate(params["out_avals"]):
        if k in aliases:
            output_params.append(aliases[k])
            continue
        var = n_index + n_in + k
        base = names[var] + ("_hbm" if blocked[n_in + k] else "")
        params_list.append((taken(base), _hbm_type(aval)))
        output_params.append(len(params_list) - 1)

    kernel = KernelOp(name, params_list)
    kernel.location = location
    block = kernel.body.block
    hbm = list(block.args)
    importer = BodyImporter(block, location, opaque_compute=opaque_compute, names=taken)

    env_args: list[Any] = [None] * len(kernel_vars)
    for k in range(n_index):  # scalar prefetch: in SMEM before the kernel
        smem = AllocOp(
            ref_type(
                tuple(operand_avals[k].shape),
                _element(operand_avals[k].dtype),
                "smem",
            ),
            taken(names[k] + "_smem"),
        )
        importer.emit(smem)
        importer.emit(SyncCopyOp(pytree.LEAF, [hbm[k]], pytree.LEAF, [smem.results[0]]))
        env_args[k] = smem.results[0]
    for k, var in enumerate(kernel_vars[n_index + n_in + n_out :]):
        scratch = names[n_index + n_in + n_out + k]
        env_args[n_index + n_in + n_out + k] = importer.allocate(var, block, scratch)

    operand_param = [
        *[hbm[n_index + k] for k in range(n_in)],
        *[hbm[output_params[k]] for k in range(n_out)],
    ]
    for k in range(n_in + n_out):
        if not blocked[k]:
            env_args[n_index + k] = operand_param[k]

    semantics = grid_semantics(params.get("compiler_params"), len(grid))
    pipelined = [k for k in range(n_in + n_out) if blocked[k]]
    if pipelined:
        run_grid = grid or (1,)
        specs = [
            block_spec(importer, gm.block_mappings[k], k >= n_in, len(grid))
            for k in pipelined
        ]
        window_names = [names[n_index + k] for k in pipelined]
        index_names = [taken(default_index_name(d)) for d in range(len(run_grid))]
        pipe = importer.emit(
            PipelineOp(
                run_grid,
                [operand_param[k] for k in pipelined],
                specs,
                [*window_names, *index_names],
                dimension_semantics=semantics if grid else None,
                kernel_grid=True,
            )
        )
        body = pipe.regions[0].block
        windows = body.args[: len(pipelined)]
        for k, window in zip(pipelined, windows, strict=True):
            env_args[n_index + k] = window
        indices = body.args[len(pipelined) :]
        run_body(importer, body, jaxpr, env_args, grid, indices[: len(grid)])
    elif grid:
        loop = importer.emit(
            ForOp(
                [0] * len(grid),
                grid,
                [taken(default_index_name(d)) for d in range(len(grid))],
                grid=True,
                dimension_semantics=semantics,
            )
        )
        body = loop.regions[0].block
        run_body(importer, body, jaxpr, env_args, grid, body.args)
    else:
        run_body(importer, block, jaxpr, env_args, (), ())

    operands = [params_list[k][0] for k in range(len(operand_avals))]
    outputs = [params_list[p][0] for p in output_params]
    imported = ImportedKernel(
        ModuleOp([kernel]),
        name,
        {},
        outputs,
        operands,
        grid_copies=bool(pipelined),
    )
    return imported if values is None else imported.called_on(values)


def run_body(
    importer: BodyImporter,
    block: Block,
    jaxpr,
    args: list[Any],
    grid: tuple[int, ...],
    indices: Sequence[SSAValue],
) -> None:
    importer.grid = grid
    importer.program_ids = [importer.dim(i) for i in indices]
    outs = importer.in_block(block, lambda: importer.run(jaxpr, [], args))
    assert not outs  # a kernel returns nothing: it writes its outputs


def _is_blocked(var) -> bool:
    """A kernel argument in VMEM (or the default space) is a block; one in
    `ANY` (HBM) is the whole array."""
    space = jax_compat.memory_space(var.aval)
    if "smem" in space:
        raise unsupported("an SMEM `BlockSpec`", None)
    if space == "host":
        raise unsupported("a `BlockSpec` in host memory (`pl.HOST`)", None)
    return "any" not in space and "hbm" not in space


def _hbm_type(aval) -> Any:
    return ref_type(tuple(aval.shape), _element(aval.dtype), "hbm")


def _element(dtype: Any) -> Any:
    """An operand's element type; one copyir lacks (`float8_e4m3fn`) is
    not supported yet."""
    try:
        return element_of(dtype)
    except (KeyError, TypeError):
        raise unsupported(f"the dtype {dtype}", None) from None


def grid_semantics(compiler_params, rank: int) -> list[str] | None:
    """The grid's dimension semantics, from the Mosaic compiler params
    (`parallel`, `core_parallel`, ... all run in any order: parallel)."""
    if isinstance(compiler_params, dict):
        compiler_params = compiler_params.get("mosaic_tpu") or compiler_params.get(
            "mosaic"
        )
    found = getattr(compiler_params, "dimension_semantics", None)
    if found is None or not rank:
        return None
    words = [str(getattr(s, "value", s)).lower() for s in found]
    return ["parallel" if "parallel" in w else "arbitrary" for w in words]
