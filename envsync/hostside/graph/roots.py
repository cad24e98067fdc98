"""The roots of the startup graph: modules, console scripts and scripts as a command names
them, what the interpreter's site runs at every start, and the submodules of a package a
registry imports whole."""

from __future__ import annotations

import os
import sys

from ..facts.dists import IDENT
from ..facts.files import read_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def console_script(name: str, searched: set[str]) -> str | None:
    """`module:function` of a console script of this environment, from entry_points.txt
    (each file looked at goes to `searched`: creating one changes the answer)."""
    for entry in [p for p in sys.path if p and os.path.isdir(p)]:
        try:
            names = sorted(os.listdir(entry))
        except OSError:
            continue
        for meta in names:
            if not meta.endswith((".dist-info", ".egg-info")):
                continue
            searched.add(os.path.join(entry, meta, "entry_points.txt"))
            try:
                text = read_text(os.path.join(entry, meta, "entry_points.txt"))
            except OSError:
                continue
            section = None
            for line in (text or "").splitlines():
                line = line.strip()
                if line.startswith("["):
                    section = line.strip("[]").strip()
                elif section == "console_scripts" and "=" in line:
                    key, _, value = line.partition("=")
                    if key.strip() == name:
                        return value.split("[")[0].strip()
    return None


def script_path(root: str, options: dict[str, Any]) -> str:
    """The file of a "script:PATH" root: relative to the service's working folder."""
    where = os.path.expanduser(options.get("workdir") or "~")
    return os.path.normpath(os.path.join(where, root[len("script:") :]))


def launch_roots(
    roots: list[str], options: dict[str, Any], searched: set[str]
) -> tuple[list[str], dict[str, str], str | None, dict[str, list[str]]]:
    """Roots as envsync names them -> module names, with what each resolved to, the
    script run as __main__, and the functions startup calls in a root module.

    "console:NAME": the module of the console script NAME of this environment, whose
    function (`module:function`, `module:object.attr`) runs at startup;
    "script:PATH": the script, as __main__, its folder first on sys.path (as Python does).
    """
    out: list[str] = []
    resolved: dict[str, str] = {}
    runs: dict[str, list[str]] = {}
    main_file = None
    for root in roots:
        if root.startswith("console:"):
            target = console_script(root[len("console:") :], searched)
            if target:
                resolved[root] = target
                module, _, function = target.partition(":")
                out.append(module.strip())
                if function.strip():
                    runs.setdefault(module.strip(), []).append(function.strip().partition(".")[0])
        elif root.startswith("script:"):
            main_file = script_path(root, options)
            if os.path.isfile(main_file):
                resolved[root] = "__main__"
                out.append("__main__")
        else:
            out.append(root)
    return out, resolved, main_file, runs


def site_roots(finder: Any) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """What the interpreter's site module runs at every start, before the service: the
    `import` lines of the .pth files in the site-packages folders (each read as a module
    of its own, "site:NAME"), then sitecustomize and usercustomize where they exist.

    Returns the root names and the pseudo-modules of the .pth files.
    """
    import site

    from .analyse import analyze_source

    folders = list(getattr(site, "getsitepackages", lambda: [])())
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    roots: list[str] = []
    modules: dict[str, dict[str, Any]] = {}
    for folder in folders:
        finder.searched.add(folder)  # a new .pth file changes the folder's stamp
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".pth"))
        except OSError:
            continue
        for pth in names:
            path = os.path.join(folder, pth)
            try:
                text = read_text(path) or ""
            except OSError:
                continue
            # site runs a line that starts with "import " or "import\t"; others are paths
            lines = [
                line if line.startswith(("import ", "import\t")) else ""
                for line in text.splitlines()
            ]
            if not any(lines):
                continue
            name = "site:" + pth[: -len(".pth")].replace(".", "_")
            try:
                facts = analyze_source("\n".join(lines), name, False)
            except (SyntaxError, ValueError):
                continue
            modules[name] = {
                "kind": "source",
                "file": path,
                "imports": facts["imports"],
                "defines": [],
                "all": None,
                "dynamic": False,
                "stars": [],
            }
            roots.append(name)
    for name in ("sitecustomize", "usercustomize"):
        found = finder.find(name)
        if found is not None and found[0] not in ("builtin", "stdlib"):
            roots.append(name)
    return roots, modules


def package_submodules(name: str, locations: list[str], subpackages: bool = False) -> list[str]:
    """The modules (and subpackages) in a package's directories."""
    found = set()
    for location in locations:
        try:
            entries = os.listdir(location)
        except OSError:
            continue
        for entry in entries:
            stem, dot, ext = entry.partition(".")
            if dot and ext == "py" and stem != "__init__" and IDENT.match(stem):
                found.add(name + "." + stem)
            elif (
                not dot
                and subpackages
                and IDENT.match(entry)
                and os.path.isfile(os.path.join(location, entry, "__init__.py"))
            ):
                found.add(name + "." + entry)
    return sorted(found)
