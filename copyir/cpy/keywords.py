"""The words of the `.cpy` language, in one place: the grammar spells them
(tests/cpy/test_keywords.py checks the list against grammar.lark), the parser's
did-you-means offer them, and the printer names no value but a kernel's
parameter with one."""

STATEMENT_WORDS = (
    "copy_start",
    "copy_wait",
    "dma",
    "sync_copy",
    "buffered_copy",
    "for",
    "when",
    "pipeline",
    "scope",
    "invalidate",
    "opaque",
)
"""The words that start a statement."""
VALUE_WORDS = ("alloc", "semaphore", "buffered_ref", "async_copy", "window")
"""The words that start the right-hand side of `name = ...`."""
GRAMMAR_WORDS = frozenset(
    (
        *STATEMENT_WORDS,
        *VALUE_WORDS,
        *("kernel", "in", "out", "inout", "and", "or", "not", "loc", "stale", "keeps"),
    )
)
"""Every word the grammar spells: with the statements' and values' words, a
kernel's, a loop's and a pipeline's headers, conditions and locations."""
FLOAT_WORDS = ("nan", "inf")
"""Float literals a computation may name (as `jnp.nan`, `jnp.inf`): the
printer writes them for the padding of a cut block."""
BLOCK_WORDS = ("None", "Blocked", "Element")
"""Names that a block shape reads as a squeezed, blocked or element
dimension."""
AUGMENTED = {"add": "+=", "sub": "-=", "mul": "*=", "div": "/="}
"""The augmented assignment of each operation a computation may apply to
its destination (`acc += x` adds x to acc)."""
NAME_WORDS = frozenset(("out", "inout", "stale", "keeps"))
"""Words of the grammar that may name a value: lark's contextual lexer reads
`out` and `inout` as keywords only where a pipeline's spec may start, and
`stale` only after an invalidation's ref and `keeps` only after an opaque
computation's refs, where no value's name stands
(examples name their output `out`)."""
KEYWORDS = (GRAMMAR_WORDS - NAME_WORDS) | {*FLOAT_WORDS, *BLOCK_WORDS}
"""Words the parser reads as something other than a value's name somewhere:
no value is printed with one as its name (it gets a fresh name instead),
except a kernel's parameter. A parameter's name is the kernel's interface
(inputs and outputs bind by name), and the parser reads any word as one
where a parameter stands: in the kernel's header and as an operand of a
copy, a DMA, a buffered_ref or a pipeline (a computation never reads a
parameter, so its `nan` and `inf` stay floats). Only a view of a parameter
printed as its own statement (`v = window[0:4]`, from MLIR with twin views)
puts the name where a value's word (`VALUE_WORDS`) would be read."""
