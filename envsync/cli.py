"""The envsync command line: argparse, the only place that prints or exits."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from envsync import __version__
from envsync.collect import DEFAULT_TIMEOUT, ProbeOptions
from envsync.errors import CollectError, EnvsyncError, InputError
from envsync.exitcodes import ExitCode
from envsync.findings import SEVERITIES
from envsync.inventory import HostSpec, Inventory, ServiceSpec, load_inventory
from envsync.lock import dumps_lock, read_lock
from envsync.model import SNAPSHOT_SCHEMA_VERSION, Snapshot, to_data
from envsync.report import FORMATS
from envsync.runner import Runner
from envsync.runner.local import LocalRunner
from envsync.snapshot import (
    HostSource,
    check_writable,
    dumps_snapshot,
    resolve,
    take,
    write_atomic,
)

if TYPE_CHECKING:
    from envsync.compare import Target
    from envsync.findings import Report

# Commands import what they need when they run: deepdiff, the classifier, rich and the
# SSH stack cost more to import than a whole local snapshot takes.


class Runners:
    """One runner per host for the whole command: one SSH connection per host, closed at end."""

    def __init__(self, *, accept_new: bool = False, connect_timeout: float = 10.0) -> None:
        self.accept_new = accept_new
        self.connect_timeout = connect_timeout
        self._runners: dict[str, Runner] = {}
        self._lock = threading.Lock()

    def __call__(self, spec: HostSpec) -> Runner:
        with self._lock:
            if spec.name not in self._runners:
                self._runners[spec.name] = self._make(spec)
            return self._runners[spec.name]

    def _make(self, spec: HostSpec) -> Runner:
        if spec.is_local:
            return LocalRunner(spec.name)
        from envsync.runner.ssh import SSHRunner  # paramiko: only for SSH hosts

        return SSHRunner(spec, accept_new=self.accept_new, connect_timeout=self.connect_timeout)

    def close(self) -> None:
        for runner in self._runners.values():
            close = getattr(runner, "close", None)
            if close is not None:
                close()


def _err(message: str) -> None:
    print(f"envsync: {message}", file=sys.stderr)


def _note(args: argparse.Namespace, message: str) -> None:
    if not args.quiet:
        print(message, file=sys.stderr)


def _probe_options(args: argparse.Namespace) -> ProbeOptions:
    return ProbeOptions(
        deep=args.deep, timeout=args.timeout, cache_dir="" if args.no_cache else None
    )


def _snapshot_of(
    name: str,
    inventory: Inventory,
    args: argparse.Namespace,
    options: ProbeOptions | None = None,
) -> Snapshot:
    source = resolve(name, inventory)
    snap = take(source, args.runners, options or _probe_options(args))
    if snap.broken and not args.allow_broken:
        first = snap.broken[0]
        more = f" (and {len(snap.broken) - 1} more)" if len(snap.broken) > 1 else ""
        raise CollectError(
            f"{source.label}: malformed distribution metadata at {first.path}: "
            f"{first.reason}{more}",
            tip="repair or remove it, or pass --allow-broken to record it and go on",
        )
    if isinstance(source, HostSource):
        _note(
            args,
            f"{source.label}: {len(snap.distributions)} distributions, "
            f"{sum(1 for d in snap.distributions if d.watched)} watched, "
            f"collected in {snap.duration_s or 0:.2f}s",
        )
    return snap


def _emit(text: str, output: str | None) -> None:
    if output:
        write_atomic(Path(output), text)
    else:
        sys.stdout.write(text)


def _fleet(
    names: Sequence[str], inventory: Inventory, args: argparse.Namespace
) -> tuple[list[Snapshot], list[tuple[str, CollectError]]]:
    """Snapshots of several hosts in parallel (at most --jobs at once); failures kept apart."""
    for name in names:
        resolve(name, inventory)  # every name is checked before anything is collected
    if len(names) == 1:
        try:
            return [_snapshot_of(names[0], inventory, args)], []
        except CollectError as e:
            _err(str(e))
            return [], [(names[0], e)]
    from concurrent.futures import ThreadPoolExecutor, as_completed

    results: dict[int, Snapshot] = {}
    errors: list[tuple[str, CollectError]] = []
    progress = None
    if sys.stderr.isatty() and not args.quiet and len(names) > 1:
        from rich.console import Console
        from rich.progress import Progress

        progress = Progress(transient=True, console=Console(stderr=True))
    task = progress.add_task("collecting", total=len(names)) if progress else None
    with (
        progress or contextlib.nullcontext(),
        ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool,
    ):
        jobs = {pool.submit(_snapshot_of, name, inventory, args): i for i, name in enumerate(names)}
        for job in as_completed(jobs):
            i = jobs[job]
            try:
                results[i] = job.result()
            except CollectError as e:
                errors.append((names[i], e))
                _err(str(e))
            if progress is not None and task is not None:
                progress.advance(task)
    return [results[i] for i in sorted(results)], errors


def cmd_snapshot(args: argparse.Namespace, inventory: Inventory) -> ExitCode:
    if args.output:
        check_writable(Path(args.output))
    snaps, errors = _fleet(args.hosts, inventory, args)
    if len(args.hosts) == 1:
        if errors:
            return ExitCode.COLLECT
        text = dumps_snapshot(snaps[0])
    else:
        doc: dict[str, object] = {
            "schema_version": SNAPSHOT_SCHEMA_VERSION,
            "snapshots": [to_data(s) for s in snaps],
        }
        if errors:
            doc["errors"] = [{"host": name, "error": str(e)} for name, e in errors]
        text = json.dumps(doc, indent=2) + "\n"
    _emit(text, args.output)
    return ExitCode.COLLECT if errors else ExitCode.OK


def cmd_lock(args: argparse.Namespace, inventory: Inventory) -> ExitCode:
    host = args.host or inventory.reference
    if host is None:
        raise InputError(
            "lock: no HOST given and the inventory names no defaults.reference",
            tip="run `envsync lock HOST > env.lock`",
        )
    if args.output:
        check_writable(Path(args.output))
    _emit(dumps_lock(_snapshot_of(host, inventory, args)), args.output)
    return ExitCode.OK


# ---------------------------------------------------------------------------------------
# diff and check


def _compare(
    reference: Snapshot,
    target: Target,
    inventory: Inventory,
    args: argparse.Namespace,
    snap: Snapshot | None = None,
) -> Report:
    from envsync.compare import compare

    if snap is None:
        snap = _snapshot_of(target.name, inventory, args, target.options)
    return compare(
        reference,
        target,
        snap,
        runners=args.runners,
        probe=args.probe,
        probe_timeout=args.probe_timeout,
    )


def _targets(names: Sequence[str], inventory: Inventory, args: argparse.Namespace) -> list[Target]:
    from envsync.classify.rules import load_packs
    from envsync.compare import prepare

    packs = load_packs(inventory.rules)
    return [prepare(n, inventory, packs, _probe_options(args)) for n in names]


def _format(fmt: str, reports: list[Report]) -> str:
    from envsync.report import render

    return render(fmt, reports)


def _render(args: argparse.Namespace, reports: list[Report]) -> str:
    from envsync.report import render

    color = args.output is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    width = shutil.get_terminal_size((120, 40)).columns if color else 120
    return render(args.format, reports, color=color, width=width)


def cmd_diff(args: argparse.Namespace, inventory: Inventory) -> ExitCode:
    ref_name = args.reference or inventory.reference
    tgt_name = args.target or inventory.target
    if not ref_name or not tgt_name:
        raise InputError(
            "diff: name REF and TGT, or set defaults.reference and defaults.target in the inventory"
        )
    if args.output:
        check_writable(Path(args.output))
    resolve(ref_name, inventory)  # both names are checked before anything is collected
    (target,) = _targets([tgt_name], inventory, args)
    reference, target_snap = _collect_pair(ref_name, target, inventory, args)
    report = _compare(reference, target, inventory, args, target_snap)
    _emit(_render(args, [report]), args.output)
    _note(args, _summary_line(report))
    return ExitCode.DRIFT if report.findings else ExitCode.OK


def cmd_repair(args: argparse.Namespace, inventory: Inventory) -> ExitCode:
    from envsync.apply import apply_plan
    from envsync.model import from_data
    from envsync.plan import PLAN_SCHEMA_VERSION, Plan, describe, make_plan

    if args.output:
        check_writable(Path(args.output))
    if args.plan:
        try:
            data = json.loads(Path(args.plan).read_text(encoding="utf-8"))
            version = data.get("schema_version")
            if version != PLAN_SCHEMA_VERSION:
                raise InputError(f"{args.plan}: plan schema_version {version!r} is not supported")
            plan = from_data(Plan, data, "plan")
        except (OSError, ValueError, AttributeError) as e:
            raise InputError(f"{args.plan}: not an envsync plan: {e}") from e
        ref_name: str | None = plan.reference
        tgt_name: str | None = plan.target
    else:
        ref_name = args.reference or inventory.reference
        tgt_name = args.target or inventory.target
    if not ref_name or not tgt_name:
        raise InputError("repair: name REF and TGT, or set defaults.reference and defaults.target")
    ref_source = resolve(ref_name, inventory)
    (target,) = _targets([tgt_name], inventory, args)
    if not isinstance(target.source, HostSource):
        raise InputError(f"repair: the target must be a host, not the file {tgt_name}")
    reference, target_snap = _collect_pair(ref_name, target, inventory, args)
    if not args.plan:
        report = _compare(reference, target, inventory, args, target_snap)
        from envsync.compare import with_service_flags

        command = with_service_flags(target, target_snap.service_flags).startup.command
        plan = make_plan(
            report,
            reference,
            target_snap,
            prefer=args.prefer,
            only=args.only,
            command=command,
        )
        if args.output:
            write_atomic(Path(args.output), json.dumps(to_data(plan), indent=2) + "\n")
    if not args.apply:
        _emit(describe(plan), None)
        return ExitCode.DRIFT if plan.steps else ExitCode.OK
    if not plan.steps:
        _note(args, f"{tgt_name}: nothing to do")
        return ExitCode.OK
    spec = target.source.spec
    ref_spec = ref_source.spec if isinstance(ref_source, HostSource) else None
    applied = apply_plan(
        plan,
        target_spec=spec,
        target=target_snap,
        runners=args.runners,
        reference_spec=ref_spec,
        reference=reference,
        pip_options=spec.pip_options,
        on_step=lambda i, step: _note(
            args, f"{tgt_name}: step {i}/{len(plan.steps)}: {step.summary}"
        ),
    )
    _note(
        args,
        f"{tgt_name}: applied {applied.steps} step(s) in {applied.duration_s:.1f}s; "
        f"backup {applied.backup} (envsync rollback {tgt_name} restores it)",
    )
    service = spec.service or inventory.service
    if args.no_deploy or service is None or not service.command:
        return ExitCode.OK
    if not service.port:
        _note(args, f"{tgt_name}: the service has no port in the inventory: not deployed")
        return ExitCode.OK
    return _run_smoke(spec, inventory, args, restart=True)


def _service_of(spec: HostSpec, inventory: Inventory) -> ServiceSpec:
    service = spec.service or inventory.service
    if service is None or not service.command:
        raise InputError(
            f"{spec.name}: no service configured", tip="add a [service] table to the inventory"
        )
    return service


def _host(name: str, inventory: Inventory) -> HostSpec:
    source = resolve(name, inventory)
    if not isinstance(source, HostSource):
        raise InputError(f"{name} is a file, not a host")
    return source.spec


def _throughput_store() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "envsync" / "throughput.json"


def _run_smoke(
    spec: HostSpec, inventory: Inventory, args: argparse.Namespace, restart: bool
) -> ExitCode:
    from envsync.service import attach, deploy, smoke

    service = _service_of(spec, inventory)
    runner = args.runners(spec)
    flags = _snapshot_flags(spec, runner)
    started = time.monotonic()
    if restart:
        deployment = deploy(spec, runner, service, flags)
        _note(args, f"{spec.name}: started {' '.join(deployment.command)} ({deployment.mode})")
    else:
        deployment = attach(spec, service, flags)
    verdict = smoke(spec, runner, deployment, deadline=args.deadline)
    took = time.monotonic() - started
    if verdict.kind == "ready":
        line = f"{spec.name}: ready in {took:.1f}s; {verdict.detail}"
        if verdict.tokens_per_s:
            line += f": {verdict.tokens_per_s:.0f} tokens/s"
            line += _compare_throughput(spec.name, inventory, verdict.tokens_per_s)
        print(line)
        return ExitCode.OK
    if verdict.kind == "stalled":
        print(f"{spec.name}: STALLED: {verdict.detail}; log tail:\n{_indent(verdict.log_tail)}")
        return ExitCode.SMOKE
    print(f"{spec.name}: CRASHED {took:.1f}s after start: {verdict.exception or verdict.detail}")
    _diagnose(spec, inventory, args, verdict.exception)
    if verdict.log_tail:
        print(f"log tail:\n{_indent(verdict.log_tail)}")
    return ExitCode.SMOKE


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def _snapshot_flags(spec: HostSpec, runner: Runner) -> dict[str, str] | None:
    """The launch flags envsync keeps on the host (from `repair`), read by the probe."""
    from envsync.collect import collect

    # Only the flags are wanted: no watched files hashed, no variables recorded.
    snap = collect(replace(spec, watch=(), env=()), runner, ProbeOptions(timeout=120))
    return dict(snap.service_flags) if snap.service_flags else None


def _compare_throughput(host: str, inventory: Inventory, rate: float) -> str:
    store = _throughput_store()
    try:
        known = json.loads(store.read_text())
    except (OSError, ValueError):
        known = {}
    known[host] = {"tokens_per_s": rate, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with contextlib.suppress(OSError):
        store.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(store, json.dumps(known, indent=1) + "\n")
    ref = inventory.reference
    if ref and ref != host and ref in known:
        theirs = known[ref]["tokens_per_s"]
        return f" ({rate / theirs:.0%} of {ref}'s {theirs:.0f} tokens/s on {known[ref]['at']})"
    return ""


def _diagnose(
    spec: HostSpec, inventory: Inventory, args: argparse.Namespace, exception: str | None
) -> None:
    """Match the crash's exception to a finding of `diff` and name the next command."""
    from envsync.classify import failing_module, finding_for_module

    ref = inventory.reference
    if not exception or not ref or ref == spec.name:
        return
    module = failing_module(exception)
    if module is None:
        print("  (envsync knows no finding for this exception)")
        return
    (target,) = _targets([spec.name], inventory, args)
    reference, target_snap = _collect_pair(ref, target, inventory, args)
    report = _compare(reference, target, inventory, args, target_snap)
    finding = finding_for_module(report, module, reference, target_snap)
    if finding is None:
        print(f"  (no difference from {ref} explains it: {ref} may fail the same way)")
        return
    print(f"  cause ({finding.severity} finding of envsync diff {ref} {spec.name}):")
    print(f"    {finding.reason}")
    for fix in (f for f in finding.fixes if f.kind in ("pin", "flag")):
        how = "--prefer workaround" if fix.kind == "flag" else "--prefer fix"
        print(f"  fix: {fix.summary}")
        print(f"       next: envsync repair {ref} {spec.name} {how} --apply")


