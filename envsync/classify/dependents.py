"""Requires-Dist as evidence: what the target's distributions require of a changed one,
evaluated with their markers for the target's Python and platform, on both hosts.

A requirement that the target violates and the reference meets is the difference's doing;
one that both violate is not, and is said so. A dependent whose modules startup reaches
makes the violation evidence about startup: the finding is at least `risky`, citing the
requirement, the dependent and the import of it that startup runs (file:line).

Where the dependent's own source checks the version at import and raises (numba's
`if numpy_version > (2, 2): raise ImportError(msg)`), the check is read as the code runs
it and evaluated on each host's version: raising on the target alone, at module level,
makes the finding `fatal` with that line.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envsync.classify.graph import path_to
from envsync.classify.startup import CONTEXT_WORDS, SEVERITY_OF_CONTEXT, Analysis, short_file
from envsync.model.environment import Distribution, Snapshot, VersionCheck
from envsync.model.findings import Evidence
from envsync.model.markers import applies
from envsync.model.vocab import RUNS, SEVERITY_RANK, Severity, weaker


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


def unmet(
    dependent: Distribution, target: Snapshot, name: str | None = None
) -> Iterator[tuple[str, Requirement, Distribution | None]]:
    """The Requires-Dist of `dependent` (on `name` only, when given) that apply to the
    target (its Python, its platform, no extra) and that its installed versions violate:
    the requirement's text, parsed, and the target's distribution (None: it lacks it)."""
    for text in dependent.requires:
        req = _parse(text)
        if req is None or (name is not None and canonicalize_name(req.name) != name):
            continue
        if applies(req, target) is not True:
            continue  # not for the target's platform, or an extra; or not readable
        have = target.distribution(canonicalize_name(req.name))
        if have is None or not satisfies(req, have.version):
            yield text, req, have


def violations(
    name: str, reference: Snapshot, target: Snapshot, analysis: Analysis | None
) -> list[Violation]:
    """The target's requirements on `name` that the target's installed version violates."""
    ref_dist = reference.distribution(name)
    out = []
    for dependent in target.distributions:
        if dependent.name == name:
            continue
        for text, req, have in unmet(dependent, target, name):
            meets = ref_dist is not None and _reference_meets(req, dependent, reference)
            out.append(_violation(dependent, text, req, meets, ref_dist, have, analysis))
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


# ---------------------------------------------------------------------------------------
# Version checks a dependent runs at import (envsync/hostside/graph/versionchecks.py)


@dataclass(frozen=True, slots=True, kw_only=True)
class Checked:
    """A version check startup runs that raises on the target's version of `name`."""

    severity: Severity  # as sure as the check runs: fatal at module level
    reason: str
    evidence: Evidence
    caused: bool  # False: it raises on the reference too (not the difference's doing)


def check_raises(check: VersionCheck, version: str) -> bool | None:
    """Whether `if VERSION OP VALUE: raise` raises for this installed version, compared as
    the code compares (the first `parts` integers, or the whole version); None: the code
    itself would fail to read it (a part that is no integer). A string compared with a
    string is compared as Python does: "2.10" < "2.9"."""
    if check.compares == "str":
        return bool(_COMPARE[check.op](version, check.value))
    if check.compares == "ints":
        try:
            have = tuple(int(p) for p in version.split(".")[: check.parts])
            want = tuple(int(p) for p in check.value.split("."))
        except ValueError:
            return None
        return bool(_COMPARE[check.op](have, want))
    try:
        return bool(_COMPARE[check.op](Version(version), Version(check.value)))
    except InvalidVersion:
        return None


_COMPARE = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


def version_checks(
    name: str, names: set[str], reference: Snapshot, target: Snapshot, analysis: Analysis
) -> list[Checked]:
    """The version checks of `name` (its modules `names`) that startup runs on the target
    and that raise for the target's version, surest first."""
    tgt_dist = target.distribution(name)
    if tgt_dist is None or analysis.graph is None:
        return []
    ref_dist = reference.distribution(name)
    out: list[Checked] = []
    for module, how in analysis.reached.items():
        facts = analysis.graph.modules.get(module)
        if facts is None or not facts.checks:
            continue
        for check in facts.checks:
            about = canonicalize_name(check.name) if check.of == "dist" else None
            if about != name and check.name.partition(".")[0] not in names:
                continue
            context = weaker(how.context, check.context)
            if context not in RUNS or check_raises(check, tgt_dist.version) is not True:
                continue
            theirs = check_raises(check, ref_dist.version) if ref_dist else None
            caused = theirs is False
            at = f"{short_file(facts.file, module) or module}:{check.line}"
            read = {
                "ints": f"the first {check.parts} parts of {check.name}'s version as integers",
                "str": f"{check.name}'s version as a string",
                "version": f"{check.name}'s version",
            }[check.compares]
            on_ref = (
                f"the reference's {ref_dist.version} passes it"
                if caused and ref_dist
                else "it raises on the reference too, so not caused by this difference"
                if theirs
                else "the reference cannot be compared"
            )
            detail = (
                f"{module} checks {read} {CONTEXT_WORDS[context]} and raises: "
                f"`{check.statement}` holds for the target's {tgt_dist.version}, then "
                f"`{check.raises}` ({at}); {on_ref}"
            )
            chain = " -> ".join(path_to(analysis.reached, module))
            out.append(
                Checked(
                    severity=SEVERITY_OF_CONTEXT[context],
                    reason=detail,
                    caused=caused,
                    evidence=Evidence(
                        source="version-check",
                        detail=detail,
                        file=facts.file,
                        line=check.line,
                        statement=check.raises,
                        context=f"{context}; line {check.test_line}: {check.statement}; "
                        f"startup path: {chain}",
                    ),
                )
            )
    out.sort(key=lambda c: (not c.caused, SEVERITY_RANK[c.severity]))
    return out
