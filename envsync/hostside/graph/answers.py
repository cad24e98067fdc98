"""Which names a module's `__getattr__` can answer: those of its paths that return.

`from numpy import NaN` on NumPy 2 asks numpy's module `__getattr__`, whose every path
for that name raises (numpy/__init__.py: a return only under `attr == "linalg"` and
the like; `NaN` is in `__expired_attributes__`, whose branch raises, and the function
ends in `raise AttributeError`). A module with a `__getattr__` was "any name may exist";
read path by path, the names it can return are few and known, and any other name is
provably missing: the import raises ImportError.

The body is read with the name as the unknown: an `if` on `name == "x"`, `name in
("x", "y")` or `name.startswith("x")` narrows the names a path can be taken for (its
`else` narrows nothing: envsync keeps no list of names excluded); any other test leaves
both ways open. A `return` (or the end of the body, which returns None) answers for the
names its path allows; a `raise` answers for none. A statement that may return from
inside (a loop, a `with`, a `try`, a `match`) answers for every name its path allows.
A path that returns with nothing narrowed answers for every name: None.
"""

from __future__ import annotations

import ast

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import FrozenSet, Optional, Tuple, Union

    FunctionDef = Union[ast.FunctionDef, ast.AsyncFunctionDef]
    # the names a path can be taken for (None: any), the prefixes among them
    Allowed = Optional[Tuple[FrozenSet[str], FrozenSet[str]]]


class _Any(Exception):
    """A path returns for any name: nothing is known."""


def answered(node: FunctionDef) -> dict[str, list[str]] | None:
    """The names (and name prefixes) a module `__getattr__` can return for, or None: any."""
    args = node.args.posonlyargs + node.args.args
    if len(args) != 1:
        return None
    reader = _Reader(args[0].arg)
    try:
        live = reader.body(node.body, [None])
        for allowed in live:  # the end of the body: it returns None
            reader.answer(allowed)
    except _Any:
        return None
    return {"names": sorted(reader.names), "prefixes": sorted(reader.prefixes)}


class _Reader:
    def __init__(self, param: str) -> None:
        self.param = param
        self.names: set[str] = set()
        self.prefixes: set[str] = set()

    def answer(self, allowed: Allowed) -> None:
        if allowed is None:
            raise _Any
        self.names |= allowed[0]
        self.prefixes |= allowed[1]

    def body(self, statements: list[ast.stmt], live: list[Allowed]) -> list[Allowed]:
        """The paths that come out of `statements` when `live` go in."""
        for node in statements:
            if not live:
                break
            if isinstance(node, ast.Return):
                for allowed in live:
                    self.answer(allowed)
                live = []
            elif isinstance(node, ast.Raise):
                live = []
            elif isinstance(node, ast.If):
                taken, other = self.test(node.test)
                out: list[Allowed] = []
                for allowed in live:
                    inside = _narrow(allowed, taken)
                    if inside != _NONE:
                        out += self.body(node.body, [inside])
                    if other:
                        out += self.body(node.orelse, [allowed])
                live = out
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # a def's returns are its own
            elif any(isinstance(n, ast.Return) for n in ast.walk(node)):
                for allowed in live:  # a loop, a with, a try that may return inside
                    self.answer(allowed)
        return live

    def test(self, test: ast.expr) -> tuple[Allowed, bool]:
        """What taking an `if` narrows the names to (None: nothing), and whether its else
        can be taken at all (always: envsync keeps no names excluded)."""
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, op, right = test.left, test.ops[0], test.comparators[0]
            if isinstance(right, ast.Name) and right.id == self.param:
                left, right = right, left  # "x" == name
            if not (isinstance(left, ast.Name) and left.id == self.param):
                return None, True
            if isinstance(op, ast.Eq) and _text(right) is not None:
                return (frozenset([str(_text(right))]), frozenset()), True
            if isinstance(op, ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
                texts = [_text(e) for e in right.elts]
                if all(t is not None for t in texts):
                    return (frozenset(str(t) for t in texts), frozenset()), True
            return None, True
        if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute):
            owner, args = test.func.value, test.args
            if (
                test.func.attr == "startswith"
                and isinstance(owner, ast.Name)
                and owner.id == self.param
                and len(args) == 1
                and _text(args[0]) is not None
            ):
                return (frozenset(), frozenset([str(_text(args[0]))])), True
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            narrowed: Allowed = None
            for value in test.values:
                found, _ = self.test(value)
                narrowed = _narrow(narrowed, found)
            return narrowed, True
        return None, True


_NONE: Allowed = (frozenset(), frozenset())


def _narrow(allowed: Allowed, taken: Allowed) -> Allowed:
    """The names both allow."""
    if taken is None:
        return allowed
    if allowed is None:
        return taken
    names = {n for n in allowed[0] if n in taken[0] or n.startswith(tuple(taken[1]))}
    names |= {n for n in taken[0] if n.startswith(tuple(allowed[1]))}
    prefixes = {p for p in allowed[1] for q in taken[1] if p.startswith(q)} | {
        q for q in taken[1] for p in allowed[1] if q.startswith(p)
    }
    return frozenset(names), frozenset(prefixes)


def _text(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
