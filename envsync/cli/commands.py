"""The envsync commands: each takes its parsed arguments and the shared Context."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING

from envsync import redact
from envsync.cli.context import Context, collect_all, collect_each, collect_many, collect_one
from envsync.cli.output import emit, err, indent, render
from envsync.codec import to_data
from envsync.collect.importcheck import DEFAULT_TIMEOUT as IMPORT_TIMEOUT
from envsync.documents import check_writable, write_atomic
from envsync.errors import CollectError, InputError
from envsync.exitcodes import ExitCode
from envsync.inventory import HostSpec, ServiceSpec
from envsync.lock import dumps_lock, read_lock
from envsync.model import SNAPSHOT_SCHEMA_VERSION, Snapshot
from envsync.snapshot import HostSource, dumps_snapshot, resolve
from envsync.vocab import SEVERITY_RANK

if TYPE_CHECKING:
    from collections.abc import Iterator

    from envsync.collect import ProbeOptions
    from envsync.compare import Target
    from envsync.findings import Report
    from envsync.plan import Plan

# Commands import what they need when they run: deepdiff, the classifier, rich and the
# SSH stack cost more to import than a whole local snapshot takes.


def _writable(*paths: str | None) -> None:
    """Fail before a long collection when an output can never be written."""
    for path in paths:
        if path:
            check_writable(Path(path))


def _pair_names(args: argparse.Namespace, ctx: Context, command: str) -> tuple[str, str]:
    ref = args.reference or ctx.inventory.reference
    tgt = args.target or ctx.inventory.target
    if not ref or not tgt:
        raise InputError(
            f"{command}: name REF and TGT, or set defaults.reference and defaults.target "
            "in the inventory"
        )
    return ref, tgt


def cmd_snapshot(args: argparse.Namespace, ctx: Context) -> ExitCode:
    _writable(args.output)
    if len(args.hosts) == 1:
        (result,) = collect_many(ctx, [(args.hosts[0], None)])
        if isinstance(result, CollectError):
            err(str(result))
            return ExitCode.COLLECT
        emit(dumps_snapshot(result), args.output)
        return ExitCode.OK
    with tempfile.TemporaryFile() as spool:
        doc = _snapshots_document(ctx, args.hosts, spool)
        emit(doc.pieces(), args.output)
    return ExitCode.COLLECT if doc.errors else ExitCode.OK


class _Spooled:
    """A multi-host snapshot document whose snapshots wait in a spool file, each written
    there as its host answers: the command holds at most --jobs snapshots at a time, and
    the document still lists them in the order the hosts were named."""

    def __init__(self, spool: IO[bytes]) -> None:
        self.spool = spool
        self.placed: dict[int, tuple[int, int]] = {}  # host index -> (offset, length)
        self.errors: dict[int, tuple[str, CollectError]] = {}

    def add(self, i: int, snap: Snapshot) -> None:
        # Each line indented as json.dumps(indent=2) indents an item of "snapshots" (a JSON
        # string never holds a raw newline, so the replace touches only the layout).
        data = json.dumps(to_data(snap), indent=2).replace("\n", "\n    ").encode()
        self.spool.seek(0, os.SEEK_END)
        self.placed[i] = (self.spool.tell(), len(data))
        self.spool.write(data)

    def pieces(self) -> Iterator[str]:
        marks = {i: f"\0envsync-snapshot-{i}\0" for i in sorted(self.placed)}
        doc: dict[str, object] = {
            "schema_version": SNAPSHOT_SCHEMA_VERSION,
            "snapshots": list(marks.values()),
        }
        if self.errors:
            doc["errors"] = [
                {"host": name, "error": str(e)} for _, (name, e) in sorted(self.errors.items())
            ]
        text = json.dumps(doc, indent=2) + "\n"
        for i, mark in marks.items():
            before, text = text.split(json.dumps(mark), 1)
            yield before
            offset, length = self.placed[i]
            self.spool.seek(offset)
            yield self.spool.read(length).decode()
        yield text


def _snapshots_document(ctx: Context, hosts: list[str], spool: IO[bytes]) -> _Spooled:
    doc = _Spooled(spool)
    for i, result in collect_each(ctx, [(name, None) for name in hosts]):
        if isinstance(result, CollectError):
            err(str(result))
            doc.errors[i] = (hosts[i], result)
        else:
            doc.add(i, result)
        del result
    return doc


def cmd_lock(args: argparse.Namespace, ctx: Context) -> ExitCode:
    host = args.host or ctx.inventory.reference
    if host is None:
        raise InputError(
            "lock: no HOST given and the inventory names no defaults.reference",
            tip="run `envsync lock HOST > env.lock`",
        )
    _writable(args.output)
    if args.format == "pylock":
        source = resolve(host, ctx.inventory)
        if not isinstance(source, HostSource):
            raise InputError(
                f"lock --format pylock: {host} is a file; the files a host installs from are "
                "known only on the live host",
                tip="name an inventory host or `local`",
            )
        _check_pylock_name(args.output)
        text = _pylock(ctx, source.spec, collect_one(ctx, host))
    else:
        text = dumps_lock(collect_one(ctx, host), portable=args.portable)
    emit(text, args.output)
    return ExitCode.OK


def _check_pylock_name(output: str | None) -> None:
    from envsync.pylock import FILE_NAME

    if output and not FILE_NAME.match(Path(output).name):
        err(
            f"warning: installers read only pylock.toml or pylock.NAME.toml; "
            f"`uv pip sync {output}` will not take {Path(output).name} as a lock "
            "(Tip: -o pylock.toml or -o pylock.HOST.toml)"
        )


def _pylock(ctx: Context, spec: HostSpec, snap: Snapshot) -> str:
    """The host's pylock.toml: each package's file, from the host's own indexes."""
    from envsync.index import Index, read_config
    from envsync.pylock import dumps_pylock, locate

    config = read_config(spec, ctx.runners(spec))
    if not config.indexes:
        err(f"warning: {spec.name}: its pip configuration names no index (no-index)")
    index = Index(config)
    ctx.note(
        f"{spec.name}: locating {len(snap.distributions)} packages on "
        f"{len(config.indexes)} index(es)"
    )
    located = locate(snap, index.files, config.tags, index.size)
    for name, reason in sorted(located.unlocked.items()):
        dist = snap.distribution(name)
        err(
            f"warning: {name} {dist.version if dist else ''}: {reason}; listed under "
            "[tool.envsync].unlocked, not installed by `uv pip sync`"
        )
    return dumps_pylock(snap, located)


