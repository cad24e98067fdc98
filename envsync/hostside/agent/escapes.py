"""Where a change would leave the environment: a path an installer or a copy writes or
removes that resolves outside it.

A package folder that is a link to another environment's (Spack views and shared builds
make them: `site-packages/foo -> /other/env/site-packages/foo`), a linked `site-packages`,
or a RECORD line that names a path outside (`../../../../etc/x`): pip writes through the
first two (it refuses to remove what lies outside a venv's prefix, then installs the new
files through the link all the same), and removes the third outside a venv. Nothing of it
is in a backup, which records the environment's own paths only, so no rollback could put
it back.

The environment is its prefix as the host resolves it and the source trees of its
editable installs, never envsync's own state folder (a site directory outside the prefix
by its own name, a distribution's layout and no link, is one of it too). Only the host can
resolve its own links: the agent checks every path of a plan before its first step
(backup.py), again before a copy writes or removes (transfer.py, backup.py), and a
rollback checks the distributions it put back (restore.py).
"""

from __future__ import annotations

import os
import sys

from .paths import STATE, editable_sources, installations, site_dirs, within
from .uninstall import scripts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

    # (the link a path goes through, where that link resolves), or (the path, None) for a
    # path that is outside as it is written
    Exit = Tuple[str, Optional[str]]
    Found = Dict[Exit, List[str]]  # each way out -> what goes through it ("pkg", ...)

SHOWN = 3  # ways out named in a message, then "and N more"


class Bounds:
    """The environment's real folders, and each path's real place as it is asked (a RECORD
    names thousands of files in a few hundred folders: each folder is resolved once)."""

    def __init__(self) -> None:
        self.homes = homes()
        self.real: dict[str, str] = {}

    def resolve(self, path: str) -> str:
        real = self.real.get(path)
        if real is None:
            real = self.real[path] = os.path.realpath(path)
        return real

    def inside(self, real: str) -> bool:
        """Is this resolved path in the environment (and not envsync's state)?"""
        return not within(real, STATE.root) and any(within(real, h) for h in self.homes)

    def way_out(self, path: str, whole: bool = False) -> Exit | None:
        """How absolute `path` leaves the environment: the first link on it that leads out
        and where that resolves, or (path, None) when it is outside as written; None when
        it stays inside. Its last part is not followed (a removal or a rename acts on a
        link itself; pip unlinks a file before writing it) unless `whole` (a folder an
        installer writes into)."""
        path = os.path.normpath(path)
        head, tail = os.path.split(path)
        real = self.resolve(path) if whole else os.path.join(self.resolve(head), tail)
        if self.inside(real):
            return None
        parts = [p for p in path.split(os.sep) if p]
        current, entered = os.sep, False
        for part in parts if whole else parts[:-1]:
            current = os.path.join(current, part)
            resolved = self.resolve(current)
            if self.inside(resolved):
                entered = True
            elif entered:  # one step more, not `..` (normalized away): a link, leading out
                return current, resolved
        return path, None


def homes() -> list[str]:
    """The real folders of the environment: its prefix, a site directory outside the
    prefix by its own name, the source trees of its editable installs."""
    out = [STATE.prefix]
    named = os.path.abspath(sys.prefix)
    for folder in site_dirs():
        lexical = os.path.abspath(folder)
        if not within(lexical, named) and not within(lexical, STATE.prefix):
            out.append(os.path.realpath(folder))
    return out + editable_sources()


def installer_ways_out(bounds: Bounds) -> Found:
    """The folders an installer writes into (the site directories, the scripts folder)
    that resolve outside the environment."""
    import sysconfig

    found: Found = {}
    folders = [*site_dirs(), sysconfig.get_path("scripts")]
    for folder in sorted({f for f in folders if f}):
        out = bounds.way_out(folder, whole=True)
        if out is not None:
            found.setdefault(out, []).append(f"the installer's folder {folder}")
    return found


def dist_ways_out(names: list[str], bounds: Bounds) -> Found:
    """The paths of these distributions (every installation's RECORD lines and scripts,
    its metadata folder) that resolve outside the environment."""
    found: Found = {}
    for name in names:
        for location, entry, record in installations(name):
            meta = os.path.join(location, entry)
            out = bounds.way_out(meta, whole=True)
            if out is not None:
                found.setdefault(out, []).append(f"{entry}")
            for rel in [*record, *scripts(meta)]:
                if not rel or "\0" in rel:
                    continue
                out = bounds.way_out(os.path.join(location, rel))  # an absolute rel stays
                if out is None:
                    continue
                if out[1] is None:  # outside as written: the line is what to name
                    found.setdefault(out, []).append(f"{entry}/RECORD's line {rel!r}")
                else:
                    found.setdefault(out, []).append(f"{name}'s {rel}")
    return found


def file_ways_out(paths: list[str], bounds: Bounds) -> Found:
    """The files of a plan (absolute, as the target names them) that resolve outside."""
    found: Found = {}
    for path in paths:
        out = bounds.way_out(path)
        if out is not None:
            found.setdefault(out, []).append(path)
    return found


def describe(found: Found) -> str:
    """The ways out, each with what goes through it, in one line: "pkg's pkg/__init__.py
    and 3 more go through /e/site-packages/pkg, a link to /other/site-packages/pkg"."""
    said = []
    for (where, to), what in sorted(found.items(), key=lambda item: item[0][0]):
        shown = what[0] + (f" and {len(what) - 1} more" if len(what) > 1 else "")
        if to is None:
            said.append(f"{shown} is {where}")
        else:
            verb = "goes" if len(what) == 1 else "go"
            said.append(f"{shown} {verb} through {where}, a link to {to}")
    more = f"; and {len(said) - SHOWN} more" if len(said) > SHOWN else ""
    return "; ".join(said[:SHOWN]) + more


def leaving(names: list[str], files: list[str]) -> str | None:
    """What of a change (distributions an installer or a copy replaces, files a copy
    writes or removes) would leave the environment, in one line; None when nothing."""
    bounds = Bounds()
    # a file outside as written is no file of the environment's at all (refused as such,
    # paths.in_package): only one that leads out through a link is named here
    found = {out: what for out, what in file_ways_out(files, bounds).items() if out[1]}
    if names:
        for out, what in [
            *installer_ways_out(bounds).items(),
            *dist_ways_out(names, bounds).items(),
        ]:
            found.setdefault(out, []).extend(what)
    if not found:
        return None
    return f"{describe(found)}: outside this environment ({STATE.prefix})"
