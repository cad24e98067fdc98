"""Which of a module's own functions run while the module is imported, and with what.

A call runs while the module runs wherever Python evaluates it then: a statement
(`main()`, `sys.exit(main())`, under `if __name__ == "__main__":` when it runs as a
script), a decorator (`@f` calls f; `@f(...)` calls f, then the function f returns when
it is a def of f's own), a default argument, a class body. What such a function calls in
turn runs too, read as if its body were the module's (a call under an `if` there runs
under one).

A parameter that every call passes the same string is bound to it, so that a computed
import in the body (`importlib.import_module(package_name)`, the names of a
`pkgutil.iter_modules(path, package_name + ".")` loop) is read with the name it will have:
`ModelRegistry.register("pkg.models")` at module level imports `pkg.models` and, below it,
what the loop finds, not any module at all.
"""

from __future__ import annotations

import ast

from ..shared import CONTEXT_RANK, weaker
from .astutil import (
    catches_import_error,
    constant_text,
    is_main_guard,
    is_try,
    is_type_checking,
    scope_names,
    subscript_key,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple, Union

    from ..shared import Context
    from .astutil import Names

    FunctionDef = Union[ast.FunctionDef, ast.AsyncFunctionDef]
    Called = Dict[str, Tuple[Context, int]]
    Found = List[Tuple[str, Optional[ast.Call]]]
    # the parameters a call binds to strings, sorted
    Binding = Tuple[Tuple[str, str], ...]
    # one way a function runs: its name ("": the module's level), what its parameters
    # are bound to, the environment variable it runs only when set (None: any)
    Frame = Tuple[str, Binding, Optional[str]]
    # function -> each way it runs, with its parameters as a dict, and in what context
    Frames = Dict[str, List[Tuple[Dict[str, str], Optional[str], Context]]]

TOP: Frame = ("", (), None)
# the ways one function is read before its calls are read as one, whatever they pass
WAYS = 8


def called_at_import(
    tree: ast.Module,
    functions: dict[str, FunctionDef],
    as_main: bool,
    runs: tuple[str, ...] = (),
    lists: frozenset[str] = frozenset(),
    binds: bool = False,
) -> tuple[Called, Frames]:
    """Module-level functions the module calls while it runs, and those startup calls
    itself (`runs`: a console script's function), each with the context of the surest call
    and the module's line where it runs (0: after the module); and each way each runs: the
    strings its calls bind its parameters to (`binds`: asked only where a computed import
    needs them), the environment variable that the `if` it is called under reads, and the
    context of those calls.

    Functions are this module's (`functions`: a method as "Class.name"): `f()`, `Class()`
    (its `__init__`), `Class.name()`, `obj.name()` where the module bound `obj =
    Class(...)`, and within a method `self.name()` / `cls.name()`. A call envsync cannot
    resolve so is not followed: nothing is said to run that may not."""
    reader = _Reader(tree, functions, as_main, lists, binds)
    reader.scan(tree.body, "module", "", -1, TOP)
    for name in runs:
        if name in functions:
            reader.note(name, "module", 0, None, TOP)
    frames = {
        name: [(dict(binding), env, context) for (binding, env), context in seen.items()]
        for name, seen in reader.frames.items()
    }
    return reader.called, frames


class _Reader:
    def __init__(
        self,
        tree: ast.Module,
        functions: dict[str, FunctionDef],
        as_main: bool,
        lists: frozenset[str],
        binds: bool,
    ) -> None:
        self.tree = tree
        self.binds = binds
        self.functions = functions
        self.as_main = as_main
        self.lists = lists
        self.called: Called = {}
        self.frames: dict[str, dict[tuple[Binding, str | None], Context]] = {}
        self.known: dict[tuple[str, Binding], Names] = {}
        self.classes = {name.rpartition(".")[0] for name in functions if "." in name}
        self.instances: dict[str, str] = {}  # module-level `obj = Class(...)`: obj -> Class
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                made = node.value.func
                if isinstance(made, ast.Name) and made.id in self.classes:
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            self.instances[target.id] = made.id

    # -- what a call runs ------------------------------------------------------------------

    def resolve(self, func: ast.expr, owner: str) -> str | None:
        """The function a call of `func` runs (`owner`: the class of the method it is in)."""
        functions, classes = self.functions, self.classes
        if isinstance(func, ast.Name):
            if func.id in functions and "." not in func.id:
                return func.id
            if func.id in classes:
                init = func.id + ".__init__"
                return init if init in functions else None
            return None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            base = func.value.id
            if base in ("self", "cls") and owner:
                cls = owner
            else:
                cls = base if base in classes else self.instances.get(base, "")
            name = cls + "." + func.attr
            return name if cls and name in functions else None
        return None

    def calls(self, node: ast.AST, owner: str) -> Found:
        """The resolved calls that run as `node` runs: not those in a nested def's or a
        lambda's body, which run only when that is called (its decorators and defaults do)."""
        found: Found = []
        todo = [node]
        while todo:
            c = todo.pop()
            if isinstance(c, ast.Call):
                name = self.resolve(c.func, owner)
                if name is not None:
                    found.append((name, c))
            if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef)):
                todo += c.decorator_list + c.args.defaults
                todo += [d for d in c.args.kw_defaults if d is not None]
            elif isinstance(c, ast.Lambda):
                todo += c.args.defaults + [d for d in c.args.kw_defaults if d is not None]
            else:
                todo += ast.iter_child_nodes(c)
        return found

    def returned(self, name: str) -> list[str]:
        """The functions of its own that `name` returns (a decorator factory's decorator)."""
        node = self.functions[name]
        owner = name.rpartition(".")[0]
        inner = {
            n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        made = [
            (owner + "." if owner else "") + r.value.id
            for r in ast.walk(node)
            if isinstance(r, ast.Return) and isinstance(r.value, ast.Name) and r.value.id in inner
        ]
        return [m for m in made if m in self.functions]

    # -- the strings a call passes ---------------------------------------------------------

    def names(self, frame: Frame) -> Names:
        """The names known to a string where `frame` runs."""
        caller, binding, _ = frame
        key = (caller, binding)
        if key not in self.known:
            scope: ast.AST = self.functions[caller] if caller else self.tree
            self.known[key] = scope_names(scope, self.lists, dict(binding))
        return self.known[key]

    def passed(self, name: str, call: ast.Call | None, frame: Frame) -> Binding:
        """The parameters of `name` that `call` (made where `frame` runs) binds to strings
        envsync can read (none for a call it cannot map: a decorator applied, `*args`)."""
        if not self.binds:
            return ()
        found = self._passed(name, call, frame)
        return tuple(sorted((p, v) for p, v in found.items() if v is not None))

    def _passed(self, name: str, call: ast.Call | None, frame: Frame) -> dict[str, str | None]:
        node = self.functions[name]
        params = [a.arg for a in node.args.posonlyargs + node.args.args]
        every = params + [a.arg for a in node.args.kwonlyargs]
        out: dict[str, str | None] = dict.fromkeys(every)
        if call is None or any(isinstance(a, ast.Starred) for a in call.args):
            return out
        if "." in name and (self._implicit(name, call) or name.endswith(".__init__")):
            params = params[1:]  # self or cls, which the call does not pass
        defaults = node.args.defaults
        for param, default in zip(params[len(params) - len(defaults) :], defaults):
            out[param] = self.text(default, TOP)
        for param, kw_default in zip([a.arg for a in node.args.kwonlyargs], node.args.kw_defaults):
            if kw_default is not None:
                out[param] = self.text(kw_default, TOP)
        for param, value in zip(params, call.args):
            out[param] = self.text(value, frame)
        for kw in call.keywords:
            if kw.arg is None:
                return dict.fromkeys(every)  # **kwargs: any of them
            if kw.arg in out:
                out[kw.arg] = self.text(kw.value, frame)
        return out

    def text(self, node: ast.expr, frame: Frame) -> str | None:
        """The whole string `node` is where `frame` runs (None: not one envsync reads);
        the names of the scope are read only for a name or a sum."""
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, (ast.Name, ast.BinOp)):
            return constant_text(node, self.names(frame))
        return None

    def _implicit(self, name: str, call: ast.Call) -> bool:
        """Whether a call of the method `name` passes its first parameter itself: through
        an instance (`obj.m()`, `self.m()`) or a classmethod's class."""
        func = call.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
            return False
        if func.value.id != name.rpartition(".")[0]:
            return True  # obj.m(), self.m(), cls.m()
        node = self.functions[name]
        return any(isinstance(d, ast.Name) and d.id == "classmethod" for d in node.decorator_list)

    # -- the walk --------------------------------------------------------------------------

    def note(
        self, name: str, context: Context, at: int, call: ast.Call | None, frame: Frame
    ) -> None:
        """A call of `name` that runs in `context` at the module's line `at`, made where
        `frame` runs: its body is read as the module's (a call under an `if` there runs
        under one), once for each way it runs, again where it runs more surely."""
        if name not in self.called or CONTEXT_RANK[context] < CONTEXT_RANK[self.called[name][0]]:
            self.called[name] = (context, at)
        seen = self.frames.setdefault(name, {})
        key = (self.passed(name, call, frame), frame[2])
        if key not in seen and len(seen) >= WAYS:
            key = ((), frame[2])  # read as if it were passed nothing envsync can read
        if key in seen and CONTEXT_RANK[context] >= CONTEXT_RANK[seen[key]]:
            return
        seen[key] = context
        owner = name.rpartition(".")[0]
        self.scan(self.functions[name].body, context, owner, at, (name, key[0], key[1]))

    def decorated(
        self, node: ast.stmt, context: Context, owner: str, at: int, frame: Frame
    ) -> None:
        """What runs as a def or a class statement runs: its decorators (applied too) and
        a def's default arguments."""
        for deco in getattr(node, "decorator_list", []):
            for name, call in self.calls(deco, owner):
                self.note(name, context, at, call, frame)
            applied = self.resolve(deco.func if isinstance(deco, ast.Call) else deco, owner)
            if applied is not None:
                self.note(applied, context, at, None, frame)
                if isinstance(deco, ast.Call):  # @f(...): what f returned is applied
                    for made in self.returned(applied):
                        self.note(made, context, at, None, frame)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defaults = node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
            for default in defaults:
                for name, call in self.calls(default, owner):
                    self.note(name, context, at, call, frame)

    def scan(
        self, body: list[ast.stmt], context: Context, owner: str, at: int, frame: Frame
    ) -> None:
        """The calls of `body` (the module's, or a called function's: `owner` its class,
        `at` the module's line it runs at, `frame` how it runs), each in its context."""
        for node in body:
            line = node.lineno if at < 0 else at
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.decorated(node, context, owner, line, frame)
                continue
            if isinstance(node, ast.ClassDef):
                self.decorated(node, context, owner, line, frame)
                for base in node.bases + [k.value for k in node.keywords]:
                    for name, call in self.calls(base, owner):
                        self.note(name, context, line, call, frame)
                # a class body runs as the statement does
                self.scan(node.body, context, owner, at, frame)
                continue
            if isinstance(node, ast.If):
                if is_type_checking(node.test):
                    continue
                if is_main_guard(node.test) and at < 0:
                    self.scan(node.body if self.as_main else node.orelse, context, "", -1, TOP)
                    continue
                for name, call in self.calls(node.test, owner):
                    self.note(name, context, line, call, frame)
                variable = environment_read(node.test)
                inside = (frame[0], frame[1], variable or frame[2])
                self.scan(node.body, weaker(context, "if"), owner, at, inside)
                self.scan(node.orelse, weaker(context, "if"), owner, at, frame)
                continue
            if is_try(node):
                handlers: list[ast.ExceptHandler] = getattr(node, "handlers", [])
                guarded = any(catches_import_error(h) for h in handlers)
                try_body: list[ast.stmt] = getattr(node, "body", [])
                tried: Context = weaker(context, "try") if guarded else context
                self.scan(try_body, tried, owner, at, frame)
                parts = [h.body for h in handlers]
                parts += [getattr(node, "orelse", []), getattr(node, "finalbody", [])]
                for part in parts:
                    self.scan(part, context, owner, at, frame)
                continue
            for name, call in self.calls(node, owner):
                self.note(name, context, line, call, frame)


