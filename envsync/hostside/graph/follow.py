"""Calls made while modules are imported, followed across modules toward some imports.

The analyser follows the calls a module makes of its own functions while it runs
(calls.py); a call into another module (`app = FastAPI()`, then `@app.post("/files")`)
runs code the module's facts do not hold. This follows those calls on demand: asked
whether startup runs some imports that sit inside functions (`targets`: module, line),
it runs the module-level code of the modules that may lead there (`allowed`: the
modules that import the targets' modules, as the whole graph says) as Python would,
statement by statement, with the values calls make: a class called makes an instance
and runs its `__init__`, which records what it sets on `self`; a method looked up on an
instance runs with it; a decorator is called with the function it decorates, and a
factory's decorator is what it returns; a function's parameters are the values the call
passes, or its defaults. What envsync cannot tell (a value from a module not allowed, a
builtin, a computed name) is no value: nothing is said to run that may not.

An import reached so answers with the context it runs in there (an `if`, a loop that may
not run, a try that swallows ImportError, a statement after an early return: each as
sure as the weakest step to it) and the chain of calls from a module's statement to it.
Nothing is imported or run.
"""

from __future__ import annotations

import ast

from ..facts.files import read_text
from ..shared import CONTEXT_RANK, weaker
from .astutil import (
    absolute_module,
    guards_import,
    is_main_guard,
    is_try,
    is_type_checking,
    suppresses_import_error,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, FrozenSet, Set, Tuple, Union

    from ..shared import Context
    from .finder import ModuleFinder

    Site = Tuple[str, int, str]  # file, line, statement
    Chain = Tuple[Site, ...]
    Value = Union[Tuple[str, str, str], "Fn"]  # ("cls" | "obj", module, qualname), a function
    Values = Set[Value]
    Env = Dict[str, Values]
    FunctionDef = Union[ast.FunctionDef, ast.AsyncFunctionDef]
    Signature = Tuple[FrozenSet[Any], ...]

STATEMENT_CHARS = 160
DEPTH = 40  # calls within calls, at most
RUNS = 20000  # function bodies run for one question, at most
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# statements after one of these (in a compound statement before them) may not run
LEAVES = (ast.Return, ast.Raise, ast.Break, ast.Continue)


class Fn:
    """A function as a value: its def, the instance it is bound to, the names it closes over."""

    __slots__ = ("bound", "closure", "module", "node", "qual")

    def __init__(
        self, module: Module, node: FunctionDef, qual: str, bound: Value | None, closure: Env
    ) -> None:
        self.module, self.node, self.qual = module, node, qual
        self.bound, self.closure = bound, closure


class Module:
    """A module's source, parsed: its classes by qualified name, its lines."""

    def __init__(self, name: str, file: str, tree: ast.Module, text: str, package: str) -> None:
        self.name, self.file, self.tree, self.package = name, file, tree, package
        self.lines = text.splitlines()
        self.classes: dict[str, ast.ClassDef] = {}
        todo: list[tuple[str, ast.AST]] = [("", tree)]
        while todo:
            prefix, node = todo.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ClassDef):
                    self.classes[prefix + child.name] = child
                    todo.append((prefix + child.name + ".", child))
                elif isinstance(child, ast.stmt) and not isinstance(child, FUNCTIONS):
                    todo.append((prefix, child))

    def statement(self, node: ast.AST) -> str:
        line = getattr(node, "lineno", 0)
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        return text[:STATEMENT_CHARS]

    def absolute(self, node: ast.ImportFrom) -> str:
        return absolute_module(node, self.package)


class Frame:
    """Where a statement runs: its module, how surely, and the calls that led there."""

    __slots__ = ("chain", "context", "module")

    def __init__(self, module: Module, context: Context, chain: Chain) -> None:
        self.module, self.context, self.chain = module, context, chain

    def weaker(self, context: Context) -> Frame:
        return Frame(self.module, weaker(self.context, context), self.chain)


