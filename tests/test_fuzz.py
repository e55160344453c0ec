"""Fuzzing: random mutations of the examples through `parse` and `verify`.

Every example file (`examples/` and `examples/invalid/`, `.cpy` and `.mlir`),
plus the MLIR form of the smaller valid examples (named `<example>.cpy.mlir`),
is mutated at random, in-process: tokens deleted, swapped, duplicated,
inserted and replaced; bytes deleted, inserted and replaced (non-ASCII and
control characters included, decoded with errors="replace"); and structural
changes (truncation, repeated, deleted and swapped lines, brackets nested
5,000 deep, repeated token runs, very long tokens, explicit `loc(...)`
annotations, splices of two files). Each mutant must either verify (and then
lower to a DMA stream) or fail with a `CopyIRError` located at a file, a
line >= 1 and a column >= 1.
Anything else that escapes, any error without such a location, and any
mutant that runs longer than `TIME_LIMIT` (a hang), is an internal error.

The run is deterministic: mutant `i` comes from its own `random.Random`, so
one failure is reproduced with `mutant(i)` alone (from the tests directory):

    from test_fuzz import mutant, outcome
    name, text, how = mutant(1234)
    result, error = outcome(name, text)   # error.trace is the traceback
"""

from __future__ import annotations

import dataclasses
import random
import re
import signal
import threading
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest
from conftest import EXAMPLES, ROOT, VALID_EXAMPLES

import copyir
from copyir.cpy.keywords import KEYWORDS
from copyir.errors import CopyIRError, CopyIRWarning

SEED = 0x5EED_C0DE
MUTANTS = 12_000
MIN_MUTANTS = 10_000
CHUNK = 1_000
"""Mutants per test: the campaign is split into runs of consecutive mutants
(each mutant has its own seed, so a run is the same whoever runs it), which
pytest-xdist's workers share out."""
SHOWN_FAILURES = 5
TIME_LIMIT = 10.0
"""Seconds one mutant may take before it is stopped and counted as an internal
error. The limit only catches hangs, not slowness: the slowest legitimate
mutants take about 0.35 s alone but more than 1 s on a busy machine, so it
is generous."""
MAX_MLIR_SEED = 3_000
"""Only valid examples whose MLIR form is this short become extra seeds, so
that the large ones do not dominate the run time."""

TOKEN = re.compile(
    r"""[A-Za-z_][A-Za-z0-9_]*   # identifiers (and keywords)
      | [0-9]+                   # numbers
      | "(?:[^"\\\n]|\\.)*"?     # strings, unterminated ones included
      | \s+                      # whitespace
      | ->                       # the one two-character punctuator
      | .                        # any other character
    """,
    re.VERBOSE | re.DOTALL,
)

