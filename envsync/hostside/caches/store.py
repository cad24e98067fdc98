"""Facts kept by the content they were learned from: one small file per entry.

A module's parsed facts are a pure function of its file's content (the sha256 in the key),
its name and how it runs, so they are kept once by that key and shared by every graph,
environment and run on the host. Each entry is a file of its own, so that a run reads the
entries it needs and writes the ones it learned: after a change, the changed files only.

    FOLDER/facts-DIGEST/ab/abcdef....json     two lines: the key and the sha256 of the
                                             facts' text; the facts' JSON text

    FOLDER/facts-DIGEST/packs/DIGEST.pack    a pack of entries other hosts learned (share.py),
    FOLDER/facts-DIGEST/packs/DIGEST.keys    kept whole once a walk used it, and its keys

A pack that a walk used is kept as it came (one file, not one per entry: a node of a fleet
writes a few dozen files, not thousands), and read whole when one of its keys is first
looked up. An entry or a pack whose text does not match its digest (cut short, damaged) or
that names another key is removed and learned again, never used. The store is bounded:
past its cap, the entries used longest ago go first (a hit refreshes an entry's time once
a day, so that a warm run writes nothing). Best effort: a store that cannot be written is
a store that keeps nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time

from ..facts.files import open_regular
from ..shared import seal, temp_name, text_digest, unseal

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
        try:  # envsync refuses a value out of range; here one is the default (never a crash)
            value = float(given)
            if value >= 0 and value <= float(1 << 20):
                return int(value * (1 << 20))
        except ValueError:
            pass
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
        self.seed_of: dict[str, str] = {}  # key -> the digest of the pack it came in
        self.pack_texts: dict[str, tuple[bytes, list[str]]] = {}  # digest -> text, keys
        self.used: set[str] = set()  # packs whose entries a lookup used
        self._kept: dict[str, str] | None = None  # key -> a kept pack's digest (packs/)
        self.alone: set[str] = set()  # keys read from, or written to, an entry of their own

    def seed_pack(self, digest: str, text: bytes, entries: dict[str, Any]) -> None:
        """A given pack's entries, as seeds: a lookup that uses one keeps the pack."""
        for key, facts in entries.items():
            if key not in self.seeds:
                self.seeds[key] = facts
                self.seed_of[key] = digest
            self.missing.discard(key)
        self.pack_texts[digest] = (text, sorted(entries))

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
            data, used = read_file(path)
        except OSError:
            found = self.from_kept_pack(key)
            return found if found is not None else self.seeded_value(key)
        except ValueError:  # not sealed by this run's key: learned again
            data, used = b"", 0
        try:
            value = read_entry(data, key)
        except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
            self.dropped += 1
            self.missing.add(key)
            remove(path)
            return None
        touch(path, used)
        self.memo[key] = value
        self.alone.add(key)
        return value

    def get_alone(self, key: str) -> Any:
        """`get`, and a value found in a pack kept as an entry of its own too: a reader
        that wants a few entries of many packs (the native scan's modules read one level
        deep) reads those alone on its next run, not each pack whole."""
        value = self.get(key)
        if value is not None and key not in self.alone:
            self.put(key, value)
        return value

    def seeded_value(self, key: str) -> Any:
        """A seed for a key this store does not hold: its pack is kept (keep_packs), now
        that it is used."""
        value = self.seeds.pop(key, None)
        if value is None:
            self.missing.add(key)
            return None
        self.seeded += 1
        self.memo[key] = value
        self.used.add(self.seed_of.get(key, ""))
        return value

    def packs_folder(self) -> str | None:
        return os.path.join(self.folder, "packs") if self.folder else None

    def keep_packs(self) -> None:
        """Keep the packs whose entries this run used, each in one file with its keys."""
        where = self.packs_folder()
        for digest in sorted(self.used):
            found = self.pack_texts.get(digest)
            if where is None or found is None:
                continue
            text, keys = found
            pack = os.path.join(where, digest + ".pack")
            if not os.path.isfile(pack) and write_file(pack, text):
                write_file(os.path.join(where, digest + ".keys"), json.dumps(keys).encode())
        self.used.clear()

    def from_kept_pack(self, key: str) -> Any:
        """The value a kept pack holds for `key` (None: no pack kept holds it); the pack's
        other entries are read with it. A pack that does not match its digest is removed."""
        where = self.packs_folder()
        if where is None:
            return None
        if self._kept is None:
            self._kept = kept_keys(where)
        digest = self._kept.get(key)
        if digest is None:
            return None
        path = os.path.join(where, digest + ".pack")
        try:
            text, used = read_file(path)
            if text_digest(text) != digest:
                raise ValueError("does not match its digest")
            entries = json.loads(text.decode("utf-8"))["entries"]
            if not isinstance(entries, dict):
                raise ValueError("not a pack")
        except OSError:
            entries = {}
        except (ValueError, TypeError, KeyError, UnicodeDecodeError, RecursionError):
            self.dropped += 1
            remove(path)
            remove(os.path.join(where, digest + ".keys"))
            entries = {}
        for name in [k for k, d in self._kept.items() if d == digest]:
            del self._kept[name]
        if entries:
            touch(path, used)
        for name, value in entries.items():
            if isinstance(name, str) and name not in self.memo:
                self.memo[name] = value
        return self.memo.get(key)

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
        if write_file(path, entry_text(key, value)):
            self.alone.add(key)


