"""copyir's dialects and passes for the stock `xdsl-opt`.

The `xdsl.universe` entry point (pyproject.toml) names `COPYIR_UNIVERSE`,
so that `xdsl-opt` parses, prints and transforms the `copy`, `scalar`
and `dma` dialects with copyir's passes:

    xdsl-opt prog.mlir -p expand-pytree-copies
"""

from __future__ import annotations

from xdsl.ir import Dialect
from xdsl.universe import Universe

from copyir.passes import PASSES


def _copy() -> Dialect:
    from copyir.dialects.copy import Copy

    return Copy


def _dma() -> Dialect:
    from copyir.dialects.dma import Dma

    return Dma


def _scalar() -> Dialect:
    from copyir.dialects.scalar import Scalar

    return Scalar


COPYIR_UNIVERSE = Universe(
    all_dialects={"copy": _copy, "dma": _dma, "scalar": _scalar},
    # `cse` is xDSL's own pass, which xDSL's universe already names.
    all_passes={name: p for name, p in PASSES.items() if name != "cse"},
)