# Text that the examples do not contain, or not often: keywords and types of
# both syntaxes, edge-case numbers, locations, odd strings and characters.
UNUSUAL_CHARACTERS = [
    "\u00e9",
    "\u00df",
    "\uff58",  # fullwidth x
    "\u00b2",  # superscript two: numeric, but not for int()
    "\u0661",  # Arabic-Indic digit one
    "\U0001d7d8",  # double-struck digit zero
    "\U0001d465",
    "\u00a0",
    "\u0085",
    "\u2028",
    "\u2029",
    "\u202e",
    "\ufeff",
    "\ufffd",
    "\x00",
    "\x01",
    "\x08",
    "\x0b",
    "\x0c",
    "\x1b",
    "\x7f",
    "\r",
    "\t",
]
EXTRA_TOKENS = [
    *UNUSUAL_CHARACTERS,
    # The authoring syntax.
    *sorted(KEYWORDS),
    "add",
    "priority",
    "slot",
    "block",
    "buffers",
    "space",
    "hbm",
    "vmem",
    "smem",
    "any",
    "f32",
    "bf16",
    "i8",
    "i32",
    "f64",
    "u4",
    'loc("f.cpy":0:0)',
    'loc("f.cpy":-1:-1)',
    'loc("":1:1)',
    'loc("f.cpy":99999999999999999999:1)',
    "block=(None, None)",
    "block=()",
    "block=(Element(0),)",
    "block=(Blocked(-1), 1)",
    # A BufferedRef's cut blocks: padded (a kernel grid's) or rounded to the
    # TPU tiling, the rest of a slot kept (`keeps`).
    "padded",
    ", padded",
    "keeps",
    "block=(BoundedSlice(16, 12), 128)",
    "block=(8, Element(96))",
    "f64[16, 128]",
    "copy.buffered_ref padded",
    "[0:0]",
    "[::]",
    "[1:]",
    "[:, :, :]",
    "[-1]",
    "{}",
    "{a: x}",
    "()",
    "[]",
    "(x,)",
    # The MLIR form.
    "builtin.module",
    "copy.kernel",
    "copy.alloc",
    "copy.semaphore",
    "copy.dma",
    "copy.view",
    "copy.sem_index",
    "copy.sync_copy",
    "copy.buffered_ref",
    "copy.buffered_copy",
    '"copy.dma"',
    '"copy.kernel"',
    '"test.op"()',
    "func.func",
    "!copy.ref<8x128xf32, hbm>",
    "!copy.ref<0xf32, vmem>",
    "!copy.ref<f32, vmem>",
    "!copy.ref<?x8xf32, smem>",
    "!copy.sem",
    "!copy.sem_array<2>",
    "!copy.sem_array<>",
    "!copy.buffered<64x128xf32, [32, 128], buffers 0, vmem>",
    "!copy.buffered<8xf32, [None], buffers 2, vmem>",
    "%x",
    "%s",
    "%0",
    "%1#0",
    "@k",
    "^bb0",
    "^bb1(%a: i32):",
    "loc(unknown)",
    'loc("f.mlir":0:0)',
    'loc("f.mlir":1:1 to 2:2)',
    "loc(#loc)",
    "#loc = loc(unknown)",
    '<{action = "commit"}>',
    "<{}>",
    "{foo}",
    "attributes {}",
    "array<i32: 1, 2>",
    "array<i32: -1>",
    "array<i64>",
    "dense<1>",
    "i64",
    "index",
    "f16",
    "none",
    "() -> ()",
    "operandSegmentSizes",
    "src_tree",
    "dst_tree",
    '"(*, *)"',
    '"(*)"',
    '"[*,]"',
    '"{a: *, a: *}"',
    '"((((((*"',
    '"' + "(" * 100 + "*" + ",)" * 100 + '"',
    '""',
    '"\\"',
    '"\\n"',
    '"\\u00e9"',
    # Numbers.
    "0",
    "-0",
    "-1",
    "2",
    "-2",
    "63",
    "64",
    "65",
    "255",
    "256",
    "2147483648",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "1" + "0" * 40,
    "0x7f",
    "1e10",
    "1.5",
    "-1.0e-3",
    "nan",
    "inf",
    # Punctuation and comments.
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "<",
    ">",
    ",",
    ":",
    ";",
    "=",
    "->",
    "@",
    "%",
    "!",
    "#",
    "*",
    "?",
    "^",
    "\\",
    '"',
    "'",
    ".",
    "-",
    "\n",
    "\r\n",
    " ",
    "# comment",
    "// comment",
    "/*",
]
LOCATIONS = [
    'loc("f":1:1)',
    'loc("f":0:0)',
    'loc("f":0:1)',
    'loc("f":1:0)',
    'loc("f":-1:-1)',
    'loc("":1:1)',
    'loc("f":4294967296:1)',
    'loc("f":99999999999999999999:1)',
    "loc(unknown)",
    'loc("name")',
    'loc("name"("f":1:1))',
    'loc(fused["f":1:1, "g":2:2])',
    'loc(callsite("f":1:1 at "g":2:2))',
    'loc("f":1:1 to 2:2)',
    "loc(#loc)",
    "loc()",
    "loc(",
]
BRACKETS = ["(", "[", "{", "<", "((", "[(", "{a: "]
CLOSING = {"(": ")", "[": "]", "{": "}", "<": ">", "((": "))", "[(": ")]"}


