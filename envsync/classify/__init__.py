"""Classify differences by their impact on the service's startup imports (pure)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envsync import redact
from envsync.classify.graph import Failure, GraphIndex, Reach, path_to, uses
from envsync.classify.rules import Root, RulePack, active_roots
from envsync.findings import (
    Difference,
    Evidence,
    Finding,
    Fix,
    FlagFix,
    PinFix,
    Report,
    SyncDistFix,
    SyncFileFix,
)
from envsync.launch import parse_flags, with_flag
from envsync.markers import applies
from envsync.model import (
    GitState,
    ImportOutcome,
    Snapshot,
    StartupGraph,
    Torch,
    Unavailable,
    why_files_cannot_serve,
)
from envsync.vocab import PACKAGE_KINDS, RUNS, SEVERITY_RANK, Kind, Severity

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Startup:
    """The service's startup as envsync understands it for one target."""

    entrypoint: str | None  # the module startup runs (a script: __main__)
    command: tuple[str, ...]
    packs: tuple[RulePack, ...]
    launcher: tuple[str, ...] = ()  # modules the launch command runs first (console scripts)
    shown: str | None = None  # the entrypoint as a report names it ("script /srv/serve.py")
    unreadable: str | None = None  # why envsync cannot tell what the command starts
    unresolved: tuple[str, ...] = ()  # launch roots the target does not have ("console:x")

    def roots(self, flags: Mapping[str, str]) -> tuple[Root, ...]:
        """The modules startup imports under these launch flags, the launcher's first
        (none without an entrypoint): what the classifier reads from and the real-import
        check imports, so that both judge the same startup."""
        if not self.entrypoint:
            return ()
        return active_roots(self.entrypoint, self.packs, flags, self.launcher, self.shown)


class _Analysis:
    """The target's startup graph under one set of launch flags."""

    def __init__(
        self,
        graph: StartupGraph | None,
        startup: Startup,
        command: Sequence[str],
        index: GraphIndex | None = None,
    ):
        self.graph = graph
        self.index = index or (GraphIndex(graph) if graph else None)
        self.flags = parse_flags(command)
        self.roots = startup.roots(self.flags)
        self.reached: dict[str, Reach] = self.index.reach(self.roots) if self.index else {}
        self.failures: list[Failure] = (
            self.index.failures(self.reached, self.roots) if self.index else []
        )

    def fatal_keys(self) -> set[tuple[str, str | None]]:
        return {(f.module, f.missing_name) for f in self.failures if f.context == "module"}


class _ReferenceSide:
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
            and b.edge.context == failure.edge.context
            and b.edge.statement == failure.edge.statement
            for b in self.index.broken_imports(failure.importer)
        )

    def works(self, failure: Failure) -> Evidence | None:
        """Evidence that the statement failing on the target succeeds on the reference."""
        if self.index is None:
            return None
        verdict, where = self.index.import_works(failure.edge.module, failure.missing_name)
        if verdict is not True or where is None:
            return None
        facts = self.index.graph.modules.get(where)
        owner = _owner(self.reference, where)
        file = _short_file(facts.file if facts else None, where) or where
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


def classify(
    reference: Snapshot,
    target: Snapshot,
    diffs: Sequence[Difference],
    startup: Startup,
    imports: Sequence[ImportOutcome] = (),
) -> Report:
    blind = _no_startup(target, startup)
    graph = None if blind else target.startup
    analysis = _Analysis(graph, startup, startup.command)
    notes = [blind] if blind else []
    side = _ReferenceSide(reference)
    findings = [
        _classify_one(d, reference, target, analysis, startup, side)
        for d in diffs
        if d.kind != "commit"
    ]
    if blind:
        # Without the startup graph envsync cannot show that startup does not use it.
        findings = [
            replace(f, severity="unknown", reason=f"{f.reason[:-1]}; {blind}.")
            if f.severity == "benign"
            else f
            for f in findings
        ]
    findings += _target_checks(reference, target)
    findings = _apply_import_check(findings, imports, reference, target, notes)
    findings = _apply_crash(findings, target, reference, notes)
    findings += [
        _classify_commit(d, reference, target, findings) for d in diffs if d.kind == "commit"
    ]
    findings.sort(key=lambda f: (SEVERITY_RANK[f.severity], f.kind, f.subject))
    return Report(
        reference=reference.host,
        target=target.host,
        entrypoint=startup.shown or startup.entrypoint,
        command=redact.command(startup.command),  # shown and saved: no --api-key values
        findings=tuple(findings),
        notes=tuple(notes),
    )


