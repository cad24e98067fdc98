"""Version checks a module runs while it is imported, read as the code does: an `if` whose
test compares another package's version with a constant, and whose body raises.

numba's `_ensure_critical_deps()` (called at module level) is the model:

    def extract_version(mod):
        return tuple(map(int, mod.__version__.split('.')[:2]))
    import numpy as np
    numpy_version = extract_version(np)
    if numpy_version > (2, 2):
        raise ImportError(msg)

It compares the first two parts only: NumPy 2.2.6 passes, 2.3.1 raises. So each check keeps
how it compares (`compares`: "ints", a tuple of the first `parts` integers; "version", as
`packaging.version.Version` or `LooseVersion` reads it; "str", the text itself, as Python
compares two strings) and envsync evaluates it on each host's installed version.

Read: module level, a module-level function the module calls while it runs, the `else` of
a `try`; a check under a `try` that catches is not (its raise is caught), and an `if`
inside another `if` is kept with the context "if".
"""

from __future__ import annotations

import ast

from ..shared import weaker
from .astutil import callee

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Tuple, Union

    from ..shared import Context

    # ("module", import name) for a module object; ("version", "module"|"dist", name,
    # parts, how it compares: "str" | "version" | "ints") for a version read of one
    Value = Tuple[Any, ...]
    Env = Dict[str, Value]
    FunctionDef = Union[ast.FunctionDef, ast.AsyncFunctionDef]
    Functions = Dict[str, FunctionDef]
    Check = Dict[str, Any]

