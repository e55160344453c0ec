"""The lark front end of the `.cpy` syntax: the grammar, its post-lexer,
and a syntax error as a located diagnostic with hints."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path

from lark import Lark, Token
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
)
from lark.lark import PostLex

from copyir import errors
from copyir.cpy.grammar_cache import grammar_cache
from copyir.cpy.keywords import GRAMMAR_WORDS, STATEMENT_WORDS, VALUE_WORDS
from copyir.errors import CopyIRError, Loc, Note
from copyir.hints import did_you_mean, habit

_TOKEN_NAMES = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "AUGOP": "an augmented assignment such as '+='",
    "COMPARISON": "a comparison",
    "STRING": "a string",
    "_NL": "end of line",
    "$END": "end of input",
}


class _Postlex(PostLex):
    """Drop newlines inside (), [] and pytree records, as Python does, and
    in a pipeline's header (from `pipeline` to its body's `{`), whose specs
    go one per line.

    A `{` opens a body, where newlines end statements, when it ends a
    statement that starts with `kernel`, `for`, `when`, `pipeline` or `scope`
    and is outside any bracket of that statement; any other `{` opens a
    pytree record.
    """

    always_accept = ("_NL",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        stack: list[str] = []
        head = None  # the first token of the statement being read
        for token in stream:
            kind = token.type
            if kind not in _LAYOUT:  # most tokens: only a statement's first counts
                if head is None and (not stack or stack[-1] == "body"):
                    head = kind
                yield token
                continue
            level = not stack or stack[-1] == "body"
            if kind == "_NL" or kind == "SEMICOLON":
                if kind == "_NL" and (not level or head == "PIPELINE"):
                    continue
                if level:
                    head = None
            elif kind == "LBRACE":
                body = level and head in _BODY_HEADS
                stack.append("body" if body else "record")
                head = None if body else head or kind
            elif kind == "LPAR" or kind == "LSQB":
                stack.append(kind)
                if head is None and level:
                    head = kind
            elif stack and stack.pop() == "body":
                head = kind  # the body's `}` ends its statement
            yield token


_BODY_HEADS = frozenset(("KERNEL", "FOR", "WHEN", "PIPELINE", "SCOPE"))
_LAYOUT = frozenset(
    ("_NL", "SEMICOLON", "LPAR", "LSQB", "LBRACE", "RPAR", "RSQB", "RBRACE")
)


@functools.cache
def lark_parser() -> Lark:
    grammar = Path(__file__).with_name("grammar.lark").read_text(encoding="utf-8")
    return Lark(
        grammar,
        parser="lalr",
        postlex=_Postlex(),
        maybe_placeholders=True,
        cache=grammar_cache(grammar),
    )


def syntax_error(err: UnexpectedInput, filename: str, text: str) -> CopyIRError:
    """lark's exception as a located diagnostic: `expected ...`."""
    line, col = max(err.line, 1), max(err.column, 1)
    if isinstance(err, UnexpectedCharacters):
        message = f"unexpected character {err.char!r}"
    elif isinstance(err, UnexpectedEOF):
        message = "unexpected end of input"
    else:
        assert isinstance(err, UnexpectedToken)  # lark's third kind
        token = err.token
        if token.type == "$END":
            message = "unexpected end of input"
            line, col = _end_position(err)
        elif token.type == "_NL":
            message = "unexpected end of line"
            line, col = token.line, token.column
        elif token.type == "DMA_LINE":  # the word the general rule stops at
            message = f"unexpected {token.value.split(None, 1)[0]!r}"
        else:
            message = f"unexpected {token.value!r}"
    expected = sorted({_token_name(t) for t in _expected(err) - {"DMA_LINE"}})
    if expected:
        message += "; expected " + one_of(expected)
    return CopyIRError(message, Loc(filename, line, col), _syntax_notes(err, text))