def _no_startup(target: Snapshot, startup: Startup) -> str | None:
    """Why envsync has no startup graph to judge by on this target, or None."""
    if startup.unreadable:
        return startup.unreadable
    if startup.entrypoint is None:
        return "no service entrypoint: envsync cannot tell what startup uses"
    if target.startup is None:
        return (
            f"{target.host} has no startup import graph (a lock or snapshot file): "
            "envsync cannot tell what startup uses"
        )
    if startup.unresolved:
        names = ", ".join(r.partition(":")[2] for r in startup.unresolved)
        return f"{names} does not resolve on {target.host}: envsync cannot tell what startup uses"
    facts = target.startup.modules.get(startup.entrypoint)
    if facts is None or facts.kind == "missing":
        return f"{startup.entrypoint} is not importable on {target.host}"
    return None


# ---------------------------------------------------------------------------------------
# One difference


def _import_names(name: str, *snaps: Snapshot) -> set[str]:
    names: set[str] = set()
    for snap in snaps:
        dist = snap.distribution(name)
        if dist is not None:
            names.update(dist.top_level)
    return names or {name.replace("-", "_")}


def _classify_one(
    diff: Difference,
    reference: Snapshot,
    target: Snapshot,
    analysis: _Analysis,
    startup: Startup,
    side: _ReferenceSide,
) -> Finding:
    if diff.kind in PACKAGE_KINDS:
        return _classify_dist(diff, reference, target, analysis, startup, side)
    if diff.kind == "file":
        return _classify_file(diff, reference, target, analysis)
    return _classify_fact(diff, analysis)


def _failure_evidence(failure: Failure, analysis: _Analysis) -> list[Evidence]:
    chain = path_to(analysis.reached, failure.importer)
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


def _why_runs(failure: Failure, analysis: _Analysis) -> str:
    chain = path_to(analysis.reached, failure.importer)
    label = failure.root.label
    if failure.context == "function":
        return "a feature that calls it fails later, startup itself goes on"
    if len(chain) == 1:
        return f"startup runs that module ({label})"
    shown = chain if len(chain) <= 4 else [chain[0], "…", *chain[-2:]]
    return f"startup reaches it: {' -> '.join(shown)} ({chain[0]}: {label})"


