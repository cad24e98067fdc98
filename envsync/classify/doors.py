"""Where the static reading of startup stops, and what could be behind each stop (pure).

envsync reads every Python module startup may run, but three things it cannot read: an
extension module (its C code may import any module), an import whose module name is
computed at run time (`importlib.import_module(name)`), and a file that does not parse.
Each is a door. What could be behind a door, the rule envsync keeps:

- a computed name with a constant prefix (`f"pkg.models.{x}"`, `("." + x, __package__)`,
  a name from `pkgutil.iter_modules(path, "pkg.models.")`) can only be a module under that
  prefix: the probe reads them all, and the door is closed (each module an edge under a
  condition);
- a door without one, in a module of distribution P, can import P's own modules and the
  distributions P requires (Requires-Dist that applies on the host, no extra);
- and whatever those run in turn: the distributions they require, transitively.

A door that opens only where an environment variable is set (a plugin package named by
one: SGLang's `if external_pkg := envs.SGLANG_EXTERNAL_MODEL_PACKAGE.get():
ModelRegistry.register(external_pkg)`) is open only where the service's environment (its
`[service].env`, or the host's) sets it.

No difference in a distribution that could be behind an open door is benign: it is
`unknown`, with the door in its reason. (docs/explanation/startup-imports.md tells why this
rule, and what the reachability harness measured of it on real SGLang and vLLM startups.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from envsync.classify.graph import Reach
from envsync.model.environment import Snapshot, StartupGraph
from envsync.model.markers import applies
from envsync.model.vocab import CONTEXT_RANK as RANK
from envsync.model.vocab import RUNS, Context, weaker


@dataclass(frozen=True, slots=True, kw_only=True)
class Door:
    """A place in a module startup may run where envsync stops reading."""

    module: str
    file: str | None
    context: Context  # how surely startup gets there
    what: str  # "an extension module", "a computed import (`...`)"
    line: int | None = None
    prefix: str | None = None  # a computed name's constant start: behind it, only that

    def describe(self) -> str:
        at = f":{self.line}" if self.line else ""
        return f"{self.what} in {self.module}{at}"


def open_doors(
    graph: StartupGraph, reached: Mapping[str, Reach], env: frozenset[str] = frozenset()
) -> list[Door]:
    """Every door in the modules startup reaches, surest first: not one that opens only
    where an environment variable is set, where the service's (`env`) does not set it."""
    out: list[Door] = []
    for name, how in reached.items():
        facts = graph.modules.get(name)
        if facts is None:
            continue
        if facts.kind == "extension":
            out.append(
                Door(module=name, file=facts.file, context=how.context, what="an extension module")
            )
        elif facts.kind == "error":
            out.append(
                Door(
                    module=name,
                    file=facts.file,
                    context=how.context,
                    what=f"a file envsync cannot read ({facts.error})",
                )
            )
        for door in facts.doors:
            if door.read or door.context not in RUNS or (door.env and door.env not in env):
                # closed: every module its prefix can name was read; or inside a function,
                # which does not count (see the module's docstring); or behind a variable
                # the service's environment does not set
                continue
            out.append(
                Door(
                    module=name,
                    file=facts.file,
                    context=weaker(how.context, door.context),
                    what=f"a computed import (`{door.statement}`)",
                    line=door.line,
                    prefix=door.prefix,
                )
            )
    out.sort(key=lambda d: (RANK[d.context], d.module, d.line or 0))
    return out


class Behind:
    """Which distributions of the target could be behind the open doors of its startup,
    each with the surest door."""

    def __init__(self, doors: list[Door], target: Snapshot) -> None:
        self._owners: dict[str, list[str]] = {}
        requires: dict[str, set[str]] = {}
        for dist in target.distributions:
            for top in dist.top_level:
                self._owners.setdefault(top, []).append(dist.name)
            needs = requires.setdefault(dist.name, set())
            for text in dist.requires:
                try:
                    req = Requirement(text)
                except InvalidRequirement:
                    continue
                if applies(req, target) is not False:  # no extra; unreadable markers count
                    needs.add(canonicalize_name(req.name))
        self._requires = requires
        self._doors: dict[str, list[Door]] = {}  # each dist's doors, surest first
        self._closure: dict[str, frozenset[str]] = {}
        for door in doors:
            for name in self._reach(door):
                self._doors.setdefault(name, []).append(door)

    def _reach(self, door: Door) -> frozenset[str]:
        top = door.module.partition(".")[0]
        if door.prefix and "." in door.prefix:
            top = door.prefix.partition(".")[0]  # only modules under the prefix
        out: set[str] = set()
        for dist in self._owners.get(top, ()):
            out |= self.closure(dist)
        return frozenset(out)

    def closure(self, dist: str) -> frozenset[str]:
        """`dist` and every distribution it requires, transitively."""
        found = self._closure.get(dist)
        if found is None:
            seen = {dist}
            todo = [dist]
            while todo:
                for need in self._requires.get(todo.pop(), ()):
                    if need not in seen:
                        seen.add(need)
                        todo.append(need)
            found = self._closure[dist] = frozenset(seen)
        return found

    def door_to(self, dist: str) -> Door | None:
        """The surest open door that could lead to `dist`, or None."""
        doors = self._doors.get(canonicalize_name(dist))
        return doors[0] if doors else None

    def door_to_module(self, module: str) -> Door | None:
        """The surest open door behind which `module` of the target could run: one that
        can lead to its distribution."""
        doors = [
            d
            for dist in self._owners.get(module.partition(".")[0], ())
            for d in self._doors.get(dist, ())
        ]
        return min(doors, key=lambda d: RANK[d.context]) if doors else None
