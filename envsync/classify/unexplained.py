"""An exception the import check sees on the target that no difference explains: what
envsync tried, said in the report's note, and the differing distributions startup imports
before the frames it went through, each at least `unknown` with the exception as evidence
(never a silent "no difference explains it")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from envsync.classify.startup import short_file
from envsync.model.environment import Raised, Snapshot
from envsync.model.findings import Evidence, Finding
from envsync.model.vocab import PACKAGE_KINDS, RUNS, SEVERITY_RANK


def tried(owners: Sequence[str]) -> str:
    """What was looked at, in words: the frames' distributions (`owners`: "name version"),
    their requirements, the names in the messages."""
    frames = (
        f"the distributions of its frames ({', '.join(owners)}) are the same on both hosts "
        "and the target meets what they require"
        if owners
        else "none of its frames is in an installed distribution"
    )
    return f"tried: {frames}; no module or distribution its message names differs"


def before(
    findings: Sequence[Finding], chain: Sequence[Raised], target: Snapshot
) -> list[tuple[int, str]]:
    """The package findings of what the frames' modules import, at module level, before the
    line each frame ran: (index, `file:line statement`), outermost frame first."""
    graph = target.startup
    if graph is None:
        return []
    by_file = {m.file: name for name, m in graph.modules.items() if m.file}
    by_top: dict[str, int] = {}
    for i, f in enumerate(findings):
        if f.kind in PACKAGE_KINDS:
            dist = target.distribution(f.subject)
            for top in dist.top_level if dist else (f.subject.replace("-", "_"),):
                by_top.setdefault(top, i)
    out: dict[int, str] = {}
    for raised in chain:
        for frame in raised.frames:
            module = by_file.get(frame.file)
            if module is None or frame.line is None:
                continue
            facts = graph.modules[module]
            for edge in facts.imports:
                if edge.line >= frame.line or edge.context not in RUNS or edge.at is not None:
                    continue
                found = by_top.get(edge.module.partition(".")[0])
                if found is None or found in out or findings[found].severity == "fatal":
                    continue
                shown = short_file(facts.file, module) or module
                out[found] = f"{shown}:{edge.line} `{edge.statement}`"
    return list(out.items())


def mark(findings: list[Finding], candidates: list[tuple[int, str]], what: str) -> list[Finding]:
    """Each candidate's finding, at least `unknown`, with the exception as evidence."""
    out = list(findings)
    for i, where in candidates:
        finding = out[i]
        evidence = Evidence(
            source="import-check",
            detail=f"{what}, and no difference is shown to explain it; startup imports "
            f"{finding.subject} before it ({where}): it may be the cause",
        )
        if SEVERITY_RANK[finding.severity] > SEVERITY_RANK["unknown"]:
            finding = replace(
                finding,
                severity="unknown",
                decided_by="import-check",
                reason=f"{finding.reason[:-1]}; but {what}, which no difference is shown to "
                f"explain, and startup imports {finding.subject} before it ({where}).",
            )
        out[i] = replace(finding, evidence=(*finding.evidence, evidence))
    return out
