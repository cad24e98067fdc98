"""The argparse parser: each command with the options that mean something for it, and the
builder (cli/options.py) that turns its namespace into the command's typed options."""

from __future__ import annotations

import argparse
from functools import partial

from envsync import __version__
from envsync.cli import cache, commands, completion, options, ranges
from envsync.cli.usage import Parser, link
from envsync.collect import DEFAULT_TIMEOUT
from envsync.collect.importcheck import DEFAULT_TIMEOUT as IMPORT_TIMEOUT
from envsync.model.inventory import DEFAULT_DEADLINE
from envsync.model.vocab import FAIL_ON_DEFAULT, ONLY, ONLY_DEFAULT, PREFER, SEVERITIES
from envsync.report import FORMATS
from envsync.runner import CONNECT_TIMEOUT
from envsync.sources.locks.locking import LOCK_FORMATS
from envsync.sources.session import ENGINES, JOBS
from envsync.sources.states import KEEP


def _seconds(
    p: argparse.ArgumentParser, flag: str, default: float, what: str, *, zero: bool = False
) -> None:
    """An option of SECONDS whose help says its default (`zero`: 0 means something)."""
    p.add_argument(
        flag,
        type=ranges.wait if zero else ranges.seconds,
        default=default,
        metavar="SECONDS",
        help=f"{what} (default {default:g})",
    )


def _ssh_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--accept-new-host-keys",
        action="store_true",
        help="accept and record unknown SSH host keys (like StrictHostKeyChecking=accept-new); "
        "a changed key is always refused",
    )
    _seconds(
        p, "--connect-timeout", CONNECT_TIMEOUT, "give up connecting to an SSH host after SECONDS"
    )


def _collect_options(p: argparse.ArgumentParser) -> None:
    """How a host is collected (every command that takes a snapshot)."""
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the host's caches of file hashes and import graphs "
        "(~/.cache/envsync there)",
    )
    p.add_argument(
        "--deep",
        action="store_true",
        help="also import torch on the host for CUDA arch list, cuDNN, NCCL",
    )
    _seconds(p, "--timeout", DEFAULT_TIMEOUT, "give up on a host's probe after SECONDS")
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default=ENGINES[0],
        help="envsync (default): its own runners (this machine, SSH through Fabric, exec "
        "prefixes) with --jobs hosts at once; ansible: collect through ansible-playbook, its forks "
        "(--jobs), connection plugins and become, each host as it answers",
    )
    p.add_argument(
        "--allow-broken",
        action="store_true",
        help="record malformed .dist-info directories in the snapshot instead of failing",
    )
    _ssh_options(p)


def _state_options(p: argparse.ArgumentParser, *, records: bool = False) -> None:
    """Where hosts' states are kept (HOST@good, HOST@-1, HOST@TIME read them); `records`:
    the command records one (a ready deploy or smoke, a lock, a watch)."""
    p.add_argument(
        "--state-dir",
        metavar="DIR",
        help="where the hosts' recorded states are kept (default: $ENVSYNC_STATE_DIR, else "
        "$XDG_STATE_HOME/envsync/states, ~/.local/state by default)",
    )
    if records:
        p.add_argument(
            "--keep-states",
            type=ranges.count(1),
            default=KEEP,
            metavar="N",
            help=f"keep the last N recorded states of a host (default {KEEP}), and always "
            "its last good one",
        )


def _output_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE (atomically) instead of stdout"
    )


def _jobs_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-j",
        "--jobs",
        type=ranges.count(1),
        default=JOBS,
        metavar="N",
        help=f"collect from at most N hosts at once (default {JOBS})",
    )


def _report_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format", choices=sorted(FORMATS), default="table", help="report format (default: table)"
    )
    p.add_argument(
        "--import-check",
        action="store_true",
        help="also import the startup modules in the target's interpreter and attach the "
        "exact exception (--probe, --probe-timeout: the old names, accepted until the "
        "next release)",
    )
    _seconds(p, "--import-check-timeout", IMPORT_TIMEOUT, "give up importing after SECONDS")
    # The names of the previous release, for one more: hidden from --help.
    p.add_argument(
        "--probe",
        dest="import_check",
        action="store_true",
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )
    p.add_argument(
        "--probe-timeout",
        dest="import_check_timeout",
        type=ranges.seconds,
        default=argparse.SUPPRESS,
        metavar="SECONDS",
        help=argparse.SUPPRESS,
    )


def _deadline_option(p: argparse.ArgumentParser, what: str) -> None:
    _seconds(p, "--deadline", DEFAULT_DEADLINE, f"{what}give up waiting for health after SECONDS")


def _wait_option(p: argparse.ArgumentParser) -> None:
    _seconds(
        p,
        "--wait",
        0.0,
        "when another envsync is changing the target, queue behind it for up to SECONDS; "
        "0 exits 6 at once",
        zero=True,
    )