@dataclass(frozen=True)
class Seed:
    name: str
    text: str

    @property
    def format(self) -> str:
        return "mlir" if self.name.endswith(".mlir") else "cpy"


@cache
def seeds() -> tuple[Seed, ...]:
    """The example files, and the MLIR form of the smaller valid examples."""
    paths = [
        p
        for folder in (EXAMPLES, EXAMPLES / "invalid")
        for p in sorted(folder.iterdir())
        if p.suffix in (".cpy", ".mlir")  # programs, not inputs or scripts
    ]
    found = [
        Seed(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in paths
    ]
    for path in VALID_EXAMPLES:
        name = str(path.relative_to(ROOT))
        text = copyir.to_text(copyir.parse(path.read_text(), filename=name), "mlir")
        if len(text) <= MAX_MLIR_SEED:
            found.append(Seed(name + ".mlir", text))
    return tuple(found)


GROUP_WEIGHTS = (35, 30, 35)
"""How often a mutant starts from a valid `.cpy` example, an invalid one, or
an `.mlir` file: the valid ones are what most often stays valid, and the few
`.mlir` files would otherwise be seldom picked."""


@cache
def seed_groups() -> tuple[tuple[Seed, ...], ...]:
    """The seeds as valid `.cpy` examples, invalid ones, and `.mlir` files."""
    valid = {str(p.relative_to(ROOT)) for p in VALID_EXAMPLES}
    cpy = [s for s in seeds() if s.format == "cpy"]
    return (
        tuple(s for s in cpy if s.name in valid),
        tuple(s for s in cpy if s.name not in valid),
        tuple(s for s in seeds() if s.format == "mlir"),
    )


@cache
def token_pool() -> tuple[str, ...]:
    """Every distinct non-blank token of the seeds, and the extra ones."""
    pool = {t for s in seeds() for t in TOKEN.findall(s.text) if not t.isspace()}
    return tuple(sorted(pool)) + tuple(EXTRA_TOKENS)


# -- mutations: each takes (rng, text) and returns (new text, description) ----


def _token_index(rng: random.Random, tokens: list[str]) -> int:
    """A random token, usually not whitespace."""
    i = rng.randrange(len(tokens))
    for _ in range(3):
        if not tokens[i].isspace():
            break
        i = rng.randrange(len(tokens))
    return i


def _a_token(rng: random.Random) -> str:
    if rng.random() < 0.3:
        return rng.choice(EXTRA_TOKENS)
    return rng.choice(token_pool())


def delete_token(rng, text):
    tokens = TOKEN.findall(text)
    i = _token_index(rng, tokens)
    deleted = tokens.pop(i)
    return "".join(tokens), f"delete token {i} {deleted!r}"


def swap_tokens(rng, text):
    tokens = TOKEN.findall(text)
    i = _token_index(rng, tokens)
    if rng.random() < 0.5:
        j = min(i + rng.choice((1, 2)), len(tokens) - 1)
    else:
        j = _token_index(rng, tokens)
    tokens[i], tokens[j] = tokens[j], tokens[i]
    return "".join(tokens), f"swap tokens {i} and {j}"


def duplicate_token(rng, text):
    tokens = TOKEN.findall(text)
    i = _token_index(rng, tokens)
    times = rng.choice((1, 1, 1, 2, 5, 50))
    tokens[i] = tokens[i] * (times + 1)
    return "".join(tokens), f"duplicate token {i} {tokens[i][:20]!r} x{times}"


def insert_token(rng, text):
    tokens = TOKEN.findall(text)
    i = rng.randrange(len(tokens) + 1)
    new = _a_token(rng)
    if rng.random() < 0.5:
        new = rng.choice(("", " ")) + new + rng.choice(("", " "))
    tokens.insert(i, new)
    return "".join(tokens), f"insert token {new!r} at {i}"


def replace_token(rng, text):
    tokens = TOKEN.findall(text)
    i = _token_index(rng, tokens)
    old, tokens[i] = tokens[i], _a_token(rng)
    return "".join(tokens), f"replace token {i} {old!r} with {tokens[i]!r}"


def _some_bytes(rng: random.Random) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:
        return bytes([rng.randrange(256)])
    if kind == 1:
        return bytes([rng.choice([*range(32), 127])])
    if kind == 2:
        return rng.choice(UNUSUAL_CHARACTERS).encode()
    code = rng.randrange(0x80, 0x110000)
    if 0xD800 <= code < 0xE000:
        code = 0xFFFD
    return chr(code).encode()


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def delete_bytes(rng, text):
    data = text.encode()
    i = rng.randrange(len(data))
    n = rng.choice((1, 1, 1, 2, 3, 8))
    return _decode(data[:i] + data[i + n :]), f"delete {n} bytes at {i}"


def insert_bytes(rng, text):
    data = text.encode()
    i = rng.randrange(len(data) + 1)
    new = b"".join(_some_bytes(rng) for _ in range(rng.choice((1, 1, 1, 2, 4))))
    return _decode(data[:i] + new + data[i:]), f"insert bytes {new!r} at {i}"


def replace_bytes(rng, text):
    data = text.encode()
    i = rng.randrange(len(data))
    new = _some_bytes(rng)
    n = rng.choice((1, 1, 2))
    return _decode(data[:i] + new + data[i + n :]), f"replace {n} bytes at {i}"


def flip_bit(rng, text):
    data = bytearray(text.encode())
    i = rng.randrange(len(data))
    bit = rng.randrange(8)
    data[i] ^= 1 << bit
    return _decode(bytes(data)), f"flip bit {bit} of byte {i}"


def truncate(rng, text):
    i = rng.randrange(len(text))
    return text[:i], f"truncate at {i}"


def repeat_line(rng, text):
    lines = text.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    times = rng.choice((1, 1, 2, 10, 100))
    lines[i] = lines[i] * (times + 1)
    return "".join(lines), f"repeat line {i + 1} x{times}"


def delete_line(rng, text):
    lines = text.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    del lines[i]
    return "".join(lines), f"delete line {i + 1}"


def swap_lines(rng, text):
    lines = text.splitlines(keepends=True)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines), f"swap lines {i + 1} and {j + 1}"