# ---------------------------------------------------------------------------------------
# diff, check, repair: compare targets with a reference


def _targets(ctx: Context, names: list[str]) -> list[Target]:
    from envsync.classify.rules import load_packs
    from envsync.compare import prepare

    packs = load_packs(ctx.inventory.rules)
    return [prepare(n, ctx.inventory, packs, ctx.probe) for n in names]


def _compare(
    ctx: Context, args: argparse.Namespace, reference: Snapshot, target: Target, snap: Snapshot
) -> Report:
    from envsync.compare import compare

    return compare(
        reference,
        target,
        snap,
        runners=ctx.runners,
        import_check=getattr(args, "probe", False),
        import_timeout=getattr(args, "probe_timeout", IMPORT_TIMEOUT),
    )


def _reference_request(
    ctx: Context, ref_name: str, targets: list[Target]
) -> tuple[str, ProbeOptions | None]:
    """The reference, collected with the targets' startup roots too: an import that fails
    on a target is read on the reference as well, so a fatal finding says it works there."""
    rooted = [t.options for t in targets if t.options.roots]
    if not rooted or not isinstance(resolve(ref_name, ctx.inventory), HostSource):
        return ref_name, None
    (own,) = _targets(ctx, [ref_name])
    base = own.options if own.options.roots else rooted[0]
    every = [base, *rooted]
    return ref_name, replace(
        base,
        roots=tuple(dict.fromkeys(r for o in every for r in o.roots)),
        internal=tuple(dict.fromkeys(i for o in every for i in o.internal)),
        lazy_graph=True,
    )


def _compare_each(
    ctx: Context,
    args: argparse.Namespace,
    targets: list[Target],
    *,
    reference: Snapshot | tuple[str, ProbeOptions | None],
) -> tuple[list[Report], bool]:
    """Collect the targets (and the reference, when it is a request) in parallel and
    compare each target as it arrives, keeping only its report (targets that answer
    before the reference wait for it). The reports in the order the targets were named,
    and whether any target could not be collected (each said on stderr); a reference
    that cannot be collected is raised."""
    requests: list[tuple[str, ProbeOptions | None]] = [(t.name, t.options) for t in targets]
    ref: Snapshot | None = None
    if isinstance(reference, Snapshot):
        ref, first = reference, 0  # first: the index of the first target among the requests
    else:
        requests.insert(0, reference)
        first = 1
    waiting: dict[int, Snapshot] = {}
    done: dict[int, Report] = {}
    failures: dict[int, CollectError] = {}
    for i, result in collect_each(ctx, requests):
        if i < first:
            if isinstance(result, CollectError):
                raise result
            ref = result
        elif isinstance(result, CollectError):
            failures[i - first] = result
        else:
            waiting[i - first] = result
        del result
        if ref is not None:
            for j in list(waiting):
                done[j] = _compare(ctx, args, ref, targets[j], waiting.pop(j))
    for j in sorted(failures):
        err(str(failures[j]))
    return [done[j] for j in sorted(done)], bool(failures)