def _global_options(p: argparse.ArgumentParser) -> None:
    # Accepted before or after the command; SUPPRESS keeps a later default from erasing
    # an earlier value.
    p.add_argument(
        "--inventory",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="inventory file (default: $ENVSYNC_INVENTORY, else ./envsync.toml)",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=argparse.SUPPRESS,
        help="no progress on stderr",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="envsync",
        description="Find, explain and repair environment drift between GPU inference hosts.",
        epilog="HOST is an inventory host name, `local`, a recorded state of a host "
        "(HOST@good, HOST@latest, HOST@-1, HOST@2026-11-30T14:00), or a snapshot (.json), "
        "lock (.lock, .toml) or pinned requirements (.txt) file. Exit codes: 0 clean, 1 drift, "
        "2 usage or bad input, 3 collection failed, 4 apply failed, 5 smoke test failed, 6 the "
        "target is locked by another envsync.",
    )
    parser.add_argument("--version", action="version", version=f"envsync {__version__}")
    _global_options(parser)
    # The global options are SUPPRESSed (see _global_options): these are their defaults.
    parser.set_defaults(inventory=None, quiet=False)
    common = Parser(add_help=False)
    _global_options(common)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("snapshot", parents=[common], help="JSON snapshot of one or more hosts")
    p.add_argument("hosts", nargs="+", metavar="HOST")
    _output_option(p)
    _collect_options(p)
    _state_options(p)
    _jobs_option(p)
    p.set_defaults(build=partial(options.snapshot, command=commands.cmd_snapshot))

    p = sub.add_parser(
        "lock", parents=[common], help="TOML lock of a host (default: the inventory's reference)"
    )
    p.add_argument("host", nargs="?", metavar="HOST")
    p.add_argument(
        "--format",
        choices=LOCK_FORMATS,
        default="envsync",
        help="envsync (default): every fact of the host; pylock: also a standard PEP 751 "
        "pylock.toml that uv installs, each package's file from the host's own indexes",
    )
    p.add_argument(
        "--portable",
        action="store_true",
        help="leave out the facts of the machine (its paths: interpreter, prefix, sys.path, "
        "locations; its hostname): for locks kept in a repository",
    )
    _output_option(p)
    _collect_options(p)
    _state_options(p, records=True)
    p.set_defaults(build=partial(options.lock, command=commands.cmd_lock))

    p = sub.add_parser(
        "diff",
        parents=[common],
        help="findings between a reference and a target; exit 1 when they differ",
    )
    p.add_argument("reference", nargs="?", metavar="REF", help="default: defaults.reference")
    p.add_argument(
        "targets",
        nargs="*",
        metavar="TGT",
        help="default: defaults.target; several (or a group, a node set): collected in "
        "parallel, identical hosts folded into classes (table, json, markdown, html)",
    )
    _output_option(p)
    _collect_options(p)
    _state_options(p)
    _jobs_option(p)
    _report_options(p)
    p.set_defaults(build=partial(options.diff, command=commands.cmd_diff))

    p = sub.add_parser(
        "check",
        parents=[common],
        help="CI gate: exit 1 when a host has findings at or above --fail-on against a lock",
    )
    p.add_argument("hosts", nargs="*", metavar="HOST", help="default: defaults.target")
    p.add_argument(
        "--lock",
        required=True,
        metavar="FILE",
        help="the known-good lock, or a host's recorded state (HOST@good)",
    )
    p.add_argument(
        "--fail-on",
        choices=SEVERITIES,
        default=FAIL_ON_DEFAULT,
        help=f"default: {FAIL_ON_DEFAULT}; the JUnit reports fail the same findings",
    )
    p.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report")
    p.add_argument("--markdown", metavar="FILE", help="also write a Markdown report")
    _output_option(p)
    _collect_options(p)
    _state_options(p)
    _jobs_option(p)
    _report_options(p)
    p.set_defaults(build=partial(options.check, command=commands.cmd_check))

    p = sub.add_parser(
        "repair",
        parents=[common],
        help="plan the fixes for a target (exit 1 when steps are pending); --apply runs them",
    )
    p.add_argument("reference", nargs="?", metavar="REF", help="default: defaults.reference")
    p.add_argument(
        "target",
        nargs="?",
        metavar="TGT",
        help="default: defaults.target; a group or node set: planned once per class, "
        "applied in canary batches",
    )
    p.add_argument(
        "--prefer",
        choices=PREFER,
        default=PREFER[0],
        help="fix: pins and syncs; workaround: launch flags where one exists; auto (default): "
        "a flag only when it gives up nothing the configured command uses",
    )
    p.add_argument(
        "--only",
        choices=tuple(ONLY),
        default=ONLY_DEFAULT,
        help="address findings of this severity and worse (default: risky, i.e. fatal and risky)",
    )
    p.add_argument("--plan", metavar="FILE", help="apply this saved plan (with --apply)")
    p.add_argument(
        "--apply", action="store_true", help="run the plan: backup, steps, rollback on failure"
    )
    p.add_argument(
        "--no-deploy", action="store_true", help="do not deploy and smoke-test after --apply"
    )
    p.add_argument("-o", "--output", metavar="FILE", help="save the plan as JSON to FILE")
    p.add_argument(
        "--batch",
        action="append",
        metavar="SIZES",
        help="a fleet (TGT a group or node set): apply in canary batches of these sizes, "
        "counts or percentages, the last repeated (as Ansible's serial; default 1,10%%,100%%)",
    )
    p.add_argument(
        "--max-fail",
        type=ranges.failures,
        default="0",
        metavar="N",
        help="a batch stops the rollout (and is rolled back) when more than N of its hosts "
        "(or N%%) fail (default 0)",
    )
    _collect_options(p)
    _jobs_option(p)
    _state_options(p, records=True)
    _deadline_option(p, "smoke test after --apply: ")
    _wait_option(p)
    p.set_defaults(build=partial(options.repair, command=commands.cmd_repair))

    for name, build, text in (
        (
            "deploy",
            partial(options.deploy, command=commands.cmd_deploy),
            "(re)start the service with its effective flags, then smoke-test it",
        ),
        (
            "smoke",
            partial(options.smoke, command=commands.cmd_smoke),
            "smoke-test the running service: crashed, ready or stalled",
        ),
    ):
        p = sub.add_parser(name, parents=[common], help=text + "; exit 5 unless ready")
        p.add_argument("host", metavar="HOST")
        _deadline_option(p, "")
        _collect_options(p)  # a crash is traced to `diff REF HOST`, collected like diff
        _state_options(p, records=True)  # ready: the host's last good state
        if name == "deploy":
            _wait_option(p)
        p.set_defaults(build=build)

    p = sub.add_parser("stop", parents=[common], help="stop the service envsync deployed")
    p.add_argument("host", metavar="HOST")
    _ssh_options(p)
    _wait_option(p)
    p.set_defaults(build=partial(options.stop, command=commands.cmd_stop))

    p = sub.add_parser(
        "rollback", parents=[common], help="undo a host's latest apply (restore its backup)"
    )
    p.add_argument("host", metavar="HOST")
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--backup", metavar="ID", help="restore this backup instead (`--list` shows them)"
    )
    which.add_argument(
        "--list", action="store_true", help="list the host's backups and their states; no change"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="restore even over paths changed since the apply (refused without, naming them)",
    )
    _ssh_options(p)
    _wait_option(p)
    p.set_defaults(build=partial(options.rollback, command=commands.cmd_rollback))
    p = sub.add_parser(
        "history",
        parents=[common],
        help="a host as it is now and its recorded states, what changed between them, when "
        "each package arrived",
    )
    p.add_argument("host", metavar="HOST")
    p.add_argument("--format", choices=("json", "table"), default="table", help="default: table")
    p.add_argument(
        "--live",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="collect the host now and show it first, with what changed since its latest "
        "recorded state (the default); --no-live reads the records alone",
    )
    _output_option(p)
    _collect_options(p)
    _state_options(p)
    p.set_defaults(build=partial(options.history, command=commands.cmd_history))

    p = sub.add_parser(
        "watch",
        parents=[common],
        help="check hosts every --every (or --once), printing only what changed since the last run",
    )
    p.add_argument("hosts", nargs="*", metavar="HOST", help="default: defaults.target")
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument(
        "--every",
        type=ranges.duration,
        metavar="DURATION",
        help="run every DURATION (30s, 10m, 1h) until SIGTERM (exit 0) or Ctrl-C",
    )
    when.add_argument(
        "--once",
        action="store_true",
        help="run once (a systemd timer, cron); exit as check does: 1 when a host has "
        "findings at or above --fail-on, 3 when one cannot be collected",
    )
    p.add_argument(
        "--lock",
        metavar="FILE",
        help="compare each host with this lock (or HOST@good); default: each host with its "
        "own last good state",
    )
    p.add_argument(
        "--fail-on", choices=SEVERITIES, default=FAIL_ON_DEFAULT, help=f"default: {FAIL_ON_DEFAULT}"
    )
    p.add_argument("--log", metavar="FILE", help="append what changed to FILE as JSON lines")
    p.add_argument(
        "--prometheus",
        metavar="FILE",
        help="write the hosts' status to FILE (node_exporter's textfile format, atomically) "
        "after each run",
    )
    _collect_options(p)
    _state_options(p, records=True)
    p.set_defaults(build=partial(options.watch, command=commands.cmd_watch))
    cache.add_command(sub, common)
    completion.add_command(sub)
    return link(parser)
