"""The roots of the startup graph: modules, console scripts and scripts as a command names
them, and the submodules of a package a registry imports whole."""

from __future__ import annotations

import os
import sys

from .dists import IDENT
from .files import read_text

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
) -> tuple[list[str], dict[str, str], str | None]:
    """Roots as envsync names them -> module names, with what each resolved to.

    "console:NAME": the module of the console script NAME of this environment;
    "script:PATH": the script, as __main__, its folder first on sys.path (as Python does).
    """
    out: list[str] = []
    resolved: dict[str, str] = {}
    main_file = None
    for root in roots:
        if root.startswith("console:"):
            target = console_script(root[len("console:") :], searched)
            if target:
                resolved[root] = target
                out.append(target.partition(":")[0])
        elif root.startswith("script:"):
            main_file = script_path(root, options)
            if os.path.isfile(main_file):
                resolved[root] = "__main__"
                out.append("__main__")
        else:
            out.append(root)
    return out, resolved, main_file


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