STATEMENT_CHARS = 160
PARSERS = ("Version", "parse", "LooseVersion", "StrictVersion", "parse_version")
OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def version_checks(
    tree: ast.Module, lines: list[str], called: dict[str, tuple[Context, int]]
) -> list[Check]:
    """The version checks that run while the module is imported. `called`: the module-level
    functions it calls as it runs, with the context of the call and its line."""
    if "version" not in "\n".join(lines):
        return []
    functions: Functions = {
        n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    reader = Reader(lines, functions)
    env: Env = {}
    reader.scan(tree.body, env, "module", None)
    for name, (context, at) in sorted(called.items()):
        node = functions.get(name)
        if node is not None:
            reader.scan(node.body, dict(env), context, at or None, scope=node)
    return reader.found


class Reader:
    def __init__(self, lines: list[str], functions: Functions) -> None:
        self.lines = lines
        self.functions = functions
        self.found: list[Check] = []

    def statement(self, node: ast.AST) -> str:
        line = getattr(node, "lineno", 0)
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        return text[:STATEMENT_CHARS]

    def scan(
        self,
        body: list[ast.stmt],
        env: Env,
        context: Context,
        at: int | None,
        scope: FunctionDef | None = None,
    ) -> None:
        local: Functions = dict(self.functions)
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                local[node.name] = node
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        env[alias.asname] = ("module", alias.name)
                    else:
                        top = alias.name.partition(".")[0]
                        env[top] = ("module", top)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                for alias in node.names:
                    bound = alias.asname or alias.name
                    if alias.name == "__version__":
                        env[bound] = ("version", "module", node.module, None, "str")
                    elif alias.name == "version" and node.module.startswith("importlib"):
                        env.pop(bound, None)  # importlib.metadata.version: read as a call
                    else:
                        env[bound] = ("module", f"{node.module}.{alias.name}")
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    value = self.value(node.value, env, local)
                    if value is None:
                        env.pop(target.id, None)
                    else:
                        env[target.id] = value
            elif isinstance(node, ast.If):
                self.check(node, env, local, context, at)
                inner = weaker(context, "if")
                self.scan(node.body, dict(env), inner, at, scope)
                self.scan(node.orelse, dict(env), inner, at, scope)
            elif isinstance(node, ast.Try):
                # what the try runs may be caught; its else is not
                self.scan(node.orelse, dict(env), context, at, scope)

    def value(self, node: ast.expr, env: Env, functions: Functions) -> Value | None:
        """What an expression is, as far as a version check cares: a module, or a version
        read of one (with the number of parts it keeps), or None."""
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if isinstance(node, ast.Attribute):
            if node.attr == "__version__":
                base = self.value(node.value, env, functions)
                if base is not None and base[0] == "module":
                    return ("version", "module", base[1], None, "str")
                return None
            base = self.value(node.value, env, functions)
            if base is not None and base[0] == "module":
                return ("module", f"{base[1]}.{node.attr}")
            return None
        if not isinstance(node, ast.Call):
            return None
        name = callee(node.func)
        args = node.args
        if name in PARSERS and len(args) == 1:
            inner = self.value(args[0], env, functions)
            if inner is None or inner[0] != "version" or inner[4] != "str":
                return None
            return (*inner[:4], "version")
        if (
            name == "version"
            and len(args) == 1
            and isinstance(args[0], ast.Constant)
            and isinstance(args[0].value, str)
        ):  # importlib.metadata.version("numpy")
            return ("version", "dist", args[0].value, None, "str")
        if name == "tuple" and len(args) == 1:
            return self.int_parts(args[0], env, functions)
        if isinstance(node.func, ast.Name) and node.func.id in functions:
            return self.call(functions[node.func.id], args, env, functions)
        return None

    def int_parts(self, node: ast.expr, env: Env, functions: Functions) -> Value | None:
        """`map(int, V.split(".")[:N])`: the first N parts of V as integers."""
        if not (
            isinstance(node, ast.Call)
            and callee(node.func) == "map"
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == "int"
        ):
            return None
        cut = node.args[1]
        if not isinstance(cut, ast.Subscript):
            return None
        index: Any = cut.slice
        index = getattr(index, "value", index)  # ast.Index before 3.9
        if not (
            isinstance(index, ast.Slice)
            and index.lower is None
            and isinstance(index.upper, ast.Constant)
            and isinstance(index.upper.value, int)
        ):
            return None
        split = cut.value
        if not (
            isinstance(split, ast.Call)
            and isinstance(split.func, ast.Attribute)
            and split.func.attr == "split"
            and len(split.args) == 1
            and isinstance(split.args[0], ast.Constant)
            and split.args[0].value == "."
        ):
            return None
        inner = self.value(split.func.value, env, functions)
        if inner is None or inner[0] != "version" or inner[4] != "str":
            return None
        return ("version", inner[1], inner[2], index.upper.value, "ints")

    def call(
        self, function: FunctionDef, args: list[ast.expr], env: Env, functions: Functions
    ) -> Value | None:
        """A local function whose body returns an expression of its parameters."""
        body = [
            s
            for s in function.body
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        ]
        params = [a.arg for a in function.args.args]
        if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
            return None
        if len(params) != len(args):
            return None
        inner: Env = {}
        for param, arg in zip(params, args):
            value = self.value(arg, env, functions)
            if value is not None:
                inner[param] = value
        return self.value(body[0].value, inner, {})

    def check(
        self, node: ast.If, env: Env, functions: Functions, context: Context, at: int | None
    ) -> None:
        raised = next((s for s in node.body if isinstance(s, ast.Raise)), None)
        if raised is None:
            return
        tests: list[ast.expr] = (
            list(node.test.values)
            if isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.Or)
            else [node.test]
        )
        for test in tests:
            negate = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
            if isinstance(test, ast.UnaryOp) and negate:
                test = test.operand
            found = self.compare(test, env, functions)
            if found is None:
                continue
            read, op, value = found
            exc = raised.exc
            kind = callee(exc.func) if isinstance(exc, ast.Call) else (callee(exc) if exc else None)
            self.found.append(
                {
                    "of": read[1],  # "module" (its __version__) or "dist" (its metadata)
                    "name": read[2],
                    "parts": read[3],
                    "compares": read[4],
                    "op": NEGATED[op] if negate else op,
                    "value": value,
                    "line": raised.lineno,
                    "test_line": node.lineno,
                    "statement": self.statement(node),
                    "raises": self.statement(raised),
                    "exception": kind,
                    "context": context,
                    "at": at,
                }
            )

    def compare(
        self, test: ast.expr, env: Env, functions: Functions
    ) -> tuple[Value, str, str] | None:
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return None
        op = OPS.get(type(test.ops[0]))
        if op is None:
            return None
        left, right = test.left, test.comparators[0]
        read = self.value(left, env, functions)
        constant = constant_version(right)
        if read is None or read[0] != "version":
            read, constant = self.value(right, env, functions), constant_version(left)
            op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        if read is None or read[0] != "version" or constant is None:
            return None
        if (read[4] == "ints") != constant[1]:
            return None  # a tuple beside a string: Python raises TypeError, no check
        return read, op, constant[0]


def constant_version(node: ast.expr) -> tuple[str, bool] | None:
    """`(2, 2)`, `"2.3"`, `Version("2.3")`: the version text a check compares with, and
    whether it is a tuple of integers."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, False
    if isinstance(node, ast.Tuple) and node.elts:
        parts = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        if len(parts) == len(node.elts) and all(
            isinstance(p, int) and not isinstance(p, bool) for p in parts
        ):
            return ".".join(str(p) for p in parts), True
        return None
    if (
        isinstance(node, ast.Call)
        and callee(node.func) in PARSERS
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value, False
    return None
