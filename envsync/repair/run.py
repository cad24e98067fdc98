"""Repair a target: plan the fixes, save the plan, apply it, then deploy and smoke-test;
and roll a target back to its last backup.

`repair` is what the command of the same name does, for a library user too: it compares
the hosts, makes (or takes) the plan and, with `apply`, runs it under the target's lock and
deploys the service the plan changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envsync.compare.targets import diff, pair_names
from envsync.documents import check_writable, write_atomic
from envsync.errors import InputError
from envsync.model.environment import Snapshot
from envsync.model.findings import Report
from envsync.model.inventory import DEFAULT_DEADLINE, HostSpec
from envsync.model.vocab import ONLY_DEFAULT, PREFER, Only, Prefer
from envsync.repair.plan import Plan, container_note, dumps_plan, load_plan, make_plan
from envsync.repair.transaction import Applied, apply_plan, backups, rollback
from envsync.runner.agent import BackupInfo
from envsync.service.host import ServiceRun, run_service
from envsync.sources.hold import hold_target
from envsync.sources.session import Session
from envsync.sources.source import HostSource


@dataclass(frozen=True, slots=True, kw_only=True)
class RepairOptions:
    """What `repair` is asked to do (the CLI's `repair` options, typed)."""

    reference: str | None = None  # default: defaults.reference (or the saved plan's)
    target: str | None = None  # default: defaults.target (or the saved plan's)
    prefer: Prefer = PREFER[0]
    only: Only = ONLY_DEFAULT
    plan: Path | None = None  # a saved plan to apply instead of a new one
    save: Path | None = None  # save the new plan there (JSON)
    apply: bool = False
    deploy: bool = True  # after an apply: deploy and smoke-test when a service is configured
    deadline: float = DEFAULT_DEADLINE  # of that smoke test
    wait: float = 0.0  # queue behind another envsync holding the target's lock
    store: Path | None = None  # where the smoke test keeps tokens/s figures (None: nowhere)
    # A fleet (TGT a group or node set): the canary batches, as Ansible's `serial`
    # (counts or percentages of the hosts, the last repeated), and how many hosts of a
    # batch may fail (N, or N% of the batch) before the rollout stops (canary.py).
    batch: tuple[str, ...] = ()
    max_fail: str = "0"


@dataclass(frozen=True, slots=True, kw_only=True)
class Repair:
    """What `repair` did: the plan, and with `apply` what ran and how the service came up."""

    plan: Plan
    exec_prefix: tuple[str, ...] = ()  # the target's, when it is behind one (a container)
    applied: Applied | None = None  # None: not applied (no --apply, or nothing to do)
    service: ServiceRun | None = None  # the deploy and smoke test after the apply
    not_deployed: str | None = None  # why there was none although a service is configured


def fleet_targets(session: Session, options: RepairOptions) -> tuple[str, ...]:
    """The hosts of a fleet repair: TGT's (or defaults.target's) when it names several, or
    when canary batches are asked for; () for the repair of one host."""
    target = options.target or session.inventory.target
    hosts = tuple(s.label for s in session.select([target])) if target else ()
    return hosts if len(hosts) > 1 or options.batch else ()


def plan_repair(
    report: Report, reference: Snapshot, target: Snapshot, options: RepairOptions, spec: HostSpec
) -> Plan:
    """The plan `options` ask for, of `target` (on host `spec`) against `reference`: the one
    place repair and each class of a canary rollout make theirs."""
    return make_plan(
        report,
        reference,
        target,
        prefer=options.prefer,
        only=options.only,
        installer=spec.installer,
    )


def repair(session: Session, options: RepairOptions) -> Repair:
    """Plan the fixes of the target against the reference (or take the saved plan) and,
    with `options.apply`, apply them and deploy. Progress, the steps as they run and the
    backup made go to the session's notes as they happen."""
    if options.save:
        check_writable(options.save)
    saved = load_plan(options.plan) if options.plan else None
    if saved is not None:
        ref_name, tgt_name = saved.reference, saved.target
    else:
        ref_name, tgt_name = pair_names(
            session.inventory, options.reference, options.target, "repair"
        )
    session.resolve(ref_name)  # both names are checked before anything is collected
    if not isinstance(session.resolve(tgt_name), HostSource):
        raise InputError(f"repair: the target must be a host, not the file {tgt_name}")
    spec = session.host(tgt_name)
    if not options.apply:
        return _plan(session, options, saved, ref_name, tgt_name, None)
    # The lock comes first: the target must not change between its snapshot and the apply.
    with hold_target(session, spec, f"envsync repair --apply {spec.name}", options.wait) as lock:
        return _plan(session, options, saved, ref_name, tgt_name, lock)


def _check_flags(session: Session, plan: Plan, target: Snapshot, origin: str) -> None:
    """A saved plan sets only the flags the service's entrypoint defines (those the rule
    packs choose backends by, and those of its command), and changes service.json only by
    its steps."""
    from envsync.classify.rules import load_packs
    from envsync.model.launch import parse_flags
    from envsync.repair.plan import flags_problems

    known = {rule.flag for pack in load_packs(session.inventory.rules) for rule in pack.flags}
    if session.inventory.service is not None:
        known |= set(parse_flags(session.inventory.service.command))
    problems = flags_problems(plan, target.service_flags or {}, known)
    if problems:
        raise InputError(
            f"{origin}: refusing the plan: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            tip="a plan is data: make a new one with `envsync repair -o FILE` and review it",
        )


def _plan(
    session: Session,
    options: RepairOptions,
    saved: Plan | None,
    ref_name: str,
    tgt_name: str,
    lock: str | None,
) -> Repair:
    spec = session.host(tgt_name)
    ref_source = session.resolve(ref_name)
    comparison = diff(session, ref_name, tgt_name, command="repair")
    reference, snap = comparison.reference, comparison.snapshot
    plan = saved
    if saved is not None:
        _check_flags(session, saved, snap, str(options.plan))
    if plan is None:
        plan = plan_repair(comparison.report, reference, snap, options, spec)
        if options.save:
            write_atomic(options.save, dumps_plan(plan))
    done = Repair(plan=plan, exec_prefix=spec.exec)
    if not options.apply or not plan.steps:
        return done
    reference_spec = ref_source.spec if isinstance(ref_source, HostSource) else None
    return carry_out(session, options, spec, plan, reference, snap, reference_spec, lock)


def carry_out(
    session: Session,
    options: RepairOptions,
    spec: HostSpec,
    plan: Plan,
    reference: Snapshot,
    snap: Snapshot,
    reference_spec: HostSpec | None,
    lock: str | None,
) -> Repair:
    """Apply a plan to the target whose snapshot it was made from (under its lock), then
    deploy and smoke-test the service when one is configured (`repair --apply`, and each
    host of a canary rollout)."""
    tgt_name = spec.name
    count = len(plan.steps)
    try:
        applied = apply_plan(
            plan,
            target_spec=spec,
            target=snap,
            runners=session.runners,
            reference_spec=reference_spec,
            reference=reference,
            pip_options=spec.pip_options,
            on_step=lambda i, step: session.note(f"{tgt_name}: step {i}/{count}: {step.summary}"),
            lock=lock,
        )
    finally:
        session.changed(tgt_name)  # applied, or rolled back: collected again when next asked
    session.note(
        f"{tgt_name}: applied {applied.steps} step(s) in {applied.duration_s:.1f}s; "
        f"backup {applied.backup} (envsync rollback {tgt_name} restores it)",
    )
    if spec.exec:
        session.note(f"{tgt_name}: {container_note(tgt_name, spec.exec)}")
    run, why = deploy_after_apply(session, options, spec, lock)
    return Repair(plan=plan, exec_prefix=spec.exec, applied=applied, service=run, not_deployed=why)


def deploy_after_apply(
    session: Session, options: RepairOptions, spec: HostSpec, lock: str | None
) -> tuple[ServiceRun | None, str | None]:
    """Deploy and smoke-test the target's service after an apply, when asked and one is
    configured: the smoke test, or why there was none (None, None: not asked, no service)."""
    service = spec.service
    if not options.deploy or service is None or not service.command:
        return None, None
    if not service.port:
        return None, "the service has no port in the inventory: not deployed"
    run = run_service(
        session, spec, restart=True, deadline=options.deadline, lock=lock, store=options.store
    )
    return run, None


@dataclass(frozen=True, slots=True, kw_only=True)
class Rollback:
    """What `rollback` restored."""

    host: str
    backup: str
    dists: tuple[str, ...] = ()  # the distributions it put back (none: files only)
    already: bool = False  # the backup was rolled back before: nothing restored again
    changed: int = 0  # paths put back, removed or made again
    found: tuple[str, ...] = ()  # what appeared during the apply that it did not write: kept


def rollback_host(
    session: Session,
    host: str,
    *,
    backup: str = "latest",
    force: bool = False,
    wait: float = 0.0,
) -> Rollback:
    """`rollback HOST`: under the target's lock, undo its latest apply that is not rolled
    back (or restore a named backup); refused, naming them, when paths changed since the
    apply, unless `force`."""
    spec = session.host(host)
    with hold_target(session, spec, f"envsync rollback {spec.name}", wait) as lock:
        try:
            result = rollback(spec, session.runners(spec), backup, force=force, lock=lock)
        finally:
            session.changed(spec.name)
    return Rollback(
        host=host,
        backup=result.backup,
        dists=tuple(result.dists),
        already=result.already,
        changed=result.changed,
        found=result.found,
    )


def list_backups(session: Session, host: str) -> tuple[BackupInfo, ...]:
    """`rollback --list HOST`: the environment's backups, oldest first (nothing changes)."""
    spec = session.host(host)
    return backups(spec, session.runners(spec))
