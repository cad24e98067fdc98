"""Facts kept by the content they were learned from: one small file per entry.

A module's parsed facts are a pure function of its file's content (the sha256 in the key),
its name and how it runs, so they are kept once by that key and shared by every graph,
environment and run on the host. Each entry is a file of its own, so that a run reads the
entries it needs and writes the ones it learned: after a change, the changed files only.

    FOLDER/facts-DIGEST/ab/abcdef....json     two lines: the key and the sha256 of the
                                             facts' text; the facts' JSON text

An entry whose text does not match its digest (cut short, damaged) or that names another
key is removed and learned again, never used. The store is bounded: past its cap, the
entries used longest ago go first (a hit refreshes an entry's time once a day, so that a
warm run writes nothing). Best effort: a store that cannot be written is a store that
keeps nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time

from .files import open_regular
from .shared import temp_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_CAP = 512 << 20  # bytes of facts on a host (ENVSYNC_HOST_CACHE_MB overrides)
REFRESH_NS = 86400 * 10**9  # a hit older than this is touched: least recently used, roughly
STALE_TEMP_NS = 3600 * 10**9  # a temporary file this old is a failed write's: removed


def cap_from_env(name: str, default: int) -> int:
    """A cache cap in bytes from the variable `name` (megabytes), else `default`."""
    given = os.environ.get(name)
    if given:
        try:
            return max(0, int(float(given) * (1 << 20)))
        except ValueError:
            return default
    return default


def host_cap() -> int:
    """The host's cache cap in bytes: ENVSYNC_HOST_CACHE_MB, else DEFAULT_CAP."""
    return cap_from_env("ENVSYNC_HOST_CACHE_MB", DEFAULT_CAP)


def entry_text(key: str, value: Any) -> bytes:
    text = json.dumps(value, separators=(",", ":")).encode("utf-8")
    head = json.dumps([key, hashlib.sha256(text).hexdigest()]).encode("utf-8")
    return head + b"\n" + text


def read_entry(data: bytes, key: str) -> Any:
    """The value an entry's bytes hold for `key` (ValueError: damaged, or another key's)."""
    head, sep, text = data.partition(b"\n")
    if not sep:
        raise ValueError("no header")
    named, digest = json.loads(head.decode("utf-8"))
    if named != key or hashlib.sha256(text).hexdigest() != digest:
        raise ValueError("does not match its digest")
    return json.loads(text.decode("utf-8"))


class Store:
    """Entries by key under `folder` (None: nothing kept). `memo` holds what a run read or
    wrote; `dropped` counts the damaged entries it removed. `seeds`: entries other hosts
    learned (share.py, checked there), each kept here when a lookup first uses it
    (`seeded` counts them)."""

    def __init__(self, folder: str | None) -> None:
        self.folder = folder
        self.memo: dict[str, Any] = {}
        self.missing: set[str] = set()
        self.dropped = 0
        self.seeds: dict[str, Any] = {}
        self.seeded = 0

    def path(self, key: str) -> str | None:
        if not self.folder:
            return None
        name = hashlib.sha256(key.encode("utf-8")).hexdigest()[:40]
        return os.path.join(self.folder, name[:2], name[2:] + ".json")

    def get(self, key: str) -> Any:
        """The value kept for `key` (None: none, or a damaged entry, now removed)."""
        if key in self.memo:
            return self.memo[key]
        if key in self.missing:
            return None
        path = self.path(key)
        if path is None:
            return None
        try:
            with os.fdopen(open_regular(path, follow=False), "rb") as f:
                data = f.read()
                st = os.fstat(f.fileno())
        except OSError:
            return self.seeded_value(key)
        try:
            value = read_entry(data, key)
        except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
            self.dropped += 1
            self.missing.add(key)
            remove(path)
            return None
        touch(path, st.st_mtime_ns)
        self.memo[key] = value
        return value

    def seeded_value(self, key: str) -> Any:
        """A seed for a key this store does not hold, kept now that it is used."""
        value = self.seeds.pop(key, None)
        if value is None:
            self.missing.add(key)
            return None
        self.seeded += 1
        self.put(key, value)
        return value

    def drop(self, key: str) -> None:
        """Forget `key`'s entry (one found unfit where it is used), and remove its file."""
        self.memo.pop(key, None)
        self.dropped += 1
        path = self.path(key)
        if path is not None:
            remove(path)

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def put(self, key: str, value: Any) -> None:
        self.memo[key] = value
        self.missing.discard(key)
        path = self.path(key)
        if path is None:
            return
        write_file(path, entry_text(key, value))


_OPEN: dict[str, Store] = {}


def open_store(folder: str | None) -> Store:
    """The store of `folder` for this process: one, whoever asks (the walk and the native
    scan read the same entries, each read once)."""
    if not folder:
        return Store(None)
    found = _OPEN.get(folder)
    if found is None:
        found = _OPEN[folder] = Store(folder)
    return found


def touch(path: str, mtime_ns: int | None = None) -> None:
    """An entry used: its time refreshed (once a day at most: a warm run writes nothing)."""
    try:
        if mtime_ns is None:
            mtime_ns = os.stat(path).st_mtime_ns
        if time.time_ns() - mtime_ns > REFRESH_NS:
            os.utime(path)
    except OSError:
        return


SKIPPED = ("received",)  # folders of the cache folder that are not the host's
WRITTEN = [0]  # files this process wrote into a cache: bound() prunes only then


def bound(folder: str | None, cap: int | None = None) -> int:
    """At the end of a run that wrote into the cache folder: keep it under its cap."""
    if not folder or not WRITTEN[0]:
        return 0
    WRITTEN[0] = 0
    return prune(folder, host_cap() if cap is None else cap)


def write_file(path: str, data: bytes) -> bool:
    """Write a file whole through a temporary file, or not at all (its temporary removed)."""
    tmp = temp_name(path)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        WRITTEN[0] += 1
        return True
    except OSError:
        remove(tmp)
        return False


def remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def entries(folder: str) -> list[tuple[int, int, str]]:
    """(mtime, size, path) of every file under `folder`, temporary files of failed writes
    removed on the way."""
    found: list[tuple[int, int, str]] = []
    now = time.time_ns()
    for dirpath, dirnames, filenames in os.walk(folder):
        # the host side's own copies (host-DIGEST/) are not facts: a running probe uses
        # one; envsync's own received/ (the same folder when the host is this machine) has
        # its own cap (collect/wire.py)
        dirnames[:] = [d for d in dirnames if not d.startswith("host-") and d not in SKIPPED]
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if ".envsync-" in name and name.endswith(".tmp"):
                if now - st.st_mtime_ns > STALE_TEMP_NS:
                    remove(path)
                continue
            found.append((st.st_mtime_ns, st.st_size, path))
    return found


def prune(folder: str, cap: int, keep: set[str] | None = None) -> int:
    """Remove the entries used longest ago until `folder` holds at most `cap` bytes (to
    90% of it, so that the next writes do not prune again at once); `keep`: paths never
    removed. Returns the bytes removed."""
    found = entries(folder)
    total = sum(size for _, size, _ in found)
    if total <= cap:
        return 0
    goal = cap * 9 // 10
    removed = 0
    for _, size, path in sorted(found):
        if total - removed <= goal:
            break
        if keep and path in keep:
            continue
        remove(path)
        removed += size
    return removed
