"""The `.npz` form: a stream's tables as numpy arrays, with a JSON header.

The header names the format and its version; a file of another version is
one clear error (`errors.STREAM_VERSION`), not a table misread.
"""

from __future__ import annotations

import json
import zipfile
from contextlib import ExitStack
from os import PathLike
from typing import TypeVar

import numpy as np
from xdsl.dialects.builtin import AffineMapAttr, AffineSetAttr

from copyir import errors
from copyir.dma_schema import Compute, OperandBox, instruction_dtype
from copyir.errors import CopyIRError, Loc
from copyir.stream.model import Buffer, CountedLoop, Origin, SemaphoreName, Stream

FORMAT = "copyir-dma"
FORMAT_VERSION = 6
"""3: instruction columns laid out by `copyir.dma_schema`; 4: opaque
computations (columns `label` and `writes`, the header's `labels`); 5:
stale invalidations (column `stale`); 6: opaque writes that keep the
bytes (column `keeps`)."""


def save_npz(stream: Stream, file) -> None:
    """The binary form: the tables as numpy arrays in one `.npz`."""
    meta = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "kernel": stream.kernel,
        "target": stream.target,
        "semaphores": stream.semaphores,
        "buffers": [
            [b.name, b.space, b.address, b.dtype, list(b.shape), b.param]
            + ([b.loc.file, b.loc.line, b.loc.col] if b.loc else [])
            for b in stream.buffers
        ],
        "semaphore_names": [
            [n.name, n.first, list(n.shape)] for n in stream.semaphore_names
        ],
        "origins": [
            [o.loc.file, o.loc.line, o.loc.col, o.detail]
            if o.loc
            else [None, 0, 0, o.detail]
            for o in stream.origins
        ],
        "loops": [[x.name, x.trip_count, x.parallel, x.parent] for x in stream.loops],
        "maps": [str(m) for m in stream.maps],
        "predicates": [[str(s) for s in sets] for sets in stream.predicates],
        "computes": [
            [
                c.expression,
                [[o.space, o.address, o.map, list(o.strides)] for o in c.operands],
            ]
            for c in stream.computes
        ],
        "labels": stream.labels,
    }
    np.savez_compressed(
        file,
        meta=np.array(json.dumps(meta)),
        instructions=stream.instructions,
    )


def load_npz(file, name: str = "<input>") -> Stream:
    """A stream from its binary form; what cannot be decoded is one located
    error. Its fields are checked by `copyir.validate` before it runs."""
    try:
        # Opened here, not by numpy: np.load leaves a file it opened open
        # when the file is not a zip archive.
        with ExitStack() as stack:
            if isinstance(file, (str, PathLike)):
                file = stack.enter_context(open(file, "rb"))
            data = stack.enter_context(np.load(file, allow_pickle=False))
            if set(data.files) != {"meta", "instructions"}:
                raise ValueError("it is not a copyir DMA stream")
            meta = json.loads(str(data["meta"]))
            instructions = data["instructions"]
        stream = _decode(meta, instructions)
    except (  # what malformed data makes numpy, json and the unpacking raise
        OSError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        RecursionError,
        zipfile.BadZipFile,
    ) as err:
        raise CopyIRError(
            errors.CANNOT_READ_STREAM.format(name=name, why=err), Loc(name, 1, 1)
        ) from None
    stream.source = name
    return stream


