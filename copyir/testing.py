"""Structural comparison of IR, for round-trip tests of printers and parsers.

Two modules are the same when they have the same ops in the same order, with
equal properties, attributes, result and argument types, value names and
locations, and operands wired to corresponding values. Printing twice and
comparing text would miss a printer that drops something consistently.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue


def module_difference(a: ModuleOp, b: ModuleOp, locations: bool = True) -> str | None:
    """The first difference between two modules' contents, or None.

    The modules themselves may differ in location: each is located at the
    file it was parsed from, which a printer cannot carry. Without
    `locations`, no location is compared (text printed without debug info
    moves every statement).
    """
    ops_a, ops_b = list(a.ops), list(b.ops)
    if len(ops_a) != len(ops_b):
        return f"{len(ops_a)} top-level ops vs {len(ops_b)}"
    for op_a, op_b in zip(ops_a, ops_b, strict=True):
        if (problem := ir_difference(op_a, op_b, locations)) is not None:
            return problem
    return None


def ir_difference(a: Operation, b: Operation, locations: bool = True) -> str | None:
    """The first structural difference between two ops, or None."""
    ops_a, ops_b = list(a.walk()), list(b.walk())
    if len(ops_a) != len(ops_b):
        return f"{len(ops_a)} ops vs {len(ops_b)} ops"
    mapping: dict[SSAValue, SSAValue] = {}
    for op_a, op_b in zip(ops_a, ops_b, strict=True):
        problem = _shape_difference(op_a, op_b, mapping, locations)
        if problem is not None:
            return f"{op_a.name} at {op_a.location}: {problem}"
    for op_a, op_b in zip(ops_a, ops_b, strict=True):
        for i, (x, y) in enumerate(zip(op_a.operands, op_b.operands, strict=True)):
            if mapping.get(x) is not y:
                return (
                    f"{op_a.name} at {op_a.location}: operand {i} is wired differently"
                )
    return None


def _shape_difference(
    a: Operation, b: Operation, mapping: dict[SSAValue, SSAValue], locations: bool
) -> str | None:
    """Everything but the operand wiring, which needs all values mapped first."""
    if a.name != b.name:
        return f"op {a.name} vs {b.name}"
    if a.properties != b.properties:
        return f"properties {a.properties} vs {b.properties}"
    if a.attributes != b.attributes:
        return f"attributes {a.attributes} vs {b.attributes}"
    if locations and a.location != b.location:
        return f"location {a.location} vs {b.location}"
    if len(a.operands) != len(b.operands):
        return "operand count"
    if len(a.regions) != len(b.regions):
        return "region count"
    for region_a, region_b in zip(a.regions, b.regions, strict=True):
        if len(region_a.blocks) != len(region_b.blocks):
            return "block count"
        for block_a, block_b in zip(region_a.blocks, region_b.blocks, strict=True):
            problem = _values_difference(block_a.args, block_b.args, mapping)
            if problem is not None:
                return f"block argument {problem}"
            for x, y in zip(block_a.args, block_b.args, strict=True):
                if locations and x.location != y.location:
                    return f"argument location {x.location} vs {y.location}"
    problem = _values_difference(a.results, b.results, mapping)
    return None if problem is None else f"result {problem}"


def _values_difference(xs, ys, mapping: dict[SSAValue, SSAValue]) -> str | None:
    if len(xs) != len(ys):
        return "count"
    for x, y in zip(xs, ys, strict=True):
        if x.type != y.type:
            return f"type {x.type} vs {y.type}"
        if x.name_hint != y.name_hint:
            return f"name {x.name_hint} vs {y.name_hint}"
        mapping[x] = y
    return None


def compute_region(expression: str, dtype: str, inputs: int) -> str:
    """The MLIR text of a `copy.compute` region, `{ ^bb0(...): ...
    scalar.yield ... }`, for an expression in the prefix form of
    `copyir.compute` (`(add (mul 2.0 $0) 1.0)`) in `dtype` (`f32`) over
    `inputs` operands: tests that generate programs write their
    computations so. Its values are numbered from `%1000`, unnamed as the
    authoring syntax's are and apart from the `%0` of the program around."""
    from copyir.compute import parse_expression
    from copyir.dialects.copy import body_of
    from copyir.dialects.scalar import ConstantOp
    from copyir.dtypes import BY_NAME

    element = BY_NAME[dtype].ir
    region = body_of(parse_expression(expression), element, inputs)
    dtype = str(element)  # as MLIR writes it: ui8 for u8
    names: dict[SSAValue, str] = {
        arg: f"%{1000 + k}" for k, arg in enumerate(region.block.args)
    }
    lines = ["{"]
    if inputs:
        args = ", ".join(f"{names[a]}: {dtype}" for a in region.block.args)
        lines.append(f"^bb0({args}):")
    for op in region.block.ops:
        operands = ", ".join(names[v] for v in op.operands)
        if not op.results:
            lines.append(f"  {op.name} {operands} : {dtype}")
            continue
        names[op.results[0]] = name = f"%{1000 + len(names)}"
        if isinstance(op, ConstantOp):
            operands = f'"{op.literal.data}"'
        lines.append(f"  {name} = {op.name} {operands} : {dtype}")
    return "\n".join([*lines, "}"])


def nested_pipeline_in_loop(steps: int) -> str:
    """A loop of `steps` around a pipeline whose body runs a pipeline over
    its windows (views: no copies), as jax's
    `test_transformed_refs_as_inputs_nested` nests them: the tests' and the
    growth benchmark's program."""
    ref = f"f32[{16 * steps}, 256] @hbm"
    return f"""kernel nested(x: {ref}, y: {ref}) {{
  for t in range({steps}) {{
    xt = x[ds(16 * t, 16)]
    yt = y[ds(16 * t, 16)]
    pipeline grid=(2,)
        in  xt block=(8, 256) index=(i) -> (i, 0)
        out yt block=(8, 256) index=(i) -> (i, 0)
        (xw, yw, i) {{
      pipeline grid=(2,)
          in  xw block=(8, 128) index=(k) -> (0, k)
          out yw block=(8, 128) index=(k) -> (0, k)
          (inner_x, inner_y, k) {{
        inner_y[...] = inner_x + 1.0
      }}
    }}
  }}
}}
"""
