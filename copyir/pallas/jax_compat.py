"""What the Pallas frontend reads differently from one JAX version to another.

The frontend reads the jaxprs of JAX 0.10.2 and 0.12 (docs/pallas.md,
"JAX versions"). Where the two write a construct differently, the reading
that depends on the version lives here, in one place, and takes 0.12's form
first; everything else reads both versions alike.
"""

from __future__ import annotations

from typing import Any


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


__all__ = ["scan_counts"]
