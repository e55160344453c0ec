"""What the Pallas frontend reads differently from one JAX version to another.

The frontend reads the jaxprs of JAX 0.10.2 and 0.12 (docs/pallas.md,
"JAX versions"). Where the two write a construct differently, the reading
that depends on the version lives here, in one place, and takes 0.12's form
first; everything else reads both versions alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


def tpu_info_module() -> Any:
    """Pallas' `tpu_info` (the TPU tiling, `infer_tiling`): JAX's own in
    0.12, Pallas Mosaic's in 0.10."""
    try:
        from jax._src import tpu_info  # pyright: ignore[reportAttributeAccessIssue]
    except ImportError:  # JAX 0.10
        from jax._src.pallas.mosaic import tpu_info
    return tpu_info


def scan_counts(params: dict[str, Any]) -> tuple[int, int]:
    """A `scan`'s numbers of constant and carried operands (its other
    operands are the arrays scanned over). JAX 0.12 groups the operands
    as (consts, carries, xs) in the flat tree `ft_in`; 0.10 counts them
    in `num_consts` and `num_carry`."""
    ft_in = params.get("ft_in")
    if ft_in is None:
        return params["num_consts"], params["num_carry"]
    consts, carries, _ = ft_in.unpack()
    return len(consts), len(carries)


def memory_space(aval: Any) -> str:
    """A ref's memory space as Pallas names it, in lowercase: `any`,
    `default`, `vmem`, `smem`, `hbm`, `semaphore_mem`, `host`, ... JAX 0.12
    moved `pl.HOST` to JAX's own `MemorySpace.Host` (printed so); 0.10's
    is Pallas' `host`."""
    space = getattr(aval, "memory_space", None)
    if space is None:
        return "default"
    return str(space).rpartition(".")[2].lower()


def waits_on_source(params: dict[str, Any]) -> bool:
    """Whether a `dma_wait` waits for the source's read (`wait_read`,
    `wait_send`; its tree then holds source and destination swapped) rather
    than the destination's write. JAX 0.12 says so in `is_wait_send`; 0.10
    only for remote copies, in `insert_dummy_device`."""
    return bool(params.get("is_wait_send", params.get("insert_dummy_device", False)))


RACE_DETECTED = "RACE DETECTED"
"""How interpret mode's race detector starts its report, in both versions."""


def interpret_race(races: Any, printed: str, error: str) -> str:
    """The race that interpret mode (`detect_races=True`) reported in a run,
    or "". JAX 0.12 raises `RuntimeError: RACE DETECTED ...` from the callback
    that saw it (the caller gets a `JaxRuntimeError` whose text holds it);
    0.10 prints the report, sets `races.races_found` (`races` is
    `interpret_pallas_call.races`, the last kernel's state) and goes on."""
    for text in (error, printed):
        at = text.find(RACE_DETECTED)
        if at >= 0:
            # The heading and its four lines: the two accesses and their clocks.
            return "\n".join(text[at:].splitlines()[:5])
    if getattr(races, "races_found", False):
        return RACE_DETECTED
    return ""


def interpret_dma_cores(arguments: dict[str, Any]) -> tuple[int, int]:
    """The local cores of a DMA's source and destination, from interpret
    mode's `dma_start` callback's arguments (bound by name). JAX 0.12 passes
    `dst_local_core_id` (None for the source's core); 0.10 has no such
    argument and always writes on the source's core."""
    src_core = int(arguments["src_local_core_id"])
    dst_core = arguments.get("dst_local_core_id")
    return src_core, src_core if dst_core is None else int(dst_core)


@dataclass(frozen=True)
class PipelineOperands:
    """An `emit_pipeline` equation's operands, by what each is for."""

    index_map_consts: Sequence[Any]
    """Values the index maps captured."""
    run_time_grid: Sequence[Any]
    """Grid bounds (and, in 0.10, grid offsets) known only at run time."""
    grid_offsets: tuple[int, ...]
    """0.10's static offsets of the grid (a share of it per core); 0.12
    computes them only when it lowers the pipeline."""
    core_id: Any
    """The core's index where the grid is split over cores (0.12)."""
    body_consts: Sequence[Any]
    """The body's captured values (its jaxpr's constvars)."""
    refs: Any
    """The refs the pipeline runs over, as the call passed them: a tuple
    (of tuples) of refs and `TransformedRef`s."""
    allocations: Any
    """Buffers the caller allocated for the pipeline (0.12), or None."""


def pipeline_operands(params: dict[str, Any], args: Sequence[Any]) -> PipelineOperands:
    """The operands of an `emit_pipeline` equation. JAX 0.12 packs them in
    one `EmitPipelinePrimitiveArgs` (its `args_tree`) whose refs unflatten
    with `refs_tree`; 0.10 lays them out in a row, counted by params
    (index-map consts, dynamic bounds, dynamic offsets, body consts, refs)."""
    if "refs_tree" in params:
        packed = params["args_tree"].unflatten(args)
        return PipelineOperands(
            index_map_consts=packed.all_index_map_consts,
            run_time_grid=packed.dynamic_grid_spec,
            grid_offsets=(),
            core_id=packed.core_id,
            body_consts=packed.body_consts,
            refs=params["refs_tree"].unflatten(packed.refs_flat),
            allocations=packed.allocations,
        )
    gm = params["grid_mapping"]
    n_maps = sum(len(bm.index_map_jaxpr.consts) for bm in gm.block_mappings)
    n_run_time = gm.num_dynamic_grid_bounds + params["_num_extra_dynamic"]
    n_body = params["body_consts_len"]
    body_at = n_maps + n_run_time
    return PipelineOperands(
        index_map_consts=args[:n_maps],
        run_time_grid=args[n_maps:body_at],
        grid_offsets=tuple(params["_static_grid_offsets"]),
        core_id=None,
        body_consts=args[body_at : body_at + n_body],
        refs=params["args_tree"].unflatten(args[body_at + n_body :]),
        allocations=None,
    )


__all__ = [
    "RACE_DETECTED",
    "PipelineOperands",
    "interpret_dma_cores",
    "interpret_race",
    "memory_space",
    "pipeline_operands",
    "scan_counts",
    "waits_on_source",
]
