"""`lock HOST`: a host recorded as a lock, envsync's own TOML or a standard pylock.toml.

The pylock.toml form asks the host's own indexes for each package's file (it needs the
live host); what no index serves is listed, with the reason, as a warning of the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from envsync.errors import InputError
from envsync.sources.locks.lockfile import dumps_lock
from envsync.sources.session import Session
from envsync.sources.source import HostSource

LockFormat = Literal["envsync", "pylock"]
LOCK_FORMATS: tuple[LockFormat, ...] = ("envsync", "pylock")


@dataclass(frozen=True, slots=True, kw_only=True)
class LockText:
    """The lock of a host, and what the user should know about it."""

    host: str
    text: str
    warnings: tuple[str, ...] = ()


def lock_host(
    session: Session,
    host: str | None = None,
    *,
    form: LockFormat = "envsync",
    portable: bool = False,
) -> LockText:
    """The lock of `host` (default: the inventory's defaults.reference)."""
    name = host or session.inventory.reference
    if name is None:
        raise InputError(
            "lock: no HOST given and the inventory names no defaults.reference",
            tip="run `envsync lock HOST > env.lock`",
        )
    from envsync.sources.history import (
        record_state,  # a locked host is a good one: its state is kept
    )

    source = session.resolve(name)
    if form == "envsync":
        snap = session.collect_one(name)
        if isinstance(source, HostSource):
            record_state(session, name, "lock", snap)
        return LockText(host=name, text=dumps_lock(snap, portable=portable))
    if not isinstance(source, HostSource):
        raise InputError(
            f"lock --format pylock: {name} is a file; the files a host installs from are "
            "known only on the live host",
            tip="name an inventory host or `local`",
        )
    from envsync.sources.locks.chosen import Chosen  # the index client: only for pylock
    from envsync.sources.locks.index import Index, read_config
    from envsync.sources.locks.pylock import dumps_pylock, locate, recorded_sha256

    snap = session.collect_one(name)
    record_state(session, name, "lock", snap)
    spec = source.spec
    config = read_config(spec, session.runners(spec))
    warnings = []
    if not config.indexes:
        warnings.append(f"{spec.name}: its pip configuration names no index (no-index)")
    index = Index(config)
    kept = Chosen(config)
    sha = {d.name: recorded_sha256(d) for d in snap.distributions}
    known = {
        d.name: found
        for d in snap.distributions
        if (found := kept.get(d.name, d.version, sha[d.name])) is not None
    }
    session.note(
        f"{spec.name}: locating {len(snap.distributions)} packages on "
        f"{len(config.indexes)} index(es)"
        + (f", {len(known)} as chosen in the last day" if known else "")
    )
    located = locate(snap, index.files, config.tags, index.size, known)
    for each in snap.distributions:
        chosen = located.files.get(each.name)
        if chosen is not None and each.name not in known:
            kept.put(each.name, each.version, sha[each.name], chosen)
    kept.save()
    for dist_name, reason in sorted(located.unlocked.items()):
        dist = snap.distribution(dist_name)
        warnings.append(
            f"{dist_name} {dist.version if dist else ''}: {reason}; listed under "
            "[tool.envsync].unlocked, not installed by `uv pip sync`"
        )
    return LockText(host=name, text=dumps_pylock(snap, located), warnings=tuple(warnings))
