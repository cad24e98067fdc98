"""The native layer's findings: loads the target's loader refuses, and CUDA coherence (pure).

Each load of the target's startup (hostside/native/scan.py) whose verdict differs from the
reference's is a finding, whether or not any package version differs: a kernel built
against another torch fails with the same sgl-kernel on both hosts. Its severity is the
context of the import that makes the load (a module-level import: fatal); a library a
package ships but no import is shown to load, or a load the files cannot prove either
way, is risky at most, never benign. The reference's side names what the target lacks:
the file and distribution that define a missing symbol there (asked of the reference
after the fact: `providers`), or provide a missing library.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from packaging.version import InvalidVersion, Version

from envsync.classify.graph import path_to
from envsync.classify.launched import native_of
from envsync.classify.packages import dist_fixes
from envsync.classify.startup import CONTEXT_WORDS, SEVERITY_OF_CONTEXT, Analysis
from envsync.collect.native import Providers
from envsync.model.environment import (
    GpuInfo,
    ImportOutcome,
    NativeFacts,
    NativeLoad,
    NativeNotFound,
    NativeReason,
    NativeUndefinedSymbol,
    NativeVersionNotFound,
    Snapshot,
    Torch,
)
from envsync.model.findings import Evidence, Finding, Fix
from envsync.model.vocab import PACKAGE_KINDS, RUNS, Severity

# Sonames whose number is the CUDA toolkit's major (libcufft and others number their own).
CUDA_SONAME = re.compile(r"^lib(?:cudart|cublas|cublasLt|nvrtc|nvJitLink|cupti)\.so\.(\d+)$")
# nvidia-* distributions without a -cuNN suffix whose version is the CUDA toolkit's
CUDA_VERSIONED = ("nvidia-cuda-runtime", "nvidia-cuda-nvrtc", "nvidia-cuda-cupti", "nvidia-cublas")
CUDA_SUFFIX = re.compile(r"^nvidia-.+-cu(\d+)$")


def native_findings(
    findings: list[Finding],
    reference: Snapshot,
    target: Snapshot,
    analysis: Analysis,
    providers: Providers,
) -> list[Finding]:
    """`findings`, a distribution whose files startup loads never benign among them, and a
    finding for each target load that the target's loader refuses and the reference's does
    not (or that the reference does not make), then the CUDA checks."""
    ours = native_of(target)
    if ours is None:
        return findings
    theirs = native_of(reference)
    out = _used(findings, ours, analysis)
    for load in ours.loads:
        if load.verdict.kind == "ok":
            continue
        there = theirs.load(load.key) if theirs is not None else None
        if there is not None and _signature(there) == _signature(load):
            continue  # the reference's loader says the same: not drift
        out.append(_finding(load, there, reference, target, analysis, providers))
    return out + cuda_findings(reference, target)


def _used(findings: list[Finding], facts: NativeFacts, analysis: Analysis) -> list[Finding]:
    """A distribution whose files a load of the startup maps is used by startup: a
    difference in it is not benign (risky: not shown to break)."""
    used: dict[str, str] = {}
    for load in facts.loads:
        how = analysis.reached.get(load.via)
        if load.origin == "shipped" or how is None or how.context not in RUNS:
            continue
        for path in (load.path, *(s.path for s in load.steps if s.path)):
            owner = facts.owners.get(path)
            if owner and owner not in used:
                used[owner] = f"startup loads its {path.rpartition('/')[2]} ({load.key})"
    out = []
    for finding in findings:
        why = used.get(finding.subject) if finding.kind in PACKAGE_KINDS else None
        if why is not None and finding.severity == "benign":
            finding = replace(
                finding,
                severity="risky",
                decided_by="native",
                # its benign reason ("nothing ... uses it") is what the loads disprove
                reason=f"{finding.reason.split(': nothing ')[0]}: {why}; not shown to break.",
                evidence=(Evidence(source="native", detail=why), *finding.evidence),
            )
        out.append(finding)
    return out


def _signature(load: NativeLoad) -> tuple[str, ...]:
    """A verdict as both hosts can compare it: its kind and what fails, without paths."""
    verdict = load.verdict
    if verdict.kind != "fails" or not verdict.reasons:
        return (verdict.kind,)
    reason = verdict.reasons[0]
    match reason:
        case NativeNotFound():
            return (verdict.kind, reason.kind, reason.name)
        case NativeUndefinedSymbol():
            return (verdict.kind, reason.kind, reason.symbol, reason.version or "")
        case NativeVersionNotFound():
            return (verdict.kind, reason.kind, reason.file, reason.version)
    return (verdict.kind, reason.kind, reason.why.rpartition(": ")[2])


def _severity(load: NativeLoad, analysis: Analysis) -> tuple[Severity, str]:
    """How surely startup makes this load, from the context of the import behind it."""
    if analysis.graph is None:
        return "unknown", "envsync has no startup import graph to tell whether startup loads it"
    how = analysis.reached.get(load.via)
    if how is None:
        return "degraded", f"startup does not import {load.via} at module level"
    chain = " → ".join(path_to(analysis.reached, load.via))
    words = CONTEXT_WORDS[how.context]
    if load.origin == "shipped":
        severity: Severity = "risky" if how.context in ("module", "if") else "degraded"
        return severity, (
            f"startup imports {load.via} ({chain}, {words}), which ships it; no import is shown "
            "to load it (the package may open it itself, by a name envsync does not compute)"
        )
    what = {"import": f"importing {load.module}", "preload": f"{load.via}'s own preload"}
    context = SEVERITY_OF_CONTEXT[how.context]
    if load.verdict.kind == "unknown" and context == "fatal":
        context = "risky"  # cannot be proved either way: never fatal, never benign
    return context, f"startup loads it {what[load.origin]} ({chain}, {words})"


def _finding(
    load: NativeLoad,
    there: NativeLoad | None,
    reference: Snapshot,
    target: Snapshot,
    analysis: Analysis,
    providers: Providers,
) -> Finding:
    severity, why_runs = _severity(load, analysis)
    verdict = load.verdict
    fixes: list[Fix] = []
    evidence = [Evidence(source="native", detail=verdict.message() or verdict.kind)]
    if verdict.kind == "unknown":
        reason = f"{load.key}: envsync cannot tell whether it loads ({verdict.message()})"
    else:
        first = verdict.reasons[0]
        reason = _words(first, load)
        provider, where = _reference_side(first, load, there, reference, providers)
        if where:
            reason += f"; {where}"
        for name in (provider, _owner(target, load.path)):
            for fix in _moving(name, reference, target):
                if fix not in fixes:
                    fixes.append(fix)
    if there is None:
        reason += "; the reference makes no such load"
    reason += f"; {why_runs}."
    evidence += [
        Evidence(source="native", detail=f"{s.needed_by} needs {s.name}: {s.how}")
        for s in load.steps
        if s.path is None
    ]
    return Finding(
        subject=load.key,
        kind="native",
        reference="loads" if there is not None and there.verdict.kind == "ok" else None,
        target="fails" if verdict.kind == "fails" else "unknown",
        severity=severity,
        reason=reason,
        decided_by="native",
        evidence=tuple(dict.fromkeys(evidence)),
        fixes=tuple(fixes),
    )


def _words(reason: NativeReason, load: NativeLoad) -> str:
    """What the loader refuses, in a sentence (its own message is the evidence)."""
    key = load.key

    def short(path: str) -> str:
        return "it" if path == load.path else path.rpartition("/")[2]

    match reason:
        case NativeNotFound():
            needer = short(reason.needed_by)
            return f"{key} cannot load: {needer} needs {reason.name}, which no search path provides"
        case NativeUndefinedSymbol():
            version = f" (version {reason.version})" if reason.version else ""
            name = reason.demangled or reason.symbol
            what = f"`{name}`{version}"
            if reason.demangled:
                what += f" ({reason.symbol})"
            needer = short(reason.needed_by)
            return f"{key} cannot load: {needer} needs {what}, which nothing it loads defines"
        case NativeVersionNotFound():
            provider = reason.provider.rpartition("/")[2]
            needer = short(reason.needed_by)
            return (
                f"{key} cannot load: {needer} needs version {reason.version} of "
                f"{reason.file}, and the target's {provider} ({reason.provider}) lacks it"
            )
    return f"{key} cannot load: {reason.message()}"


def _reference_side(
    reason: NativeReason,
    load: NativeLoad,
    there: NativeLoad | None,
    reference: Snapshot,
    providers: Providers,
) -> tuple[str | None, str | None]:
    """The distribution that provides what the target lacks on the reference, and the
    words that say so ("on the reference torch 2.13.0's libc10.so defines it")."""
    theirs = native_of(reference)
    if theirs is None:
        return None, None
    path = None
    match reason:
        case NativeUndefinedSymbol():
            path = providers.get((load.key, reason.symbol))
            verb = "defines it"
        case NativeNotFound():
            path = _found_as(theirs, there, reason.name)
            verb = "provides it"
        case NativeVersionNotFound():
            path = _found_as(theirs, there, reason.file)
            loads = there is not None and there.verdict.kind == "ok"
            verb = f"defines {reason.version}" if loads else f"is its {reason.file}"
        case _:
            return None, None
    if path is None:
        return None, None
    owner = theirs.owners.get(path)
    dist = reference.distribution(owner) if owner else None
    name = path.rpartition("/")[2]
    if dist is None:
        return None, f"on the reference {path} {verb}"
    return dist.name, f"on the reference {dist.display_name} {dist.version}'s {name} {verb}"


def _found_as(facts: NativeFacts, there: NativeLoad | None, name: str) -> str | None:
    """Where a needed name led in the reference's loads (the same load's first)."""
    loads = ([there] if there is not None else []) + list(facts.loads)
    for load in loads:
        for step in load.steps:
            if step.name == name and step.path:
                return step.path
    return None


def _owner(snap: Snapshot, path: str) -> str | None:
    facts = native_of(snap)
    return facts.owners.get(path) if facts is not None else None


def _moving(name: str | None, reference: Snapshot, target: Snapshot) -> list[Fix]:
    """The fixes that make a distribution the reference's again, when it differs."""
    if name is None:
        return []
    ref, tgt = reference.distribution(name), target.distribution(name)
    if ref is None or (tgt is not None and tgt.version == ref.version and not ref.custom_build):
        return []
    return dist_fixes(name, reference, target)