class Follower:
    """Runs the module-level code of `allowed` modules as far as values can be told,
    recording the surest context each target import runs in."""

    def __init__(
        self,
        finder: ModuleFinder,
        allowed: dict[str, Context],
        targets: set[tuple[str, int]],
        main: str | None = None,
    ) -> None:
        self.finder, self.allowed, self.targets, self.main = finder, allowed, targets, main
        self.parsed: dict[str, Module | None] = {}
        self.namespaces: dict[str, Env] = {}  # a module's names as it runs (or ran)
        self.attrs: dict[tuple[str, str], Env] = {}  # what methods set on instances
        self.memo: dict[tuple[Any, ...], Values] = {}
        self.fns: dict[tuple[int, Any], Fn] = {}
        self.found: dict[tuple[str, int], tuple[Context, Chain]] = {}
        self.bodies: set[int] = set()  # the class bodies running
        self.runs = 0
        self.exhausted = False

    # -- modules ----------------------------------------------------------------------------

    def module(self, name: str) -> Module | None:
        if name not in self.allowed:
            return None
        if name not in self.parsed:
            self.parsed[name] = None
            hit = self.finder.find(name)
            if hit is not None and hit[0] == "source" and hit[1]:
                try:
                    text = read_text(hit[1])
                    tree = ast.parse(text)
                except (OSError, SyntaxError, ValueError, RecursionError):
                    return None
                package = name if hit[2] is not None else name.rpartition(".")[0]
                self.parsed[name] = Module(name, hit[1], tree, text, package)
        return self.parsed[name]

    def run_module(self, name: str) -> Env:
        """The module's names, its module-level code run first (once)."""
        if name in self.namespaces:
            return self.namespaces[name]
        env: Env = {}
        self.namespaces[name] = env
        module = self.module(name)
        if module is not None:
            frame = Frame(module, self.allowed[name], ())
            self.body(module.tree.body, env, frame, set(), top=True)
        return env

    def member(self, module: str, name: str) -> Values:
        """`module.name`: a submodule, or what the module binds to the name."""
        if module + "." + name in self.allowed:
            return {("mod", module + "." + name, "")}
        return set(self.run_module(module).get(name, set())) if module in self.allowed else set()

    # -- values -----------------------------------------------------------------------------

    def fn(self, module: Module, node: FunctionDef, qual: str, bound: Value | None, env: Env) -> Fn:
        key = (id(node), bound)
        if key not in self.fns:
            self.fns[key] = Fn(module, node, qual, bound, env)
        return self.fns[key]

    def attribute(self, value: Value, attr: str) -> Values:
        if isinstance(value, Fn):
            return set()
        kind, module, qual = value
        if kind == "mod":
            return self.member(module, attr)
        found = self.method(module, qual, attr, value if kind == "obj" else None, set())
        if kind == "obj":
            found |= self.attrs.get((module, qual), {}).get(attr, set())
        return found

    def method(
        self, module: str, qual: str, attr: str, bound: Value | None, seen: set[tuple[str, str]]
    ) -> Values:
        """A def (or a class-level name) of the class or of its bases, bound to `bound`."""
        mod = self.module(module)
        node = mod.classes.get(qual) if mod is not None else None
        if mod is None or node is None or (module, qual) in seen:
            return set()
        seen.add((module, qual))
        for stmt in node.body:
            if isinstance(stmt, FUNCTIONS) and stmt.name == attr:
                kinds = {d.id for d in stmt.decorator_list if isinstance(d, ast.Name)}
                if "staticmethod" in kinds:
                    bound = None
                elif "classmethod" in kinds:
                    bound = ("cls", module, qual)
                return {self.fn(mod, stmt, qual + "." + attr, bound, {})}
        for base in node.bases:
            for value in self.static(base, mod, {}):
                if not isinstance(value, Fn) and value[0] == "cls":
                    found = self.method(value[1], value[2], attr, bound, seen)
                    if found:
                        return found
        return set()

    def static(self, node: ast.expr, module: Module, env: Env) -> Values:
        """What a name or an attribute is, without running anything."""
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            return self.member(module.name, node.id)
        if isinstance(node, ast.Attribute):
            out: Values = set()
            for value in self.static(node.value, module, env):
                out |= self.attribute(value, node.attr)
            return out
        return set()

    # -- expressions ------------------------------------------------------------------------

    def evaluate(self, node: ast.expr | None, env: Env, frame: Frame) -> Values:
        """The values of `node`, its calls run as it is evaluated (not those in a lambda)."""
        if node is None or isinstance(node, ast.Lambda):
            return set()
        if isinstance(node, ast.Call):
            callees = self.evaluate(node.func, env, frame)
            args = [self.evaluate(a, env, frame) for a in node.args]
            kwargs = {k.arg: self.evaluate(k.value, env, frame) for k in node.keywords if k.arg}
            for k in node.keywords:
                if k.arg is None:
                    self.evaluate(k.value, env, frame)
            if any(isinstance(a, ast.Starred) for a in node.args) or len(kwargs) < len(
                node.keywords
            ):
                args, kwargs = [], {}  # *args, **kwargs: parameters envsync cannot place
            site = (frame.module.file, node.lineno, frame.module.statement(node))
            out: Values = set()
            for callee in callees:
                out |= self.call(callee, args, kwargs, frame, site)
            return out
        if isinstance(node, ast.Name):
            return self.static(node, frame.module, env)
        if isinstance(node, ast.Attribute):
            out = set()
            for base in self.evaluate(node.value, env, frame):
                out |= self.attribute(base, node.attr)
            return out
        if isinstance(node, ast.BoolOp):
            out = set()
            for operand in node.values:
                out |= self.evaluate(operand, env, frame)
            return out
        if isinstance(node, ast.IfExp):
            self.evaluate(node.test, env, frame)
            branch = frame.weaker("if")
            return self.evaluate(node.body, env, branch) | self.evaluate(node.orelse, env, branch)
        if isinstance(node, ast.NamedExpr):
            named = self.evaluate(node.value, env, frame)
            env[node.target.id] = named
            return named
        if isinstance(node, (ast.Await, ast.Starred)):
            return self.evaluate(node.value, env, frame)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.evaluate(child, env, frame)
        return set()

    def call(
        self,
        callee: Value,
        args: list[Values],
        kwargs: dict[str, Values],
        frame: Frame,
        site: Site,
    ) -> Values:
        if isinstance(callee, Fn):
            return self.run(callee, args, kwargs, frame, site)
        kind, module, qual = callee
        if kind == "cls":
            made: Value = ("obj", module, qual)
            for init in self.method(module, qual, "__init__", made, set()):
                if isinstance(init, Fn):
                    self.run(init, args, kwargs, frame, site)
            return {made}
        if kind == "obj":
            out: Values = set()
            for method in self.method(module, qual, "__call__", callee, set()):
                if isinstance(method, Fn):
                    out |= self.run(method, args, kwargs, frame, site)
            return out
        return set()

    def run(
        self, fn: Fn, args: list[Values], kwargs: dict[str, Values], frame: Frame, site: Site
    ) -> Values:
        """A function's body run as called from `site`: what it returns."""
        if len(frame.chain) >= DEPTH or self.runs >= RUNS:
            self.exhausted = True  # what lies deeper is not said
            return set()
        env = dict(fn.closure)
        env.update(self.bind(fn, args, kwargs))
        signature = tuple(frozenset(v) for _, v in sorted(env.items()))
        key = (id(fn.node), fn.bound, signature, frame.context)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = set()
        self.runs += 1
        inner = Frame(fn.module, frame.context, (*frame.chain, site))
        returned: Values = set()
        self.body(fn.node.body, env, inner, returned)
        self.memo[key] = returned
        return returned

    def bind(self, fn: Fn, args: list[Values], kwargs: dict[str, Values]) -> Env:
        """The parameters as the call passes them, else their defaults (read, not run)."""
        spec = fn.node.args
        positional = [a.arg for a in spec.posonlyargs + spec.args]
        env: Env = {}
        if fn.bound is not None and positional:
            env[positional[0]] = {fn.bound}
            positional = positional[1:]
        defaults = spec.defaults
        for param, default in zip(positional[len(positional) - len(defaults) :], defaults):
            env[param] = self.static(default, fn.module, {})
        for param, kw_default in zip([a.arg for a in spec.kwonlyargs], spec.kw_defaults):
            env[param] = self.static(kw_default, fn.module, {}) if kw_default else set()
        for param, value in zip(positional, args):
            env[param] = value
        for name, value in kwargs.items():
            env[name] = value
        return env

    # -- statements -------------------------------------------------------------------------

    def body(
        self, stmts: list[ast.stmt], env: Env, frame: Frame, returned: Values, top: bool = False
    ) -> None:
        """Run `stmts` in order; after a compound statement that may leave early, the rest
        runs less surely."""
        for node in stmts:
            self.statement(node, env, frame, returned, top)
            if not isinstance(node, (FUNCTIONS, ast.ClassDef)) and _may_leave(node):
                if isinstance(node, LEAVES):
                    return
                frame = frame.weaker("if")

    def statement(
        self, node: ast.stmt, env: Env, frame: Frame, returned: Values, top: bool
    ) -> None:
        module = frame.module
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self.imported(node, env, frame)
        elif isinstance(node, FUNCTIONS):
            self.define(node, env, frame)
        elif isinstance(node, ast.ClassDef):
            self.klass(node, env, frame)
        elif isinstance(node, ast.If):
            if is_type_checking(node.test):
                self.body(node.orelse, env, frame, returned, top)
            elif is_main_guard(node.test):
                runs = top and self.main == module.name
                self.body(node.body if runs else node.orelse, env, frame, returned, top)
            else:
                self.evaluate(node.test, env, frame)
                self.body(node.body, env, frame.weaker("if"), returned, top)
                self.body(node.orelse, env, frame.weaker("if"), returned, top)
        elif is_try(node):
            self.attempt(node, env, frame, returned, top)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            self.evaluate(getattr(node, "iter", None) or getattr(node, "test", None), env, frame)
            # a loop's body may run no time at all
            self.body(node.body, env, frame.weaker("if"), returned, top)
            self.body(node.orelse, env, frame.weaker("if"), returned, top)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.evaluate(item.context_expr, env, frame)
            caught = any(suppresses_import_error(i) for i in node.items)
            self.body(node.body, env, frame.weaker("try") if caught else frame, returned, top)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            value = self.evaluate(node.value, env, frame)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                self.assign(target, value, env, frame)
        elif isinstance(node, ast.Return):
            returned |= self.evaluate(node.value, env, frame)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.evaluate(child, env, frame)

    def attempt(self, node: ast.stmt, env: Env, frame: Frame, returned: Values, top: bool) -> None:
        handlers: list[ast.ExceptHandler] = getattr(node, "handlers", [])
        guarded = guards_import(handlers)
        tried = frame.weaker("try") if guarded else frame
        self.body(getattr(node, "body", []), env, tried, returned, top)
        # a handler runs only where the try failed (caught: the try's own failure was);
        # where the try's body runs an import asked about (a module missing here), it fails
        body: list[ast.stmt] = getattr(node, "body", [])
        caught = frame.weaker("try") if frame.context == "try" else frame.weaker("fallback")
        if self.fails(frame.module, body):
            caught = frame.weaker("try") if frame.context == "try" else frame
        for handler in handlers:
            self.body(handler.body, env, caught, returned, top)
        self.body(getattr(node, "orelse", []), env, frame.weaker("if"), returned, top)
        self.body(getattr(node, "finalbody", []), env, frame, returned, top)

    def fails(self, module: Module, body: list[ast.stmt]) -> bool:
        """Whether `body` holds an import asked about, outside a def it holds."""
        todo: list[ast.AST] = list(body)
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if (module.name, node.lineno) in self.targets:
                    return True
            elif isinstance(node, ast.stmt) and not isinstance(node, (FUNCTIONS, ast.ClassDef)):
                todo += ast.iter_child_nodes(node)
        return False

    def imported(self, node: ast.Import | ast.ImportFrom, env: Env, frame: Frame) -> None:
        module = frame.module
        key = (module.name, node.lineno)
        if key in self.targets:
            surest = self.found.get(key)
            if surest is None or CONTEXT_RANK[frame.context] < CONTEXT_RANK[surest[0]]:
                site = (module.file, node.lineno, module.statement(node))
                self.found[key] = (frame.context, (*frame.chain, site))
        if isinstance(node, ast.Import):
            for alias in node.names:
                head = alias.name if alias.asname else alias.name.partition(".")[0]
                env[alias.asname or head] = {("mod", head, "")}
            return
        base = module.absolute(node)
        for alias in node.names:
            if alias.name != "*":
                env[alias.asname or alias.name] = self.member(base, alias.name)

    def define(self, node: FunctionDef, env: Env, frame: Frame) -> None:
        """A def: its decorators and defaults run; the name is what the decorators return
        (the function itself where that is not known)."""
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d]:
            self.evaluate(default, env, frame)
        # a def in a function closes over its names; one at module level or in a class
        # body reads the module's
        local = env is not self.namespaces.get(frame.module.name) and id(env) not in self.bodies
        value: Values = {self.fn(frame.module, node, node.name, None, env if local else {})}
        for deco in reversed(node.decorator_list):
            applied = self.evaluate(deco, env, frame)
            site = (frame.module.file, deco.lineno, frame.module.statement(deco))
            made: Values = set()
            for decorator in applied:
                made |= self.call(decorator, [value], {}, frame, site)
            value = made or value
        env[node.name] = value

    def klass(self, node: ast.ClassDef, env: Env, frame: Frame) -> None:
        """A class statement: its bases, keywords and decorators are evaluated and its body
        runs (its names are the class's); the name is the class."""
        for expr in node.bases + [k.value for k in node.keywords] + node.decorator_list:
            self.evaluate(expr, env, frame)
        qual = next((q for q, c in frame.module.classes.items() if c is node), node.name)
        scope: Env = {}  # its names are the class's; others are the module's
        self.bodies.add(id(scope))
        self.body(node.body, scope, frame, set())
        self.bodies.discard(id(scope))
        env[node.name] = {("cls", frame.module.name, qual)}

    def assign(self, target: ast.expr, value: Values, env: Env, frame: Frame) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = env.get(target.id, set()) | value
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            for owner in env.get(target.value.id, set()):
                if not isinstance(owner, Fn) and owner[0] == "obj":
                    held = self.attrs.setdefault((owner[1], owner[2]), {})
                    held[target.attr] = held.get(target.attr, set()) | value
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.assign(element, set(), env, frame)


