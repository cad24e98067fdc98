"""Small readings of Python syntax trees that the import analyser and the facts share."""

from __future__ import annotations

import ast

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Dict, Literal, Tuple

    # a name bound to a known string: (its text, whether that is the whole of it)
    Names = Dict[str, Tuple[str, bool]]

IMPORT_ERRORS = frozenset(["ImportError", "ModuleNotFoundError", "Exception", "BaseException"])
EXITS = frozenset(["exit", "_exit", "quit", "abort"])


def assignments(tree: ast.Module) -> Iterator[tuple[str, ast.expr]]:
    """(name, value node) of each simple module-level assignment, annotated or not."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            yield target.id, value


def callee(func: ast.expr) -> str | None:
    """The name a call's function is known by: `f` of `f(...)` and of `x.f(...)`."""
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def names_import_error(node: ast.expr | None) -> bool:
    """Whether an except clause's type (None: bare) catches ImportError."""
    if node is None:
        return True
    types = node.elts if isinstance(node, ast.Tuple) else [node]
    return any(callee(t) in IMPORT_ERRORS for t in types)


def catches_import_error(handler: ast.ExceptHandler) -> bool:
    return names_import_error(handler.type)


def ends_by_raising(body: list[ast.stmt]) -> bool:
    """Whether a handler body always ends by raising or exiting (it does not swallow)."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, ast.Raise):
        return True
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        return callee(last.value.func) in EXITS
    if isinstance(last, ast.If):
        return ends_by_raising(last.body) and ends_by_raising(last.orelse)
    return False


def guards_import(handlers: list[ast.ExceptHandler]) -> bool:
    """Whether a try statement (its handlers) swallows an ImportError raised in its body.

    The first handler that catches ImportError decides: one that re-raises does not guard.
    """
    for handler in handlers:
        if catches_import_error(handler):
            return not ends_by_raising(handler.body)
    return False


def is_try(node: ast.stmt) -> bool:
    """A try statement, `try/except*` (Python 3.11) included."""
    return isinstance(node, ast.Try) or type(node).__name__ == "TryStar"


def suppresses_import_error(item: ast.withitem) -> bool:
    """`with contextlib.suppress(ImportError, ...):`"""
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return False
    return callee(call.func) == "suppress" and any(names_import_error(a) for a in call.args)


def is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def is_main_guard(test: ast.expr) -> bool:
    """`if __name__ == "__main__":`"""
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def bound_names(target: ast.expr, out: set[str]) -> None:
    """Add the names an assignment target binds to `out`."""
    if isinstance(target, ast.Name):
        out.add(target.id)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            bound_names(elt, out)
    elif isinstance(target, ast.Starred):
        bound_names(target.value, out)


def literal_string(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def literal_strings(node: ast.AST | None) -> list[str] | None:
    """The strings of a list or tuple display of string constants (None: not one)."""
    if not isinstance(node, (ast.List, ast.Tuple)):
        return None
    out = [literal_string(e) for e in node.elts]
    return [s for s in out if s is not None] if None not in out else None


def pairs(node: ast.Dict) -> list[tuple[ast.expr | None, ast.expr]]:
    """(key, value) of a dict display (zip(strict=) needs Python 3.10)."""
    return [(node.keys[i], node.values[i]) for i in range(len(node.keys))]


def call_name(node: ast.AST) -> str | None:
    return callee(node.func) if isinstance(node, ast.Call) else None


def constant_import(node: ast.Call) -> str | None:
    """The module of `importlib.import_module("x")` / `__import__("x")` with a constant name."""
    if call_name(node) not in ("import_module", "__import__") or not node.args:
        return None
    module = literal_string(node.args[0])
    if not module or module.startswith("."):
        return None
    return module


def computed_prefix(node: ast.expr, names: Names | None = None) -> str | None:
    """The constant text a computed string starts with: `"a.b." + x`, f"a.{x}",
    `"a.%s" % x`, `"a.{}".format(x)`, a name `names` knows (None: it starts with no
    constant)."""
    if isinstance(node, ast.Name) and names and node.id in names:
        return names[node.id][0]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        whole = constant_text(node.left, names)
        if whole is None:
            return computed_prefix(node.left, names)
        return whole + (computed_prefix(node.right, names) or "")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _head(node.left)
    if isinstance(node, ast.JoinedStr):
        return literal_string(node.values[0]) if node.values else None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        return _head(node.func.value)
    return literal_string(node)


def constant_text(node: ast.expr, names: Names | None = None) -> str | None:
    """The whole text of a string that is constant: a literal, a name `names` binds to
    one, their sum (None: computed)."""
    text = literal_string(node)
    if text is not None:
        return text
    if isinstance(node, ast.Name) and names and node.id in names:
        value, whole = names[node.id]
        return value if whole else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = constant_text(node.left, names)
        right = constant_text(node.right, names) if left is not None else None
        return left + right if left is not None and right is not None else None
    return None


MODULE_LISTS = ("iter_modules", "walk_packages")


def pkgutil_names(tree: ast.Module) -> frozenset[str]:
    """The names a module calls pkgutil's module lists by: `pkgutil.` (any alias of
    `import pkgutil`, with its dot) and `iter_modules` after `from pkgutil import ...`."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update((a.asname or a.name) + "." for a in node.names if a.name == "pkgutil")
        elif isinstance(node, ast.ImportFrom) and node.module == "pkgutil" and not node.level:
            out.update(a.asname or a.name for a in node.names if a.name in MODULE_LISTS)
    return frozenset(out)


