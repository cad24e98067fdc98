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

Module-level tables narrow too (`tables`: the keys of the module's literal dicts and sets,
comprehensions over literal strings included): `name in TABLE`, `TABLE.get(name)` tested
`is None` (the else way: the table's names). A path that returns what another module's
factory made for this one (pydantic's `return _getattr_migration(attr_name)`, where
`_getattr_migration = getattr_migration(__name__)`: `delegates`) answers for what that
factory's function answers for, with this module's name: it is looked up there. Such a
factory's function (`outer`: the factory's parameter, the module's name) narrows by a key
made of both (`import_path = f"{module}:{name}"`, `import_path in MOVED_IN_V2`): the keys
it answers for are kept whole, marked (QUALIFIED), with how they are made (`template`).
A path on `name in globals` (the module's own names) answers for no name the module
does not bind.
"""

from __future__ import annotations

import ast

from .astutil import subscript_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, FrozenSet, Optional, Tuple, Union

    FunctionDef = Union[ast.FunctionDef, ast.AsyncFunctionDef]
    # the names a path can be taken for (None: any), the prefixes among them
    Allowed = Optional[Tuple[FrozenSet[str], FrozenSet[str]]]


# a key made of the module's name and the name asked for, kept whole
QUALIFIED = "="


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class _Any(Exception):
    """A path returns for any name: nothing is known."""


def answered(
    node: FunctionDef,
    tables: dict[str, list[str]] | None = None,
    delegates: dict[str, list[str]] | None = None,
    outer: str | None = None,
) -> dict[str, Any] | None:
    """The names (and name prefixes) a module `__getattr__` can return for, the factory it
    also asks (`delegate`: module, function, this module's name), or None: any."""
    args = node.args.posonlyargs + node.args.args
    if len(args) != 1:
        return None
    param = args[0].arg
    counts: dict[str, int] = {}
    for sub in _own(node):
        for target in _stored(sub):
            counts[target] = counts.get(target, 0) + 1
    if param in counts:
        return None  # the name asked for is made another: what it narrows is not read
    local = {name for name in counts if counts[name] > 1}
    # a local of the table's name hides the table
    tables = {k: v for k, v in (tables or {}).items() if k not in counts}
    reader = _Reader(param, tables, delegates or {}, outer)
    reader.unsure = local
    try:
        live = reader.body(node.body, [None])
        for allowed in live:  # the end of the body: it returns None
            reader.answer(allowed)
    except _Any:
        return None
    if len(reader.delegate) > 1 or len(set(reader.templates.values())) > 1:
        return None  # more than one factory, or keys made two ways: not read
    found: dict[str, Any] = {"names": sorted(reader.names), "prefixes": sorted(reader.prefixes)}
    if reader.delegate:
        found["delegate"] = reader.delegate[0]
    if any(n.startswith(QUALIFIED) for n in reader.names):
        found["template"] = list(next(iter(reader.templates.values())))
    return found


def factories(tree: ast.Module, tables: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """The module's functions that make a module `__getattr__` for the module they are
    given (`def getattr_migration(module): ... def wrapper(name): ... return wrapper`):
    what each made one answers for."""
    out: dict[str, dict[str, Any]] = {}
    for node in tree.body:
        if not isinstance(node, FUNCTIONS) or not node.args.args:
            continue
        inner = {n.name: n for n in node.body if isinstance(n, FUNCTIONS)}
        returns = [r.value for r in _own(node) if isinstance(r, ast.Return)]
        made = [inner[r.id] for r in returns if isinstance(r, ast.Name) and r.id in inner]
        if len(made) == 1 and len(returns) == 1:  # it makes that one, whatever it is given
            found = answered(made[0], tables, None, node.args.args[0].arg)
            if found is not None:
                out[node.name] = found
    return out


def literal_keys(tree: ast.Module) -> dict[str, list[str]]:
    """The keys of the module-level literal dicts, sets, lists and tuples of strings (and
    of comprehensions over literal strings), by name."""
    out: dict[str, list[str]] = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        targets = node.targets if isinstance(node, ast.Assign) else [target] if target else []
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        keys = _keys(value) if value is not None else None
        for t in targets:
            if isinstance(t, ast.Name) and keys is not None:
                out[t.id] = keys
    if not out:
        return out  # no table: nothing to check the whole module for
    changed = _changed(tree)
    return {name: keys for name, keys in out.items() if name not in changed}


# methods that change a dict, a set or a list in place
MUTATORS = frozenset(
    [
        "add",
        "update",
        "append",
        "extend",
        "insert",
        "setdefault",
        "pop",
        "popitem",
        "remove",
        "discard",
        "clear",
        "__setitem__",
        "__delitem__",
        "__ior__",
    ]
)


def _changed(tree: ast.Module) -> set[str]:
    """Names whose table may change after their literal: bound more than once anywhere
    (a function's `global` among them), an item set or deleted, augmented, or a mutating
    method called on them."""
    bound: dict[str, int] = {}
    changed: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound[node.id] = bound.get(node.id, 0) + 1
        elif isinstance(node, ast.Global):
            changed.update(node.names)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if isinstance(node.value, ast.Name):
                changed.add(node.value.id)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            changed.add(node.target.id)
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in MUTATORS
            and isinstance(node.value, ast.Name)
        ):
            changed.add(node.value.id)
    return changed | {name for name, count in bound.items() if count > 1}


def _keys(value: ast.expr) -> list[str] | None:
    if isinstance(value, ast.Dict):
        keys = [_text(k) if k is not None else None for k in value.keys]
    elif isinstance(value, (ast.Set, ast.List, ast.Tuple)):
        keys = [_text(e) for e in value.elts]
    elif isinstance(value, (ast.DictComp, ast.SetComp)) and len(value.generators) == 1:
        loop = value.generators[0]
        key = value.key if isinstance(value, ast.DictComp) else value.elt
        items = _keys(loop.iter)
        if loop.ifs or not isinstance(loop.target, ast.Name) or items is None:
            return None
        keys = [_formatted(key, {loop.target.id: item}) for item in items]
    else:
        return None
    return None if any(k is None for k in keys) else [str(k) for k in keys]


def _formatted(node: ast.expr, names: dict[str, str]) -> str | None:
    """An f-string (or a name, or a constant) whose names are all known."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            part = (
                _formatted(value.value, names)
                if isinstance(value, ast.FormattedValue)
                else _text(value)
            )
            if part is None or (
                isinstance(value, ast.FormattedValue)
                and (value.format_spec or value.conversion != -1)
            ):
                return None
            parts.append(part)
        return "".join(parts)
    return _text(node)


class _Reader:
    def __init__(
        self,
        param: str,
        tables: dict[str, list[str]],
        delegates: dict[str, list[str]],
        outer: str | None,
    ) -> None:
        self.param = param
        self.tables = tables
        self.delegates = delegates
        self.outer = outer
        self.names: set[str] = set()
        self.prefixes: set[str] = set()
        self.lookups: dict[str, str] = {}  # `found = TABLE.get(name)`: found -> TABLE
        self.templates: dict[str, tuple[str, str]] = {}  # f"{outer}SEP{name}SUFFIX"
        self.own: set[str] = set()  # names bound to the module's own namespace
        self.delegate: list[list[str]] = []
        self.unsure: set[str] = set()  # names the body assigns more than once

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
                delegate = self.delegated(node.value)
                if delegate is not None:  # what another module's factory answers for
                    if delegate not in self.delegate:
                        self.delegate.append(delegate)
                else:
                    for allowed in live:
                        self.answer(allowed)
                live = []
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                self.bind(node)
            elif isinstance(node, ast.Raise):
                live = []
            elif isinstance(node, ast.If):
                taken, otherwise = self.test(node.test)
                out: list[Allowed] = []
                for allowed in live:
                    inside = _narrow(allowed, taken)
                    if inside != _NONE:
                        out += self.body(node.body, [inside])
                    outside = _narrow(allowed, otherwise)
                    if outside != _NONE:
                        out += self.body(node.orelse, [outside])
                live = out
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # a def's returns are its own
            elif any(isinstance(n, ast.Return) for n in ast.walk(node)):
                for allowed in live:  # a loop, a with, a try that may return inside
                    self.answer(allowed)
        return live

    def bind(self, node: ast.Assign | ast.AnnAssign) -> None:
        """What an assignment in the body makes of the name asked for (a name assigned
        more than once in the body is never narrowed on)."""
        target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
        value = node.value
        if not isinstance(target, ast.Name) or value is None or target.id in self.unsure:
            return
        name = target.id
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            owner = value.func.value
            if (
                value.func.attr == "get"
                and isinstance(owner, ast.Name)
                and owner.id in self.tables
                and len(value.args) == 1  # .get(name, default) is never None
                and not value.keywords
                and self.is_param(value.args[0])
            ):
                self.lookups[name] = owner.id
        elif isinstance(value, ast.JoinedStr) and self.outer is not None:
            template = _template(value, self.outer, self.param)
            if template is not None:
                self.templates[name] = template
        elif _namespace(value, self.outer):
            self.own.add(name)

    def is_param(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id == self.param

    def delegated(self, value: ast.expr | None) -> list[str] | None:
        """`return made(name)`, where `made` is what another module's factory made."""
        if not (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in self.delegates
            and len(value.args) == 1
            and self.is_param(value.args[0])
        ):
            return None
        return self.delegates[value.func.id]

    def keys(self, node: ast.expr) -> list[str] | None:
        """The keys of a module-level table (`TABLE`, `TABLE.keys()`)."""
        if isinstance(node, ast.Call) and not node.args:
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "keys":
                node = func.value
        if isinstance(node, ast.Name):
            return self.tables.get(node.id)
        return None

    def test(self, test: ast.expr) -> tuple[Allowed, Allowed]:
        """What taking an `if` narrows the names to, and what its else does (None:
        nothing; envsync keeps no list of names excluded)."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            taken, otherwise = self.test(test.operand)
            return otherwise, taken
        if isinstance(test, ast.Name) and test.id in self.lookups:
            return self.table(test.id), None
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, op, right = test.left, test.ops[0], test.comparators[0]
            if isinstance(right, ast.Name) and right.id in (self.param, *self.templates):
                left, right = right, left  # "x" == name
            if isinstance(left, ast.Name) and left.id in self.lookups:
                if isinstance(right, ast.Constant) and right.value is None:
                    found = self.table(left.id)
                    if isinstance(op, ast.Is):
                        return None, found
                    if isinstance(op, ast.IsNot):
                        return found, None
                return None, None
            if isinstance(left, ast.Name) and left.id in self.templates:
                return self.qualified(op, right), None
            if not self.is_param(left):
                return None, None
            if isinstance(op, ast.Eq) and _text(right) is not None:
                return (frozenset([str(_text(right))]), frozenset()), None
            if isinstance(op, ast.In) and isinstance(right, ast.Name) and right.id in self.own:
                return _NONE, None  # the module's own names: none it does not bind
            if isinstance(op, ast.In):
                texts = self.keys(right)
                if isinstance(right, (ast.Tuple, ast.List, ast.Set)):
                    texts = [_text(e) for e in right.elts]  # type: ignore[misc]
                if texts is not None and all(t is not None for t in texts):
                    return (frozenset(str(t) for t in texts), frozenset()), None
            return None, None
        if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute):
            owner, args = test.func.value, test.args
            if (
                test.func.attr == "startswith"
                and self.is_param(owner)
                and len(args) == 1
                and _text(args[0]) is not None
            ):
                return (frozenset(), frozenset([str(_text(args[0]))])), None
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            narrowed: Allowed = None
            for value in test.values:
                found, _ = self.test(value)
                narrowed = _narrow(narrowed, found)
            return narrowed, None
        return None, None

    def table(self, name: str) -> Allowed:
        return (frozenset(self.tables[self.lookups[name]]), frozenset())

    def qualified(self, op: ast.cmpop, right: ast.expr) -> Allowed:
        """`key == "m:x"`, `key in TABLE`: the keys, kept whole."""
        if isinstance(op, ast.Eq) and _text(right) is not None:
            return (frozenset([QUALIFIED + str(_text(right))]), frozenset())
        texts = self.keys(right) if isinstance(op, ast.In) else None
        if texts is None:
            return None
        return (frozenset(QUALIFIED + t for t in texts), frozenset())


def _template(node: ast.JoinedStr, outer: str, param: str) -> tuple[str, str] | None:
    """f"{outer}SEP{param}SUFFIX": (SEP, SUFFIX)."""
    shown: list[tuple[str, str]] = []  # ("name", id) | ("text", constant)
    for part in node.values:
        if isinstance(part, ast.FormattedValue):
            plain = part.conversion == -1 and part.format_spec is None
            if not (plain and isinstance(part.value, ast.Name)):
                return None
            shown.append(("name", part.value.id))
        elif _text(part) is not None:
            shown.append(("text", str(_text(part))))
        else:
            return None
    names = [value for kind, value in shown if kind == "name"]
    if names != [outer, param] or shown[0] != ("name", outer):
        return None
    at = shown.index(("name", param))
    sep = "".join(value for _, value in shown[1:at])
    suffix = "".join(value for _, value in shown[at + 1 :])
    return sep, suffix


def _namespace(value: ast.expr, outer: str | None) -> bool:
    """The module's own namespace: `globals()`, `sys.modules[__name__].__dict__`,
    `vars(sys.modules[__name__])` (in a factory, its parameter's module for __name__)."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        if value.func.id == "globals" and not value.args:
            return True
        if value.func.id == "vars" and len(value.args) == 1:
            return _this_module(value.args[0], outer)
        return False
    return (
        isinstance(value, ast.Attribute)
        and value.attr == "__dict__"
        and _this_module(value.value, outer)
    )


def _this_module(node: ast.expr, outer: str | None) -> bool:
    """`sys.modules[__name__]` (or `sys.modules[outer]`)."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)):
        return False
    if node.value.attr != "modules":
        return False
    key = subscript_key(node)
    return isinstance(key, ast.Name) and key.id in ("__name__", outer)


def _own(node: FunctionDef) -> list[ast.AST]:
    """The nodes of a function's body, not of the defs, classes and lambdas it holds."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(node.body)
    while todo:
        current = todo.pop()
        out.append(current)
        if not isinstance(current, (*FUNCTIONS, ast.ClassDef, ast.Lambda)):
            todo += ast.iter_child_nodes(current)
    return out


def _stored(node: ast.AST) -> list[str]:
    """The names a node binds: an assignment's, an augmented one's, a loop's, a with's,
    an except's, a walrus's, an import's."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return [node.id]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).partition(".")[0] for a in node.names]
    return []


_NONE: Allowed = (frozenset(), frozenset())


def _narrow(allowed: Allowed, taken: Allowed) -> Allowed:
    """The names both allow."""
    if taken is None:
        return allowed
    if allowed is None:
        return taken
    if _qualified(allowed) != _qualified(taken):
        # keys made of the module's name and plain names do not meet: the keys are kept
        return allowed if _qualified(allowed) else taken
    names = {n for n in allowed[0] if n in taken[0] or n.startswith(tuple(taken[1]))}
    names |= {n for n in taken[0] if n.startswith(tuple(allowed[1]))}
    prefixes = {p for p in allowed[1] for q in taken[1] if p.startswith(q)} | {
        q for q in taken[1] for p in allowed[1] if q.startswith(p)
    }
    return frozenset(names), frozenset(prefixes)


def _text(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _qualified(allowed: Allowed) -> bool:
    return allowed is not None and any(n.startswith(QUALIFIED) for n in allowed[0])