def nest(rng, text):
    """Deep nesting at a token boundary, balanced or not."""
    tokens = TOKEN.findall(text)
    i = rng.randrange(len(tokens) + 1)
    opening = rng.choice(BRACKETS)
    depth = rng.choice((65, 100, 1000, 5000))
    middle = rng.choice(("", "x", "*", "%x", "1", "x,"))
    new = opening * depth + middle
    balanced = opening in CLOSING and rng.random() < 0.7
    if balanced:
        new += CLOSING[opening] * depth
    tokens.insert(i, new)
    kind = "balanced" if balanced else "unbalanced"
    return "".join(tokens), f"nest {opening!r} x{depth} ({kind}) at token {i}"


def repeat_span(rng, text):
    """A few tokens in a row, repeated: `[0]` becomes `[0][0][0]...`."""
    tokens = TOKEN.findall(text)
    i = _token_index(rng, tokens)
    j = min(i + rng.randrange(1, 7), len(tokens))
    times = rng.choice((1, 2, 10, 100, 600))
    span = "".join(tokens[i:j])
    tokens[i:j] = [span * (times + 1)]
    return "".join(tokens), f"repeat tokens {i}:{j} {span[:30]!r} x{times}"


def add_location(rng, text):
    """An explicit location, odd or not, at the end of a line."""
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    new = rng.choice(LOCATIONS)
    lines[i] = lines[i].rstrip() + " " + new
    return "\n".join(lines), f"add {new} to line {i + 1}"