def kept_keys(where: str) -> dict[str, str]:
    """{key: the digest of the kept pack that holds it} of the packs folder `where`."""
    out: dict[str, str] = {}
    try:
        names = sorted(n for n in os.listdir(where) if n.endswith(".keys"))
    except OSError:
        return out
    for name in names:
        try:
            keys = json.loads(read_file(os.path.join(where, name))[0].decode("utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if isinstance(keys, list):
            out.update((k, name[: -len(".keys")]) for k in keys if isinstance(k, str))
    return out


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


def write_file(path: str, data: bytes, *, by_name: bool = False) -> bool:
    """Write a file whole and sealed (shared.seal) through a temporary file, or not at all
    (its temporary removed; no key for this run: nothing). `by_name`: a file named by the
    digest of its text, which only sealed files name (a graph's chunks): its digest is its
    seal, and it is written as it is."""
    sealed = seal(data)
    if sealed is None:
        return False
    if by_name:
        sealed = data
    tmp = temp_name(path)
    made = False
    try:
        private_dirs(os.path.dirname(path))
        # never through a link planted at the temporary name, never over another's file
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o600)
        made = True
        with os.fdopen(fd, "wb") as f:
            f.write(sealed)
        os.replace(tmp, path)
        WRITTEN[0] += 1
        return True
    except OSError:
        if made:  # ours: a planted file at the name is left alone
            remove(tmp)
        return False


NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def read_file(path: str, *, by_name: bool = False) -> tuple[bytes, int]:
    """The text of a file a cache wrote (`write_file`) and its mtime: never through a link
    in its last part, never a FIFO or device (OSError); ValueError when its seal does not
    verify under this run's key (edited, forged, another machine's), and then it is removed.
    `by_name`: as written (the caller checks its text against the digest that names it)."""
    with os.fdopen(open_regular(path, follow=False), "rb") as f:
        data = f.read()
        used = os.fstat(f.fileno()).st_mtime_ns
    if by_name:
        return data, used
    try:
        return unseal(data), used
    except ValueError:
        remove(path)
        raise


def private_dirs(folder: str) -> None:
    """`folder` and the folders above it that do not exist yet, made 0700 whatever the
    umask (os.makedirs gives the ones above the default mode), the process's umask left
    alone (threads write at once)."""
    missing = []
    while folder and not os.path.isdir(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    for path in reversed(missing):  # each level 0700 (a umask only takes bits away)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue


def remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def entries(folder: str) -> list[tuple[int, int, str]]:
    """(mtime, size, path) of every file under `folder`, temporary files of failed writes
    removed on the way; none when `folder` is a link (os.walk would follow it: another
    user's link at a cache's name must not make a prune remove what it points to)."""
    found: list[tuple[int, int, str]] = []
    if os.path.islink(folder):  # a cache never follows a link out of itself: nothing of it
        return found
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
