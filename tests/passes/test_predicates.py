"""The predicate of an instruction under nested `when`s: the product of
the conditions with the conjunctions that hold nowhere in the loops'
domain dropped as they are made. It must hold at exactly the points the
whole product holds at, and stay small where nesting multiplies
(`when i != c` n deep was 2**n sets; tests/pallas/test_attack.py found it
exponential in time)."""

from __future__ import annotations

import itertools

import numpy as np
from copyir.passes.convert_copy_to_dma import _Context, possible
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.ir.affine import (
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineExpr,
    AffineSet,
)

from copyir.index import comparison, holds

OPS = ("<", "<=", ">", ">=", "==", "!=")


@st.composite
def conditions(draw):
    """Up to 6 nested conditions over 1 or 2 loops (trips up to 7), each
    an or of sets of `a*i + b*j + c op k` comparisons."""
    trips = tuple(draw(st.lists(st.integers(1, 7), min_size=1, max_size=2)))
    width = len(trips)
    nested = []
    for _ in range(draw(st.integers(1, 6))):
        a = [draw(st.integers(-2, 2)) for _ in range(width)]
        expr = sum(
            (AffineExpr.dimension(k) * a[k] for k in range(width)),
            AffineExpr.constant(draw(st.integers(-3, 3))),
        )
        op = draw(st.sampled_from(OPS))
        bound = AffineExpr.constant(draw(st.integers(-2, 8)))
        sets = tuple(AffineSet(width, 0, tuple(c)) for c in comparison(op, expr, bound))
        nested.append(sets)
    return trips, tuple(nested)


def points(trips):
    grid = np.meshgrid(*[np.arange(t) for t in trips], indexing="ij")
    return [g.ravel() for g in grid]


@settings(max_examples=150, deadline=None)
@given(conditions())
def test_the_pruned_predicate_holds_where_the_whole_product_does(case):
    trips, nested = case
    context = _Context(tuple(range(len(trips))), nested, (0,) * len(trips), trips)
    pruned = [s.data for s in context.predicate().data]
    whole = [
        AffineSet(len(trips), 0, tuple(c for s in combo for c in s.constraints))
        for combo in itertools.product(*nested)
    ]
    dims = points(trips)
    assert np.array_equal(holds(pruned, dims), holds(whole, dims))
    assert len(pruned) <= len(whole)


def test_nested_inequalities_on_one_index_stay_linear():
    """`when i != c` 16 deep over a loop of 8: the product has 65,536 sets,
    the pruned predicate one per region the constants cut the loop into."""
    depth = 16
    i = AffineExpr.dimension(0)
    nested = tuple(
        tuple(
            AffineSet(1, 0, tuple(c))
            for c in comparison("!=", i, AffineExpr.constant(c))
        )
        for c in range(depth)
    )
    context = _Context((0,), nested, (0,), (8,))
    sets = [s.data for s in context.predicate().data]
    assert len(sets) <= depth + 1
    assert holds(sets, points((8,))).tolist() == [False] * 8  # i < 8 <= 15


def test_possible_proves_only_empty_ranges():
    i = AffineExpr.dimension(0)
    ge, eq = AffineConstraintKind.ge, AffineConstraintKind.eq
    zero = AffineExpr.constant(0)
    assert not possible(
        [
            AffineConstraintExpr(ge, i - 3, zero),
            AffineConstraintExpr(ge, AffineExpr.constant(1) - i, zero),
        ],
        (8,),
    )
    assert not possible([AffineConstraintExpr(eq, i * 2 - 3, zero)], (8,))  # 2i = 3
    assert not possible([AffineConstraintExpr(ge, i - 8, zero)], (8,))  # i < 8
    assert possible([AffineConstraintExpr(eq, i * 2 - 4, zero)], (8,))
    # two indices: nothing is proved
    j = AffineExpr.dimension(1)
    assert possible([AffineConstraintExpr(ge, i + j - 100, zero)], (8, 8))
