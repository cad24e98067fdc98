"""One module's source read with ast: its import edges, the names it binds, its lazy table.

Each import edge records its context: "module" (runs when the module is imported), "if"
(module level, under a condition), "try" (module level, inside a try whose first
ImportError-catching handler swallows it), "fallback" (inside such a handler's body or
another except body: runs only when the try failed; `group` names the try, so that the
two are judged together), "typing" (under `if TYPE_CHECKING:`, never runs) or "function"
(inside a def: runs only when called). A function the module calls while it runs (a
statement, a decorator, a class body, a default argument: called_at_import) imports at
startup: its imports take the context of the call.

Where reading stops inside the module, it records a door: `importlib.import_module(x)` or
`__import__(x)` with a name computed at run time (with the constant prefix it starts
with, when there is one), in whatever context it stands.
"""

from __future__ import annotations

import ast

from ..shared import CONTEXT_RANK, RUNS, weaker
from .answers import answered, factories, literal_keys
from .astutil import (
    absolute_module,
    all_mutation,
    binds_dynamically,
    binds_globals,
    bound_names,
    call_name,
    catches_import_error,
    computed_prefix,
    constant_import,
    constant_text,
    guards_import,
    is_main_guard,
    is_sys_modules_self,
    is_try,
    is_type_checking,
    literal_string,
    literal_strings,
    pkgutil_names,
    scope_names,
    subscript_key,
    suppresses_import_error,
)
from .calls import called_at_import
from .compilable import compile_error
from .lazy import LazyExports
from .versionchecks import version_checks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple, Union

    from ..shared import Context
    from .astutil import Names

    Edge = Dict[str, Any]
    FunctionDef = Union[ast.FunctionDef, ast.AsyncFunctionDef]
    Condition = Optional[str]
    Group = Optional[int]
    Bodies = Dict[str, Tuple[FunctionDef, List[Edge], List[Edge]]]
    Reading = Tuple[List[Edge], List[Edge]]

STATEMENT_CHARS = 160
IMPORT_CALLS = ("import_module", "__import__")


def raises_instead(handlers: list[ast.ExceptHandler]) -> bool:
    """Whether a handler that catches ImportError raises (a bare `raise` too): the
    import is a check that fails loudly (FastAPI's ensure_multipart_is_installed turns
    it into a RuntimeError), not an optional one."""
    for handler in handlers:
        if catches_import_error(handler) and any(
            isinstance(n, ast.Raise) for n in ast.walk(handler)
        ):
            return True
    return False