def _collect_pair(
    ref_name: str, target: Target, inventory: Inventory, args: argparse.Namespace
) -> tuple[Snapshot, Snapshot]:
    """The reference's and the target's snapshots, collected at the same time."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        reference = pool.submit(_snapshot_of, ref_name, inventory, args)
        target_snap = pool.submit(_snapshot_of, target.name, inventory, args, target.options)
        return reference.result(), target_snap.result()


def cmd_deploy(args: argparse.Namespace, inventory: Inventory) -> ExitCode:
    return _run_smoke(_host(args.host, inventory), inventory, args, restart=True)


def cmd_smoke(args: argparse.Namespace, inventory: Inventory) -> ExitCode:
    return _run_smoke(_host(args.host, inventory), inventory, args, restart=False)


def cmd_stop(args: argparse.Namespace, inventory: Inventory) -> ExitCode:
    from envsync.service import stop

    spec = _host(args.host, inventory)
    what = stop(spec, args.runners(spec), _service_of(spec, inventory))
    _note(args, f"{spec.name}: stopped {what}")
    return ExitCode.OK


def cmd_rollback(args: argparse.Namespace, inventory: Inventory) -> ExitCode:
    from envsync.apply import rollback

    source = resolve(args.host, inventory)
    if not isinstance(source, HostSource):
        raise InputError(f"rollback: {args.host} is a file, not a host")
    result = rollback(source.spec, args.runners(source.spec), args.backup or "latest")
    _note(
        args,
        f"{args.host}: restored {result.get('backup')} "
        f"({', '.join(result.get('dists') or []) or 'files only'})",
    )
    return ExitCode.OK


def _summary_line(report: Report) -> str:
    counts = report.summary
    shown = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no drift"
    return f"{report.target} against {report.reference}: {shown}"


def cmd_check(args: argparse.Namespace, inventory: Inventory) -> ExitCode:
    hosts = args.hosts or ([inventory.target] if inventory.target else [])
    if not hosts:
        raise InputError("check: name the HOSTs to check, or set defaults.target in the inventory")
    for path in (args.output, args.junit, args.markdown):
        if path:
            check_writable(Path(path))
    reference = read_lock(Path(args.lock)) if Path(args.lock).is_file() else None
    if reference is None:
        raise InputError(
            f"{args.lock}: no such lock file", tip="create one with `envsync lock HOST > env.lock`"
        )
    targets = _targets(hosts, inventory, args)
    reports: list[Report] = []
    failed = False
    for target in targets:
        try:
            reports.append(_compare(reference, target, inventory, args))
        except CollectError as e:
            _err(str(e))
            failed = True
    threshold = SEVERITIES.index(args.fail_on)
    blocking = [
        (r.target, f)
        for r in reports
        for f in r.findings
        if SEVERITIES.index(f.severity) <= threshold
    ]
    _emit(_render(args, reports), args.output)
    if args.junit:
        write_atomic(Path(args.junit), _format("junit", reports))
    if args.markdown:
        write_atomic(Path(args.markdown), _format("markdown", reports))
    for report in reports:
        _note(args, _summary_line(report))
    if failed:
        return ExitCode.COLLECT
    if blocking:
        _note(args, f"check: {len(blocking)} finding(s) at or above {args.fail_on}: failing")
        return ExitCode.DRIFT
    return ExitCode.OK


def _add_report_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format", choices=sorted(FORMATS), default="table", help="report format (default: table)"
    )
    p.add_argument(
        "--probe",
        action="store_true",
        help="also import the startup modules in the target's interpreter "
        "and attach the exact exception",
    )
    p.add_argument("--probe-timeout", type=float, default=180.0, metavar="SECONDS")


def _add_collect_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the host's caches of file hashes and import graphs "
        "(~/.cache/envsync there)",
    )
    p.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE (atomically) instead of stdout"
    )
    p.add_argument(
        "--deep",
        action="store_true",
        help="also import torch on the host for CUDA arch list, cuDNN, NCCL",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"give up on a host's probe after SECONDS (default {DEFAULT_TIMEOUT:g})",
    )
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=8,
        metavar="N",
        help="collect from at most N hosts at once (default 8)",
    )
    p.add_argument(
        "--accept-new-host-keys",
        action="store_true",
        help="accept and record unknown SSH host keys (like StrictHostKeyChecking=accept-new); "
        "a changed key is always refused",
    )
    p.add_argument(
        "--connect-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="give up connecting to an SSH host after SECONDS (default 10)",
    )
    p.add_argument(
        "--allow-broken",
        action="store_true",
        help="record malformed .dist-info directories in the snapshot instead of failing",
    )


def _add_global_options(p: argparse.ArgumentParser, default: object) -> None:
    # Accepted before or after the command; SUPPRESS keeps a later default from erasing
    # an earlier value.
    p.add_argument(
        "--inventory",
        metavar="PATH",
        default=default,
        help="inventory file (default: $ENVSYNC_INVENTORY, else ./envsync.toml)",
    )
    p.add_argument(
        "-q", "--quiet", action="store_true", default=default, help="no progress on stderr"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="envsync",
        description="Find, explain and repair environment drift between GPU inference hosts.",
        epilog="HOST is an inventory host name, `local`, or a snapshot (.json), lock (.lock, "
        ".toml) or pinned requirements (.txt) file. Exit codes: 0 clean, 1 drift, 2 usage or "
        "bad input, 3 collection failed, 4 apply failed, 5 smoke test failed.",
    )
    parser.add_argument("--version", action="version", version=f"envsync {__version__}")
    _add_global_options(parser, argparse.SUPPRESS)
    common = argparse.ArgumentParser(add_help=False)
    _add_global_options(common, argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("snapshot", parents=[common], help="JSON snapshot of one or more hosts")
    p.add_argument("hosts", nargs="+", metavar="HOST")
    _add_collect_options(p)
    p.set_defaults(func=cmd_snapshot)

    p = sub.add_parser(
        "lock", parents=[common], help="TOML lock of a host (default: the inventory's reference)"
    )
    p.add_argument("host", nargs="?", metavar="HOST")
    _add_collect_options(p)
    p.set_defaults(func=cmd_lock)

    p = sub.add_parser(
        "diff",
        parents=[common],
        help="findings between a reference and a target; exit 1 when they differ",
    )
    p.add_argument("reference", nargs="?", metavar="REF", help="default: defaults.reference")
    p.add_argument("target", nargs="?", metavar="TGT", help="default: defaults.target")
    _add_collect_options(p)
    _add_report_options(p)
    p.set_defaults(func=cmd_diff)

    p = sub.add_parser(
        "check",
        parents=[common],
        help="CI gate: exit 1 when a host has findings at or above --fail-on against a lock",
    )
    p.add_argument("hosts", nargs="*", metavar="HOST", help="default: defaults.target")
    p.add_argument("--lock", required=True, metavar="FILE", help="the known-good lock")
    p.add_argument("--fail-on", choices=SEVERITIES, default="fatal", help="default: fatal")
    p.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report")
    p.add_argument("--markdown", metavar="FILE", help="also write a Markdown report")
    _add_collect_options(p)
    _add_report_options(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser(
        "repair",
        parents=[common],
        help="plan the fixes for a target (exit 1 when steps are pending); --apply runs them",
    )
    p.add_argument("reference", nargs="?", metavar="REF", help="default: defaults.reference")
    p.add_argument("target", nargs="?", metavar="TGT", help="default: defaults.target")
    p.add_argument(
        "--prefer",
        choices=("fix", "workaround", "auto"),
        default="auto",
        help="fix: pins and syncs; workaround: launch flags where one exists; auto (default): "
        "a flag only when it gives up nothing the configured command uses",
    )
    p.add_argument(
        "--only",
        choices=("fatal", "risky", "degraded", "all"),
        default="risky",
        help="address findings of this severity and worse (default: risky, i.e. fatal and risky)",
    )
    p.add_argument("--plan", metavar="FILE", help="apply this saved plan (with --apply)")
    p.add_argument(
        "--apply", action="store_true", help="run the plan: backup, steps, rollback on failure"
    )
    p.add_argument(
        "--no-deploy", action="store_true", help="do not deploy and smoke-test after --apply"
    )
    _add_collect_options(p)
    p.add_argument(
        "--deadline",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="smoke test after --apply: give up waiting for health after SECONDS",
    )
    p.set_defaults(func=cmd_repair, probe=False, probe_timeout=180.0, format="table")

    for name, func, text in (
        (
            "deploy",
            cmd_deploy,
            "(re)start the service with its effective flags, then smoke-test it",
        ),
        ("smoke", cmd_smoke, "smoke-test the running service: crashed, ready or stalled"),
    ):
        p = sub.add_parser(name, parents=[common], help=text + "; exit 5 unless ready")
        p.add_argument("host", metavar="HOST")
        p.add_argument(
            "--deadline",
            type=float,
            default=300.0,
            metavar="SECONDS",
            help="give up waiting for health after SECONDS (default 300)",
        )
        _add_collect_options(p)
        p.set_defaults(func=func, probe=False, probe_timeout=180.0)

    p = sub.add_parser("stop", parents=[common], help="stop the service envsync deployed")
    p.add_argument("host", metavar="HOST")
    _add_collect_options(p)
    p.set_defaults(func=cmd_stop)

    p = sub.add_parser("rollback", parents=[common], help="restore a host's latest envsync backup")
    p.add_argument("host", metavar="HOST")
    p.add_argument("--backup", metavar="ID", help="a backup other than the latest")
    _add_collect_options(p)
    p.set_defaults(func=cmd_rollback)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.inventory = getattr(args, "inventory", None)
    args.quiet = getattr(args, "quiet", False)
    args.runners = Runners(
        accept_new=getattr(args, "accept_new_host_keys", False),
        connect_timeout=getattr(args, "connect_timeout", 10.0),
    )
    try:
        inventory = load_inventory(args.inventory, os.environ)
        return int(args.func(args, inventory))
    except EnvsyncError as e:
        _err(str(e))
        return int(e.exit_code)
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:
        # stdout closed early (e.g. `| head`): not an error of ours.
        sys.stderr.close()
        return int(ExitCode.OK)
    finally:
        args.runners.close()
