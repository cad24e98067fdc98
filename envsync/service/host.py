"""deploy, smoke and stop for one inventory host: what those commands (and repair, after
an apply) do, with the results they print.

A deploy takes the target's lock, reads what envsync keeps on the host for the service
(the flags of `repair`, the last crash), starts the service and smoke-tests it; a crash is
kept on the host as ground truth and traced to its finding; a ready host's tokens/s is
kept and compared with the reference's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from envsync import redact
from envsync.collect import collect
from envsync.errors import InputError
from envsync.model.environment import Crash, Snapshot
from envsync.model.inventory import DEFAULT_DEADLINE, HostSpec, ServiceSpec
from envsync.service import Verdict, attach, deploy, keep_crash, smoke, stop
from envsync.service.diagnose import Diagnosis
from envsync.service.throughput import Figure, record
from envsync.sources.hold import hold_target
from envsync.sources.session import Session
from envsync.sources.states import State


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceRun:
    """One smoke test of a host's service (after a (re)start, or of the running one)."""

    host: str
    verdict: Verdict
    took: float  # seconds from the (re)start, or the watch, to the verdict
    reference: Figure | None = None  # ready: the reference's last tokens/s, when known
    diagnosis: Diagnosis | None = None  # crashed: the exception traced to a finding
    recorded: State | None = None  # ready: the host's state, recorded as its last good one

    @property
    def ok(self) -> bool:
        return self.verdict.kind == "ready"


def service_of(spec: HostSpec) -> ServiceSpec:
    """The host's service; InputError when the inventory configures none."""
    if spec.service is None or not spec.service.command:
        raise InputError(
            f"{spec.name}: no service configured", tip="add a [service] table to the inventory"
        )
    return spec.service


def _service_state(session: Session, spec: HostSpec) -> Snapshot:
    """What envsync keeps on the host for the service (flags of `repair`, the last crash),
    read by the probe (or as this command last collected the host, unchanged since)."""
    known = session.collected.any(spec.name)
    if known is not None:
        return known
    # Only that is wanted: no watched files hashed, no variables recorded, no graph.
    return collect(
        replace(spec, watch=(), env=()),
        session.runners(spec),
        replace(session.probe, deep=False, roots=(), internal=()),
    )


def run_service(
    session: Session,
    spec: HostSpec,
    *,
    restart: bool,
    deadline: float = DEFAULT_DEADLINE,
    lock: str | None = None,
    store: Path | None = None,
) -> ServiceRun:
    """(Re)start the host's service (`restart`) or attach to it, and smoke-test it.

    `lock`: the token of the target's lock the caller holds (a restart needs one);
    `store`: where tokens/s figures are kept (None: not kept, not compared).
    """
    service = service_of(spec)
    runner = session.runners(spec)
    state = _service_state(session, spec)
    flags = dict(state.service_flags) if state.service_flags else None
    started = time.monotonic()
    if restart:
        if state.crash is not None:
            keep_crash(spec, runner, None)  # this start tells anew
            session.changed(spec.name)
        deployment = deploy(spec, runner, service, flags, lock=lock)
        shown = " ".join(redact.command(deployment.command))
        session.note(f"{spec.name}: started {shown} ({deployment.mode})")
    else:
        deployment = attach(spec, service, flags)
    verdict = smoke(spec, runner, deployment, deadline=deadline, attached=not restart)
    took = time.monotonic() - started
    run = ServiceRun(host=spec.name, verdict=verdict, took=took)
    if verdict.kind == "ready":
        if state.crash is not None and not restart:
            keep_crash(spec, runner, None)  # ready again: the crash is no longer the truth
            session.changed(spec.name)
        if verdict.tokens_per_s and store is not None:
            figure = record(store, spec.name, verdict.tokens_per_s, session.inventory.reference)
            run = replace(run, reference=figure)
        from envsync.sources.history import record_state

        run = replace(run, recorded=record_state(session, spec.name, "ready"))
    elif verdict.kind == "crashed" and verdict.exception:
        from envsync.service.diagnose import diagnose  # the classifier: only for a crash

        raised = verdict.raised
        run = replace(
            run, diagnosis=diagnose(session, spec, verdict.exception, verdict.frame, raised)
        )
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        crash = Crash(
            exception=verdict.exception,
            line=verdict.frame,
            at=at,
            frames=raised[0].frames if raised else (),
            chain=raised[1:],
        )
        # Ground truth for diff, check and repair on this host until it is next ready.
        keep_crash(spec, runner, crash)
        session.changed(spec.name)
    return run


def deploy_host(
    session: Session,
    host: str,
    *,
    deadline: float = DEFAULT_DEADLINE,
    wait: float = 0.0,
    store: Path | None = None,
) -> ServiceRun:
    """`deploy HOST`: under the target's lock, (re)start the service and smoke-test it."""
    spec = session.host(host)
    with hold_target(session, spec, f"envsync deploy {spec.name}", wait) as lock:
        return run_service(session, spec, restart=True, deadline=deadline, lock=lock, store=store)


def smoke_host(
    session: Session, host: str, *, deadline: float = DEFAULT_DEADLINE, store: Path | None = None
) -> ServiceRun:
    """`smoke HOST`: smoke-test the running service without restarting it."""
    return run_service(session, session.host(host), restart=False, deadline=deadline, store=store)


def stop_host(session: Session, host: str, *, wait: float = 0.0) -> str:
    """`stop HOST`: under the target's lock, stop the service envsync deployed; what was
    stopped ("process 123", "unit x.service", "nothing (not running)")."""
    spec = session.host(host)
    service = service_of(spec)
    with hold_target(session, spec, f"envsync stop {spec.name}", wait) as lock:
        return stop(spec, session.runners(spec), service, lock=lock)