def _diff_pair(
    ctx: Context, args: argparse.Namespace, ref_name: str, tgt_name: str
) -> tuple[Target, Snapshot, Snapshot, Report]:
    """Collect the reference and the target together and compare them."""
    resolve(ref_name, ctx.inventory)  # both names are checked before anything is collected
    (target,) = _targets(ctx, [tgt_name])
    reference, snap = collect_all(
        ctx, [_reference_request(ctx, ref_name, [target]), (tgt_name, target.options)]
    )
    return target, reference, snap, _compare(ctx, args, reference, target, snap)


def cmd_diff(args: argparse.Namespace, ctx: Context) -> ExitCode:
    if len(args.targets) > 1:
        return _diff_fleet(args, ctx)
    args.target = args.targets[0] if args.targets else None
    ref_name, tgt_name = _pair_names(args, ctx, "diff")
    _writable(args.output)
    _, _, _, report = _diff_pair(ctx, args, ref_name, tgt_name)
    emit(render(args.format, [report], args.output), args.output)
    ctx.note(report.summary_line())
    return ExitCode.DRIFT if report.findings else ExitCode.OK


def _diff_fleet(args: argparse.Namespace, ctx: Context) -> ExitCode:
    """`diff REF HOST...`: every target collected in parallel, one matrix of the fleet."""
    _writable(args.output)
    ref_name = args.reference
    resolve(ref_name, ctx.inventory)  # every name is checked before anything is collected
    targets = _targets(ctx, args.targets)
    reports, failed = _compare_each(
        ctx, args, targets, reference=_reference_request(ctx, ref_name, targets)
    )
    if reports:
        emit(render(args.format, reports, args.output, fleet=True), args.output)
    for report in reports:
        ctx.note(report.summary_line())
    if failed:
        return ExitCode.COLLECT
    return ExitCode.DRIFT if any(r.findings for r in reports) else ExitCode.OK


def cmd_check(args: argparse.Namespace, ctx: Context) -> ExitCode:
    hosts = args.hosts or ([ctx.inventory.target] if ctx.inventory.target else [])
    if not hosts:
        raise InputError("check: name the HOSTs to check, or set defaults.target in the inventory")
    _writable(args.output, args.junit, args.markdown)
    if not Path(args.lock).is_file():
        raise InputError(
            f"{args.lock}: no such lock file", tip="create one with `envsync lock HOST > env.lock`"
        )
    reference = read_lock(Path(args.lock))
    targets = _targets(ctx, hosts)
    reports, failed = _compare_each(ctx, args, targets, reference=reference)
    from envsync.report import render as render_reports

    emit(render(args.format, reports, args.output), args.output)
    if args.junit:
        write_atomic(Path(args.junit), render_reports("junit", reports, fail_on=args.fail_on))
    if args.markdown:
        write_atomic(Path(args.markdown), render_reports("markdown", reports))
    for report in reports:
        ctx.note(report.summary_line())
    if failed:
        return ExitCode.COLLECT
    threshold = SEVERITY_RANK[args.fail_on]
    blocking = [f for r in reports for f in r.findings if SEVERITY_RANK[f.severity] <= threshold]
    if blocking:
        ctx.note(f"check: {len(blocking)} finding(s) at or above {args.fail_on}: failing")
        return ExitCode.DRIFT
    return ExitCode.OK


def cmd_repair(args: argparse.Namespace, ctx: Context) -> ExitCode:
    from envsync.plan import load_plan

    _writable(args.output)
    plan = load_plan(Path(args.plan)) if args.plan else None
    if plan is not None:
        ref_name, tgt_name = plan.reference, plan.target
    else:
        ref_name, tgt_name = _pair_names(args, ctx, "repair")
    resolve(ref_name, ctx.inventory)  # both names are checked before anything is collected
    if not isinstance(resolve(tgt_name, ctx.inventory), HostSource):
        raise InputError(f"repair: the target must be a host, not the file {tgt_name}")
    if not args.apply:
        return _repair(args, ctx, plan, ref_name, tgt_name, None)
    # The lock comes first: the target must not change between its snapshot and the apply.
    with _locked(ctx, args, ctx.host(tgt_name)) as lock:
        return _repair(args, ctx, plan, ref_name, tgt_name, lock)