def _decode(meta: object, instructions: np.ndarray) -> Stream:
    """The stream from the JSON header and the table, every field's type
    checked: a header of the wrong shape raises ValueError."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError("it is not a copyir DMA stream")
    if meta.get("version") != FORMAT_VERSION:
        raise ValueError(
            errors.STREAM_VERSION.format(
                found=meta.get("version"), expected=FORMAT_VERSION
            )
        )
    if instructions.ndim != 1 or instructions.dtype.names is None:
        raise ValueError("its instruction table is not a table")
    shape = (
        instructions.dtype.fields.get("shape") if instructions.dtype.fields else None
    )
    rank = shape[0].shape[0] if shape is not None and shape[0].shape else 0
    if rank < 1 or instructions.dtype != instruction_dtype(rank):
        raise ValueError("unexpected instruction table layout")
    buffers = []
    for entry in _list(meta, "buffers"):
        if not isinstance(entry, list) or len(entry) not in (6, 9):
            raise ValueError("a buffer entry of the wrong shape")
        name, space, address, dtype, dims, param = entry[:6]
        loc = Loc(*_fields(entry[6:], (str, int, int))) if entry[6:] else None
        buffers.append(
            Buffer(
                _field(name, str),
                _field(space, str),
                _field(address, int),
                _field(dtype, str),
                _ints(dims),
                _field(param, bool),
                loc,
            )
        )
    origins = []
    for entry in _list(meta, "origins"):
        if not isinstance(entry, list) or len(entry) != 4:
            raise ValueError("an origin entry of the wrong shape")
        file, line, col, detail = entry
        loc = (
            Loc(*_fields([file, line, col], (str, int, int)))
            if file is not None
            else None
        )
        origins.append(Origin(loc, _field(detail, str)))
    loops = []
    for entry in _list(meta, "loops", []):
        if not isinstance(entry, list) or len(entry) != 4:
            raise ValueError("a loop entry of the wrong shape")
        loops.append(CountedLoop(*_fields(entry, (str, int, bool, int))))
    maps = [
        _affine(AffineMapAttr, _field(m, str)).data for m in _list(meta, "maps", [])
    ]
    predicates = []
    for entry in _list(meta, "predicates", []):
        if not isinstance(entry, list):
            raise ValueError("a predicate that is not a list")
        predicates.append(
            tuple(_affine(AffineSetAttr, _field(x, str)).data for x in entry)
        )
    computes = []
    for entry in _list(meta, "computes", []):
        if not isinstance(entry, list) or len(entry) != 2:
            raise ValueError("a compute entry of the wrong shape")
        expression, operands = entry
        if not isinstance(operands, list):
            raise ValueError("compute operands that are not a list")
        parts = []
        for operand in operands:
            if not isinstance(operand, list) or len(operand) != 4:
                raise ValueError("a compute operand of the wrong shape")
            space, address, map_id, strides = operand
            parts.append(
                OperandBox(
                    _field(space, str),
                    _field(address, int),
                    _field(map_id, int),
                    _ints(strides),
                )
            )
        computes.append(Compute(_field(expression, str), tuple(parts)))
    labels = [_field(label, str) for label in _list(meta, "labels", [])]
    names = []
    for entry in _list(meta, "semaphore_names", []):
        if not isinstance(entry, list) or len(entry) != 3:
            raise ValueError("a semaphore entry of the wrong shape")
        name, first, shape = entry
        names.append(SemaphoreName(_field(name, str), _field(first, int), _ints(shape)))
    return Stream(
        _field(meta.get("kernel"), str),
        _field(meta.get("target"), str),
        _field(meta.get("semaphores"), int),
        buffers,
        instructions,
        origins,
        names,
        loops=loops,
        maps=maps,
        predicates=predicates,
        computes=computes,
        labels=labels,
    )


Affine = TypeVar("Affine", AffineMapAttr, AffineSetAttr)
T = TypeVar("T")


def _affine(attr: type[Affine], text: str) -> Affine:
    """An affine map or set from its text, through xDSL's parser."""
    kind = attr.name
    from xdsl.context import Context
    from xdsl.parser import Parser
    from xdsl.utils.exceptions import ParseError

    try:
        attribute = Parser(Context(), f"{kind}<{text}>").parse_attribute()
    except ParseError as err:
        raise ValueError(f"bad {kind} {text!r}: {err.msg}") from None
    except ZeroDivisionError:  # xDSL folds `1 mod 0` as it parses
        raise ValueError(f"bad {kind} {text!r}: {errors.DIVIDES_BY_ZERO}") from None
    except NotImplementedError:  # and refuses `d0 * d1`
        raise ValueError(f"bad {kind} {text!r}: {errors.SEMI_AFFINE}") from None
    if not isinstance(attribute, attr):
        raise ValueError(f"bad {kind} {text!r}")
    return attribute


def _list(meta: dict, key: str, default=None) -> list:
    value = meta.get(key, default)
    if not isinstance(value, list):
        raise ValueError(f"its {key} are not a list")
    return value


def _field(value: object, kind: type[T]) -> T:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{value!r} is not a {kind.__name__}")
    return value


def _fields(values: list, kinds: tuple) -> list:
    return [_field(v, k) for v, k in zip(values, kinds, strict=True)]


def _ints(values: object) -> tuple[int, ...]:
    if not isinstance(values, list):
        raise ValueError(f"{values!r} is not a list of integers")
    return tuple(_field(v, int) for v in values)
