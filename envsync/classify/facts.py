"""Facts of the hosts (Python, torch, the system) that differ, and the build constraints
the target must meet (torch against its GPUs and driver).
"""

from __future__ import annotations

from collections.abc import Callable

from packaging.version import InvalidVersion, Version

from envsync.classify.packages import dist_fixes
from envsync.classify.startup import Analysis, finding_about
from envsync.model.environment import Snapshot, Torch, Unavailable
from envsync.model.findings import Difference, Evidence, Finding
from envsync.model.vocab import RUNS, Kind, Severity


def classify_fact(diff: Difference, analysis: Analysis) -> Finding:
    severity: Severity = "benign"
    reason = f"{diff.subject}: {diff.reference} on the reference, {diff.target} on the target"
    if diff.section == "python" and diff.key in ("version", "abi_tag", "interpreter_tag"):
        ref_mm = ".".join((diff.reference or "").split(".")[:2])
        tgt_mm = ".".join((diff.target or "").split(".")[:2])
        if diff.key != "version" or ref_mm != tgt_mm:
            severity = "risky"
            reason += "; compiled extension modules and copied packages may not load"
    elif diff.section == "torch" and analysis.imports is not None:
        use = analysis.imports.surest({"torch"})
        if use is not None and use[2] in RUNS:
            severity = "risky"
            reason += "; startup imports torch"
    elif diff.section == "system" and diff.key == "glibc":
        try:
            if Version(diff.target or "0") < Version(diff.reference or "0"):
                severity = "risky"
                reason += "; wheels built on the reference may need the newer glibc"
        except InvalidVersion:
            pass
    return finding_about(
        diff,
        severity=severity,
        reason=reason + ".",
        decided_by="facts",
    )


def _sm(cc: str) -> int | None:
    try:
        major, _, minor = cc.partition(".")
        return int(major) * 10 + int(minor or 0)
    except ValueError:
        return None


def _arch_problem(torch: Torch, snap: Snapshot) -> str | None:
    gpu = snap.gpu
    if (
        isinstance(gpu, Unavailable)
        or not isinstance(torch.arch_list, tuple)
        or not torch.arch_list
    ):
        return None
    arch = set(torch.arch_list)
    for g in gpu.gpus:
        sm = _sm(g.compute_capability or "")
        if sm is None:
            continue
        sass = f"sm_{sm}" in arch
        ptx = any(a.startswith("compute_") and a[8:].isdigit() and int(a[8:]) <= sm for a in arch)
        if not (sass or ptx):
            return (
                f"GPU {g.name} has compute capability {g.compute_capability}, which torch "
                f"{torch.version}'s arch list ({' '.join(torch.arch_list)}) lacks: CUDA kernels "
                "fail with 'no kernel image is available for execution on the device'"
            )
    return None


def _driver_problem(torch: Torch, snap: Snapshot) -> str | None:
    gpu = snap.gpu
    if isinstance(gpu, Unavailable) or not torch.cuda or not gpu.cuda_driver_version:
        return None
    try:
        build, driver = Version(torch.cuda), Version(gpu.cuda_driver_version)
    except InvalidVersion:
        return None
    if build.major > driver.major:
        return (
            f"torch {torch.version} is built for CUDA {torch.cuda}; the driver "
            f"{gpu.driver_version or ''} supports CUDA {gpu.cuda_driver_version} at most"
        )
    return None


def _label_problem(snap: Snapshot) -> str | None:
    labels = {}
    for name in ("torch", "torchvision", "torchaudio"):
        dist = snap.distribution(name)
        if dist is not None and "+" in dist.version:
            labels[name] = dist.version.split("+", 1)[1]
    if len(set(labels.values())) > 1:
        shown = ", ".join(f"{n} +{v}" for n, v in labels.items())
        return (
            f"mismatched local build labels: {shown}; "
            "their compiled operators will not load together"
        )
    return None


def target_checks(reference: Snapshot, target: Snapshot) -> list[Finding]:
    out = []
    checks: list[tuple[str, Kind, Callable[[Torch, Snapshot], str | None]]] = [
        ("torch arch list", "gpu", _arch_problem),
        ("torch CUDA build", "torch", _driver_problem),
    ]
    for subject, kind, check in checks:
        tgt_torch, ref_torch = target.torch, reference.torch
        if not isinstance(tgt_torch, Torch):
            continue
        problem = check(tgt_torch, target)
        if problem is None:
            continue
        if isinstance(ref_torch, Torch) and check(ref_torch, reference) is not None:
            continue  # the reference has the same problem: not drift
        out.append(
            Finding(
                subject=subject,
                kind=kind,
                reference=ref_torch.version if isinstance(ref_torch, Torch) else None,
                target=tgt_torch.version,
                severity="fatal",
                reason=problem + ".",
                decided_by="facts",
                evidence=(Evidence(source="facts", detail=problem),),
                fixes=tuple(dist_fixes("torch", reference, target)),
            )
        )
    problem = _label_problem(target)
    if problem is not None and _label_problem(reference) is None:
        out.append(
            Finding(
                subject="torch build labels",
                kind="torch",
                reference=None,
                target=None,
                severity="fatal",
                reason=problem + ".",
                decided_by="facts",
                evidence=(Evidence(source="facts", detail=problem),),
            )
        )
    return out
