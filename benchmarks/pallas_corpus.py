"""The differential harness over jax's own Pallas TPU tests.

    python benchmarks/pallas_corpus.py [--jobs J] [--budget S] [SOURCE ...]

`benchmarks/corpus/collect.py` runs the vendored tests and doc kernels of
one jax release on the CPU and hands each `pallas_call` they execute (a
unit: its parameters and concrete operands) to `compare_unit`, in the
worker process. `compare_unit` runs the call both ways,
`copyir.pallas.compare`, and returns a small verdict. This script prints
one line per unit (imported or not supported and which feature; agrees,
or differs: classified or not, where), then the summary table and the
features that block the rest, ranked by how many units need them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "corpus"))


@dataclass(frozen=True)
class UnitVerdict:
    """What the harness found for one `pallas_call` (picklable)."""

    status: str
    """agrees, differs (known), differs (unclassified), not supported, or
    copyir failed (an exception that is not a verdict: copyir's bug)."""
    feature: str = ""
    differences: tuple[str, ...] = ()
    known: tuple[str, ...] = ()


def compare_unit(unit: Any) -> UnitVerdict:
    """Run one captured `pallas_call` on copyir and in Pallas' interpret
    mode, on the operands it received."""
    from jax._src.pallas.pallas_call import pallas_call_p

    from copyir.pallas.compare import compare

    def call() -> Any:
        return pallas_call_p.bind(*unit.operands, interpret=False, **unit.params)

    try:
        comparison = compare(call, timeout=5.0)
    except Exception as err:
        return UnitVerdict("copyir failed", f"{type(err).__name__}: {err}"[:200])
    return UnitVerdict(
        comparison.status,
        comparison.unsupported,
        tuple(str(d) for d in comparison.differences),
        tuple(sorted({d.known.name for d in comparison.differences if d.known})),
    )
