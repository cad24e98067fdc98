"""What the compiler refuses after the parser took it: the SyntaxError importing raises.

ast.parse checks what the parser checks; the compiler then refuses more, in two passes:
its symbol table (a duplicate argument, `import *` in a function, `nonlocal` at module
level) and its code generation (`return`, `yield` or `await` outside a function, `break`
or `continue` outside a loop, more than 20 statically nested blocks: CPython's
CO_MAXBLOCKS). Each pass reports the first it meets, in the order it walks the module,
and the first pass first: this finds the same, without compiling (which would cost as
much as parsing again). The nested blocks are counted as every version pushes them at
least (a loop's, a with's, a try's, an except's or finally's body: one each), so a file
said to be over the limit is over it on every interpreter.
"""

from __future__ import annotations

import ast
import bisect
import re
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Tuple, Union

    Found = List[Tuple[int, Optional[int], str]]  # pass, line, message
    # the def a statement stands in (None: the module's level or a class body)
    Def = Optional[Union[ast.FunctionDef, ast.AsyncFunctionDef]]

# Statically nested blocks, as each version counts them: (the most a code object takes,
# the blocks an except body adds, whether the error names the line): Python 3.8 names
# none and adds one for a handler, 3.9 on add two; 3.13 takes one more. A version not
# listed is not checked for them.
BLOCKS = {
    (3, 8): (20, 1, False),
    (3, 9): (20, 2, True),
    (3, 10): (20, 2, True),
    (3, 11): (20, 2, True),
    (3, 12): (20, 2, True),
    (3, 13): (21, 2, True),
}
LOOPS = (ast.For, ast.AsyncFor, ast.While)
EXPRESSION_WORDS = ("yield", "await", "lambda")
WORDS = re.compile("|".join(EXPRESSION_WORDS))


def compile_error(
    tree: ast.Module, text: str | None = None, version: tuple[int, int] | None = None
) -> SyntaxError | None:
    """The SyntaxError compiling `tree` (parsed from `text`) raises on Python `version`
    (this one's), or None. A statement's expressions are read only where its lines in
    `text` name what they can hold (`yield`, `await`, `lambda`): a node's keyword is on
    its statement's lines, and most statements have none (reading every expression of
    every file cost a third of the time parsing takes)."""
    version = version or (sys.version_info[0], sys.version_info[1])
    found: Found = []
    walk = _Walk(found, version)
    if text is not None and "\r" not in text:  # lines as the tokenizer counts them
        walk.lines_named = lines_naming(text)
    walk.body(tree.body, None, loop=False, blocks=0)
    if not found:
        return None
    _, line, message = min(found, key=lambda f: (f[0], f[1] or 0))
    error = SyntaxError(message)
    error.lineno = line
    return error


def lines_naming(text: str) -> list[int]:
    """The numbers of the lines that hold a word of EXPRESSION_WORDS, in order (lines end
    at "\n" only: not at a form feed, which splitlines would take for one)."""
    out: list[int] = []
    line, at = 1, 0
    for found in WORDS.finditer(text):
        line += text.count("\n", at, found.start())
        at = found.start()
        if not out or out[-1] != line:
            out.append(line)
    return out