def module_list_prefix(node: ast.expr, lists: frozenset[str], names: Names) -> str | None:
    """The constant start of every name `pkgutil.iter_modules(path, PREFIX)` or
    `walk_packages(path, PREFIX)` yields (None: not such a call, or no constant prefix:
    then the names it yields can be anything)."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        ours = func.attr in MODULE_LISTS and func.value.id + "." in lists
    else:
        ours = isinstance(func, ast.Name) and func.id in lists
    if not ours:
        return None
    prefix = node.args[1] if len(node.args) > 1 else None
    for kw in node.keywords:
        if kw.arg == "prefix":
            prefix = kw.value
    return computed_prefix(prefix, names) if prefix is not None else None


def scope_names(
    scope: ast.AST, lists: frozenset[str], given: Mapping[str, str] | None = None
) -> Names:
    """The names a scope (a module, a function, a class body) binds to a known string:
    `name = "a.b"` when every binding of the name in the scope is that constant (whole),
    and the name of a `for _, name, _ in pkgutil.iter_modules(path, "a.b.")` loop when it
    is its only binding (only its start is known). A name rebound in any other way, a
    parameter (unless `given` binds it: a function's parameter that every call passes the
    same string), or one declared global or nonlocal anywhere inside, is not known."""
    given = given or {}
    declared: set[str] = set()
    for node in ast.walk(scope):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
    known: dict[int, tuple[str, bool]] = {}  # id of a Name bound to a known string
    for node in _in_scope(scope):
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            text = constant_text(node.value)
            if text is not None:
                known.update((id(t), (text, True)) for t in node.targets)
    known.update(
        (id(node), (given[node.arg], True))
        for node in _in_scope(scope)
        if isinstance(node, ast.arg) and node.arg in given
    )
    constants = _settle(scope, known, declared)
    for node in _in_scope(scope):  # the loops, whose prefix may be one of those constants
        if isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.target, ast.Tuple):
            head = module_list_prefix(node.iter, lists, constants)
            elts = node.target.elts
            if head and len(elts) > 1 and isinstance(elts[1], ast.Name):
                known[id(elts[1])] = (head, False)
    return _settle(scope, known, declared)


def _settle(scope: ast.AST, known: dict[int, tuple[str, bool]], declared: set[str]) -> Names:
    """The names each of whose bindings in the scope is the same known string."""
    values: dict[str, list[tuple[str, bool] | None]] = {}
    for node in _in_scope(scope):
        bound: list[str] = []
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            values.setdefault(node.id, []).append(known.get(id(node)))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound = [(a.asname or a.name).partition(".")[0] for a in node.names]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound = [node.name] if node is not scope else []
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound = [node.name]
        elif isinstance(node, ast.arg):
            values.setdefault(node.arg, []).append(known.get(id(node)))
            continue
        elif type(node).__name__ in ("MatchAs", "MatchStar", "MatchMapping"):  # 3.10
            found = [getattr(node, "name", None), getattr(node, "rest", None)]
            bound = [n for n in found if isinstance(n, str)]
        for name in bound:
            values.setdefault(name, []).append(None)
    out: Names = {}
    for name, found_values in values.items():
        first = found_values[0]
        if first is not None and name not in declared and all(v == first for v in found_values):
            out[name] = first
    return out


def _in_scope(scope: ast.AST) -> Iterator[ast.AST]:
    """Every node of a scope, not those of the scopes inside it (a nested function's or
    class's body, a lambda's), but their names, parameters, defaults and decorators."""
    todo: list[ast.AST] = [scope]
    while todo:
        node = todo.pop()
        yield node
        if node is not scope and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner: list[ast.AST] = [*node.decorator_list, *node.args.defaults]
            inner += [d for d in node.args.kw_defaults if d is not None]
            todo.extend(inner)
        elif node is not scope and isinstance(node, ast.ClassDef):
            todo.extend([*node.decorator_list, *node.bases, *node.keywords])
        elif node is not scope and isinstance(node, ast.Lambda):
            todo.extend([*node.args.defaults, *(d for d in node.args.kw_defaults if d)])
        else:
            todo.extend(ast.iter_child_nodes(node))


def _head(node: ast.expr) -> str | None:
    """A format string's text before its first placeholder."""
    text = literal_string(node)
    if text is None:
        return None
    for mark in ("%", "{"):
        text = text.partition(mark)[0]
    return text


