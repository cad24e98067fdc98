"""What every command shares: the inventory, one runner per host, and how to collect."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from envsync.cli.output import note
from envsync.collect import ProbeOptions
from envsync.errors import CollectError, InputError
from envsync.inventory import HostSpec, Inventory
from envsync.model import Snapshot
from envsync.runner import Runners
from envsync.snapshot import HostSource, resolve, take

JOBS = 8  # hosts collected at once by default


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """Options that hold for the whole command, typed; commands pass this, not argparse."""

    inventory: Inventory
    runners: Runners
    quiet: bool = False
    probe: ProbeOptions = field(default_factory=ProbeOptions)  # --deep, --timeout, --no-cache
    allow_broken: bool = False
    jobs: int = JOBS

    def note(self, message: str) -> None:
        note(self.quiet, message)

    def host(self, name: str) -> HostSpec:
        """An inventory host (or `local`), not a file: for commands that act on a host."""
        source = resolve(name, self.inventory)
        if not isinstance(source, HostSource):
            raise InputError(f"{name} is a file, not a host")
        return source.spec


Request = tuple[str, ProbeOptions | None]  # a HOST argument, and what to collect there


def collect_one(ctx: Context, name: str, options: ProbeOptions | None = None) -> Snapshot:
    """The snapshot a HOST argument names: collected live, or read from its file."""
    source = resolve(name, ctx.inventory)
    snap = take(source, ctx.runners, options or ctx.probe)
    if snap.broken and not ctx.allow_broken:
        first = snap.broken[0]
        more = f" (and {len(snap.broken) - 1} more)" if len(snap.broken) > 1 else ""
        raise CollectError(
            f"{source.label}: malformed distribution metadata at {first.path}: "
            f"{first.reason}{more}",
            tip="repair or remove it, or pass --allow-broken to record it and go on",
        )
    if isinstance(source, HostSource):
        ctx.note(
            f"{source.label}: {len(snap.distributions)} distributions, "
            f"{sum(1 for d in snap.distributions if d.watched)} watched, "
            f"collected in {snap.duration_s or 0:.2f}s",
        )
    return snap


def collect_each(
    ctx: Context, requests: Sequence[Request]
) -> Iterator[tuple[int, Snapshot | CollectError]]:
    """Snapshots of several HOSTs in parallel (at most --jobs at once), each as it arrives,
    with its index in `requests`; a host that fails gives its CollectError and does not
    stop the others. Nothing is kept once it is handed on: a caller that writes each
    snapshot out holds at most --jobs of them, however many hosts there are."""
    for name, _ in requests:
        resolve(name, ctx.inventory)  # every name is checked before anything is collected
    if len(requests) == 1:
        name, options = requests[0]
        try:
            yield 0, collect_one(ctx, name, options)
        except CollectError as e:
            yield 0, e
        return
    from concurrent.futures import ThreadPoolExecutor, as_completed

    progress = None
    if sys.stderr.isatty() and not ctx.quiet:
        from rich.console import Console
        from rich.progress import Progress

        progress = Progress(transient=True, console=Console(stderr=True))
    task = progress.add_task("collecting", total=len(requests)) if progress else None
    with (
        progress or contextlib.nullcontext(),
        ThreadPoolExecutor(max_workers=max(1, ctx.jobs)) as pool,
    ):
        jobs = {
            pool.submit(collect_one, ctx, name, options): i
            for i, (name, options) in enumerate(requests)
        }
        try:
            for job in as_completed(jobs):
                i = jobs.pop(job)  # as_completed lets go of it too: its snapshot goes with it
                try:
                    result: Snapshot | CollectError = job.result()
                except CollectError as e:
                    result = e
                del job
                if progress is not None and task is not None:
                    progress.advance(task)
                yield i, result
                del result
        finally:  # a caller that stops early (an error): hosts not started are not collected
            for job in jobs:
                job.cancel()


def collect_many(ctx: Context, requests: Sequence[Request]) -> list[Snapshot | CollectError]:
    """collect_each's results in the order asked."""
    results: list[Snapshot | CollectError | None] = [None] * len(requests)
    for i, result in collect_each(ctx, requests):
        results[i] = result
    return [r for r in results if r is not None]


def collect_all(ctx: Context, requests: Sequence[Request]) -> list[Snapshot]:
    """Like collect_many, for commands that need every host: the first failure is raised."""
    out = []
    for result in collect_many(ctx, requests):
        if isinstance(result, CollectError):
            raise result
        out.append(result)
    return out