def widen(rng, text):
    """A run of blanks, a number or any token, made very long."""
    tokens = TOKEN.findall(text)
    length = rng.choice((100, 1000, 5000))
    kind = rng.choice(("blank", "number", "any"))
    numbers = [i for i, t in enumerate(tokens) if t.isdigit()]
    if kind == "number" and numbers:
        i = rng.choice(numbers)
        tokens[i] = rng.choice("123456789") + "0" * length
    else:
        i = rng.randrange(len(tokens))
        if kind == "any" and not tokens[i].isspace():
            tokens[i] = tokens[i] * (length // len(tokens[i]) + 1)
        else:
            tokens[i] = rng.choice((" ", "\t", " \t")) * length
    return "".join(tokens), f"widen token {i} to {len(tokens[i])} characters"


def splice(rng, text, other):
    """The start of this seed, the end of another one of the same format."""
    i, j = rng.randrange(len(text) + 1), rng.randrange(len(other.text) + 1)
    return text[:i] + other.text[j:], f"splice at {i} with {other.name} from {j}"


Mutation = Callable[[random.Random, str], tuple[str, str]]
MUTATIONS: list[tuple[Mutation, int]] = [
    (delete_token, 6),
    (swap_tokens, 5),
    (duplicate_token, 5),
    (insert_token, 8),
    (replace_token, 8),
    (delete_bytes, 4),
    (insert_bytes, 5),
    (replace_bytes, 4),
    (flip_bit, 2),
    (truncate, 3),
    (repeat_line, 3),
    (delete_line, 3),
    (swap_lines, 2),
    (nest, 2),
    (repeat_span, 2),
    (add_location, 2),
    (widen, 2),
]


def mutant(i: int) -> tuple[str, str, str]:
    """Mutant `i` of the run: (file name, text, how it was made)."""
    rng = random.Random(SEED * 1_000_003 + i)
    seed = rng.choice(rng.choices(seed_groups(), weights=GROUP_WEIGHTS)[0])
    text, steps = seed.text, []
    count = rng.choices((1, 2, 3, 4), weights=(70, 15, 10, 5))[0]
    for _ in range(count):
        if not text:
            break
        if rng.random() < 0.03:
            others = [s for s in seeds() if s.format == seed.format]
            text, step = splice(rng, text, rng.choice(others))
        else:
            mutation = rng.choices(*zip(*MUTATIONS, strict=True))[0]
            text, step = mutation(rng, text)
        steps.append(step)
    return seed.name, text, f"{seed.name}: " + "; ".join(steps)


# -- running ------------------------------------------------------------------


class TooSlow(BaseException):
    """Raised from a timer signal in a mutant that runs too long; a
    BaseException, so that no `except Exception` in the code under test
    can swallow it."""


def _too_slow(signum, frame):
    raise TooSlow(f"took more than {TIME_LIMIT} s")


def _can_time_out() -> bool:
    """Only the main thread gets signals; and leave any running timer be."""
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    )


@dataclass(frozen=True)
class Internal:
    """An internal error: what escaped (or lacked a location), and where."""

    kind: str
    where: str
    trace: str

    @property
    def signature(self) -> str:
        return f"{self.kind} at {self.where}" if self.where else self.kind


def outcome(name: str, text: str) -> tuple[str, Internal | None]:
    """("valid" | "invalid" | "internal", the internal error if any)."""
    if not _can_time_out():
        return _classify(name, text)
    previous = signal.signal(signal.SIGALRM, _too_slow)
    try:
        signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT)
        try:
            return _classify(name, text)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except TooSlow as err:
        return "internal", _internal(f"hang: {err}", err, innermost=True)
    finally:
        signal.signal(signal.SIGALRM, previous)


def _classify(name: str, text: str) -> tuple[str, Internal | None]:
    try:
        module = copyir.parse(text, filename=name)
        copyir.verify(module)
        for kernel in copyir.kernels(module):  # valid programs lower, too
            copyir.to_stream(copyir.lower(module, kernel.kernel_name))
    except CopyIRError as err:
        problem = _location_problem(err)
        if problem is None:
            return "invalid", None
        # Grouped by what is wrong with the location, not by the raising site.
        return "internal", _internal(f"CopyIRError {problem}", err, site=False)
    except Exception as err:
        return "internal", _internal(type(err).__qualname__, err)
    return "valid", None


