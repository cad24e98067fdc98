"""The service's startup on a target as the classifier reads it: its roots, what they reach
under a set of launch flags, the reference's side of a failing import, and the words
that evidence and reasons are made of.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envsync.classify.doors import Behind, Door, open_doors
from envsync.classify.graph import Failure, GraphIndex, ImportsOf, Reach, path_to
from envsync.classify.launched import Startup
from envsync.classify.rules import Root
from envsync.model.environment import Snapshot, StartupGraph
from envsync.model.findings import Difference, Evidence, Finding, Fix
from envsync.model.launch import parse_flags
from envsync.model.vocab import Severity

SEVERITY_OF_CONTEXT: dict[str, Severity] = {
    "module": "fatal",
    "if": "risky",
    "try": "degraded",
    "fallback": "degraded",
    "function": "degraded",
}


CONTEXT_WORDS = {
    "module": "at module level",
    "if": "at module level under a condition",
    "try": "inside try/except ImportError",
    "fallback": "in an except body (a fallback that runs only when its try fails)",
    "function": "inside a function (lazily)",
}


SITE_REASON = (
    "the interpreter's site module runs it at every start, before the service "
    "(the import lines of .pth files in site-packages, sitecustomize)"
)


def site_roots(graph: StartupGraph | None) -> tuple[Root, ...]:
    """What the interpreter runs before any service module, as the probe found it."""
    if graph is None:
        return ()
    return tuple(Root(module=m, reason=SITE_REASON, label="site") for m in graph.site)


class Analysis:
    """The target's startup graph under one set of launch flags."""

    def __init__(
        self,
        graph: StartupGraph | None,
        startup: Startup,
        command: Sequence[str],
        index: GraphIndex | None = None,
    ):
        self.graph = graph
        self.env = frozenset(startup.env)
        self.index = index or (GraphIndex(graph, startup.governed()) if graph else None)
        self.flags = parse_flags(command)
        roots = startup.roots(self.flags)
        self.roots = (site_roots(graph) + roots) if roots else ()
        self.reached: dict[str, Reach] = self.index.reach(self.roots) if self.index else {}
        self._failures: list[Failure] | None = None
        self._imports: ImportsOf | None = None
        self._doors: list[Door] | None = None
        self._behind: Behind | None = None

    @property
    def failures(self) -> list[Failure]:
        """The imports that cannot succeed, surest first, then in the order startup runs
        them (computed when first asked: a launch flag tried asks only fatal_keys)."""
        if self._failures is None:
            self._failures = self.index.failures(self.reached, self.roots) if self.index else []
        return self._failures

    def fatal_keys(self) -> set[tuple[str, str | None]]:
        found = self._failures
        if found is None:
            found = self.index.unordered_failures(self.reached) if self.index else []
        return {(f.module, f.missing_name) for f in found if f.context == "module"}

    @property
    def imports(self) -> ImportsOf | None:
        """The surest import of each top-level name startup may run (None: no graph)."""
        if self._imports is None and self.graph is not None:
            self._imports = ImportsOf(self.graph, self.reached)
        return self._imports

    @property
    def doors(self) -> list[Door]:
        """Where reading stopped in what startup reaches, surest first."""
        if self._doors is None:
            self._doors = open_doors(self.graph, self.reached, self.env) if self.graph else []
        return self._doors

    def behind(self, target: Snapshot) -> Behind:
        """What of the target could be behind those doors."""
        if self._behind is None:
            self._behind = Behind(self.doors, target)
        return self._behind


class ReferenceSide:
    """Whether an import that fails on the target fails on the reference too, read on the
    reference's graph (collected for the same startup). Only the statements asked about
    are looked at: no reachability is computed on the reference."""

    def __init__(self, reference: Snapshot) -> None:
        self.reference = reference
        self.index = GraphIndex(reference.startup) if reference.startup is not None else None

    @property
    def why_unchecked(self) -> str | None:
        if self.reference.startup is None:
            return (
                f"the reference {self.reference.host} has no import graph (a lock or "
                "snapshot file): envsync did not check it there"
            )
        return None

    def fails_too(self, failure: Failure) -> bool:
        """The reference's own module holds the same import in the same context, and it
        cannot succeed there either: not this difference's doing."""
        if self.index is None:
            return False
        return any(
            b.module == failure.module
            and b.missing_name == failure.missing_name
            and b.error == failure.error
            and b.edge.context == failure.edge.context
            and b.edge.statement == failure.edge.statement
            for b in self.index.broken_imports(failure.importer)
        )

    def states(self, failure: Failure) -> bool:
        """The reference's copy of the importer holds the failing statement too (or there
        is no copy there to compare with: a lock, a file only the target has): what fails
        is the module it imports, not the importer's change."""
        if self.index is None:
            return True
        facts = self.index.graph.modules.get(failure.importer)
        return (
            facts is None
            or facts.kind != "source"
            or any(
                e.statement == failure.edge.statement and e.context == failure.edge.context
                for e in facts.imports
            )
        )

    def works(self, failure: Failure) -> Evidence | None:
        """Evidence that the statement failing on the target succeeds on the reference."""
        if self.index is None or failure.error:
            return None
        verdict, where = self.index.import_works(failure.edge.module, failure.missing_name)
        if verdict is not True or where is None:
            return None
        facts = self.index.graph.modules.get(where)
        owner = owner_of(self.reference, where)
        file = short_file(facts.file if facts else None, where) or where
        what = (
            f"defines {failure.missing_name} ({file})"
            if failure.missing_name
            else f"installs {failure.edge.module} ({file})"
        )
        return Evidence(
            source="name-check" if failure.missing_name else "import-graph",
            detail=f"on the reference, {owner} {what}",
            file=facts.file if facts else None,
        )