def _may_leave(node: ast.stmt) -> bool:
    """Whether running `node` may end its block early (a return, raise, break or continue
    in it, not in a def or class it holds)."""
    todo: list[ast.AST] = [node]
    while todo:
        current = todo.pop()
        if isinstance(current, LEAVES):
            return True
        # an except body and a match case are not statements, but hold them
        todo += [
            c
            for c in ast.iter_child_nodes(current)
            if not isinstance(c, (FUNCTIONS, ast.ClassDef, ast.Lambda, ast.expr))
        ]
    return False


def follow(
    finder: ModuleFinder,
    allowed: dict[str, Context],
    targets: list[tuple[str, int]],
    main: str | None = None,
    runs: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Whether and how surely the imports at `targets` (module, line) run while startup
    imports `allowed` (module: the context startup runs it in), `main` running as
    __main__ and, after its module, each function of `runs` (a console script's)."""
    follower = Follower(finder, allowed, set(targets), main)
    try:
        for name in allowed:
            follower.run_module(name)
        for name, functions in sorted((runs or {}).items()):
            module = follower.module(name)
            if module is None:
                continue
            frame = Frame(module, allowed[name], ())
            for function in functions:
                site = (module.file, 0, f"{function}() (the console script calls it)")
                for value in list(follower.run_module(name).get(function, ())):
                    follower.call(value, [], {}, frame, site)
    except RecursionError:  # calls or expressions nested deeper than the stack: what was
        follower.exhausted = True  # found holds, the rest is not said
    answers = {
        f"{module}:{line}": {"context": context, "chain": [list(site) for site in chain]}
        for (module, line), (context, chain) in sorted(follower.found.items())
    }
    return {
        "answers": answers,
        "parsed": sum(1 for m in follower.parsed.values() if m is not None),
        "runs": follower.runs,
        "exhausted": follower.exhausted,
    }