def _location_problem(err: CopyIRError) -> str | None:
    """What keeps the error's location from pointing into a file, if anything."""
    loc = err.loc
    if loc is None:
        return "without a location"
    if not isinstance(loc.file, str) or not loc.file:
        return "with no file name"
    if not isinstance(loc.line, int) or not isinstance(loc.col, int):
        return "with a line or column that is not an integer"
    if loc.line < 1 or loc.col < 1:
        return "at a line or column < 1"
    return None


def _internal(
    kind: str, err: BaseException, site: bool = True, innermost: bool = False
) -> Internal:
    """The error, and where: its innermost frames in xDSL and in copyir (or,
    for a hang, the frame it was stopped in)."""
    frames = traceback.extract_tb(err.__traceback__)
    if innermost:
        packages = ("xdsl|lark|copyir|passes",)
    else:
        packages = ("xdsl|lark", "copyir|passes")
    where = []
    for package in packages:
        pattern = rf"[/\\]({package})[/\\]"
        ours = [f for f in frames if re.search(pattern, f.filename)]
        if ours:
            frame = ours[-1]
            path = re.split(r"site-packages[/\\]|main[/\\]", frame.filename)[-1]
            where.append(f"{path}:{frame.lineno} ({frame.name})")
    trace = "".join(traceback.format_exception(err))
    return Internal(kind, " via ".join(where) if site else "", trace)


@dataclass
class Failure:
    index: int
    name: str
    text: str
    how: str
    error: Internal

    def report(self) -> str:
        shown = repr(self.text)
        if len(shown) > 2_000:
            shown = shown[:2_000] + f"... ({len(self.text)} characters)"
        return (
            f"--- mutant({self.index}): {self.how}\n"
            f"name = {self.name!r}\ntext = {shown}\n{self.error.trace}"
        )


def test_the_campaign_is_at_least_min_mutants_of_enough_seeds():
    assert len(seeds()) >= 40
    assert MUTANTS >= MIN_MUTANTS
    assert MUTANTS % CHUNK == 0
    assert STREAM_MUTANTS % CHUNK == 0


@pytest.mark.parametrize(
    "first", range(0, MUTANTS, CHUNK), ids=lambda first: f"mutants-{first}"
)
def test_mutated_examples_verify_or_fail_with_a_located_error(first):
    counts: Counter[str] = Counter()
    failures: list[Failure] = []
    start = time.perf_counter()
    for i in range(first, first + CHUNK):
        name, text, how = mutant(i)
        result, error = outcome(name, text)
        counts[result] += 1
        if error is not None:
            failures.append(Failure(i, name, text, how, error))
    elapsed = time.perf_counter() - start
    summary = (
        f"{sum(counts.values())} mutants in {elapsed:.1f}s: "
        f"{counts['valid']} valid, {counts['invalid']} invalid, "
        f"{counts['internal']} internal errors"
    )
    print(summary)

    assert sum(counts.values()) == CHUNK, summary
    # The generator has not degenerated into only one kind of outcome.
    assert counts["valid"] >= CHUNK // 20, summary
    assert counts["invalid"] >= CHUNK // 4, summary

    # The first failure of each kind, the first few kinds in full.
    kinds = Counter(f.error.signature for f in failures)
    first = {}
    for failure in failures:
        first.setdefault(failure.error.signature, failure)
    table = "\n".join(f"{n:6} x {signature}" for signature, n in kinds.items())
    shown = "\n".join(f.report() for f in list(first.values())[:SHOWN_FAILURES])
    assert counts["internal"] == 0, (
        f"{summary}, of {len(kinds)} kinds:\n{table}\n"
        f"The first of the first {SHOWN_FAILURES} kinds:\n{shown}"
    )


# -- lowered streams -------------------------------------------------------------

STREAM_MUTANTS = 3_000


@cache
def stream_seeds() -> tuple[Seed, ...]:
    """The `.dma` text of every valid example, and the hand-made stream."""
    found = []
    for path in VALID_EXAMPLES:
        name = str(path.relative_to(ROOT))
        program = copyir.lower(copyir.parse(path.read_text(), filename=name))
        found.append(Seed(name.replace(".cpy", ".dma"), copyir.dma_text(program)))
    for path in sorted((EXAMPLES / "invalid" / "run").glob("*.dma")):
        found.append(Seed(str(path.relative_to(ROOT)), path.read_text()))
    return tuple(found)


