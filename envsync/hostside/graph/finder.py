"""Find modules by name without importing anything, as the interpreter would."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Tuple

    # (kind, origin, search locations): kind is builtin, stdlib, source, extension,
    # namespace, provided (put in sys.modules by its parent, a module that is no
    # package; origin: the parent's file); None: the module cannot be found
    Found = Optional[Tuple[str, Optional[str], Optional[List[str]]]]


class ModuleFinder:
    """importlib's PathFinder, then the editable finders' MAPPING, in the order the
    interpreter asks them (setuptools appends its finder to sys.meta_path, after the path
    finder). `searched` collects every folder looked in: what a cached graph's validity
    depends on (a finder made from another shares it)."""

    def __init__(
        self,
        paths: list[str],
        editable: dict[str, str] | None = None,
        searched: set[str] | None = None,
    ) -> None:
        import sysconfig
        from importlib.machinery import PathFinder

        self.finder = PathFinder
        self.paths = paths
        self.editable = editable or {}
        self.searched: set[str] = searched if searched is not None else set()
        self.mapped: set[str] = set()  # top-level names found through an editable finder
        self.cache: dict[str, Found] = {}
        stdlib = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib")}
        self.stdlib = tuple(p for p in stdlib if p)

    def find(self, name: str) -> Found:
        """(kind, origin, search locations) or None when the module cannot be found."""
        if name in self.cache:
            return self.cache[name]
        result: Found = None
        parent, _, _ = name.rpartition(".")
        if not parent and name in sys.builtin_module_names:
            result = ("builtin", None, None)
        else:
            search: list[str] | None = self.paths
            if parent:
                found = self.find(parent)
                search = found[2] if found else None
                if found is not None and search is None:
                    # A module that is no package can only have "submodules" that its code
                    # puts in sys.modules (torch._C._jit_tree_views, six.moves, os.path):
                    # provided at run time, never found, never to be called missing.
                    kind = "stdlib" if found[0] in ("stdlib", "builtin") else "provided"
                    result = (kind, found[1], None)
                    self.cache[name] = result
                    return result
            spec = None
            if search is not None:
                self.searched.update(search)
                try:
                    spec = self.finder.find_spec(name, list(search))
                except KeyError:
                    # A namespace package inside a regular one: importlib wants the
                    # parent imported to build its path. Find its directories instead.
                    last = name.rpartition(".")[2]
                    dirs = [os.path.join(p, last) for p in search]
                    dirs = [d for d in dirs if os.path.isdir(d)]
                    result = ("namespace", None, dirs) if dirs else None
                    self.cache[name] = result
                    return result
                except (ImportError, ValueError, OSError):
                    spec = None
            if spec is None and not parent and name in self.editable:
                result = self.find_mapped(name, self.editable[name])
            if spec is not None:
                origin = spec.origin if spec.has_location else None
                locations = spec.submodule_search_locations
                if origin is None:
                    kind = "namespace" if locations is not None else "builtin"
                elif self.in_stdlib(origin):
                    kind = "stdlib"
                elif origin.endswith(".py"):
                    kind = "source"
                else:
                    kind = "extension"
                result = (kind, origin, list(locations) if locations is not None else None)
        self.cache[name] = result
        return result

    def in_stdlib(self, path: str) -> bool:
        """Whether a path lies in the standard library's folders (not in a site folder
        inside them)."""
        return path.startswith(self.stdlib) and "-packages" not in path

    def find_mapped(self, name: str, path: str) -> Found:
        """What an editable finder answers for a top-level name it maps to `path`."""
        init = os.path.join(path, "__init__.py")
        self.searched.update((path, os.path.dirname(path)))
        if os.path.isdir(path):
            self.mapped.add(name)
            if os.path.isfile(init):
                return ("source", init, [path])
            return ("namespace", None, [path])
        if os.path.isfile(path):
            self.mapped.add(name)
            return ("source" if path.endswith(".py") else "extension", path, None)
        return None
