"""The differential harness over jax's own Pallas TPU tests.

    python benchmarks/pallas_corpus.py [--jobs J] [--budget S]
        [--source-budget S] [--save FILE] [--load FILE] [SOURCE ...]

`benchmarks/corpus/collect.py` runs the vendored tests and doc kernels of
one jax release on the CPU and hands each `pallas_call` they execute (a
unit: its parameters and concrete operands) to `compare_unit`, in the
worker process. `compare_unit` runs the call both ways
(`copyir.pallas.compare`: Pallas' TPU interpret mode and copyir, in eager
and on_wait modes) and returns a small verdict. This script prints one
line per unit (not supported and which feature; agrees; or differs,
classified or not, and where), then the summary table and the features
that block the rest, ranked by how many units need them.
"""

from __future__ import annotations

import argparse
import collections
import pickle
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "corpus"))

STATUSES = (
    "agrees",
    "differs (known)",
    "differs (unclassified)",
    "not supported",
    "copyir failed",
)


SHARD_MAP = "a kernel under `shard_map` (its mesh axes), replayed alone"


@dataclass(frozen=True)
class UnitVerdict:
    """What the harness found for one `pallas_call` (picklable)."""

    status: str
    """One of `STATUSES`: `copyir failed` is an exception that is not a
    verdict, copyir's bug."""
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
    except Exception as err:  # reported as copyir's failure, never hidden
        if isinstance(err, NameError) and "unbound axis name" in str(err):
            # The call ran under `shard_map` (remote DMAs); replayed alone,
            # its mesh axes are gone: neither side can run it here.
            return UnitVerdict("not supported", SHARD_MAP)
        return UnitVerdict("copyir failed", f"{type(err).__name__}: {err}"[:300])
    return UnitVerdict(
        comparison.status,
        comparison.unsupported,
        tuple(str(d) for d in comparison.differences),
        tuple(sorted({d.known.name for d in comparison.differences if d.known})),
    )


def unit_lines(outcomes: Sequence[Any]) -> list[str]:
    """One line per unit: the case, the call, what the harness found."""
    lines = []
    for outcome in outcomes:
        for unit in outcome.units:
            verdict = unit.result
            head = f"{unit.test_id} #{unit.index} {unit.name}"
            if not isinstance(verdict, UnitVerdict):
                lines.append(f"{head}: harness failed: {verdict}")
                continue
            detail = verdict.feature or "; ".join(verdict.differences)
            lines.append(
                f"{head}: {verdict.status}" + (f": {detail}" if detail else "")
            )
    return lines


def test_method(test_id: str) -> str:
    """A case's test method: its id without the parameterisation (absl's
    number and arguments)."""
    return re.sub(r"\d*( \(.*\))?$", "", test_id)


def summary(outcomes: Sequence[Any]) -> str:
    """The README's table: cases, kernels, and what became of them; the
    blocking features ranked by the kernels that need them (and the test
    methods those come from: parameterisations multiply kernels)."""
    verdicts = [u.result for o in outcomes for u in o.units]
    counts = collections.Counter(
        v.status if isinstance(v, UnitVerdict) else "copyir failed" for v in verdicts
    )
    ran = sum(1 for o in outcomes if o.status == "ok" or o.units)
    imported = len(verdicts) - counts["not supported"] - counts["copyir failed"]
    lines = [
        "| corpus | count |",
        "| --- | ---: |",
        f"| cases (test parameterisations, doc cells) | {len(outcomes)} |",
        f"| cases that ran on the CPU | {ran} |",
        f"| kernels (`pallas_call`s executed) | {len(verdicts)} |",
        f"| imported by copyir | {imported} |",
        f"| agree | {counts['agrees']} |",
        f"| differ, known divergence | {counts['differs (known)']} |",
        f"| differ, unclassified | {counts['differs (unclassified)']} |",
        f"| not supported yet | {counts['not supported']} |",
        f"| copyir failed (a bug) | {counts['copyir failed']} |",
        "",
        "| kernels | tests | blocked by |",
        "| ---: | ---: | --- |",
    ]
    kernels: collections.Counter[str] = collections.Counter()
    tests: dict[str, set[str]] = collections.defaultdict(set)
    for outcome in outcomes:
        for unit in outcome.units:
            v = unit.result
            if isinstance(v, UnitVerdict) and v.status == "not supported":
                kernels[v.feature] += 1
                tests[v.feature].add(test_method(unit.test_id))
    lines += [
        f"| {n} | {len(tests[feature])} | {feature} |"
        for feature, n in kernels.most_common()
    ]
    known = collections.Counter(
        name for v in verdicts if isinstance(v, UnitVerdict) for name in v.known
    )
    if known:
        lines += ["", "| kernels | known divergence |", "| ---: | --- |"]
        lines += [f"| {n} | `{name}` |" for name, n in known.most_common()]
    return "\n".join(lines)


def main() -> None:
    import collect

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", help="paths relative to " + collect.TAG)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--test-timeout", type=float, default=120.0)
    parser.add_argument("--budget", type=float, default=3600.0)
    parser.add_argument("--source-budget", type=float, default=600.0)
    parser.add_argument("--save", type=Path, help="pickle the outcomes here")
    parser.add_argument("--load", type=Path, help="report outcomes saved before")
    args = parser.parse_args()
    start = time.monotonic()
    if args.load:
        outcomes = pickle.loads(args.load.read_bytes())
    else:
        outcomes = collect.collect(
            args.sources or None,
            jobs=args.jobs,
            test_timeout=args.test_timeout,
            budget=args.budget,
            source_budget=args.source_budget,
            on_unit="pallas_corpus:compare_unit",
        )
    if args.save:
        args.save.write_bytes(pickle.dumps(outcomes))
    print("\n".join(unit_lines(outcomes)))
    print()
    print(summary(outcomes))
    print()
    print(collect.summary(outcomes))
    print(f"\nwall time: {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    # As the module the workers import, so that their verdicts unpickle
    # as this module's `UnitVerdict`.
    import pallas_corpus

    pallas_corpus.main()