def _expected(err: UnexpectedInput) -> set[str]:
    """The terminals the parser would take where it stopped.

    LALR merges the states of one construct in different places, so lark's
    `expected` may list what fits only elsewhere (`and` inside a view's
    brackets); feeding each to a copy of the parser keeps the ones that fit.
    """
    expected: set[str] = set(getattr(err, "expected", ()) or ())
    parser = getattr(err, "interactive_parser", None)
    if parser is None or not expected:
        return expected
    try:
        return expected & parser.accepts() or expected
    except UnexpectedInput:
        return expected


def _syntax_notes(err: UnexpectedInput, text: str) -> tuple[Note, ...]:
    """Hints for a syntax error: another language's habit, a misspelt
    keyword, a DMA without its semaphore."""
    offset = getattr(err, "pos_in_stream", None)
    expected = _expected(err) or set(getattr(err, "allowed", None) or ())
    ends = not expected or bool(expected & {"_NL", "SEMICOLON", "$END"})
    if offset is not None and (notes := habit(text, offset, ends)):
        return notes
    if isinstance(err, UnexpectedToken):
        return _misspelt_keyword(err, text) or _missing_semaphore(err)
    return ()


def _misspelt_keyword(err: UnexpectedToken, text: str) -> tuple[Note, ...]:
    """`kernal k(...)`, where a keyword was expected; or `copy_strat x ...`
    and `b = aloc ...`, a name where a statement or a value starts."""
    token = err.token
    if token.type == "NAME":
        keywords = [_keyword(name) for name in err.expected]
        if notes := did_you_mean(token.value, [k for k in keywords if k]):
            return notes
    previous = err.token_history[-1] if err.token_history else None
    if previous is None or previous.type != "NAME" or previous.start_pos is None:
        return ()
    line = text[text.rfind("\n", 0, previous.start_pos) + 1 : previous.start_pos]
    if "EQUAL" in err.expected and re.fullmatch(r"(.*[;{])?[ \t]*", line):
        return did_you_mean(previous.value, STATEMENT_WORDS)
    if re.fullmatch(r"(.*[;{])?[ \t]*[A-Za-z_]\w*[ \t]*=[ \t]*", line):
        return did_you_mean(previous.value, VALUE_WORDS)
    return ()


def _keyword(terminal: str) -> str | None:
    """The word a terminal stands for, if it is a keyword: lark names a
    word's terminal after it (`KERNEL`, `COPY_START`; `_IN`, a word up to a
    word's end)."""
    word = terminal.lstrip("_").lower()
    return word if word in GRAMMAR_WORDS else None


def _missing_semaphore(err: UnexpectedToken) -> tuple[Note, ...]:
    """A DMA that ends after its destination: `, sem` would complete it."""
    if "COMMA" not in err.expected:
        return ()
    # The trial only feeds tokens: the parse trees on the stack are shared,
    # not copied (a deeply nested program's would exhaust the recursion).
    parser = err.interactive_parser.copy(deepcopy_values=False)
    try:
        parser.feed_token(Token("COMMA", ","))
        parser.feed_token(Token("NAME", "sem"))
        if err.token.type == "$END":
            parser.feed_eof()
        else:
            parser.feed_token(err.token)
    except UnexpectedInput:
        return ()
    return (Note(errors.HINT_NO_SEMAPHORE),)


def _end_position(err: UnexpectedToken) -> tuple[int, int]:
    token = err.token
    line = getattr(token, "line", None) or 1
    col = getattr(token, "column", None) or 1
    return line, col


def _token_name(name: str) -> str:
    if name in _TOKEN_NAMES:
        return _TOKEN_NAMES[name]
    if (word := _keyword(name)) is not None:
        return repr(word)
    try:
        pattern = lark_parser().get_terminal(name).pattern
    except KeyError:
        return name
    if pattern.type == "str":
        return repr(pattern.value)
    return name.lower()


def one_of(names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " or " + names[-1]