@contextlib.contextmanager
def _locked(ctx: Context, args: argparse.Namespace, spec: HostSpec) -> Iterator[str]:
    """Hold the target's lock (one changing command at a time) for the body."""
    from envsync.apply.hostlock import target_lock

    what = f"envsync {args.command}{' --apply' if getattr(args, 'apply', False) else ''}"
    with target_lock(
        spec,
        ctx.runners(spec),
        command=f"{what} {spec.name}",
        wait=args.wait,
        on_stale=ctx.note,
    ) as token:
        yield token


def _repair(
    args: argparse.Namespace,
    ctx: Context,
    plan: Plan | None,
    ref_name: str,
    tgt_name: str,
    lock: str | None,
) -> ExitCode:
    """Plan (or take the saved plan), then print it or, with --apply, apply and deploy it."""
    from envsync.apply import apply_plan
    from envsync.plan import describe, dumps_plan, make_plan

    ref_source = resolve(ref_name, ctx.inventory)
    _, reference, snap, report = _diff_pair(ctx, args, ref_name, tgt_name)
    if plan is None:
        plan = make_plan(
            report,
            reference,
            snap,
            prefer=args.prefer,
            only=args.only,
            installer=ctx.host(tgt_name).installer,
        )
        if args.output:
            write_atomic(Path(args.output), dumps_plan(plan))
    if not args.apply:
        emit(describe(plan, exec_prefix=ctx.host(tgt_name).exec), None)
        return ExitCode.DRIFT if plan.steps else ExitCode.OK
    if not plan.steps:
        ctx.note(f"{tgt_name}: nothing to do")
        return ExitCode.OK
    spec = ctx.host(tgt_name)
    count = len(plan.steps)
    applied = apply_plan(
        plan,
        target_spec=spec,
        target=snap,
        runners=ctx.runners,
        reference_spec=ref_source.spec if isinstance(ref_source, HostSource) else None,
        reference=reference,
        pip_options=spec.pip_options,
        on_step=lambda i, step: ctx.note(f"{tgt_name}: step {i}/{count}: {step.summary}"),
        lock=lock,
    )
    ctx.note(
        f"{tgt_name}: applied {applied.steps} step(s) in {applied.duration_s:.1f}s; "
        f"backup {applied.backup} (envsync rollback {tgt_name} restores it)",
    )
    if spec.exec:
        from envsync.plan import container_note

        ctx.note(f"{tgt_name}: {container_note(tgt_name, spec.exec)}")
    service = spec.service
    if args.no_deploy or service is None or not service.command:
        return ExitCode.OK
    if not service.port:
        ctx.note(f"{tgt_name}: the service has no port in the inventory: not deployed")
        return ExitCode.OK
    return _run_smoke(ctx, args, spec, restart=True, lock=lock)


# ---------------------------------------------------------------------------------------
# deploy, smoke, stop, rollback: act on one host


def _service_of(spec: HostSpec) -> ServiceSpec:
    if spec.service is None or not spec.service.command:
        raise InputError(
            f"{spec.name}: no service configured", tip="add a [service] table to the inventory"
        )
    return spec.service


def _service_state(ctx: Context, spec: HostSpec) -> Snapshot:
    """What envsync keeps on the host for the service (flags of `repair`, the last crash),
    read by the probe."""
    from envsync.collect import collect

    # Only that is wanted: no watched files hashed, no variables recorded, no graph.
    return collect(
        replace(spec, watch=(), env=()),
        ctx.runners(spec),
        replace(ctx.probe, deep=False, roots=(), internal=()),
    )


