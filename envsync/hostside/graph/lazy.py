"""Lazy modules: the name tables through which a module exports names it does not bind.

A lazy module (one that replaces itself in sys.modules, transformers' `_import_structure`
and `define_import_structure`, a module `__getattr__` over a name table, lazy_loader's
`attach`) exports names it does not bind: its facts carry the table ("lazy": name ->
the submodule that defines it, star submodules, and whether the table is complete).
"""

from __future__ import annotations

import ast

from .astutil import call_name, literal_string, literal_strings, pairs, subscript_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class NameTables:
    """Module-level dict literals that may be a lazy module's table, and what mutates them."""

    def __init__(self, package: str) -> None:
        self.package = package
        self.tables: dict[str, dict[str, list[str] | None]] = {}
        # {"Name": "module"} tables (a module __getattr__'s): name -> absolute module
        self.by_name: dict[str, dict[str, str]] = {}
        # X = define_import_structure(path, prefix="models"); X[...].update(T): star
        # packages and the tables merged into X
        self.derived: dict[str, dict[str, Any]] = {}
        self.inexact: set[str] = set()

    def resolve(self, value: str) -> str:
        """A table value (submodule key) as an absolute module name."""
        if value.startswith("."):
            stripped = value.lstrip(".")
            base = self.package
            for _ in range(len(value) - len(stripped) - 1):
                base = base.rpartition(".")[0]
            return base + ("." + stripped if stripped else "")
        if self.package and not value.startswith(self.package.partition(".")[0] + "."):
            return self.package + "." + value if value else self.package
        return value

    def assign(self, name: str, value: ast.expr) -> None:
        if call_name(value) == "define_import_structure" and isinstance(value, ast.Call):
            prefix = None
            for kw in value.keywords:
                if kw.arg == "prefix":
                    prefix = literal_string(kw.value)
            stars = [self.resolve(prefix)] if prefix else []
            self.derived[name] = {"stars": stars, "dir": not prefix, "merged": []}
            return
        if isinstance(value, ast.Dict):
            table: dict[str, list[str] | None] = {}
            by_name: dict[str, str] = {}
            for key, item in pairs(value):
                key_text = literal_string(key) if key is not None else None
                if key_text is None:
                    self.inexact.add(name)
                    continue
                table[key_text] = literal_strings(item)
                module = literal_string(item)
                if module is not None:
                    by_name[key_text] = self.resolve(module)
            self.tables[name] = table
            if by_name:
                self.by_name[name] = by_name

    def mutate(self, node: ast.stmt) -> None:
        """Track `T[key] = [...]`, `T[key].append(x)`, `T[key].extend([...])`, `T.update(...)`."""

        def subscript_of(target: ast.expr) -> tuple[str | None, str | None]:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                return target.value.id, literal_string(subscript_key(target))
            return None, None

        if isinstance(node, ast.Assign):
            for target in node.targets:
                name, key = subscript_of(target)
                if name in self.tables:
                    if key is None:
                        self.inexact.add(name)
                    else:
                        self.tables[name][key] = literal_strings(node.value)
            return
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
            return
        call = node.value
        func = call.func
        if not isinstance(func, ast.Attribute):
            return
        owner = func.value
        if isinstance(owner, ast.Name) and owner.id in self.tables:
            self.inexact.add(owner.id)  # T.update(...), T.setdefault(...): not read
            return
        name, key = subscript_of(owner)
        if name in self.derived and func.attr == "update" and call.args:
            merged = call.args[0]
            if isinstance(merged, ast.Name) and merged.id in self.tables:
                self.derived[name]["merged"].append(merged.id)
            else:
                self.derived[name]["merged"].append(None)
            return
        if name is None or name not in self.tables:
            return
        if key is None or func.attr not in ("append", "extend"):
            self.inexact.add(name)
            return
        entry = self.tables[name].setdefault(key, [])
        arg = call.args[0] if call.args else None
        items = [literal_string(arg)] if func.attr == "append" else literal_strings(arg)
        if entry is None or items is None or None in items:
            self.inexact.add(name)
        else:
            entry.extend(i for i in items if i is not None)

    def lazy(self, name: str) -> dict[str, Any]:
        """{"names": {name: module}, "stars": [...], "exact": bool} of table `name`."""
        names: dict[str, str] = {}
        stars: list[str] = []
        for key, items in self.tables.get(name, {}).items():
            module = self.resolve(key)
            if items is None:
                if key in self.by_name.get(name, {}):
                    continue  # a {"Name": "module"} entry, read by by_name
                # transformers' dummy-object entries list `dir()` of the submodule.
                stars.append(module)
                continue
            for item in items:
                names.setdefault(item, module)
        return {"names": names, "stars": stars, "exact": name not in self.inexact}