class _Walk:
    def __init__(self, found: Found, version: tuple[int, int]) -> None:
        self.found = found
        self.version = version
        self.limit, self.handler, self.lines = BLOCKS.get(version, (0, 0, False))
        # the lines that name a word of EXPRESSION_WORDS (None: every line may)
        self.lines_named: list[int] | None = None
        self.inside = 0  # the defs the statement stands in, however deep
        self.classes = 0  # the class bodies

    def say(self, phase: int, node: ast.AST, message: str) -> None:
        self.found.append((phase, getattr(node, "lineno", 0), message))

    def body(self, stmts: list[ast.stmt], function: Def, loop: bool, blocks: int) -> None:
        for node in stmts:
            self.statement(node, function, loop, blocks)

    def over(self, node: ast.AST, blocks: int) -> bool:
        """Whether `blocks` nested blocks at `node` are more than the compiler takes."""
        if not self.limit or blocks <= self.limit:
            return False
        line = getattr(node, "lineno", 0) if self.lines else None
        self.found.append((1, line, "too many statically nested blocks"))
        return True

    def statement(self, node: ast.stmt, function: Def, loop: bool, blocks: int) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.signature(node)
            # what the enclosing scope evaluates: decorators, defaults (keyword-only too)
            for expr in node.decorator_list + _defaults(node.args):
                self.expression(expr, function)
            self.inside += 1
            self.body(node.body, node, loop=False, blocks=0)
            self.inside -= 1
            return
        if isinstance(node, ast.ClassDef):
            keywords = [k.value for k in node.keywords]  # metaclass=... too
            for expr in node.bases + keywords + node.decorator_list:
                self.expression(expr, function)
            # a class body is no function's (return, yield); `nonlocal` there is another
            # error (or none, in a def): not said
            self.classes += 1
            self.body(node.body, None, loop=False, blocks=0)
            self.classes -= 1
            return
        if isinstance(node, ast.Return) and function is None:
            self.say(1, node, "'return' outside function")
        elif isinstance(node, ast.Break) and not loop:
            self.say(1, node, "'break' outside loop")
        elif isinstance(node, ast.Continue) and not loop:
            self.say(1, node, "'continue' not properly in loop")
        elif isinstance(node, ast.Nonlocal) and not (self.inside or self.classes):
            self.say(0, node, "nonlocal declaration not allowed at module level")
        elif (
            isinstance(node, ast.ImportFrom)
            and function is not None
            and any(alias.name == "*" for alias in node.names)
        ):
            # before 3.10 the error names the def's line
            where = function if self.version < (3, 10) else node
            self.say(0, where, "import * only allowed at module level")
        pushes = isinstance(node, (*LOOPS, ast.With, ast.AsyncWith)) or _is_try(node)
        if pushes and self.over(node, blocks + 1):
            return
        for field, value in ast.iter_fields(node):
            if isinstance(value, ast.expr):
                self.expression(value, function)
            elif isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                # a loop's body is in the loop (its else is not); a loop's, a with's, a
                # try's body and a finally are one more nested block
                in_loop = loop or (isinstance(node, LOOPS) and field == "body")
                deeper = pushes and field in ("body", "finalbody")
                self.body(value, function, in_loop, blocks + 1 if deeper else blocks)
            elif isinstance(value, list):
                for item in value:
                    self.item(item, function, loop, blocks)

    def reads(self, node: ast.AST) -> bool:
        """Whether the node's lines name a word of EXPRESSION_WORDS (a node's keyword is on
        its own lines: a decorator's stand before its def's)."""
        named = self.lines_named
        if named is None:
            return True
        first = getattr(node, "lineno", None)
        last = getattr(node, "end_lineno", None) or first
        if first is None or last is None:
            return True
        at = bisect.bisect_left(named, first)
        return at < len(named) and named[at] <= last

    def item(self, item: object, function: Def, loop: bool, blocks: int) -> None:
        if isinstance(item, ast.ExceptHandler):
            self.expression(item.type, function)
            if not self.over(item, blocks + self.handler):
                self.body(item.body, function, loop, blocks + self.handler)
        elif isinstance(item, ast.withitem):
            self.expression(item.context_expr, function)
        elif isinstance(item, ast.expr):
            self.expression(item, function)

    def signature(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        """A duplicate argument: from 3.10 on the error names the argument's line, before
        that the def's (or the lambda's)."""
        spec = node.args
        args = spec.posonlyargs + spec.args + spec.kwonlyargs
        args += [a for a in (spec.vararg, spec.kwarg) if a is not None]
        seen: set[str] = set()
        for arg in args:
            if arg.arg in seen:
                where = arg if self.version >= (3, 10) else node
                self.say(0, where, f"duplicate argument '{arg.arg}' in function definition")
                return
            seen.add(arg.arg)

    def expression(self, node: ast.expr | None, function: Def) -> None:
        """`yield` and `await` outside a function, `await` outside an async one; a lambda
        is a function of its own (its arguments are read, its body is not). Read only where
        its lines name one of those words."""
        if node is None or not self.reads(node):
            return
        todo: list[ast.AST] = [node]
        while todo:
            current = todo.pop()
            if isinstance(current, ast.Lambda):
                self.signature(current)  # its defaults run where it is made, its body not
                todo += _defaults(current.args)
                continue
            if isinstance(current, COMPREHENSIONS):
                continue  # their own scopes, with rules of their own
            if function is None and isinstance(current, (ast.Yield, ast.YieldFrom)):
                self.say(1, current, "'yield' outside function")
            elif isinstance(current, ast.Await):
                if function is None:
                    self.say(1, current, "'await' outside function")
                elif not isinstance(function, ast.AsyncFunctionDef):
                    self.say(1, current, "'await' outside async function")
            todo += ast.iter_child_nodes(current)


COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _defaults(spec: ast.arguments) -> list[ast.expr]:
    """A def's or a lambda's defaults, keyword-only ones too: evaluated where it is made."""
    return spec.defaults + [d for d in spec.kw_defaults if d is not None]


def _is_try(node: ast.stmt) -> bool:
    return isinstance(node, ast.Try) or type(node).__name__ == "TryStar"
