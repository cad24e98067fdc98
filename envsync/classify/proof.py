"""`degraded` and `benign` need proof (pure): the one rule every finding kind passes.

Both say startup works. A weaker story found elsewhere (a guarded import of the same
library failing in another module) is no proof: where startup runs the difference at
module level, unguarded (a changed distribution it imports there, a differing file whose
module it imports there), the verdict is at least `risky`, with the import that runs it
as evidence; so it is where an install check fails (a function whose import of the
difference fails and whose ImportError handler raises): what runs the check, a route
decorator while a module is imported or a request later, is not shown. Findings of host
facts (variables, the GPU, the system) are no imports: their own rules decide.
"""

from __future__ import annotations

from dataclasses import replace

from envsync.classify.graph import path_to
from envsync.classify.startup import (
    CONTEXT_WORDS,
    Analysis,
    import_names,
    module_of,
    short_file,
)
from envsync.model.environment import ImportEdge, Snapshot
from envsync.model.findings import Difference, Evidence, Finding
from envsync.model.vocab import PACKAGE_KINDS

CLAIMS = ("degraded", "benign")
UNGUARDED = ("module", "if")


def proven(
    finding: Finding, diff: Difference, reference: Snapshot, target: Snapshot, analysis: Analysis
) -> Finding:
    """`finding`, lifted to `risky` where it claims startup works and startup runs the
    difference unguarded at module level."""
    if finding.severity not in CLAIMS:
        return finding
    runs = runs_unguarded(diff, reference, target, analysis) or checked(
        diff, reference, target, analysis
    )
    return finding if runs is None else lifted(finding, finding.subject, *runs)


def checked(
    diff: Difference, reference: Snapshot, target: Snapshot, analysis: Analysis
) -> tuple[str, Evidence] | None:
    """An install check that fails on the target: a function of a module startup imports
    whose import of the difference fails and whose ImportError handler raises (FastAPI's
    ensure_multipart_is_installed, which a route decorator runs while the service's module
    is imported when the route takes form data). Whatever calls it, at import or later, is
    not shown: "fails later" is not proven (None: no such check fails)."""
    if diff.kind not in PACKAGE_KINDS or analysis.graph is None:
        return None
    names = set(import_names(diff.subject, reference, target))
    for failure in analysis.failures:
        if failure.context != "function" or not failure.edge.raises or failure.top not in names:
            continue
        if not _imported_elsewhere(failure.importer, analysis):
            continue  # a root no module imports: its own calls at import were all read
        at = f"{short_file(failure.file, failure.importer) or failure.importer}:{failure.edge.line}"
        return (
            f"{failure.importer} checks for {failure.module} in a function and raises "
            f"where it is missing ({at}); what calls that check, and when, is not shown",
            _graph_evidence(
                analysis,
                failure.importer,
                failure.file,
                failure.edge,
                f"{failure.importer} imports {failure.module} in a function, and its "
                f"ImportError handler raises: {failure.message()} on the target",
            ),
        )
    return None


def lifted(finding: Finding, shown: str, why: str, evidence: Evidence) -> Finding:
    """`finding` made `risky` for `why`: what it claimed stays, as what was not shown."""
    return replace(
        finding,
        severity="risky",
        decided_by=evidence.source,
        reason=f"{shown}: {why}; not shown to load, so not {finding.severity} ({finding.reason})",
        evidence=tuple(dict.fromkeys((evidence, *finding.evidence))),
    )


def runs_unguarded(
    diff: Difference, reference: Snapshot, target: Snapshot, analysis: Analysis
) -> tuple[str, Evidence] | None:
    """How startup runs the difference at module level, unguarded (None: it does not, as
    far as the graph shows): the surest import of a changed version, or of a file's module."""
    if analysis.graph is None:
        return None
    if diff.kind in PACKAGE_KINDS:
        if diff.kind != "version" or analysis.imports is None:
            return None
        use = analysis.imports.surest(import_names(diff.subject, reference, target))
        if use is None or use[2] not in UNGUARDED:
            return None
        importer, edge, context = use
        what = f"{edge.module}, and the version it runs there differs"
    elif diff.kind == "file" and (module := module_of(diff.subject)) is not None:
        how = analysis.reached.get(module)
        if how is None or how.context not in UNGUARDED or how.parent is None or how.edge is None:
            return None
        importer, edge, context = how.parent, how.edge, how.context
        what = f"{module}, whose file differs"
    else:
        return None
    facts = analysis.graph.modules.get(importer)
    file = facts.file if facts else None
    at = f"{short_file(file, importer) or importer}:{edge.line}"
    return (
        f"startup imports {what} ({CONTEXT_WORDS[context]}, unguarded: {importer}, {at})",
        _graph_evidence(
            analysis,
            importer,
            file,
            edge,
            f"{importer} imports {edge.module} {CONTEXT_WORDS[context]}, unguarded: "
            "the target's copy runs there",
        ),
    )


def _graph_evidence(
    analysis: Analysis, importer: str, file: str | None, edge: ImportEdge, detail: str
) -> Evidence:
    """The import statement a lift rests on, with the path startup takes to its module."""
    chain = " -> ".join(path_to(analysis.reached, importer))
    return Evidence(
        source="import-graph",
        detail=detail,
        file=file,
        line=edge.line,
        statement=edge.statement,
        context=f"{edge.context}; startup path: {chain}",
    )


def _imported_elsewhere(module: str, analysis: Analysis) -> bool:
    """Whether a module startup reaches imports `module` (its functions can be called
    from there): a module that only runs as a root, the service's own `-m` module, has
    every call made of it at import read with it."""
    graph = analysis.graph
    if graph is None:
        return True
    parent, _, last = module.rpartition(".")
    for name in analysis.reached:
        facts = graph.modules.get(name)
        if facts is None or name == module:
            continue
        for edge in facts.imports:
            if edge.module == module or (edge.module == parent and last in edge.names):
                return True
    return False
