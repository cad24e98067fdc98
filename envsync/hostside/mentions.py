"""Which of a lazy module's star submodules may bind a name: a text search before ast.

transformers' models tree is thousands of files: only those whose text may bind the
name are read with ast.
"""

from __future__ import annotations

import os
import re

from .files import read_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .finder import Found, ModuleFinder


def binding_patterns(name: str) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """Text that may bind `name` in a module: (a def, class, assignment or string, as in
    `__all__`; an import of it, one line or one item of a parenthesized list, or an alias).

    A file with none of these cannot bind the name; a file with one is read with ast.
    """
    n = re.escape(name.encode())
    defines = re.compile(
        rb"(?:class|def)[ \t]+" + n + rb"\b|^[ \t]*" + n + rb"[ \t]*[:=]|['\"]" + n + rb"['\"]"
    )
    imports = re.compile(
        rb"^[ \t]*" + n + rb"[ \t]*(?:,|\)|\r?$|as\b)"
        rb"|\bimport[ \t].*\b" + n + rb"\b"
        rb"|\bas[ \t]+" + n + rb"\b"
    )
    return defines, imports


def python_files(found: Found) -> list[str] | None:
    """The .py files of a found module or package tree (None: not all source)."""
    if found is None:
        return []
    kind, origin, locations = found
    if locations is None:
        return [origin] if kind == "source" and origin else None
    files: list[str] = []
    for location in locations:
        for dirpath, dirnames, filenames in os.walk(location):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            files.extend(os.path.join(dirpath, f) for f in filenames if f.endswith(".py"))
    return files


class Mentions:
    """How strongly a module's files name something, each file read once."""

    def __init__(self, finder: ModuleFinder) -> None:
        self.finder = finder
        self.subtree: dict[str, list[str] | None] = {}
        self.texts: dict[str, bytes] = {}

    def tier(self, module: str, item: str) -> int:
        """2: a file may define the name; 1: one may import it; 0: none names it."""
        if module not in self.subtree:
            self.subtree[module] = python_files(self.finder.find(module))
        files = self.subtree[module]
        if files is None:
            return 2  # an extension module or unreadable: read it, never rule it out
        needle = item.encode()
        defines, imports = binding_patterns(item)
        best = 0
        for path in files:
            data = self.texts.get(path)
            if data is None:
                try:
                    data = self.texts[path] = read_bytes(path)
                except OSError:
                    return 2
            # Test only the lines that hold the name: a regex over whole files is slow.
            at = data.find(needle)
            while at >= 0:
                start = data.rfind(b"\n", 0, at) + 1
                end = data.find(b"\n", at)
                line = data[start : end if end >= 0 else len(data)]
                if defines.search(line):
                    return 2
                if best == 0 and imports.search(line):
                    best = 1
                if end < 0:
                    break
                at = data.find(needle, end)
        return best
