"""Requires-Dist as evidence: what the target's distributions require of a changed one,
evaluated with their markers for the target's Python and platform, on both hosts.

A requirement that the target violates and the reference meets is the difference's doing;
one that both violate is not, and is said so. A dependent whose modules startup reaches
makes the violation evidence about startup: the finding is at least `risky`, citing the
requirement, the dependent and the import of it that startup runs (file:line).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envsync.classify.graph import path_to
from envsync.classify.startup import CONTEXT_WORDS, Analysis, short_file
from envsync.findings import Evidence
from envsync.markers import applies
from envsync.model import Distribution, Snapshot
from envsync.vocab import RUNS


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    """A requirement of a target distribution on a changed one that the target violates."""

    dependent: Distribution
    text: str  # the Requires-Dist line as the dependent's metadata writes it
    reference_meets: bool  # False: the reference violates it too (not the difference's doing)
    evidence: Evidence
    reached: bool  # startup runs a module of the dependent (outside functions)

    @property
    def words(self) -> str:
        return f"{self.dependent.display_name} {self.dependent.version} requires {self.text}"


@cache
def _parse(text: str) -> Requirement | None:
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def satisfies(req: Requirement, version: str) -> bool:
    try:
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def violations(
    name: str, reference: Snapshot, target: Snapshot, analysis: Analysis | None
) -> list[Violation]:
    """The target's requirements on `name` that the target's installed version violates."""
    ref_dist = reference.distribution(name)
    tgt_dist = target.distribution(name)
    out = []
    for dependent in target.distributions:
        if dependent.name == name:
            continue
        for text in dependent.requires:
            req = _parse(text)
            if req is None or canonicalize_name(req.name) != name:
                continue
            if applies(req, target) is not True:
                continue  # not for the target's platform, or an extra; or not readable
            if tgt_dist is not None and satisfies(req, tgt_dist.version):
                continue
            meets = ref_dist is not None and _reference_meets(req, dependent, reference)
            out.append(_violation(dependent, text, req, meets, ref_dist, tgt_dist, analysis))
    return out


def _reference_meets(req: Requirement, dependent: Distribution, reference: Snapshot) -> bool:
    """Whether the reference meets it: its own copy of the dependent (when it has one) asks
    the same or another version of the requirement; its installed version decides."""
    ref_dist = reference.distribution(canonicalize_name(req.name))
    if ref_dist is None:
        return False
    theirs = reference.distribution(dependent.name)
    if theirs is not None:
        for text in theirs.requires:
            other = _parse(text)
            if (
                other is not None
                and canonicalize_name(other.name) == ref_dist.name
                and applies(other, reference) is True
                and not satisfies(other, ref_dist.version)
            ):
                return False
    return satisfies(req, ref_dist.version)


def _violation(
    dependent: Distribution,
    text: str,
    req: Requirement,
    meets: bool,
    ref_dist: Distribution | None,
    tgt_dist: Distribution | None,
    analysis: Analysis | None,
) -> Violation:
    have = f"has {tgt_dist.version}" if tgt_dist else "lacks it"
    words = f"{dependent.display_name} {dependent.version} requires {text}"
    if meets:
        detail = f"{words}; the reference satisfies it, the target {have}"
    else:
        ref_have = f"has {ref_dist.version}" if ref_dist else "lacks it"
        detail = (
            f"{words}; the target {have} and the reference {ref_have}: violated on both "
            "hosts, so not caused by this difference"
        )
    use = analysis.imports.surest(dependent.top_level) if analysis and analysis.imports else None
    if use is None or use[2] not in RUNS or analysis is None or analysis.graph is None:
        return Violation(
            dependent=dependent,
            text=text,
            reference_meets=meets,
            evidence=Evidence(source="requirements", detail=detail),
            reached=False,
        )
    importer, edge, context = use
    facts = analysis.graph.modules.get(importer)
    file = facts.file if facts else None
    at = f"{short_file(file, importer) or importer}:{edge.line}"
    chain = " -> ".join(path_to(analysis.reached, importer))
    return Violation(
        dependent=dependent,
        text=text,
        reference_meets=meets,
        evidence=Evidence(
            source="requirements",
            detail=f"{detail}; startup imports {edge.module} {CONTEXT_WORDS[context]} ({at})",
            file=file,
            line=edge.line,
            statement=edge.statement,
            context=f"{edge.context}; startup path: {chain}",
        ),
        reached=True,
    )
