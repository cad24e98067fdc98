"""Canary repairs of a fleet: plan once per class, apply in batches, stop at a failing one.

`repair REF FLEET --apply --batch 1,10%,100% --max-fail N` (as Ansible's `serial` and
`max_fail_percentage`): the fleet is compared once per class (classes.py); each class
gets one plan; then the hosts that need one are changed batch by batch, each host under
its own lock, re-collected and checked to be still of its class, applied, deployed and
smoke-tested, `jobs` hosts at once. A batch where more hosts fail than `--max-fail` allows
stops the rollout, and every host of that batch that was changed is rolled back; later
batches are not started. The rollout says, host by host, what changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Literal

from envsync.compare.targets import FleetComparison, class_key, diff_fleet, targets
from envsync.errors import EnvsyncError, InputError, PlanError, StalePlan
from envsync.model.environment import Snapshot
from envsync.model.findings import Report
from envsync.model.nodeset import fold
from envsync.repair.plan import Plan
from envsync.repair.run import RepairOptions, carry_out, deploy_after_apply, plan_repair
from envsync.repair.transaction import rollback
from envsync.sources.hold import hold_target
from envsync.sources.session import Session
from envsync.sources.source import HostSource

DEFAULT_BATCHES = ("1", "10%", "100%")
_SIZE = re.compile(r"^([1-9][0-9]*)(%?)$")

Outcome = Literal["changed", "failed", "rolled-back", "unchanged", "not-run"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassPlan:
    """The plan of one class of hosts (made once, from its first host)."""

    hosts: tuple[str, ...]
    key: str
    plan: Plan | None  # None: no plan could be made (why)
    why: str | None = None

    @property
    def nodeset(self) -> str:
        return fold(self.hosts)


@dataclass(frozen=True, slots=True, kw_only=True)
class HostResult:
    host: str
    outcome: Outcome
    detail: str = ""  # what happened: the steps, the verdict, the error
    backup: str | None = None  # the backup its apply made (a rollback restores it)


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    hosts: tuple[str, ...]
    results: tuple[HostResult, ...]
    failed: int
    allowed: int  # failures this batch could take (--max-fail)

    @property
    def stopped(self) -> bool:
        return self.failed > self.allowed


@dataclass(frozen=True, slots=True, kw_only=True)
class Rollout:
    reference: str
    plans: tuple[ClassPlan, ...]
    batches: tuple[Batch, ...] = ()  # the batches that ran, in turn
    planned: int = 0  # how many batches the rollout had
    applied: bool = False  # False: --apply not given, only the plans
    results: tuple[HostResult, ...] = ()  # every host, in the order named

    @property
    def stopped(self) -> bool:
        return any(b.stopped for b in self.batches)

    def hosts(self, outcome: Outcome) -> tuple[str, ...]:
        return tuple(r.host for r in self.results if r.outcome == outcome)


def parse_sizes(words: Sequence[str]) -> tuple[str, ...]:
    """`--batch 1,10%,100%`: each a count or a percentage (InputError otherwise)."""
    sizes = tuple(w.strip() for word in words for w in word.split(",") if w.strip())
    for size in sizes:
        match = _SIZE.match(size)
        if not match or (match.group(2) and int(match.group(1)) > 100):
            raise InputError(
                f"--batch {size!r}: not a host count or a percentage",
                tip="e.g. --batch 1,10%,100% (as Ansible's serial)",
            )
    return sizes or DEFAULT_BATCHES


def _count(size: str, total: int) -> int:
    if size.endswith("%"):
        return max(1, total * int(size[:-1]) // 100)
    return int(size)


def batches(hosts: Sequence[str], sizes: Sequence[str]) -> list[tuple[str, ...]]:
    """The hosts in batches as Ansible's `serial` makes them: each size in turn (a
    percentage of all the hosts), the last size repeated until every host has had one."""
    out: list[tuple[str, ...]] = []
    left, i = list(hosts), 0
    while left:
        n = _count(sizes[min(i, len(sizes) - 1)], len(hosts))
        out.append(tuple(left[:n]))
        left, i = left[n:], i + 1
    return out


def allowed_failures(max_fail: str, batch: int) -> int:
    """How many hosts of a batch of `batch` may fail: N, or N% of it (Ansible: the batch
    fails once its failures exceed max_fail_percentage)."""
    text = max_fail.strip()
    match = re.fullmatch(r"([0-9]+)(%?)", text)
    if not match:
        raise InputError(
            f"--max-fail {max_fail!r}: not a count or a percentage",
            tip="e.g. --max-fail 0 (the default: any failure stops), 2, or 10%",
        )
    number = int(match.group(1))
    return batch * number // 100 if match.group(2) else number


def rollout(session: Session, options: RepairOptions, hosts: Sequence[str]) -> Rollout:
    """Plan once per class of `hosts` and, with `options.apply`, roll the plans out in
    canary batches (progress goes to the session's notes as it happens)."""
    reference = options.reference or session.inventory.reference
    if not reference:
        raise InputError("repair: name REF, or set defaults.reference in the inventory")
    for host in hosts:
        if not isinstance(session.resolve(host), HostSource):
            raise InputError(f"repair: the targets must be hosts, not the file {host}")
    sizes = parse_sizes(options.batch)
    allowed_failures(options.max_fail, 1)  # a bad --max-fail fails before anything runs
    fleet = diff_fleet(session, reference, hosts, samples=True)
    ref_snap = fleet.reference_snapshot
    assert ref_snap is not None
    plans = _class_plans(session, options, fleet, ref_snap)
    done = Rollout(reference=reference, plans=tuple(plans))
    results: dict[str, HostResult] = {
        e_host: HostResult(host=e_host, outcome="not-run", detail=str(e))
        for e_host, e in zip(fleet.unreachable, fleet.failures, strict=True)
    }
    plan_of, settled = _by_host(plans)
    results.update(settled)
    todo = [h for h in hosts if h in plan_of and h not in results]
    if not options.apply:
        return replace(done, results=_ordered(hosts, results))
    groups = batches(todo, sizes)
    ran: list[Batch] = []
    reports = {h: c.report for c in fleet.classes for h in c.hosts}
    for n, group in enumerate(groups, 1):
        session.note(f"batch {n}/{len(groups)}: {fold(group)} ({len(group)} host(s))")
        batch = _run_batch(
            session,
            options,
            group,
            lambda h: _one(session, options, h, plan_of[h], reports[h], ref_snap, reference),
        )
        results.update({r.host: r for r in batch.results})
        ran.append(batch)
        if batch.stopped:
            session.note(
                f"batch {n}/{len(groups)}: {batch.failed} host(s) failed (--max-fail "
                f"{options.max_fail}): the rollout stops, the batch is rolled back"
            )
            break
    for host in todo:
        results.setdefault(
            host, HostResult(host=host, outcome="not-run", detail="a batch before it failed")
        )
    return replace(
        done,
        batches=tuple(ran),
        planned=len(groups),
        applied=True,
        results=_ordered(hosts, results),
    )


def _class_plans(
    session: Session, options: RepairOptions, fleet: FleetComparison, reference: Snapshot
) -> list[ClassPlan]:
    """One plan per class of the fleet, made from its first host's snapshot (or why not)."""
    plans = []
    for c in fleet.classes:
        sample = fleet.samples[c.key]
        spec = session.host(c.hosts[0])
        try:
            plan = plan_repair(c.report, reference, sample, options, spec)
            # shown for the class: its node set, not the host it was made from
            plans.append(ClassPlan(hosts=c.hosts, key=c.key, plan=replace(plan, target=c.nodeset)))
        except PlanError as e:
            plans.append(ClassPlan(hosts=c.hosts, key=c.key, plan=None, why=e.message))
    return plans


def _by_host(plans: Sequence[ClassPlan]) -> tuple[dict[str, ClassPlan], dict[str, HostResult]]:
    """Each host's class plan, and the result of each host that has nothing to apply (no
    plan could be made, or it has no step)."""
    plan_of: dict[str, ClassPlan] = {}
    settled: dict[str, HostResult] = {}
    for cp in plans:
        for host in cp.hosts:
            plan_of[host] = cp
            if cp.plan is None:
                settled[host] = HostResult(host=host, outcome="not-run", detail=cp.why or "")
            elif not cp.plan.steps:
                settled[host] = HostResult(host=host, outcome="unchanged", detail="nothing to do")
    return plan_of, settled


def _run_batch(
    session: Session,
    options: RepairOptions,
    group: tuple[str, ...],
    one: Callable[[str], HostResult],
) -> Batch:
    """One batch: `one` on each of its hosts, `session.jobs` at once, then the failed
    hosts rolled back, and every changed host with them when the batch stops."""
    with ThreadPoolExecutor(max_workers=max(1, session.jobs)) as pool:
        outcomes = list(pool.map(one, group))
    failed = sum(1 for r in outcomes if r.outcome == "failed")
    batch = Batch(
        hosts=group,
        results=tuple(outcomes),
        failed=failed,
        allowed=allowed_failures(options.max_fail, len(group)),
    )
    # A host that failed after its change goes back at once; a batch that stops takes
    # its changed hosts back with it.
    outcomes = [
        _roll_back(session, options, r) if r.outcome == "failed" or batch.stopped else r
        for r in outcomes
    ]
    return replace(batch, results=tuple(outcomes))


def _ordered(hosts: Sequence[str], results: dict[str, HostResult]) -> tuple[HostResult, ...]:
    return tuple(results[h] for h in hosts if h in results)


def _one(
    session: Session,
    options: RepairOptions,
    host: str,
    planned: ClassPlan,
    report: Report,
    reference: Snapshot,
    reference_name: str,
) -> HostResult:
    """One host of a batch: under its lock, re-collected, still of its class, its plan
    applied, the service deployed and smoke-tested."""
    spec = session.host(host)
    ref_source = session.resolve(reference_name)
    reference_spec = ref_source.spec if isinstance(ref_source, HostSource) else None
    (target,) = targets(session, [host])
    backup = None
    try:
        with hold_target(
            session, spec, f"envsync repair --apply {host} (canary rollout)", options.wait
        ) as lock:
            session.changed(host)  # collected before its lock was held: not trusted under it
            snap = session.collect_one(host, target.options)
            if class_key(target, snap) != planned.key:
                raise StalePlan(
                    f"{host}: changed since the rollout planned its class {planned.nodeset}",
                    tip=f"run `envsync repair {reference_name} {host}` to plan it anew",
                )
            plan = plan_repair(replace(report, target=host), reference, snap, options, spec)
            quiet = replace(options, deploy=False)  # deployed below, the backup known
            done = carry_out(session, quiet, spec, plan, reference, snap, reference_spec, lock)
            backup = done.applied.backup if done.applied else None
            steps = f"{done.applied.steps} step(s), backup {backup}" if done.applied else "no step"
            try:
                run, _ = deploy_after_apply(session, options, spec, lock)
            except EnvsyncError as e:
                detail = f"{steps}; deploy: {e}"
                return HostResult(host=host, outcome="failed", detail=detail, backup=backup)
    except EnvsyncError as e:
        return HostResult(host=host, outcome="failed", detail=str(e), backup=backup)
    if run is not None and not run.ok:
        what = run.verdict.exception or run.verdict.detail or run.verdict.kind
        return HostResult(
            host=host,
            outcome="failed",
            detail=f"{steps}; {run.verdict.kind}: {what}",
            backup=backup,
        )
    verdict = f"; {run.verdict.kind} in {run.took:.1f}s" if run is not None else ""
    return HostResult(host=host, outcome="changed", detail=steps + verdict, backup=backup)


def _roll_back(session: Session, options: RepairOptions, result: HostResult) -> HostResult:
    """A host's change rolled back (a failed apply rolled itself back already: no backup
    is left to restore); it stays failed if it had failed."""
    if result.backup is None:
        return result
    spec = session.host(result.host)
    try:
        with hold_target(
            session, spec, f"envsync rollback {result.host} (canary rollout)", options.wait
        ) as lock:
            # the apply names its backup by its folder; the agent restores it by its name
            ident = result.backup.rstrip("/").rpartition("/")[2]
            try:
                rollback(spec, session.runners(spec), ident, lock=lock)
            finally:
                session.changed(result.host)
    except EnvsyncError as e:
        return replace(result, outcome="failed", detail=f"{result.detail}; rollback failed: {e}")
    session.note(f"{result.host}: rolled back {result.backup}")
    outcome: Outcome = "failed" if result.outcome == "failed" else "rolled-back"
    return replace(result, outcome=outcome, detail=f"{result.detail}; rolled back")
