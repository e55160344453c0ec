"""Control flow of a kernel's jaxpr: `run_scoped` as `copy.scope`,
`scan` and `while` (a `fori_loop`) as `copy.for`, `cond` (`pl.when`) as
`copy.when`, and `emit_pipeline` as `copy.pipeline`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from copyir import errors
from copyir.dialects.copy import ForOp, ScopeOp, WhenOp
from copyir.errors import CopyIRError
from copyir.pallas import jax_compat
from copyir.pallas.integers import Integers
from copyir.pallas.symbols import (
    Condition,
    as_condition,
    as_expr,
    difference,
    folded,
    local_sets,
)
from copyir.pallas.values import Vector
from copyir.pallas.walker import Value, is_integer, python_value, read


class Control(Integers):
    """Scopes, loops, conditions and pipelines."""

    def run_scoped(self, eqn, args: list[Value]) -> list[Value]:
        """`pl.run_scoped`: its allocations live for the body, fresh on
        every entry (a `copy.scope`)."""
        jaxpr = eqn.params["jaxpr"]
        scope = self.emit(ScopeOp())
        block = scope.regions[0].block

        def walk() -> list[Value]:
            allocated = [self.allocate(v, block) for v in jaxpr.invars]
            return self.run(jaxpr, args, allocated)

        outs = self.in_block(block, walk)
        if outs:
            raise self.unsupported("`run_scoped` that returns values")
        return outs

    def scan(self, eqn, args: list[Value]) -> list[Value]:
        """A `fori_loop` of static bounds: a carry incremented by 1 each
        step is the loop index; the other carries must pass through."""
        p = eqn.params
        if p["reverse"]:
            raise self.unsupported("a reversed `scan`")
        n_consts, n_carry = jax_compat.scan_counts(p)
        consts = args[:n_consts]
        carries = args[n_consts : n_consts + n_carry]
        if len(args) > n_consts + n_carry:
            raise self.unsupported("a `scan` over arrays")
        jaxpr = p["jaxpr"].jaxpr
        carry_vars = jaxpr.invars[n_consts : n_consts + n_carry]
        kinds = _carry_kinds(jaxpr, carry_vars, jaxpr.outvars[:n_carry])
        return self.loop(p["length"], kinds, carries, p["jaxpr"], [*consts], jaxpr)

    def loop(self, length: int, kinds, carries, closed, consts, jaxpr) -> list[Value]:
        for kind, value in zip(kinds, carries, strict=True):
            if kind == "carried" or (kind == "step" and not is_integer(value)):
                what = "array" if isinstance(value, Vector) else "index"
                raise self.unsupported(f"a loop-carried {what} value")
        finals = [
            folded(as_expr(v) + length) if k == "step" else v
            for k, v in zip(kinds, carries, strict=True)
        ]
        if length <= 0:
            return finals
        loop = self.emit(ForOp([0], [length], [self.index_name()]))
        t = self.dim(loop.regions[0].block.args[0])
        bound = [
            folded(as_expr(v) + t) if k == "step" else v
            for k, v in zip(kinds, carries, strict=True)
        ]
        self.in_block(
            loop.regions[0].block,
            lambda: self.run(
                jaxpr, list(getattr(closed, "consts", ())), [*consts, *bound]
            ),
        )
        return finals

    def while_loop(self, eqn, args: list[Value]) -> list[Value]:
        """A `fori_loop` whose bounds JAX did not know: a `for` where they
        are static here (the condition `i < upper`, `i` stepping by 1)."""
        p = eqn.params
        cond_consts = args[: p["cond_nconsts"]]
        body_consts = args[p["cond_nconsts"] : p["cond_nconsts"] + p["body_nconsts"]]
        carries = args[p["cond_nconsts"] + p["body_nconsts"] :]
        body = p["body_jaxpr"].jaxpr
        nconsts = p["body_nconsts"]
        kinds = _carry_kinds(body, body.invars[nconsts:], body.outvars)
        steps = [k for k, kind in enumerate(kinds) if kind == "step"]
        bound = self.trip_count(p["cond_jaxpr"], cond_consts, carries, steps)
        return self.loop(bound, kinds, carries, p["body_jaxpr"], body_consts, body)

    def trip_count(self, cond, consts, carries, steps: list[int]) -> int:
        """The steps of `while i < upper` for a stepping carry `i` and an
        `upper` known here (or affine with a constant difference)."""
        jaxpr = cond.jaxpr
        nconsts = len(consts)
        if len(jaxpr.eqns) == 1 and jaxpr.eqns[0].primitive.name == "lt":
            lhs, rhs = jaxpr.eqns[0].invars
            values = dict(
                zip(jaxpr.invars[nconsts:], range(len(carries)), strict=False)
            )
            if lhs in values and values[lhs] in steps:
                env = dict(zip(jaxpr.invars, [*consts, *carries], strict=True))
                upper = read(env, rhs)
                if is_integer(upper):
                    start = carries[values[lhs]]
                    count = difference(upper, start, len(self.dims))
                    if isinstance(count, int):
                        return max(count, 0)
        raise self.unsupported("a `while` loop whose trip count is not static")

    def cond(self, eqn, args: list[Value]) -> list[Value]:
        """`pl.when` (and `lax.cond` without results) on an index
        condition: one `copy.when` per branch that does anything."""
        which, *operands = args
        branches = eqn.params["branches"]
        if isinstance(which, bool | int | np.integer | np.bool_):
            index = min(max(int(which), 0), len(branches) - 1)
            return self.run_closed(branches[index], operands)
        if not isinstance(which, Condition) or len(branches) != 2:
            raise self.unsupported("`cond` on a value that is no index condition")
        if eqn.outvars:
            raise self.unsupported("`cond` with results")
        for holds, branch in ((True, branches[1]), (False, branches[0])):
            if not branch.jaxpr.eqns:
                continue
            condition = which if holds else as_condition(self.condition(lambda: ~which))
            if not condition.sets:
                continue
            sets, dims = local_sets(condition, self.dims)
            when = self.emit(WhenOp(sets, dims))
            self.in_block(
                when.regions[0].block, lambda b=branch: self.run_closed(b, operands)
            )
        return []

    def emit_pipeline(self, eqn, args: list[Value]) -> list:
        """`pltpu.emit_pipeline` traced as one equation (with
        `jax_use_emit_pipeline_primitive`): a `copy.pipeline` over its
        refs, the body its jaxpr on the windows. Without a core axis
        Pallas ignores `dimension_semantics` here (its prefetch crosses
        every dimension), so the pipeline gets none."""
        from copyir.dialects.copy import PipelineOp
        from copyir.pallas.blocks import block_spec

        p = eqn.params
        gm = p["grid_mapping"]
        if p.get("core_axis") is not None or p.get("core_axis_name") is not None:
            raise self.unsupported("`emit_pipeline` over cores (`core_axis`)")
        if p.get("tiling") is not None:
            raise self.unsupported("`emit_pipeline` with `tiling`")
        operands = jax_compat.pipeline_operands(p, args)
        if operands.core_id is not None:
            raise self.unsupported("`emit_pipeline` over cores (`core_axis`)")
        if operands.run_time_grid or any(d != 0 for d in operands.grid_offsets):
            raise self.unsupported("`emit_pipeline` with a grid known only at run time")
        if operands.index_map_consts:
            raise self.unsupported("`emit_pipeline` index maps that capture values")
        if operands.allocations is not None:
            raise self.unsupported("`emit_pipeline` with `allocations`")
        if p.get("output_wait_read_only"):
            raise self.unsupported("`emit_pipeline(output_wait_read_only=True)`")
        if p.get("_explicit_indices"):
            raise self.unsupported("an `emit_pipeline` body given its indices")
        body_consts = list(operands.body_consts)
        refs = [self.ref(r) for r in _leaves(operands.refs)]
        grid = tuple(gm.grid)
        for bm in gm.block_mappings[gm.num_inputs :]:
            if getattr(getattr(bm, "pipeline_mode", None), "revisit", None) is not None:
                # JAX 0.12's _make_pipeline_allocations refuses it on an output
                raise CopyIRError(errors.REVISIT_MODE, self.loc())
        specs = [
            block_spec(self, bm, k >= gm.num_inputs, len(grid))
            for k, bm in enumerate(gm.block_mappings)
        ]
        body_jaxpr = p["body_jaxpr"]
        names = [self.names(n) for n in _window_names(body_jaxpr, len(refs))]
        indices = [self.index_name() for _ in grid]
        pipe = self.emit(
            PipelineOp(
                grid,
                refs,
                specs,
                [*names, *indices],
                no_pipelining=bool(p.get("no_pipelining")),
            )
        )
        windows = list(pipe.regions[0].block.args[: len(refs)])
        for index in pipe.regions[0].block.args[len(refs) :]:
            self.dim(index)
        self.in_block(
            pipe.regions[0].block,
            lambda: self.run(body_jaxpr, body_consts, windows),
        )
        return []

    def semaphore_op(self, eqn, args: list[Value]) -> Any:
        raise self.unsupported(f"`{eqn.primitive.name}` (regular semaphores)")


def _leaves(tree: Any) -> list:
    """The refs of an `args_tree`, in order (tuples and lists of them)."""
    if isinstance(tree, tuple | list):
        return [leaf for item in tree for leaf in _leaves(item)]
    return [tree]


def _window_names(jaxpr, count: int) -> list[str]:
    """The body's argument names, where JAX kept them, else `window`."""
    from copyir.pallas.calls import identifier

    info = getattr(jaxpr, "debug_info", None)
    names = list(getattr(info, "arg_names", None) or ())
    if len(names) != count:
        return ["window"] * count
    return [identifier(n) for n in names]


def _carry_kinds(jaxpr, carry_vars: Sequence[Any], outvars: Sequence[Any]) -> list[str]:
    """Per carry of a loop body: `step` (its output is the carry plus 1),
    `same` (passed through) or `carried` (anything else)."""
    made = {}
    for eqn in jaxpr.eqns:
        for out in eqn.outvars:
            made[out] = eqn
    kinds = []
    for var, out in zip(carry_vars, outvars, strict=True):
        if out is var:
            kinds.append("same")
            continue
        if type(out).__name__ == "Literal":  # a constant, unhashable
            kinds.append("carried")
            continue
        eqn = made.get(out)
        if eqn is not None and eqn.primitive.name == "add":
            a, b = eqn.invars
            one = [x for x in (a, b) if x is not var]
            if len(one) == 1 and (a is var or b is var) and _is_one(one[0]):
                kinds.append("step")
                continue
        kinds.append("carried")
    return kinds


def _is_one(var: Any) -> bool:
    return type(var).__name__ == "Literal" and python_value(var.val) == 1