# ---------------------------------------------------------------------------------------
# CUDA coherence


def cuda_majors(facts: NativeFacts) -> dict[int, list[str]]:
    """{CUDA major: the needed names that ask for it} over every load of the startup."""
    out: dict[int, list[str]] = {}
    for load in facts.loads:
        for step in load.steps:
            match = CUDA_SONAME.match(step.name)
            if match and step.name not in out.setdefault(int(match.group(1)), []):
                out[int(match.group(1))].append(step.name)
    return out


def cuda_dists(snap: Snapshot) -> dict[int, list[str]]:
    """{CUDA major: the nvidia-* distributions built for it}."""
    out: dict[int, list[str]] = {}
    for dist in snap.distributions:
        match = CUDA_SUFFIX.match(dist.name)
        major = int(match.group(1)) if match else None
        if major is None and dist.name in CUDA_VERSIONED:
            try:
                major = Version(dist.version).major
            except InvalidVersion:
                major = None
        if major is not None:
            out.setdefault(major, []).append(f"{dist.display_name} {dist.version}")
    return out


def cuda_problems(snap: Snapshot) -> list[tuple[str, Severity, str]]:
    """(subject, severity, why) of each CUDA incoherence of one host."""
    out: list[tuple[str, Severity, str]] = []
    facts = native_of(snap)
    majors = cuda_majors(facts) if facts is not None else {}
    gpu = snap.gpu
    if majors and isinstance(gpu, GpuInfo) and gpu.cuda_driver_version:
        try:
            driver = Version(gpu.cuda_driver_version)
        except InvalidVersion:
            driver = None
        top = max(majors)
        if driver is not None and top > driver.major:
            out.append(
                (
                    "CUDA runtime",
                    "fatal",
                    f"startup loads {', '.join(majors[top])} (CUDA {top}); the driver "
                    f"{gpu.driver_version or ''} supports CUDA {gpu.cuda_driver_version} at most: "
                    "CUDA calls fail with 'CUDA driver version is insufficient for CUDA runtime "
                    "version'",
                )
            )
    dists = cuda_dists(snap)
    if len(dists) > 1:
        shown = "; ".join(f"CUDA {m}: {', '.join(d)}" for m, d in sorted(dists.items()))
        out.append(
            (
                "CUDA libraries",
                "risky",
                f"nvidia-* distributions of several CUDA majors in one environment ({shown}): "
                "a library may load another major's runtime beside its own",
            )
        )
    torch = snap.torch
    if isinstance(torch, Torch) and torch.cuda and majors:
        try:
            built = Version(torch.cuda).major
        except InvalidVersion:
            built = None
        others = {m: n for m, n in majors.items() if m != built}
        if built is not None and others:
            names = ", ".join(n for names in others.values() for n in names)
            out.append(
                (
                    "torch CUDA libraries",
                    "risky",
                    f"torch {torch.version} is built for CUDA {torch.cuda}, and startup also "
                    f"loads {names}: two CUDA runtimes in one process",
                )
            )
    return out