def subscript_key(target: ast.Subscript) -> ast.AST:
    """The key of `x[key]` (Python 3.8 wraps it in an ast.Index)."""
    key: ast.AST = target.slice
    if type(key).__name__ == "Index":
        key = getattr(key, "value", key)
    return key


NAMESPACES = frozenset(["globals", "vars", "locals"])


def binds_dynamically(node: ast.stmt) -> bool:
    """A module-level statement that binds names envsync cannot list: `globals()[k] = v`,
    `globals().update(...)`, `setattr(sys.modules[__name__], ...)`, `exec(...)`, or an
    assignment of a module `__getattr__` (`__getattr__ = lazy.attach(...)[0]`)."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            names: set[str] = set()
            bound_names(target, names)
            if "__getattr__" in names:
                return True
            if isinstance(target, ast.Subscript) and call_name(target.value) in NAMESPACES:
                return True
        return False
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    call = node.value
    func = call.func
    if isinstance(func, ast.Name) and func.id == "exec":
        return True
    if isinstance(func, ast.Name) and func.id == "setattr" and call.args:
        first = call.args[0]
        return isinstance(first, ast.Subscript) and is_sys_modules_self(first)
    if isinstance(func, ast.Attribute) and func.attr in ("update", "setdefault", "__setitem__"):
        owner = func.value
        if call_name(owner) in NAMESPACES:
            return True
        # sys.modules[__name__].__dict__.update(...)
        if isinstance(owner, ast.Attribute) and owner.attr == "__dict__":
            return isinstance(owner.value, ast.Subscript) and is_sys_modules_self(owner.value)
    return False


def binds_globals(node: ast.stmt) -> bool:
    """A statement anywhere (a function's too) that binds the module's own names at run
    time: `globals()[k] = v`, `globals().update(...)`, `setattr(sys.modules[__name__], ...)`
    (unlike binds_dynamically, not `exec` or `locals()`, which bind a function's locals)."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(
            isinstance(t, ast.Subscript) and call_name(t.value) == "globals" for t in targets
        )
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    func = node.value.func
    if isinstance(func, ast.Attribute) and func.attr in ("update", "setdefault", "__setitem__"):
        return call_name(func.value) == "globals"
    return binds_dynamically(node) and isinstance(func, ast.Name) and func.id == "setattr"


def is_sys_modules_self(target: ast.expr) -> bool:
    """`sys.modules[__name__]` as an assignment target."""
    if not isinstance(target, ast.Subscript):
        return False
    value = target.value
    if not (isinstance(value, ast.Attribute) and value.attr == "modules"):
        return False
    key = subscript_key(target)
    return isinstance(key, ast.Name) and key.id == "__name__"


def all_mutation(node: ast.stmt) -> list[str] | Literal[False] | None:
    """What a statement does to `__all__` by a method call: the literal names it adds
    (`append("x")`, `extend(["x"])`), None when it adds what envsync cannot list, False
    when it is no such call."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    func = node.value.func
    if not (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "__all__"
    ):
        return False
    args = node.value.args
    if func.attr == "append" and len(args) == 1:
        text = literal_string(args[0])
        return [text] if text is not None else None
    if func.attr == "extend" and len(args) == 1:
        return literal_strings(args[0])
    return None


def absolute_module(node: ast.ImportFrom, package: str) -> str:
    """The absolute name of the module `from ... import` names, in `package`."""
    if not node.level:
        return node.module or ""
    base = package
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    return base + ("." + node.module if node.module else "") if base else (node.module or "")
