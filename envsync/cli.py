"""The envsync command line: argparse, the only place that prints or exits."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from envsync import __version__
from envsync.classify import ProbeOutcome, Startup, classify
from envsync.classify.importcheck import import_probe
from envsync.classify.rules import (
    RulePack,
    active_roots,
    all_modules,
    entrypoint_of,
    load_packs,
    packs_for,
    parse_flags,
)
from envsync.collect import DEFAULT_TIMEOUT, ProbeOptions
from envsync.diff import differences
from envsync.errors import CollectError, EnvsyncError, InputError
from envsync.exitcodes import ExitCode
from envsync.inventory import HostSpec, Inventory, load_inventory
from envsync.lock import dumps_lock, read_lock
from envsync.model import SEVERITIES, SNAPSHOT_SCHEMA_VERSION, Report, Snapshot, to_data
from envsync.report import FORMATS, render
from envsync.runner import Runner
from envsync.runner.local import LocalRunner
from envsync.snapshot import (
    HostSource,
    Source,
    check_writable,
    dumps_snapshot,
    resolve,
    take,
    write_atomic,
)


def runner_for(spec: HostSpec) -> Runner:
    if spec.is_local:
        return LocalRunner(spec.name)
    raise CollectError(
        f"{spec.name}: SSH hosts ({spec.ssh}) are not supported by envsync {__version__} yet",
        tip="run `envsync snapshot local -o FILE` on the host and name that file instead",
    )


def _err(message: str) -> None:
    print(f"envsync: {message}", file=sys.stderr)


def _note(args: argparse.Namespace, message: str) -> None:
    if not args.quiet:
        print(message, file=sys.stderr)


def _probe_options(args: argparse.Namespace) -> ProbeOptions:
    return ProbeOptions(deep=args.deep, timeout=args.timeout)


def _snapshot_of(
    name: str,
    inventory: Inventory,
    args: argparse.Namespace,
    options: ProbeOptions | None = None,
) -> Snapshot:
    source = resolve(name, inventory)
    snap = take(source, runner_for, options or _probe_options(args))
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


def cmd_snapshot(args: argparse.Namespace, inventory: Inventory) -> ExitCode:
    if args.output:
        check_writable(Path(args.output))
    snaps = [_snapshot_of(name, inventory, args) for name in args.hosts]
    if len(snaps) == 1:
        text = dumps_snapshot(snaps[0])
    else:
        doc = {"schema_version": SNAPSHOT_SCHEMA_VERSION, "snapshots": [to_data(s) for s in snaps]}
        text = json.dumps(doc, indent=2) + "\n"
    _emit(text, args.output)
    return ExitCode.OK


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


@dataclass(frozen=True, slots=True)
class _Target:
    name: str
    source: Source
    startup: Startup
    options: ProbeOptions


def _startup_for(source: Source, inventory: Inventory, packs: tuple[RulePack, ...]) -> Startup:
    service = source.spec.service if isinstance(source, HostSource) else inventory.service
    command = tuple(service.command) if service else ()
    entrypoint = (service.entrypoint or entrypoint_of(command)) if service else None
    return Startup(entrypoint=entrypoint, command=command, packs=packs_for(entrypoint, packs))


def _target(
    name: str, inventory: Inventory, args: argparse.Namespace, packs: tuple[RulePack, ...]
) -> _Target:
    source = resolve(name, inventory)
    startup = _startup_for(source, inventory, packs)
    options = _probe_options(args)
    if startup.entrypoint and isinstance(source, HostSource):
        watch = tuple(w.replace("-", "_") for w in source.spec.watch)
        options = replace(
            options,
            roots=all_modules(startup.entrypoint, startup.packs),
            internal=tuple(dict.fromkeys((startup.entrypoint.partition(".")[0], *watch))),
            cache_dir="" if args.no_cache else None,
        )
    return _Target(name=name, source=source, startup=startup, options=options)


def _compare(
    reference: Snapshot,
    target: _Target,
    inventory: Inventory,
    args: argparse.Namespace,
    snap: Snapshot | None = None,
) -> Report:
    if snap is None:
        snap = _snapshot_of(target.name, inventory, args, target.options)
    probe: list[ProbeOutcome] = []
    if args.probe:
        if not isinstance(target.source, HostSource) or not target.startup.entrypoint:
            raise InputError("--probe needs a live target host with a service entrypoint")
        graph = snap.startup
        flags = parse_flags(target.startup.command)
        roots = active_roots(target.startup.entrypoint, target.startup.packs, flags)
        modules = [
            r.module
            for r in roots
            if graph is None
            or (r.module in graph.modules and graph.modules[r.module].kind != "missing")
        ]
        if modules:
            spec = target.source.spec
            probe = import_probe(spec, runner_for(spec), modules, args.probe_timeout)
    return classify(reference, snap, differences(reference, snap), target.startup, probe)


def _render(args: argparse.Namespace, reports: list[Report]) -> str:
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
    packs = load_packs(inventory.rules)
    target = _target(tgt_name, inventory, args, packs)
    with ThreadPoolExecutor(max_workers=2) as pool:  # both hosts at once
        reference_job = pool.submit(_snapshot_of, ref_name, inventory, args)
        target_job = pool.submit(_snapshot_of, tgt_name, inventory, args, target.options)
        reference, target_snap = reference_job.result(), target_job.result()
    report = _compare(reference, target, inventory, args, target_snap)
    _emit(_render(args, [report]), args.output)
    _note(args, _summary_line(report))
    return ExitCode.DRIFT if report.findings else ExitCode.OK


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
    packs = load_packs(inventory.rules)
    reference = read_lock(Path(args.lock)) if Path(args.lock).is_file() else None
    if reference is None:
        raise InputError(
            f"{args.lock}: no such lock file", tip="create one with `envsync lock HOST > env.lock`"
        )
    targets = [_target(h, inventory, args, packs) for h in hosts]
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
        write_atomic(Path(args.junit), render("junit", reports))
    if args.markdown:
        write_atomic(Path(args.markdown), render("markdown", reports))
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
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="do not read or write the host's import-graph cache (~/.cache/envsync)",
    )


def _add_collect_options(p: argparse.ArgumentParser) -> None:
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.inventory = getattr(args, "inventory", None)
    args.quiet = getattr(args, "quiet", False)
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