def cuda_findings(reference: Snapshot, target: Snapshot) -> list[Finding]:
    """The target's CUDA incoherences the reference does not share."""
    theirs = {subject for subject, _, _ in cuda_problems(reference)}
    return [
        Finding(
            subject=subject,
            kind="native",
            reference=None,
            target=None,
            severity=severity,
            reason=why + ".",
            decided_by="native",
            evidence=(Evidence(source="native", detail=why),),
        )
        for subject, severity, why in cuda_problems(target)
        if subject not in theirs
    ]


# ---------------------------------------------------------------------------------------
# The real-import check


def apply_import_check(
    findings: list[Finding], outcomes: Sequence[ImportOutcome]
) -> tuple[list[Finding], list[ImportOutcome]]:
    """A failed real import whose message is a native finding's own loader message (or
    names the operators of a package whose shipped library cannot load) makes that
    finding fatal; the outcomes it explains are not passed on."""
    out = list(findings)
    rest = []
    for outcome in outcomes:
        if outcome.ok:
            continue
        message = outcome.message or ""
        i = next((i for i, f in enumerate(out) if _explains(f, message)), None)
        if i is None:
            rest.append(outcome)
            continue
        evidence = Evidence(
            source="import-check",
            detail=f"import {outcome.module}: {outcome.exception}: {message}",
            file=outcome.file,
            line=outcome.line,
        )
        out[i] = replace(
            out[i],
            severity="fatal",
            decided_by="import-check",
            evidence=(evidence, *out[i].evidence),
        )
    return out, rest


def _explains(finding: Finding, message: str) -> bool:
    if finding.kind != "native" or not finding.evidence:
        return False
    if message == finding.evidence[0].detail:
        return True
    top = finding.subject.partition("/")[0]
    return f"operator {top}::" in message or f"{top}._C" in message
