"""Which of a lazy module's star submodules may bind a name: a text search before ast.

transformers' models tree is thousands of files: only those whose text may bind the
name are read with ast.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

from ..facts.files import MODULE_BOUND, read_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from ..graph.finder import Found, ModuleFinder
    from .store import Store


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
    """How strongly a module's files name something, each file read once. The answers
    are facts about the files' content: kept in `store` by the module's files and their
    digests (`content`: a file's sha256 as the walk knows it), so that a later walk
    reads no file again for a name it asked before."""

    def __init__(
        self,
        finder: ModuleFinder,
        store: Store | None = None,
        content: Callable[[str], str] | None = None,
    ) -> None:
        self.finder = finder
        self.store = store
        self.content = content
        self.subtree: dict[str, list[str] | None] = {}
        self.texts: dict[str, bytes] = {}
        self.known: dict[str, tuple[str, dict[str, int]]] = {}  # module -> (key, answers)
        self.changed: set[str] = set()

    def answers(self, module: str, files: list[str]) -> dict[str, int]:
        """What was answered before for `module`'s files as they are now."""
        found = self.known.get(module)
        if found is not None:
            return found[1]
        key = ""
        kept: Any = None
        if self.store is not None and self.content is not None:
            try:
                digests = [[path, self.content(path)] for path in sorted(files)]
            except OSError:
                digests = None
            if digests is not None:
                text = json.dumps([module, digests], separators=(",", ":")).encode("utf-8")
                key = "mentions:" + hashlib.sha256(text).hexdigest()
                kept = self.store.get(key)
        answers = dict(kept) if isinstance(kept, dict) else {}
        self.known[module] = (key, answers)
        return answers

    def close(self) -> None:
        """Keep the answers learned on this walk."""
        if self.store is None:
            return
        for module in sorted(self.changed):
            key, answers = self.known[module]
            if key:
                self.store.put(key, answers)
        self.changed.clear()

    def kept(self) -> dict[str, dict[str, int]]:
        """Every answer this walk knows, by its store key (what share.py packs)."""
        return {key: answers for key, answers in self.known.values() if key and answers}

    def tier(self, module: str, item: str) -> int:
        """2: a file may define the name; 1: one may import it; 0: none names it."""
        if module not in self.subtree:
            self.subtree[module] = python_files(self.finder.find(module))
        files = self.subtree[module]
        if files is None:
            return 2  # an extension module or unreadable: read it, never rule it out
        answers = self.answers(module, files)
        known = answers.get(item)
        if isinstance(known, int):
            return known
        best = self.search(files, item)
        if best is not None:
            answers[item] = best
            self.changed.add(module)
            return best
        return 2  # a file could not be read: read the module, never rule it out

    def search(self, files: list[str], item: str) -> int | None:
        """tier's answer from the files' text (None: one could not be read)."""
        needle = item.encode()
        defines, imports = binding_patterns(item)
        best = 0
        for path in files:
            data = self.texts.get(path)
            if data is None:
                try:
                    data = self.texts[path] = read_bytes(path, MODULE_BOUND)
                except OSError:
                    return None
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
