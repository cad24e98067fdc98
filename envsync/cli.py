"""The envsync command line: argparse, the only place that prints or exits."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from envsync import __version__
from envsync.collect import DEFAULT_TIMEOUT, ProbeOptions
from envsync.errors import CollectError, EnvsyncError, InputError
from envsync.exitcodes import ExitCode
from envsync.inventory import HostSpec, Inventory, load_inventory
from envsync.lock import dumps_lock
from envsync.model import SNAPSHOT_SCHEMA_VERSION, Snapshot, to_data
from envsync.runner import Runner
from envsync.runner.local import LocalRunner
from envsync.snapshot import check_writable, dumps_snapshot, resolve, take, write_atomic


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


def _snapshot_of(name: str, inventory: Inventory, args: argparse.Namespace) -> Snapshot:
    source = resolve(name, inventory)
    snap = take(source, runner_for, _probe_options(args))
    if snap.broken and not args.allow_broken:
        first = snap.broken[0]
        more = f" (and {len(snap.broken) - 1} more)" if len(snap.broken) > 1 else ""
        raise CollectError(
            f"{source.label}: malformed distribution metadata at {first.path}: "
            f"{first.reason}{more}",
            tip="repair or remove it, or pass --allow-broken to record it and go on",
        )
    if snap.source == "probe":
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