def _failure_reason(
    failure: Failure, analysis: _Analysis, target: Snapshot, side: _ReferenceSide
) -> str:
    where = CONTEXT_WORDS[failure.context]
    at = _statement_at(failure)
    if failure.missing_name:
        head = (
            f"{_owner(target, failure.module)} lacks {failure.missing_name}, which "
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
    return f"{head}; {_why_runs(failure, analysis)}."


def _statement_at(failure: Failure) -> str:
    """`file:line` of a failing import, the file as the package names it."""
    return f"{_short_file(failure.file, failure.importer) or failure.importer}:{failure.edge.line}"


def _short_file(file: str | None, module: str) -> str | None:
    """A module's file from its import root: sglang/srt/server_args.py, whatever the host's
    site-packages or checkout is called."""
    if not file:
        return None
    parts = file.replace("\\", "/").split("/")
    keep = module.count(".") + 1 + (parts[-1] == "__init__.py")
    return "/".join(parts[-keep:]) if module != "__main__" else file


def _owner(snap: Snapshot, module: str) -> str:
    """The distribution that installs a module, with its version ("xgrammar 0.1.10")."""
    top = module.partition(".")[0]
    dist = next((d for d in snap.distributions if top in d.top_level), None)
    return f"{dist.display_name} {dist.version}" if dist else module


def _requirement_evidence(name: str, reference: Snapshot, target: Snapshot) -> list[Evidence]:
    """Requires-Dist of target packages that the reference satisfies and the target does not."""
    out = []
    ref_dist = reference.distribution(name)
    tgt_dist = target.distribution(name)
    for requirer in target.distributions:
        for text in requirer.requires:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if canonicalize_name(req.name) != name:
                continue
            if applies(req, target) is not True:
                continue  # not for the target's platform, or an extra; or not readable
            ok_ref = ref_dist is not None and _satisfies(req, ref_dist.version)
            ok_tgt = tgt_dist is not None and _satisfies(req, tgt_dist.version)
            if ok_ref and not ok_tgt:
                have = f"has {tgt_dist.version}" if tgt_dist else "lacks it"
                out.append(
                    Evidence(
                        source="requirements",
                        detail=f"{requirer.display_name} {requirer.version} requires {text}; "
                        f"the reference satisfies it, the target {have}",
                    )
                )
    return out


def _satisfies(req: Requirement, version: str) -> bool:
    try:
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def _dist_fixes(name: str, reference: Snapshot, target: Snapshot) -> list[Fix]:
    ref = reference.distribution(name)
    if ref is None:
        return []
    fixes: list[Fix] = []
    if not ref.custom_build:
        fixes.append(
            PinFix(
                summary=f"pin {ref.display_name}=={ref.version} (pip install --no-deps, "
                "every other package held at its version)",
                requirement=f"{ref.display_name}=={ref.version}",
                dist=name,
            )
        )
    if why_files_cannot_serve(reference, target) is None:
        why = (
            "a custom build: never replaced from an index"
            if ref.custom_build
            else "no index needed"
        )
        fixes.append(
            SyncDistFix(
                summary=f"copy {ref.display_name} {ref.version}'s installed files "
                f"from the reference ({why})",
                dist=name,
            )
        )
    return fixes


def _flag_fixes(related: list[Failure], analysis: _Analysis, startup: Startup) -> list[Fix]:
    """Launch-flag values that avoid every one of these failures and break nothing new."""
    if analysis.graph is None or not startup.entrypoint:
        return []
    bad = {(f.module, f.missing_name) for f in related if f.context == "module"}
    if not bad:
        return []
    current_fatal = analysis.fatal_keys()
    offered: list[Fix] = []
    for pack in startup.packs:
        for rule in pack.flags:
            if not rule.workaround or not any(f.root.flag == rule.flag for f in related):
                continue
            current = analysis.flags.get(rule.flag, rule.default)
            candidates = list(rule.prefer) + [v for v in rule.values if v not in rule.prefer]
            for value in candidates:
                if value == current:
                    continue
                alt = _Analysis(
                    analysis.graph,
                    startup,
                    with_flag(startup.command, rule.flag, value),
                    analysis.index,
                )
                alt_fatal = alt.fatal_keys()
                if alt_fatal & bad or not alt_fatal <= current_fatal:
                    continue
                gives_up = rule.values[value].gives_up or "nothing the rule pack knows of"
                offered.append(
                    FlagFix(
                        summary=f"launch with {rule.flag} {value} (gives up: {gives_up})",
                        flag=rule.flag,
                        value=value,
                        gives_up=gives_up,
                        used_when=rule.values[value].used_when,
                    )
                )
    return offered


def _classify_dist(
    diff: Difference,
    reference: Snapshot,
    target: Snapshot,
    analysis: _Analysis,
    startup: Startup,
    side: _ReferenceSide,
) -> Finding:
    name = diff.subject
    names = _import_names(name, reference, target)
    shown = {"missing": "missing on the target", "extra": "only on the target"}.get(
        diff.kind, f"{diff.reference} on the reference, {diff.target} on the target"
    )
    requirements = _requirement_evidence(name, reference, target) if diff.kind != "extra" else []
    fixes = _dist_fixes(name, reference, target) if diff.kind != "extra" else []
    related = [f for f in analysis.failures if f.top in names]
    # A statement that stops the reference's startup as well is not this difference's doing.
    shared = [f for f in related if f.context == "module" and side.fails_too(f)]
    related = [f for f in related if f not in shared]
    if related:
        # Failures come surest first, then in the order startup runs them: the first is
        # the one that stops startup; every one of them is evidence.
        worst = related[0]
        severity: Severity = SEVERITY_OF_CONTEXT[worst.context]
        evidence: list[Evidence] = []
        for f in related:
            evidence += _failure_evidence(f, analysis)
            works = side.works(f) if f.context == "module" else None
            if works is not None:
                evidence.append(works)
        if severity == "fatal" and side.why_unchecked:
            evidence.append(Evidence(source="facts", detail=side.why_unchecked))
        evidence = list(dict.fromkeys(evidence))
        if severity == "fatal":
            fixes += _flag_fixes(related, analysis, startup)
        return _finding(
            diff,
            severity=severity,
            reason=_failure_reason(worst, analysis, target, side),
            decided_by=evidence[0].source,
            evidence=tuple(evidence + requirements),
            fixes=tuple(fixes),
        )
    if shared:
        first = shared[0]
        return _finding(
            diff,
            severity="unknown",
            reason=f"{name} {shown}: envsync reads `{first.edge.statement}` "
            f"({_statement_at(first)}) as failing on the reference too ({first.message()}), "
            "so this difference does not explain it and envsync cannot tell what it does.",
            decided_by=_failure_evidence(first, analysis)[0].source,
            evidence=tuple(dict.fromkeys(e for f in shared for e in _failure_evidence(f, analysis)))
            + tuple(requirements),
            fixes=tuple(fixes),
        )
    if analysis.graph is None:
        severity = "risky" if requirements else "unknown"
        why = (
            "a package another one requires"
            if requirements
            else "no startup import graph to tell whether startup uses it"
        )
        return _finding(
            diff,
            severity=severity,
            reason=f"{name} {shown} ({why}).",
            decided_by="requirements" if requirements else "facts",
            evidence=tuple(requirements),
            fixes=tuple(fixes),
        )
    use = uses(analysis.graph, analysis.reached, names)
    if use is not None and use[2] in RUNS:
        importer, edge, context = use
        file = analysis.graph.modules[importer].file
        return _finding(
            diff,
            severity="risky",
            reason=f"{name} {shown}: startup imports it ({importer}, {CONTEXT_WORDS[context]}); "
            "not shown to break.",
            decided_by="import-graph",
            evidence=(
                Evidence(
                    source="import-graph",
                    detail=f"{importer} imports {edge.module}",
                    file=file,
                    line=edge.line,
                    statement=edge.statement,
                    context=edge.context,
                ),
                *requirements,
            ),
            fixes=tuple(fixes),
        )
    lazily = " (only inside functions)" if use is not None else ""
    return _finding(
        diff,
        severity="benign",
        reason=f"{name} {shown}: nothing the service imports at startup uses it{lazily}.",
        decided_by="import-graph",
        evidence=tuple(requirements),
        fixes=tuple(fixes),
    )


def _classify_commit(
    diff: Difference, reference: Snapshot, target: Snapshot, findings: Sequence[Finding]
) -> Finding:
    """A checkout at another commit matters as much as the worst of its differing files."""
    files = [
        f
        for f in findings
        if f.kind == "file" and any(x.kind == "sync-file" and x.dist == diff.dist for x in f.fixes)
    ]
    severity = min((f.severity for f in files), key=SEVERITY_RANK.__getitem__, default="benign")

    def where(snapshot: Snapshot, commit: str | None) -> str:
        dist = snapshot.distribution(diff.dist or "")
        git = dist.source.git if dist is not None and dist.source is not None else None
        branch = f" ({git.branch})" if isinstance(git, GitState) and git.branch else ""
        return f"{(commit or '?')[:12]}{branch} on {snapshot.host}"

    reason = (
        f"{diff.dist} at commit {where(reference, diff.reference)}, {where(target, diff.target)}"
    )
    if files:
        reason += (
            f"; {len(files)} of its files differ (each its own finding). envsync copies "
            "files; it never runs git checkout, reset or stash on a checkout."
        )
    else:
        reason += "; its files are the same on both hosts."
    return _finding(diff, severity=severity, reason=reason, decided_by="facts")


def _finding(diff: Difference, **rest: Any) -> Finding:
    """A finding about `diff`: its subject, kind and both values, and the rest."""
    return Finding(
        subject=diff.subject, kind=diff.kind, reference=diff.reference, target=diff.target, **rest
    )


def _module_of(path: str) -> str | None:
    if not path.endswith(".py") or path.startswith(".."):
        return None
    module = path[:-3].replace("/", ".")
    return module.removesuffix(".__init__")


def _classify_file(
    diff: Difference, reference: Snapshot, target: Snapshot, analysis: _Analysis
) -> Finding:
    ref_dist = reference.distribution(diff.dist or "")
    tgt_dist = target.distribution(diff.dist or "")
    path = diff.subject
    if diff.target is None:
        state = "missing on the target"
    elif diff.reference is None:
        state = "only on the target"
    else:
        state = "differs"
    whose = []
    if ref_dist is not None and (path in ref_dist.patched or path in ref_dist.added):
        whose.append("a local patch on the reference")
    if tgt_dist is not None and (path in tgt_dist.patched or path in tgt_dist.added):
        whose.append("a local patch on the target")
    what = f"{path} {state}" + (f" ({', '.join(whose)})" if whose else "")
    fix = SyncFileFix(
        summary=f"remove {path} from the target (the reference has no such file)"
        if diff.reference is None
        else f"copy {path} from the reference (backed up first, hash checked after)",
        dist=diff.dist or "",
        path=path,
    )
    module = _module_of(path)
    how = analysis.reached.get(module) if module else None
    if how is not None and how.context in RUNS:
        steps = path_to(analysis.reached, module)  # type: ignore[arg-type]
        chain = " -> ".join(steps) if len(steps) > 1 else how.root.label
        return _finding(
            diff,
            severity="risky",
            reason=f"{what}: startup imports {module} ({chain}).",
            decided_by="import-graph",
            evidence=(
                Evidence(
                    source="import-graph", detail=f"startup path: {chain}", context=how.context
                ),
            ),
            fixes=(fix,),
        )
    if analysis.graph is None:
        severity, reason = (
            "risky",
            f"{what}: no startup import graph to tell whether startup runs it.",
        )
        decided = "facts"
    else:
        severity, reason = "benign", f"{what}: startup does not import it."
        decided = "import-graph"
    return _finding(
        diff,
        severity=severity,
        reason=reason,
        decided_by=decided,
        fixes=(fix,),
    )


def _classify_fact(diff: Difference, analysis: _Analysis) -> Finding:
    severity: Severity = "benign"
    reason = f"{diff.subject}: {diff.reference} on the reference, {diff.target} on the target"
    if diff.section == "python" and diff.key in ("version", "abi_tag", "interpreter_tag"):
        ref_mm = ".".join((diff.reference or "").split(".")[:2])
        tgt_mm = ".".join((diff.target or "").split(".")[:2])
        if diff.key != "version" or ref_mm != tgt_mm:
            severity = "risky"
            reason += "; compiled extension modules and copied packages may not load"
    elif diff.section == "torch" and analysis.graph is not None:
        use = uses(analysis.graph, analysis.reached, {"torch"})
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
    return _finding(
        diff,
        severity=severity,
        reason=reason + ".",
        decided_by="facts",
    )


# ---------------------------------------------------------------------------------------
# Build constraints the target must meet (torch against its GPUs and driver)


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


def _target_checks(reference: Snapshot, target: Snapshot) -> list[Finding]:
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
                fixes=tuple(_dist_fixes("torch", reference, target)),
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


# ---------------------------------------------------------------------------------------
# Ground truth: the real import check, and crashes


def _apply_import_check(
    findings: list[Finding],
    outcomes: Sequence[ImportOutcome],
    reference: Snapshot,
    target: Snapshot,
    notes: list[str],
) -> list[Finding]:
    out = list(findings)
    for outcome in outcomes:
        if outcome.ok:
            continue
        detail = f"import {outcome.module}: {outcome.exception}: {outcome.message}"
        evidence = Evidence(
            source="import-check", detail=detail, file=outcome.file, line=outcome.line
        )
        i = finding_for_error(out, outcome.message or "", reference, target)
        if i is None:
            notes.append(f"import check: {detail} (not caused by a difference from the reference)")
            continue
        finding = out[i]
        if finding.severity != "fatal":
            finding = replace(
                finding,
                severity="fatal",
                decided_by="import-check",
                reason=f"{finding.subject}: importing {outcome.module} on the target fails: "
                f"{outcome.exception}: {outcome.message}.",
            )
        out[i] = replace(finding, evidence=(evidence, *finding.evidence))
    return out


def _apply_crash(
    findings: list[Finding], target: Snapshot, reference: Snapshot, notes: list[str]
) -> list[Finding]:
    """A crash envsync watched on the target raises the finding it matches to fatal."""
    crash = target.crash
    if crash is None:
        return findings
    when = f" at {crash.at}" if crash.at else ""
    i = finding_for_error(findings, crash.exception, reference, target)
    if i is None:
        notes.append(
            f"the service crashed on {target.host}{when} with {crash.exception}; "
            "no difference from the reference explains it"
        )
        return findings
    finding = findings[i]
    evidence = Evidence(
        source="crash",
        detail=f"the service crashed on {target.host}{when}: {crash.exception}",
        statement=crash.line,
        context="watched by envsync's smoke test; kept until the service is next ready",
    )
    out = list(findings)
    out[i] = replace(
        finding,
        severity="fatal",
        decided_by="crash",
        reason=f"the service crashed on {target.host}{when} with {crash.exception}; "
        + finding.reason,
        evidence=(evidence, *finding.evidence),
    )
    return out


def failing_module(message: str) -> str | None:
    """The top-level module an import error is about ("No module named 'x.y'": x)."""
    import re

    match = re.search(r"No module named '([^']+)'", message) or re.search(
        r"cannot import name '[^']+' from '([^']+)'", message
    )
    return match.group(1).partition(".")[0] if match else None


def finding_for_error(
    findings: Sequence[Finding], message: str, reference: Snapshot, target: Snapshot
) -> int | None:
    """The index of the first package finding whose distribution provides the module an
    import error names, or None (the import check and crash diagnosis both ask this)."""
    module = failing_module(message)
    if module is None:
        return None
    for i, finding in enumerate(findings):
        if finding.kind not in PACKAGE_KINDS:
            continue
        names = _import_names(finding.subject, reference, target)
        if module in names or module == finding.subject.replace("-", "_"):
            return i
    return None
