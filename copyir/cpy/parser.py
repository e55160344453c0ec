"""The `.cpy` parser: lark parses, `StatementBuilder` builds copy-dialect IR.

The builder resolves names and builds ops leniently: whatever the grammar
accepts and the IR can hold reaches the verifier, so `parse` then `verify`
reports every semantic error with the verifier's message. Only what the IR
cannot hold is rejected here: unknown dtypes and spaces, dimensions < 1,
slice steps, negative slice bounds, undefined and duplicate names (a loop
index, a pipeline's window or grid index, or a name of a `for`, `when` or
`pipeline` body is visible in that body only; an index map's parameters
in its expressions only), index expressions that are not affine, slices
whose size is not static, operators a computation does not have, and a
pipeline's header that names the wrong number of windows or gives an
index map the wrong number of parameters. Expressions are translated by
`copyir.cpy.expressions`.
"""

from __future__ import annotations

from lark import Tree
from lark.exceptions import UnexpectedInput
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Region

from copyir.cpy.bodies import BodyBuilder
from copyir.cpy.definitions import DefinitionBuilder
from copyir.cpy.scope import children
from copyir.cpy.syntax import lark_parser, syntax_error
from copyir.cpy.transfers import TransferBuilder
from copyir.dialects.copy import KernelOp


def parse_cpy(text: str, filename: str = "<input>") -> ModuleOp:
    """Parse the authoring syntax into a module of copy kernels."""
    try:
        tree = lark_parser().parse(text)
    except UnexpectedInput as err:
        raise syntax_error(err, filename, text) from None
    return StatementBuilder(filename, text).module(tree)


class StatementBuilder(DefinitionBuilder, TransferBuilder, BodyBuilder):
    """Builds copy-dialect ops from a lark parse tree, statement by statement
    (one method per statement of the grammar, in the modules it inherits)."""

    def module(self, tree: Tree) -> ModuleOp:
        return ModuleOp([self.kernel(k) for k in tree.children])

    def kernel(self, tree: Tree) -> KernelOp:
        _, name, *params, loc_tree, body = children(tree)
        params = [p for p in params if isinstance(p, Tree)]
        self.names, self.loop_lines, self.scopes, self.gone = {}, {}, [], {}
        self.block = Block(arg_types=[self.type(p.children[1], "hbm") for p in params])
        for arg, param in zip(self.block.args, params, strict=True):
            self.define(children(param)[0], arg)
            arg.location = self.statement_location(param, param.children[2])
        kernel = KernelOp.build(
            properties={"sym_name": StringAttr(str(name))},
            regions=[Region(self.block)],
        )
        kernel.location = self.statement_location(tree, loc_tree)
        self.statements(body)
        return kernel


__all__ = ["parse_cpy"]
