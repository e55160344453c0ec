"""Pytree structures for `sync_copy`: tuples, lists and records of refs.

A `TreeDef` is the structure without the leaves, as in JAX. Leaf order is
JAX's: tuples and lists in order, records by sorted key. A tuple and a list
are different structures. In the IR a structure is stored as its spec
string, where `*` marks a leaf: `(*, {x: *, y: *})`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from copyir import errors
from copyir.errors import CopyIRError

Kind = Literal["leaf", "tuple", "list", "record"]
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPEC_TOKEN = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*|[*(){}\[\],:])")
BRACKETS = {"tuple": "()", "list": "[]", "record": "{}"}
MAX_DEPTH = 64
"""Trees nest at most this deep, so that no input can exhaust the stack."""


@dataclass(frozen=True)
class TreeDef:
    """The structure of a pytree; records keep their keys sorted."""

    kind: Kind
    children: tuple[TreeDef, ...] = ()
    keys: tuple[str, ...] = ()

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(child.num_leaves for child in self.children)

    def leaf_paths(self) -> list[str]:
        """JAX-style key paths of the leaves, in leaf order: `[0]['x']`."""
        if self.kind == "leaf":
            return [""]
        labels = (
            [f"[{key!r}]" for key in self.keys]
            if self.kind == "record"
            else [f"[{i}]" for i in range(len(self.children))]
        )
        return [
            label + path
            for label, child in zip(labels, self.children, strict=True)
            for path in child.leaf_paths()
        ]

    def render(self, leaves: Sequence[str]) -> str:
        """The tree written out with the given leaf texts, in leaf order."""
        it = iter(leaves)
        text = self._render(lambda: next(it))
        return text

    def _render(self, leaf: Callable[[], str]) -> str:
        if self.kind == "leaf":
            return leaf()
        parts = [child._render(leaf) for child in self.children]
        if self.kind == "record":
            parts = [f"{k}: {p}" for k, p in zip(self.keys, parts, strict=True)]
        inner = ", ".join(parts)
        if self.kind == "tuple" and len(parts) == 1:
            inner += ","
        opening, closing = BRACKETS[self.kind]
        return f"{opening}{inner}{closing}"

    @property
    def spec(self) -> str:
        return self._render(lambda: "*")


LEAF = TreeDef("leaf")


def record(items: Sequence[tuple[str, TreeDef]]) -> TreeDef:
    """A record node with its keys in JAX's (sorted) order."""
    seen: set[str] = set()
    for key, _ in items:
        if key in seen:
            raise CopyIRError(errors.DUPLICATE_KEY.format(key=key))
        seen.add(key)
    ordered = sorted(items, key=lambda item: item[0])
    return TreeDef(
        "record", tuple(child for _, child in ordered), tuple(k for k, _ in ordered)
    )


def flatten(obj: object) -> tuple[TreeDef, list]:
    """Split nested tuples, lists and dicts into a structure and its leaves.

    Like `jax.tree.flatten`: anything that is not a tuple, list or dict is a
    leaf, and dict entries come in sorted key order.
    """
    leaves: list = []

    def walk(node: object, depth: int) -> TreeDef:
        if depth > MAX_DEPTH:
            raise CopyIRError(errors.NESTED_TOO_DEEP.format(limit=MAX_DEPTH))
        if isinstance(node, dict):
            keys = tuple(sorted(node))
            children = tuple(walk(node[k], depth + 1) for k in keys)
            return TreeDef("record", children, keys)
        if isinstance(node, tuple | list):
            kind: Kind = "tuple" if isinstance(node, tuple) else "list"
            return TreeDef(kind, tuple(walk(child, depth + 1) for child in node))
        leaves.append(node)
        return LEAF

    return walk(obj, 0), leaves


@functools.lru_cache(maxsize=1024)
def parse_spec(spec: str) -> TreeDef:
    """Read a spec string such as `(*, {x: *})` back into a TreeDef.

    Cached: a TreeDef is immutable, and a program repeats its few structures.
    """
    tokens, pos, end = [], 0, len(spec.rstrip())
    while pos < end:
        match = _SPEC_TOKEN.match(spec, pos)
        if match is None:
            raise _malformed(spec, f"unexpected character at {pos}")
        tokens.append(match.group(1))
        pos = match.end()
    tree, rest = _parse_tokens(spec, tokens, 0, 0)
    if rest != len(tokens):
        raise _malformed(spec, "trailing text")
    return tree


def _malformed(spec: str, why: str) -> CopyIRError:
    return CopyIRError(errors.MALFORMED_TREE.format(spec=spec, why=why))


def _parse_tokens(
    spec: str, tokens: list[str], i: int, depth: int
) -> tuple[TreeDef, int]:
    if depth > MAX_DEPTH:
        raise CopyIRError(errors.NESTED_TOO_DEEP.format(limit=MAX_DEPTH))
    if i >= len(tokens):
        raise _malformed(spec, "unexpected end")
    token = tokens[i]
    if token == "*":
        return LEAF, i + 1
    closing = {"(": ")", "[": "]", "{": "}"}.get(token)
    if closing is None:
        raise _malformed(spec, f"unexpected {token!r}")
    items: list[tuple[str, TreeDef]] = []
    i += 1
    trailing_comma = False
    while i < len(tokens) and tokens[i] != closing:
        key = ""
        if token == "{":
            if not _KEY.fullmatch(tokens[i]) or tokens[i + 1 : i + 2] != [":"]:
                raise _malformed(spec, "expected 'key:' in a record")
            key, i = tokens[i], i + 2
        child, i = _parse_tokens(spec, tokens, i, depth + 1)
        items.append((key, child))
        trailing_comma = tokens[i : i + 1] == [","]
        if trailing_comma:
            i += 1
        elif tokens[i : i + 1] != [closing]:
            raise _malformed(spec, f"expected ',' or {closing!r}")
    if i >= len(tokens):
        raise _malformed(spec, f"missing {closing!r}")
    if token == "(" and len(items) == 1 and not trailing_comma:
        raise _malformed(spec, "a one-element tuple needs a trailing comma")
    if token == "{":
        try:
            return record(items), i + 1
        except CopyIRError as err:
            raise _malformed(spec, str(err)) from None
    kind: Kind = "tuple" if token == "(" else "list"
    return TreeDef(kind, tuple(child for _, child in items)), i + 1