class LazyExports:
    """What makes a module lazy, as the analyser meets it: a replacement of itself in
    sys.modules and the tables it is built from, `attach(...)` calls, a module
    `__getattr__`, and the names imported for type checkers only (which a lazy module
    exports through its table)."""

    def __init__(self, package: str, modname: str) -> None:
        self.package = package
        self.modname = modname
        self.tables = NameTables(package)
        self.replaced = False
        self.dir = False
        self.table: str | None = None
        self.extra: list[str] = []
        self.getattr: list[str] = []
        # every path of the module __getattr__ read (answers.py): its other names known
        self.answered = False
        self.derived: str | None = None
        self.attached: list[dict[str, Any]] = []
        self.typing_names: dict[str, str] = {}
        self.typing_stars: list[str] = []

    def replacement(self, value: ast.expr) -> None:
        """Read a `sys.modules[__name__] = Lazy(...)` call's tables."""
        for sub in ast.walk(value):
            if isinstance(sub, ast.Name) and sub.id in self.tables.tables:
                self.table = sub.id
            elif isinstance(sub, ast.Name) and sub.id in self.tables.derived:
                self.derived = sub.id
            elif call_name(sub) == "define_import_structure":
                self.dir = True
            elif (
                isinstance(sub, ast.keyword)
                and sub.arg == "extra_objects"
                and isinstance(sub.value, ast.Dict)
            ):
                keys = (literal_string(k) for k in sub.value.keys if k)
                self.extra.extend(k for k in keys if k)

    def attach(self, value: ast.Call) -> None:
        """lazy_loader.attach(__name__, submodules=[...], submod_attrs={...})."""
        args: dict[str, ast.expr | None] = {"submodules": None, "submod_attrs": None}
        for i, arg in enumerate(value.args[1:3]):
            args[("submodules", "submod_attrs")[i]] = arg
        for kw in value.keywords:
            if kw.arg in args:
                args[kw.arg] = kw.value
        names: dict[str, str] = {}
        exact = True
        subs = args["submodules"]
        if subs is not None and not (isinstance(subs, ast.Constant) and subs.value is None):
            listed = literal_strings(subs)
            if listed is None and isinstance(subs, ast.Set):
                listed = literal_strings(ast.List(elts=subs.elts))
            if listed is None:
                exact = False
            for sub in listed or []:
                names[sub] = self.package + "." + sub
        attrs = args["submod_attrs"]
        if isinstance(attrs, ast.Dict):
            for key, item in pairs(attrs):
                key_text = literal_string(key) if key is not None else None
                items = literal_strings(item)
                if key_text is None or items is None:
                    exact = False
                    continue
                for name in items:
                    names[name] = self.package + "." + key_text
        elif attrs is not None and not (isinstance(attrs, ast.Constant) and attrs.value is None):
            exact = False
        self.attached.append({"names": names, "stars": [], "exact": exact})

    def facts(self) -> dict[str, Any] | None:
        """The module's lazy-export table, or None when it binds its names itself."""
        tables = self.tables
        getattr_tables = [n for n in self.getattr if n in tables.tables]
        if not (self.replaced or self.attached or getattr_tables):
            return None
        names: dict[str, str] = {}
        stars: list[str] = []
        exact = True
        listing = self.dir
        if self.table is not None:
            table = tables.lazy(self.table)
            names.update(table["names"])
            stars.extend(table["stars"])
            exact = table["exact"]
        elif self.derived is not None:
            derived = tables.derived[self.derived]
            stars.extend(derived["stars"])
            listing = listing or derived["dir"]
            for merged in derived["merged"]:
                if merged is None:
                    exact = False
                    continue
                table = tables.lazy(merged)
                names.update(table["names"])
                stars.extend(s for s in table["stars"] if s not in stars)
                exact = exact and table["exact"]
        elif self.attached:
            names.update(self.attached[-1]["names"])
            exact = self.attached[-1]["exact"]
        elif getattr_tables:
            # A module __getattr__ may compute other names than its table's: exact only
            # where each of its paths was read (answers.py: what else it answers for)
            exact = self.answered and all(tables.lazy(n)["exact"] for n in getattr_tables)
            for name in getattr_tables:
                names.update(tables.lazy(name)["names"])
                names.update(tables.by_name.get(name, {}))
        elif not listing:
            exact = False  # a replacement whose table envsync cannot read
        for name in self.extra:
            names[name] = self.modname
        for name, module in self.typing_names.items():
            names.setdefault(name, module)
        stars.extend(s for s in self.typing_stars if s not in stars)
        return {"names": names, "stars": stars, "exact": exact, "dir": listing}
