"""What pip's uninstall of a distribution removes, known before it runs.

pip removes every path its RECORD names that exists (a folder whole, whatever it holds),
the bytecode of each `.py` it names, and its console scripts; envsync's own record of a
distribution keeps only its files. A backup holds pip's whole set, so that whatever pip
removes comes back; a RECORD line that names a folder holding another distribution's
files (`sglang/srt/layers/` in xgrammar's RECORD) is a claim on that distribution: pip is
never run over it, and the claim names both.
"""

from __future__ import annotations

import os

from ..shared import normalize
from .paths import canonical, in_environment, installations, record_files, site_dirs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..protocol import Claim


def owners(but: set[str]) -> dict[str, str]:
    """{canonical path: the distribution that owns it} for every installed distribution
    not in `but` (normalized names): the files its RECORD names, and its metadata folder."""
    from .paths import dist_files, metadata_name

    out: dict[str, str] = {}
    for location in site_dirs():
        try:
            entries = sorted(os.listdir(location))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(".dist-info"):
                continue
            meta = os.path.join(location, entry)
            name = metadata_name(meta)
            if name is None or name in but:
                continue
            record = record_files(os.path.join(meta, "RECORD"))
            for path in dist_files(location, entry, record)[0]:
                out.setdefault(path, name)
    return out


def scripts(meta: str) -> list[str]:
    """The console and GUI scripts a distribution's entry points make in bin/."""
    import sys

    try:
        with open(os.path.join(meta, "entry_points.txt"), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    out, section = [], ""
    for line in lines:
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]").strip()
        elif "=" in line and section in ("console_scripts", "gui_scripts"):
            name = line.split("=", 1)[0].strip()
            if name and "/" not in name and name not in (".", ".."):
                out.append(os.path.join(sys.prefix, "bin", name))
    return out


def walk(folder: str) -> list[str]:
    out = [folder]
    for parent, dirs, files in os.walk(folder):
        out += [os.path.join(parent, n) for n in dirs + files]
    return out


def uninstall_set(names: list[str]) -> tuple[list[str], list[Claim]]:
    """The canonical paths pip's uninstall of these distributions would remove (inside the
    environment), and the claims that refuse it: a RECORD folder line holding files of
    another distribution (whose files are then left out of the set)."""
    import importlib.util

    plan = {normalize(n) for n in names}
    others: dict[str, str] | None = None
    paths: set[str] = set()
    claims: list[Claim] = []
    for name in names:
        for location, entry, record in installations(name):
            root = os.path.realpath(location)
            meta = os.path.join(root, entry)
            for rel in [*record, *scripts(meta)]:
                if not rel or "\0" in rel:
                    continue
                full = canonical(rel if os.path.isabs(rel) else os.path.join(root, rel))
                if not os.path.lexists(full) or not in_environment(full) or full == root:
                    continue
                if os.path.isdir(full) and not os.path.islink(full):
                    inside = walk(full)
                    if others is None:
                        others = owners(plan)
                    held: dict[str, int] = {}
                    for p in inside:
                        if p in others:
                            held[others[p]] = held.get(others[p], 0) + 1
                    if held:
                        whose = ", ".join(f"{n} files of {d}" for d, n in sorted(held.items()))
                        message = (
                            f"{entry}/RECORD names {rel!r}, a folder that holds {whose} "
                            f"(pip's uninstall of {name} would remove them)"
                        )
                        claims.append({"dist": normalize(name), "message": message})
                        continue
                    paths.update(inside)
                    continue
                paths.add(full)
                if full.endswith(".py"):
                    cached = canonical(importlib.util.cache_from_source(full))
                    if os.path.lexists(cached):
                        paths.add(cached)
    return sorted(p for p in paths if in_environment(p)), claims
