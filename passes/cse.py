"""cse: merge equal views, semaphore indices and index values.

The parser makes an op of every view the text writes, so an unrolled
program's `copy_wait` takes views equal to its `copy_start`'s rather than
the same ones. xDSL's common-subexpression elimination merges them (the
ops are `Pure`), an op inside a loop or `when` body into an equal one
before it outside; the views that no op uses go too. The stream does not
change: a view is an address and strides whichever op holds it, so the
default lowering leaves this pass out (it costs more than it saves there);
`copyir opt -p cse` runs it, to read or print a program with its
repetitions merged.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.transforms.common_subexpression_elimination import (
    CommonSubexpressionElimination,
)


@dataclass(frozen=True)
class CsePass(CommonSubexpressionElimination):
    """Merge equal views, semaphore indices and index values (xDSL's CSE)."""

    name = "cse"