def import_names(name: str, *snaps: Snapshot) -> set[str]:
    names: set[str] = set()
    for snap in snaps:
        dist = snap.distribution(name)
        if dist is not None:
            names.update(dist.top_level)
    return names or {name.replace("-", "_")}


def startup_chain(failure: Failure, analysis: Analysis) -> tuple[list[str], str | None]:
    """The modules through which startup gets to a failing import, and the first
    statement on the way (`sglang/__init__.py:5`): for an import at module level, the
    way Python first runs it (parents first, statements in order); else the surest."""
    if failure.context != "function" and analysis.index is not None:
        walk = analysis.index.first_run(analysis.roots, failure.importer)
        if walk:
            first, line = walk[0]
            facts = analysis.graph.modules.get(first) if analysis.graph else None
            file = short_file(facts.file if facts else None, first) or first
            return [m for m, _ in walk], (f"{file}:{line}" if line is not None else None)
    return path_to(analysis.reached, failure.importer), None


def failure_evidence(failure: Failure, analysis: Analysis) -> list[Evidence]:
    chain, _ = startup_chain(failure, analysis)
    how = " -> ".join(chain)
    out = [
        Evidence(
            source="name-check" if failure.missing_name else "import-graph",
            detail=f"{failure.importer} imports {failure.module} {CONTEXT_WORDS[failure.context]}: "
            f"{failure.message()} on the target",
            file=failure.file,
            line=failure.edge.line,
            statement=failure.edge.statement,
            context=f"{failure.edge.context}; startup path: {how}"
            + (f"; condition: {failure.edge.condition}" if failure.edge.condition else ""),
        )
    ]
    if failure.root.reason and not failure.root.reason.startswith("the service's entrypoint"):
        out.append(
            Evidence(
                source="rule-pack", detail=f"{chain[0]} runs at startup: {failure.root.reason}"
            )
        )
    return out


def why_runs(failure: Failure, analysis: Analysis) -> str:
    chain, first = startup_chain(failure, analysis)
    label = failure.root.label
    if failure.context == "function":
        return "a feature that calls it fails later, startup itself goes on"
    if len(chain) == 1:
        return f"startup runs that module ({label})"
    shown = chain if len(chain) <= 4 else [chain[0], "…", *chain[-2:]]
    start = f" from {first}" if first else ""
    root = failure.root.module
    if root.startswith(chain[0] + "."):
        label = f"the parent package of {root}, which Python runs before it"
    return f"startup reaches it{start}: {' -> '.join(shown)} ({chain[0]}: {label})"


def failure_reason(
    failure: Failure, analysis: Analysis, target: Snapshot, side: ReferenceSide
) -> str:
    where = CONTEXT_WORDS[failure.context]
    at = statement_at(failure)
    if failure.error:
        head = (
            f"{failure.importer} imports {failure.module} {where} ({at}), and the target's "
            f"interpreter cannot compile it: importing it raises {failure.error}"
        )
    elif failure.missing_name:
        head = (
            f"{owner_of(target, failure.module)} lacks {failure.missing_name}, which "
            f"{failure.importer} imports from {failure.module} {where} ({at})"
        )
    else:
        head = (
            f"{failure.importer} imports {failure.module} {where} ({at}), "
            f"and the target has no {failure.missing_module}"
        )
    works = side.works(failure)
    if works is not None:
        head += f"; {works.detail}"
    return f"{head}; {why_runs(failure, analysis)}."


def statement_at(failure: Failure) -> str:
    """`file:line` of a failing import, the file as the package names it."""
    return f"{short_file(failure.file, failure.importer) or failure.importer}:{failure.edge.line}"


def module_of(path: str) -> str | None:
    """The module a package's file is (`svc/util/__init__.py`: svc.util), None if none."""
    if not path.endswith(".py") or path.startswith(".."):
        return None
    module = path[:-3].replace("/", ".")
    return module.removesuffix(".__init__")


def short_file(file: str | None, module: str) -> str | None:
    """A module's file from its import root: sglang/srt/server_args.py, whatever the host's
    site-packages or checkout is called."""
    if not file:
        return None
    parts = file.replace("\\", "/").split("/")
    keep = module.count(".") + 1 + (parts[-1] == "__init__.py")
    return "/".join(parts[-keep:]) if module != "__main__" else file


def owner_of(snap: Snapshot, module: str) -> str:
    """The distribution that installs a module, with its version ("xgrammar 0.1.10")."""
    top = module.partition(".")[0]
    dist = next((d for d in snap.distributions if top in d.top_level), None)
    return f"{dist.display_name} {dist.version}" if dist else module


def finding_about(diff: Difference, **rest: Any) -> Finding:
    """A finding about `diff`: its subject, kind and both values, and the rest."""
    return Finding(
        subject=diff.subject, kind=diff.kind, reference=diff.reference, target=diff.target, **rest
    )


def door_finding(
    diff: Difference,
    door: Door,
    *,
    head: str,
    behind: str,
    context: str,
    words: str = "",
    more: Sequence[Evidence] = (),
    fixes: Sequence[Fix] = (),
) -> Finding:
    """`unknown`: startup may import `behind` through `door`, where envsync stops reading
    (`head` says what differs and what of it startup may import; `words`, what kind of door
    it is, in parentheses after it; `context`, the door's)."""
    return finding_about(
        diff,
        severity="unknown",
        reason=f"{head}: envsync stops reading at {door.describe()}"
        + (f" ({words})" if words else "")
        + f", and {behind} could be behind it.",
        decided_by="import-graph",
        evidence=(
            Evidence(
                source="import-graph",
                detail=f"envsync stops reading at {door.describe()}",
                file=door.file,
                line=door.line,
                context=context,
            ),
            *more,
        ),
        fixes=tuple(fixes),
    )