def _run_smoke(
    ctx: Context,
    args: argparse.Namespace,
    spec: HostSpec,
    restart: bool,
    lock: str | None = None,
) -> ExitCode:
    from envsync.model import Crash
    from envsync.service import attach, deploy, keep_crash, smoke

    service = _service_of(spec)
    runner = ctx.runners(spec)
    state = _service_state(ctx, spec)
    flags = dict(state.service_flags) if state.service_flags else None
    started = time.monotonic()
    if restart:
        if state.crash is not None:
            keep_crash(spec, runner, None)  # this start tells anew
        deployment = deploy(spec, runner, service, flags, lock=lock)
        shown = " ".join(redact.command(deployment.command))
        ctx.note(f"{spec.name}: started {shown} ({deployment.mode})")
    else:
        deployment = attach(spec, service, flags)
    verdict = smoke(spec, runner, deployment, deadline=args.deadline, attached=not restart)
    took = time.monotonic() - started
    if verdict.kind == "not-running":
        print(f"{spec.name}: not running (`envsync deploy {spec.name}` starts it)")
        return ExitCode.SMOKE
    if verdict.kind == "ready":
        if state.crash is not None and not restart:
            keep_crash(spec, runner, None)  # ready again: the crash is no longer the truth
        line = f"{spec.name}: ready in {took:.1f}s; {verdict.detail}"
        if verdict.tokens_per_s:
            line += f": {verdict.tokens_per_s:.0f} tokens/s"
            line += _compare_throughput(spec.name, ctx.inventory.reference, verdict.tokens_per_s)
        print(line)
        return ExitCode.OK
    if verdict.kind == "stalled":
        print(f"{spec.name}: STALLED: {verdict.detail}; log tail:\n{indent(verdict.log_tail)}")
        return ExitCode.SMOKE
    print(f"{spec.name}: CRASHED {took:.1f}s after start: {verdict.exception or verdict.detail}")
    if verdict.exception:
        _print_cause(ctx, args, spec, verdict.exception, verdict.frame)
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        # Ground truth for diff, check and repair on this host until it is next ready.
        keep_crash(spec, runner, Crash(exception=verdict.exception, line=verdict.frame, at=at))
    if verdict.log_tail:
        print(f"log tail:\n{indent(verdict.log_tail)}")
    return ExitCode.SMOKE


def _print_cause(
    ctx: Context, args: argparse.Namespace, spec: HostSpec, exception: str, frame: str | None
) -> None:
    """The crash traced to a finding of `diff REF HOST`, with the commands that fix it."""
    from envsync.classify import failing_module
    from envsync.service.diagnose import crash_cause

    ref = ctx.inventory.reference
    where = f"; last frame: {frame}" if frame else ""
    if not ref or ref == spec.name:
        return
    if failing_module(exception) is None:
        print(f"  not an import error: envsync has no finding for it{where}")
        return
    _, reference, snap, report = _diff_pair(ctx, args, ref, spec.name)
    cause = crash_cause(exception, report, reference, snap)
    if cause.finding is None:
        print(f"  not drift: {cause.why_not}{where}")
        return
    # The crash makes the finding fatal on this host (kept there until it is next ready).
    print(f"  cause (fatal finding of envsync diff {ref} {spec.name}):")
    print(f"    {cause.finding.reason}")
    if cause.finding.severity != "fatal":
        print(
            f"    (read from the code it was {cause.finding.severity}; this crash makes it "
            f"fatal on {spec.name} until the service is next ready)"
        )
    for fix, command in cause.fixes:
        print(f"  fix: {fix.summary}")
        print(f"       next: {command}")


def _throughput_store() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "envsync" / "throughput.json"


def _compare_throughput(host: str, reference: str | None, rate: float) -> str:
    store = _throughput_store()
    try:
        known = json.loads(store.read_text())
    except (OSError, ValueError):
        known = {}
    known[host] = {"tokens_per_s": rate, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with contextlib.suppress(OSError):
        store.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(store, json.dumps(known, indent=1) + "\n")
    if reference and reference != host and reference in known:
        theirs = known[reference]["tokens_per_s"]
        return (
            f" ({rate / theirs:.0%} of {reference}'s {theirs:.0f} tokens/s "
            f"on {known[reference]['at']})"
        )
    return ""


def cmd_deploy(args: argparse.Namespace, ctx: Context) -> ExitCode:
    spec = ctx.host(args.host)
    with _locked(ctx, args, spec) as lock:
        return _run_smoke(ctx, args, spec, restart=True, lock=lock)


def cmd_smoke(args: argparse.Namespace, ctx: Context) -> ExitCode:
    return _run_smoke(ctx, args, ctx.host(args.host), restart=False)


def cmd_stop(args: argparse.Namespace, ctx: Context) -> ExitCode:
    from envsync.service import stop

    spec = ctx.host(args.host)
    service = _service_of(spec)
    with _locked(ctx, args, spec) as lock:
        what = stop(spec, ctx.runners(spec), service, lock=lock)
    ctx.note(f"{spec.name}: stopped {what}")
    return ExitCode.OK


def cmd_rollback(args: argparse.Namespace, ctx: Context) -> ExitCode:
    from envsync.apply import rollback

    spec = ctx.host(args.host)
    with _locked(ctx, args, spec) as lock:
        result = rollback(spec, ctx.runners(spec), args.backup or "latest", lock=lock)
    ctx.note(
        f"{args.host}: restored {result.get('backup')} "
        f"({', '.join(result.get('dists') or []) or 'files only'})",
    )
    return ExitCode.OK