def _run_stream_text(name: str, text: str) -> str:
    from copyir.backends.interpreter import fill_inputs, run_stream

    from copyir.stream import read_dma

    stream = read_dma(text, name)
    stream.validate()
    with warnings.catch_warnings():  # a warning leaves the run going: valid
        warnings.simplefilter("ignore", CopyIRWarning)
        run_stream(stream, fill_inputs(stream, {}, "random"), "random")
    return "valid"


@pytest.mark.parametrize(
    "first", range(0, STREAM_MUTANTS, CHUNK), ids=lambda first: f"mutants-{first}"
)
def test_mutated_streams_run_or_fail_with_a_located_error(first):
    mutations = [m for m, _ in MUTATIONS]
    weights = [w for _, w in MUTATIONS]
    counts: Counter[str] = Counter()
    failures: list[Failure] = []
    for i in range(first, first + CHUNK):
        rng = random.Random(SEED * 7 + i)
        seed = rng.choice(stream_seeds())
        text, how = rng.choices(mutations, weights)[0](rng, seed.text)
        try:
            result = _run_stream_text(seed.name, text)
        except CopyIRError as err:
            problem = _location_problem(err)
            result = "invalid" if problem is None else "internal"
            if problem is not None:
                failures.append(
                    Failure(
                        i, seed.name, text, how, _internal(problem, err, site=False)
                    )
                )
        except Exception as err:
            result = "internal"
            failures.append(
                Failure(i, seed.name, text, how, _internal(type(err).__qualname__, err))
            )
        counts[result] += 1
    summary = f"stream mutants {first} to {first + CHUNK - 1}: {dict(counts)}"
    assert counts["valid"] >= CHUNK // 20, summary
    assert counts["invalid"] >= CHUNK // 4, summary
    shown = "\n".join(f.report() for f in failures[:SHOWN_FAILURES])
    assert not failures, f"{summary}\n{shown}"


# -- hostile table columns ---------------------------------------------------------

HOSTILE = (-1, 0, 1, 2**40, 2**31 - 1, -(2**63))


def _hostile_tables(table):
    """The table with one cell at a time set to each hostile value (and the
    largest its column holds): every column of every row, each vector slot."""
    for row in range(len(table)):
        for column in table.dtype.names:
            kind = table.dtype[column].base
            values = (*HOSTILE, np.iinfo(kind).max) if kind.kind in "iu" else (0, 1)
            cells = table[column][row]
            for slot in range(cells.size) if cells.ndim else (None,):
                for value in values:
                    mutated = table.copy()
                    cell = np.array(value, np.int64).astype(kind)
                    if slot is None:
                        mutated[column][row] = cell
                    else:
                        mutated[column][row, slot] = cell
                    if not np.array_equal(mutated, table):
                        yield f"row {row} {column}[{slot}] = {value}", mutated


def test_every_column_set_to_hostile_values_is_checked_or_runs():
    """A start's dtype of 100 was an IndexError, a loop reference in a
    stream without loops one in the rebuild, a compute row of rank 0 a
    zip() error: each cell of a lowered stream with loops and computations,
    set to hostile values, gives a `CopyIRError` or a protocol verdict."""
    from copyir.backends.interpreter import check_stream

    stream = copyir.to_stream(copyir.lower(EXAMPLES / "loop_compute.cpy"))
    failures: list[tuple[str, Internal]] = []
    for how, table in _hostile_tables(stream.instructions):
        mutated = dataclasses.replace(stream, instructions=table)
        try:
            check_stream(mutated)
        except CopyIRError:
            pass
        except Exception as err:
            failures.append((how, _internal(type(err).__qualname__, err)))
    shown = "\n".join(f"{how}: {error.signature}" for how, error in failures)
    assert not failures, f"{shown}\nThe first:\n{failures[0][1].trace}"