def analyze_source(
    text: str,
    modname: str,
    is_package: bool,
    as_main: bool = False,
    runs: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Import edges, bound names, doors and any lazy-export table of one module's source.

    `as_main`: the module runs as __main__ (a script, `python -m`): its
    `if __name__ == "__main__":` block runs. `runs`: its functions that startup calls as
    it runs the module (the function a console script names).
    """
    tree = ast.parse(text)
    refused = compile_error(tree, text)  # what the compiler refuses after the parser took it
    if refused is not None:
        raise refused
    return Analyser(text, modname, is_package, as_main, runs).run(tree)


class Analyser:
    """Reads one module's statements in the order Python runs them."""

    def __init__(
        self,
        text: str,
        modname: str,
        is_package: bool,
        as_main: bool = False,
        runs: tuple[str, ...] = (),
    ) -> None:
        self.lines = text.splitlines()
        self.modname = modname
        # a script or `-m`: its `if __name__ == "__main__":` runs
        self.as_main = as_main or modname == "__main__"
        self.runs = runs
        self.package = modname if is_package else modname.rpartition(".")[0]
        # module-level function (a method: "Class.name") -> its imports, as if its body
        # ran at module level
        self.bodies: Bodies = {}
        self.qual = ""  # the classes the statement being read stands in ("A.B.")
        self.rerun = False  # reading a function's body again for `bodies`
        self.imports: list[Edge] = []
        self.doors: list[Edge] = []
        self.defines: set[str] = set()
        self.all: list[str] | None = None
        self.dynamic = False
        # what a module __getattr__ can answer (answers.py): False while none was read,
        # None once anything makes every name possible
        self.answers: dict[str, Any] | bool | None = False
        self.getattrs: list[FunctionDef] = []  # the module __getattr__ defs, read in run()
        # a factory of module __getattr__s (answers.py): `def f(module): def wrapper(name):
        # ... raise AttributeError(...)`, read only where the text can hold one
        self.makes_getattr = "AttributeError" in text and "return " in text
        self.stars: list[str] = []
        self.loops: dict[str, list[str]] = {}  # a module-level loop's name: its literal list
        # inside a try whose ImportError handler raises: an install check
        self.checking = False
        self.lazy = LazyExports(self.package, modname)
        self.dynamic_imports = "import_module" in text or "__import__" in text
        self.hooks = "meta_path" in text  # an import hook: see run()
        self.nested_binds = "globals()" in text or "sys.modules[__name__]" in text
        # the scope a statement is read in, and the names each scope binds to a string
        self.scope: ast.AST | None = None
        self.scopes: dict[int, Names] = {}
        self.lists: frozenset[str] = frozenset()

    def run(self, tree: ast.Module) -> dict[str, Any]:
        self.scope = tree
        if self.dynamic_imports:
            self.lists = pkgutil_names(tree)
        self.visit(tree.body, "module", None)
        self.read_getattrs(tree)
        called = self.run_called(tree)
        if (
            not self.dynamic
            and self.nested_binds
            and any(binds_globals(n) for n in ast.walk(tree) if isinstance(n, ast.stmt))
        ):
            # `globals()[name] = value` in a function the import runs (numba.core.config's
            # _EnvReloader): names bound at run time, any name may exist
            self.dynamic, self.answers = True, None
        hooks = self.hooks and any(
            isinstance(n, ast.Attribute) and n.attr == "meta_path" for n in ast.walk(tree)
        )
        if hooks:
            # It installs an import hook (pkg_resources.extern's VendorImporter): the
            # submodules it serves, and so the names `from it import …` finds, are not listed
            self.dynamic, self.answers = True, None
        # every path of the module __getattr__ read, and nothing else binds names at run
        # time (set after the overrides above)
        self.lazy.answered = self.dynamic and isinstance(self.answers, dict)
        return {
            "imports": self.imports,
            "doors": self.doors,
            "defines": sorted(self.defines),
            "all": self.all,
            "dynamic": self.dynamic,
            # the names a module __getattr__ can return for, where that is all that is
            # dynamic about the module (None: any name)
            "getattr": self.answers if self.dynamic and isinstance(self.answers, dict) else None,
            "hooks": hooks,
            "stars": self.stars,
            "lazy": self.lazy.facts(),
            "checks": version_checks(tree, self.lines, called),
            "factories": factories(tree, literal_keys(tree)) if self.makes_getattr else {},
        }

    def read_getattrs(self, tree: ast.Module) -> None:
        """What the module __getattr__ (each, where branches define several) can answer
        for, with the module's tables and the factories its own was made by."""
        if not self.getattrs or self.answers is None:
            return
        tables, delegates = literal_keys(tree), self.delegates(tree)
        for node in self.getattrs:
            found = answered(node, tables, delegates) if self.answers is not None else None
            if isinstance(self.answers, dict) and found is not None:  # another branch's
                if found.get("delegate") != self.answers.get("delegate"):
                    found = None
                else:
                    for key in ("names", "prefixes"):
                        found[key] = sorted(set(found[key]) | set(self.answers[key]))
            self.answers = found

    def delegates(self, tree: ast.Module) -> dict[str, list[str]]:
        """Module-level names bound to what an imported factory made for this module
        (`_getattr_migration = getattr_migration(__name__)`): module, function, name."""
        imported: dict[str, tuple[str, str]] = {}
        out: dict[str, list[str]] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    imported[alias.asname or alias.name] = (self.absolute(node), alias.name)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
                if (
                    isinstance(target, ast.Name)
                    and isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Name)
                    and value.func.id in imported
                    and [a.id for a in value.args if isinstance(a, ast.Name)] == ["__name__"]
                    and len(value.args) == 1
                ):
                    module, function = imported[value.func.id]
                    out[target.id] = [module, function, self.modname]
        return out

    # -- edges ----------------------------------------------------------------------------

    def statement(self, node: ast.stmt | ast.expr) -> str:
        lines = self.lines
        first = lines[node.lineno - 1].strip() if node.lineno <= len(lines) else ""
        end = getattr(node, "end_lineno", node.lineno) or node.lineno
        if end > node.lineno:
            first += " ..."
        return first[:STATEMENT_CHARS]

    def absolute(self, node: ast.ImportFrom) -> str:
        return absolute_module(node, self.package)

    def add_edge(
        self,
        module: str,
        names: list[str],
        node: ast.stmt | ast.expr,
        context: Context,
        condition: Condition,
        group: Group,
    ) -> None:
        self.imports.append(
            {
                "module": module,
                "names": names,
                "line": node.lineno,
                "context": context,
                "statement": self.statement(node),
                "condition": condition,
                "group": group,
            }
        )
        if self.checking and context == "function":
            self.imports[-1]["raises"] = True

    def calls(self, node: ast.AST, context: Context, condition: Condition, group: Group) -> None:
        """importlib.import_module(...) and __import__(...) calls anywhere in a statement:
        an edge when the name is a constant, a door when it is computed."""
        if not self.dynamic_imports:
            return
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Call) or call_name(sub) not in IMPORT_CALLS:
                continue
            module = constant_import(sub)
            text = constant_text(sub.args[0], self.names()) if sub.args else None
            if module is None and text and not text.startswith("."):
                module = text  # a name bound to a constant: `name = "a.b"; import_module(name)`
            if module is None and text:
                module = self.prefix(sub)  # a constant relative name, resolved
            if module is None and sub.args:
                module = self.own_name(sub.args[0])  # __package__ + ".linalg"
            if module:
                self.add_edge(module, [], sub, context, condition, group)
            elif sub.args:
                self.doors.append(
                    {
                        "line": sub.lineno,
                        "context": context,
                        "statement": self.statement(sub),
                        "prefix": self.prefix(sub),
                    }
                )

    def names(self) -> Names:
        """The names the scope being read binds to a known string (read once a scope)."""
        scope = self.scope
        if scope is None:
            return {}
        found = self.scopes.get(id(scope))
        if found is None:
            found = self.scopes[id(scope)] = scope_names(scope, self.lists)
        return found

    def own_name(self, node: ast.expr) -> str | None:
        """`__package__ + ".sub"` / `__name__ + ".sub"`: a constant name after all."""
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
            return None
        left, right = node.left, literal_string(node.right)
        if not (isinstance(left, ast.Name) and right and right.startswith(".")):
            return None
        base = {"__package__": self.package, "__name__": self.modname}.get(left.id)
        return base + right if base else None

    def prefix(self, call: ast.Call) -> str | None:
        """The constant start of a computed module name, made absolute: `"pkg.models." +
        name`, f"pkg.{x}", `("." + name, __package__)` (None: nothing constant)."""
        head = computed_prefix(call.args[0], self.names())
        if not head:
            return None
        if not head.startswith("."):
            return head
        anchor = call.args[1] if len(call.args) > 1 else None
        for kw in call.keywords:
            if kw.arg == "package":
                anchor = kw.value
        if not (isinstance(anchor, ast.Name) and anchor.id in ("__name__", "__package__")):
            return None  # relative to a package envsync does not know
        # import_module(".x", package=P) is P.x: the anchor is taken as a package name
        base = self.modname if anchor.id == "__name__" else self.package
        stripped = head.lstrip(".")
        for _ in range(len(head) - len(stripped) - 1):
            base = base.rpartition(".")[0]
        return base + "." + stripped if base else None

    # -- statements -----------------------------------------------------------------------

    def visit(
        self, body: list[ast.stmt], context: Context, condition: Condition, group: Group = None
    ) -> None:
        for node in body:
            # the module's own level: not a class body, whose names (a method named
            # __getattr__ among them) are the class's
            top = context in RUNS and not self.qual
            if top and not self.rerun and binds_dynamically(node):
                listed = self.looped(node)
                if listed is not None:  # `for k in ["a", "b"]: globals()[k] = ...`
                    self.defines.update(listed)
                else:  # names bound at run time: any name may exist
                    self.dynamic, self.answers = True, None
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.add_edge(alias.name, [], node, context, condition, group)
                    if top:
                        self.defines.add(alias.asname or alias.name.partition(".")[0])
            elif isinstance(node, ast.ImportFrom):
                self.import_from(node, context, condition, group, top)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(node, context, condition, top)
            elif isinstance(node, ast.ClassDef):
                if top:
                    self.defines.add(node.name)
                scope, self.scope = self.scope, node  # a class body is a scope of its own
                qual, self.qual = self.qual, self.qual + node.name + "."
                self.visit(node.body, context, condition, group)
                self.scope, self.qual = scope, qual
            elif isinstance(node, ast.If):
                self.branch(node, context, condition, group)
            elif is_try(node):
                self.attempt(node, context, condition, group)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    self.calls(item, context, condition, group)
                if any(suppresses_import_error(i) for i in node.items):
                    self.visit(node.body, weaker(context, "try"), condition, node.lineno)
                else:
                    self.visit(node.body, context, condition, group)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                name = getattr(node, "target", None)
                name = name.id if isinstance(name, ast.Name) else ""
                before = self.loops.pop(name, None)
                if top and isinstance(node, (ast.For, ast.AsyncFor)):
                    bound_names(node.target, self.defines)
                    listed = literal_strings(node.iter)
                    if name and listed is not None:
                        self.loops[name] = listed
                self.visit(node.body, context, condition, group)
                self.visit(node.orelse, context, condition, group)
                self.loops.pop(name, None)
                if before is not None:
                    self.loops[name] = before
            elif isinstance(node, ast.Assign):
                self.calls(node, context, condition, group)
                if top and not self.rerun:
                    self.assign(node)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                self.calls(node, context, condition, group)
                if top:
                    bound_names(node.target, self.defines)
                    if isinstance(node.target, ast.Name) and not self.rerun:
                        self.lazy.tables.assign(node.target.id, node.value)
            elif isinstance(node, ast.AugAssign):
                self.calls(node, context, condition, group)
                target = node.target
                if top and isinstance(target, ast.Name) and target.id == "__all__":
                    extra = literal_strings(node.value)
                    known = extra is not None and self.all is not None
                    self.all = self.all + extra if known else None  # type: ignore[operator]
            elif isinstance(node, (ast.Expr, ast.Return)):
                self.calls(node, context, condition, group)
                if top and not self.rerun:
                    self.lazy.tables.mutate(node)
                    added = all_mutation(node)
                    if added is not False and self.all is not None:
                        # `__all__.append("x")` keeps it known; `append(name)` does not
                        self.all = self.all + added if added is not None else None

    def import_from(
        self, node: ast.ImportFrom, context: Context, condition: Condition, group: Group, top: bool
    ) -> None:
        target = self.absolute(node)
        self.add_edge(target, [a.name for a in node.names], node, context, condition, group)
        if top:
            for alias in node.names:
                if alias.name == "*":
                    self.stars.append(target)
                else:
                    self.defines.add(alias.asname or alias.name)
        elif context == "typing" and target.startswith(self.modname + ".") and not self.rerun:
            # a lazy module's table may name what it imports for type checkers only
            for alias in node.names:
                if alias.name == "*":
                    self.lazy.typing_stars.append(target)
                else:
                    self.lazy.typing_names.setdefault(alias.asname or alias.name, target)

    def function(
        self, node: FunctionDef, context: Context, condition: Condition, top: bool
    ) -> None:
        if top:
            self.defines.add(node.name)
            if node.name == "__getattr__" and not self.rerun:
                self.dynamic = True
                self.getattrs.append(node)  # read once the module's tables are known
                self.lazy.getattr = sorted(
                    {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                )
        scope, self.scope = self.scope, node
        self.visit(node.body, "function", condition)
        self.function_rerun(node, context)
        self.scope = scope

    def function_rerun(self, node: FunctionDef, context: Context) -> None:
        """A module-level function's imports once more, as if its body ran at module level
        (for a call of it while the module runs); its names are not the module's."""
        if context == "module":
            imports, doors = self.read_body(node)
            self.bodies[self.qual + node.name] = (node, imports, doors)

    def read_body(self, node: FunctionDef, given: dict[str, str] | None = None) -> Reading:
        """A function's imports and doors as if its body ran at module level, `given`
        binding its parameters to the strings every call passes them."""
        saved = (self.imports, self.defines, self.stars, self.all, self.dynamic, self.doors)
        bodies, scope, self.scope = self.bodies, self.scope, node
        if given:  # read again while the module's bodies are being read: they stay
            self.bodies = dict(bodies)
            self.scopes[id(node)] = scope_names(node, self.lists, given)
        self.imports, self.defines, self.stars, self.doors = [], set(), [], []
        rerun, self.rerun = self.rerun, True  # a def inside a def: still a rerun
        self.visit(node.body, "module", None)
        self.rerun = rerun
        found = (self.imports, self.doors)
        if given:
            del self.scopes[id(node)]
        self.bodies, self.scope = bodies, scope
        self.imports, self.defines, self.stars, self.all, self.dynamic, self.doors = saved
        return found

    def branch(self, node: ast.If, context: Context, condition: Condition, group: Group) -> None:
        if self.as_main and is_main_guard(node.test):
            self.visit(node.body, context, condition, group)
        elif is_type_checking(node.test):
            self.visit(node.body, weaker(context, "typing"), condition, group)
            self.visit(node.orelse, context, condition, group)
        else:
            cond = condition or self.statement(node)
            self.visit(node.body, weaker(context, "if"), cond, group)
            self.visit(node.orelse, weaker(context, "if"), cond, group)

    def attempt(self, node: ast.stmt, context: Context, condition: Condition, group: Group) -> None:
        """A try statement (ast.TryStar too, which Python 3.8's ast does not know)."""
        here = node.lineno
        handlers: list[ast.ExceptHandler] = getattr(node, "handlers", [])
        body: list[ast.stmt] = getattr(node, "body", [])
        guarded = guards_import(handlers)
        tried: Context = context
        if guarded:
            # a guarded import in an except body runs only when that try failed, and its
            # own failure is caught: guarded, as a try's body is (starlette's formparsers:
            # `except ModuleNotFoundError: try: import multipart except ...: multipart = None`)
            tried = "try" if context == "fallback" else weaker(context, "try")
        checking, self.checking = self.checking, self.checking or raises_instead(handlers)
        self.visit(body, tried, condition, here)
        self.checking = checking
        # an except body inside a guarded try's body: its failure is caught there too
        caught: Context = "try" if context == "try" else weaker(context, "fallback")
        for handler in handlers:
            self.visit(handler.body, caught, condition, here)
        self.visit(getattr(node, "orelse", []), context, condition, group)
        self.visit(getattr(node, "finalbody", []), context, condition, group)

    def looped(self, node: ast.stmt) -> list[str] | None:
        """The names `globals()[k] = v` binds where k is the name of a module-level loop
        over a literal list (NumPy's `for ta in ["float96", ...]: globals()[ta] = ...`)."""
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            return None
        target = node.targets[0]
        if not (isinstance(target, ast.Subscript) and call_name(target.value) == "globals"):
            return None
        key = subscript_key(target)
        return self.loops.get(key.id) if isinstance(key, ast.Name) else None

    def assign(self, node: ast.Assign) -> None:
        """A module-level assignment: the names it binds, `__all__`, a lazy table."""
        self.lazy.tables.mutate(node)
        for target in node.targets:
            bound_names(target, self.defines)
            if isinstance(target, ast.Name):
                if target.id == "__all__":
                    self.all = literal_strings(node.value)
                self.lazy.tables.assign(target.id, node.value)
            if is_sys_modules_self(target):
                self.lazy.replaced = True
                self.lazy.replacement(node.value)
        name = call_name(node.value) or ""
        if name.endswith("attach") and isinstance(node.value, ast.Call):  # attach, _attach
            self.lazy.attach(node.value)

    # -- functions the module calls while it runs -----------------------------------------

    def run_called(self, tree: ast.Module) -> dict[str, tuple[Context, int]]:
        """A function the module calls while it runs imports what it imports then, as
        surely as the call runs: `main()` at the bottom of a script is startup, not a
        lazy import. Each such import says at which line of the module it runs (`at`)."""
        functions = {name: body[0] for name, body in self.bodies.items()}
        binds = any(doors for _, _, doors in self.bodies.values())
        called, frames = called_at_import(
            tree, functions, self.as_main, self.runs, self.lists, binds
        )
        for name, (_, at) in called.items():
            node, plain_edges, plain_doors = self.bodies[name]
            end = getattr(node, "end_lineno", None) or node.lineno
            ran: dict[tuple[int, str], Edge] = {}
            for given, variable, context in frames[name]:
                edges, doors = plain_edges, plain_doors
                if doors and given:  # a computed import, its name a parameter's
                    edges, doors = self.read_body(node, given)
                for edge in edges:
                    if not node.lineno <= edge["line"] <= end or edge["context"] == "function":
                        continue
                    key = (edge["line"], edge["module"])
                    surest = weaker(context, edge["context"])
                    if key in ran and CONTEXT_RANK[ran[key]["context"]] <= CONTEXT_RANK[surest]:
                        continue
                    ran[key] = dict(edge, context=surest, at=at)
                    ran[key]["condition"] = edge["condition"] or (
                        f"{name}() runs at startup (the console script calls it)"
                        if at == 0
                        else f"{name}() runs while the module runs (called at line {at})"
                    )
                for door in doors:  # a computed import in a function that runs: it runs too
                    if node.lineno <= door["line"] <= end and door["context"] != "function":
                        opened = dict(door, context=weaker(context, door["context"]))
                        if variable:  # only where the environment sets it
                            opened["env"] = variable
                        if opened not in self.doors:
                            self.doors.append(opened)
            self.imports = [
                e
                for e in self.imports
                if not (e["context"] == "function" and (e["line"], e["module"]) in ran)
            ]
            self.imports += ran.values()
        return called