ENVIRONS = frozenset(["environ", "envs", "env"])


def environment_read(test: ast.expr) -> str | None:
    """The environment variable an `if` test reads, so that its body runs only where it
    is set: `os.environ.get("X")`, `os.getenv("X")`, `os.environ["X"]`, `"X" in
    os.environ`, an `envs.X` / `envs.X.get()` settings object (SGLang's, vLLM's), and any
    of them bound by `name := ...` (None: the test reads no such variable)."""
    if isinstance(test, ast.NamedExpr):
        test = test.value
    if isinstance(test, ast.Compare) and isinstance(test.ops[0], ast.In):
        left = test.left
        if isinstance(left, ast.Constant) and isinstance(left.value, str):
            return left.value if _environ(test.comparators[0]) else None
        return None
    if isinstance(test, ast.Call):
        func = test.func
        if isinstance(func, ast.Attribute) and func.attr in ("get", "getenv"):
            if func.attr == "getenv" or _environ(func.value):
                first = test.args[0] if test.args else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    return first.value
            if func.attr == "get" and not test.args:  # envs.X.get()
                return _setting(func.value)
        return None
    if isinstance(test, ast.Subscript) and _environ(test.value):
        key = subscript_key(test)
        return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
    return _setting(test)


def _environ(node: ast.expr) -> bool:
    """`os.environ` or `environ`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ"
    return isinstance(node, ast.Name) and node.id == "environ"


def _setting(node: ast.expr) -> str | None:
    """`envs.X` with X written as environment variables are: X."""
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
        return None
    name = node.attr
    if node.value.id in ENVIRONS and name.isupper() and "_" in name:
        return name
    return None
