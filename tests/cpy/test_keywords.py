"""The words of the `.cpy` language are listed once (copyir/cpy/keywords.py):
the list is the grammar's, and no value but a kernel's parameter is printed
with a keyword as its name, so that MLIR whose values are named like
keywords (`%invalidate`) prints as `.cpy` that parses back; a parameter
keeps its name, the kernel's interface."""

from __future__ import annotations

import re

import pytest

import copyir
from copyir.cpy.keywords import AUGMENTED, GRAMMAR_WORDS, KEYWORDS, NAME_WORDS
from copyir.cpy.syntax import _keyword, lark_parser
from copyir.testing import module_difference

WORD = re.compile(r"[A-Za-z_]\w*")

PROGRAM = """\
kernel k(x: f32[8, 16], y: f32[8, 16]) {
  buf = alloc f32[8, 16] @vmem
  sems = semaphore[2]
  c = async_copy x -> buf, sems[0]
  c.start()
  c.wait()
  bx = buffered_ref x, block=(8, 16), buffers=2
  buffered_copy x -> bx[0, 0], slot=0
  w = window bx[0]
  for i in range(8) {
    t = i % 2
    when t == 0 {
      row = buf[i]
      row[...] = row + w[i]
    }
  }
  invalidate buf
  pipeline grid=(2,)
      in x block=(4, 16) index=i -> (i, 0)
      out y block=(4, 16) index=i -> (i, 0)
      (xw, yw, j) {
    yw += xw * inf
  }
}
"""
"""A value of every kind a name can stand for, each used where the grammar
has keywords nearby."""


def grammar_words() -> dict[str, str]:
    """The words grammar.lark spells, by the terminal that matches each."""
    words = {}
    for terminal in lark_parser().terminals:
        pattern = terminal.pattern
        text = pattern.value.removesuffix("\\b") if pattern.type == "re" else None
        word = pattern.value if pattern.type == "str" else text
        if WORD.fullmatch(word):
            words[terminal.name] = word
    return words


def test_the_keyword_list_is_the_grammars():
    assert set(grammar_words().values()) == GRAMMAR_WORDS
    assert GRAMMAR_WORDS - NAME_WORDS <= KEYWORDS


def test_the_augmented_assignments_are_the_grammars():
    pattern = lark_parser().get_terminal("AUGOP").pattern.to_regexp()
    spellings = set(AUGMENTED.values())
    assert all(re.fullmatch(pattern, s) for s in spellings)
    assert not any(
        re.fullmatch(pattern, op + "=") for op in "%@&|^" if op + "=" not in spellings
    )
    assert len(spellings) == len(re.findall("=", pattern))


def test_a_keywords_terminal_names_its_word():
    for terminal, word in grammar_words().items():
        assert _keyword(terminal) == word


def names_of(module) -> list[str]:
    names = []
    for op in module.walk():
        values = [
            *op.results,
            *(a for r in op.regions for b in r.blocks for a in b.args),
        ]
        names += [v.name_hint for v in values if v.name_hint not in (None, *names)]
    return names


def forget_names(module):
    for op in module.walk():
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    arg.name_hint = None
        for result in op.results:
            result.name_hint = None
    return module


@pytest.mark.parametrize("keyword", sorted(KEYWORDS | GRAMMAR_WORDS))
def test_a_value_named_like_a_keyword_round_trips(keyword):
    """MLIR -> .cpy -> MLIR gives the same IR when any one value bears the
    keyword's name (it prints under a fresh one, or its own if the word
    may name a value)."""
    mlir = copyir.to_text(copyir.parse(PROGRAM, "k.cpy"), "mlir")
    for name in names_of(copyir.parse(PROGRAM, "k.cpy")):
        renamed = re.sub(rf"%{name}\b", f"%{keyword}", mlir)
        module = copyir.parse(renamed, "k.mlir")
        text = copyir.to_text(module)
        again = copyir.parse(text, "printed.cpy")
        difference = module_difference(
            forget_names(module), forget_names(again), locations=False
        )
        assert difference is None, f"%{name} named %{keyword}:\n{text}"


def test_a_value_may_be_named_out():
    mlir = copyir.to_text(copyir.parse(PROGRAM, "k.cpy"), "mlir")
    module = copyir.parse(re.sub(r"%y\b", "%out", mlir), "k.mlir")
    text = copyir.to_text(module)
    assert "out out block=(4, 16)" in text
    assert module_difference(module, copyir.parse(text), locations=False) is None


@pytest.mark.parametrize("keyword", sorted(KEYWORDS | GRAMMAR_WORDS))
@pytest.mark.parametrize("param", ["x", "y"])
def test_a_parameter_named_like_a_keyword_keeps_its_name(keyword, param):
    """A kernel's parameters are its interface (inputs and outputs bind by
    name), and the parser reads any word as a parameter's name where a
    parameter may stand: the print keeps it, and parses back."""
    program = PROGRAM.replace(" * inf", "")  # a parameter `inf` would take it
    mlir = copyir.to_text(copyir.parse(program, "k.cpy"), "mlir")
    module = copyir.parse(re.sub(rf"%{param}\b", f"%{keyword}", mlir), "k.mlir")
    text = copyir.to_text(module)
    assert f"{keyword}: f32[8, 16]" in text.splitlines()[0]
    again = copyir.parse(text, "printed.cpy")
    assert module_difference(module, again, locations=False) is None, text
