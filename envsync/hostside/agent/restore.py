"""The restore of a backup, as a transaction over its records.

Every path of the backup's record (and every path its distributions own now) is put back
to what it was before the apply: a file, a link, a folder, or absent. Before anything
changes, the target is compared with the record the apply left: a path changed since (a
later install, a hand edit) is never overwritten unless asked (`force`). Then every file
is staged beside its place (streamed from the archive, its sha256 checked on the way, so
memory stays bounded whatever a file's size), and only then swapped in with os.replace,
folders the apply made removed last. A failure before the first swap undoes the staging
("nothing was restored"); a kill at any moment leaves a state that running the restore
again completes, because every path is then either as the apply left it or as it was
before, and the restore takes both. Last, what it put back is checked against the record
(each file hashed again), and the distributions it put back must have no file outside the
environment: a restore that did not take is said, never reported as one.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tarfile

from ..shared import sweep_temps, temp_name
from .backups import (
    ROLLED_BACK,
    backup_dir,
    damaged,
    journal,
    no_space,
    prune,
    read_manifest,
    set_state,
)
from .escapes import Bounds, dist_ways_out
from .escapes import describe as describe_ways
from .failure import Failure
from .installer import quiesce
from .provenance import appeared, attribute, bytecode, topmost
from .record import (
    BLOCK,
    close_over,
    describe,
    dists_scope,
    key_of,
    leftovers,
    path_of,
    same,
)
from .service import op_set_service, read_service
from .transfer import sha256

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Tuple

    from ..protocol import RestoreReply, RestoreRequest

    Entry = Dict[str, Any]
    Staged = List[Tuple[str, str]]  # (temporary file, its place)

ABSENT: dict[str, Any] = {"kind": "absent"}
SHOWN = 5  # paths named in a message, then "and N more"
JOURNAL_EVERY = 500  # swaps between two journal lines


def named(keys: list[str]) -> str:
    shown = ", ".join(keys[:SHOWN])
    return shown + (f" and {len(keys) - SHOWN} more" if len(keys) > SHOWN else "")


def op_restore(op: RestoreRequest) -> RestoreReply:
    where = backup_dir(op.get("id", "latest"))
    sweep_temps(where)  # a restore or an apply killed while it wrote the manifest
    manifest = read_manifest(where)
    quiesce(where)  # no installer of this apply may write on while it is rolled back
    names = [d["name"] for d in manifest["dists"]]
    if manifest.get("state") == ROLLED_BACK:
        return {"backup": where, "dists": names, "already": True, "changed": 0, "found": []}
    tar_path = os.path.join(where, "files.tar")
    try:
        actual = sha256(tar_path)
    except FileNotFoundError:
        damaged(where, "files.tar is missing")
    if actual != manifest["tar_sha256"]:
        damaged(where, "files.tar differs from the manifest's sha256 (truncated or altered)")
    before: dict[str, Entry] = manifest["before"]
    after: dict[str, Entry] | None = manifest.get("after")
    owned, _ = dists_scope(names)
    keys = set(before) | set(after or {})
    mine = close_over(sorted({p for ps in owned.values() for p in ps}))
    found = [str(k) for k in manifest.get("found") or []]
    if after is None:
        # the apply stopped half-way: what its installer wrote (no RECORD yet, or inside
        # existing folders), but never what someone else wrote meanwhile
        new = sorted({*appeared(where, manifest), *mine} - {path_of(k) for k in keys})
        ours, others = attribute(where, manifest, new, mine=set(mine))
        keys |= {key_of(p) for p in ours}
        found += [key_of(p) for p in others]
    else:
        keys |= {key_of(p) for p in mine}
    found = topmost([k for k in found if os.path.lexists(str(path_of(k)))])
    paths = {k: str(path_of(k)) for k in keys}
    current = {k: describe(paths[k]) for k in keys}
    goal = {k: before.get(k, ABSENT) for k in keys}
    flags = read_service().get("flags")
    if after is not None and not op.get("force"):
        changed = sorted(
            k
            for k in keys
            if not bytecode(k)
            and not same(current[k], goal[k])
            and not same(current[k], after.get(k, ABSENT))
        )
        if flags not in (manifest.get("flags_after"), manifest.get("flags_before")):
            changed.append("the service's launch flags")
        if changed:
            raise Failure(
                "changed-since",
                f"{len(changed)} path(s) changed since the apply of {manifest['id']}: "
                f"{named(changed)}; nothing was restored",
            )
    todo = sorted(k for k in keys if not same(current[k], goal[k]) and goal[k]["kind"] != "special")
    preflight(where, [paths[k] for k in todo], goal, paths, todo)
    journal(where, f"restoring {len(todo)} path(s)")
    set_state(where, manifest, "restoring")
    files = [k for k in todo if goal[k]["kind"] in ("file", "symlink")]
    staged, made = stage(where, tar_path, files, goal, paths)
    left = swap(where, manifest, staged, made, todo, goal, current, paths)
    check(where, names, [k for k in todo if k not in left], goal, paths)
    if flags != manifest.get("flags_before"):
        op_set_service({"flags": manifest.get("flags_before")})
    set_state(where, manifest, ROLLED_BACK)
    if found:
        journal(where, f"kept {len(found)} path(s) this apply did not write: {named(found)}")
    journal(where, "rolled back")
    return {
        "backup": where,
        "dists": names,
        "already": False,
        "changed": len(todo),
        "found": found,
    }


# -- before anything changes ---------------------------------------------------------------

FS_IOC_GETFLAGS = 0x80086601  # _IOR('f', 1, long) on 64-bit Linux
FROZEN_FLAGS = 0x10 | 0x20  # FS_IMMUTABLE_FL, FS_APPEND_FL


def frozen(path: str) -> bool:
    """Is the file or folder immutable or append-only (chattr +i, +a): no rename, write or
    removal can change it, not even root's."""
    import fcntl
    import struct

    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        buf = fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 8)
    except OSError:
        return False  # a file system without these flags
    finally:
        os.close(fd)
    return bool(struct.unpack("i", buf[:4])[0] & FROZEN_FLAGS)


def preflight(
    where: str, targets: list[str], goal: dict[str, Entry], paths: dict[str, str], keys: list[str]
) -> None:
    """Refuse, before anything changes, a restore that could not finish: a place that no
    rename can change, a folder this process may not write, too little room to stage."""
    blocked = []
    folders = set()
    for path in targets:
        if frozen(path):
            blocked.append(f"{path} is immutable or append-only (chattr +i/+a)")
        parent = os.path.dirname(path)
        while parent and not os.path.isdir(parent):
            parent = os.path.dirname(parent)
        folders.add(parent)
    for folder in sorted(folders):
        if frozen(folder):
            blocked.append(f"{folder} is immutable or append-only (chattr +i/+a)")
        elif not os.access(folder, os.W_OK | os.X_OK):
            blocked.append(f"{folder} is not writable by this user")
    if blocked:
        raise Failure(
            "cannot-restore",
            f"cannot restore {os.path.basename(where)}: {named(blocked)}; nothing was restored",
        )
    need: dict[int, int] = {}
    free: dict[int, tuple[int, str]] = {}
    for key in keys:
        entry = goal[key]
        if entry["kind"] != "file":
            continue
        folder = os.path.dirname(paths[key])
        while not os.path.isdir(folder):
            folder = os.path.dirname(folder)
        device = os.stat(folder).st_dev
        need[device] = need.get(device, 0) + int(entry.get("size") or 0) + 4096
        if device not in free:
            fs = os.statvfs(folder)
            free[device] = (fs.f_bavail * fs.f_frsize, folder)
    for device, size in need.items():
        room, folder = free[device]
        if size > room:
            raise Failure(
                "no-space",
                f"no space to restore {os.path.basename(where)}: it stages {size >> 20} MB "
                f"beside the files in {folder}, {room >> 20} MB are free; nothing was restored",
            )


# -- stage every file beside its place ------------------------------------------------------


def stage(
    where: str, tar_path: str, keys: list[str], goal: dict[str, Entry], paths: dict[str, str]
) -> tuple[Staged, list[str]]:
    """Each file (and link) of the record written beside its place, checked against its
    sha256; the folders made for them. Undone whole on any failure."""
    staged: Staged = []
    made: list[str] = []
    try:
        with tarfile.open(tar_path) as tar:
            members = {m.name: m for m in tar.getmembers() if m.isfile()}
            swept: set[str] = set()
            for key in keys:
                entry, path = goal[key], paths[key]
                folder = os.path.dirname(path)
                if folder not in swept:  # before the first file of this run is staged there
                    sweep_leftovers(folder)
                    swept.add(folder)
                make_parents(folder, goal, made)
                tmp = temp_name(path)
                if os.path.lexists(tmp):
                    os.unlink(tmp)
                if entry["kind"] == "symlink":
                    os.symlink(entry["target"], tmp)
                    staged.append((tmp, path))
                    continue
                member = members.get(entry["member"])
                source = tar.extractfile(member) if member is not None else None
                if source is None:
                    damaged(where, f"files.tar does not hold {key}")
                staged.append((tmp, path))
                if write_checked(source, tmp, entry) != entry["sha256"]:
                    damaged(where, f"{key} differs from the manifest's sha256")
    except BaseException as e:
        unstage(staged, made)
        if isinstance(e, Failure):
            raise
        if isinstance(e, (OSError, tarfile.TarError)):
            why = "the disk filled up" if no_space(e) else str(getattr(e, "strerror", None) or e)
            raise Failure(
                "no-space" if no_space(e) else "cannot-restore",
                f"cannot stage {os.path.basename(where)}: {why}; nothing was restored",
            ) from None
        raise
    return staged, made


def write_checked(source: Any, tmp: str, entry: Entry) -> str:
    """Stream `source` into the new file `tmp` with the entry's mode and time; its sha256."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    digest = hashlib.sha256()
    with os.fdopen(os.open(tmp, flags, 0o600), "wb") as f:
        while True:
            block = source.read(BLOCK)
            if not block:
                break
            digest.update(block)
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, entry["mode"] & 0o7777)
    if entry.get("mtime") is not None:
        os.utime(tmp, (float(entry["mtime"]), float(entry["mtime"])))
    return digest.hexdigest()


def make_parents(folder: str, goal: dict[str, Entry], made: list[str]) -> None:
    """The folders above a staged file that the apply removed: made again, with the mode
    the record says."""
    missing = []
    while not os.path.isdir(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for path in reversed(missing):
        entry = goal.get(key_of(path), {})
        os.mkdir(path)
        made.append(path)
        os.chmod(path, int(entry.get("mode", 0o755)) & 0o7777)


def unstage(staged: Staged, made: list[str]) -> None:
    for tmp, _ in staged:
        try:
            os.unlink(tmp)
        except OSError:
            continue
    for folder in reversed(made):
        try:
            os.rmdir(folder)
        except OSError:
            continue


def sweep_leftovers(folder: str) -> None:
    """The temporary files of a restore (or write) that was killed half-way."""
    for path in leftovers(folder):
        try:
            os.unlink(path)
        except OSError:
            continue


# -- swap each in ---------------------------------------------------------------------------


def swap(
    where: str,
    manifest: dict[str, Any],
    staged: Staged,
    made: list[str],
    todo: list[str],
    goal: dict[str, Entry],
    current: dict[str, Entry],
    paths: dict[str, str],
) -> set[str]:
    """Staged files and links take their places (os.replace: each path is, at every
    moment, either as the apply left it or as it was); then what the apply made goes,
    folders it removed are made again and get their modes back. The keys of the folders
    left because they hold what the apply did not make."""
    done, swapped, total = 0, 0, len(todo)
    path = ""
    try:
        for tmp, path in staged:
            if os.path.isdir(path) and not os.path.islink(path):
                prune(path)  # a folder where a file was (rare): it must be empty of ours
            os.replace(tmp, path)
            done += 1
            swapped += 1
            if done % JOURNAL_EVERY == 0:
                journal(where, f"restored {done} of {total}")
        gone = [k for k in todo if goal[k]["kind"] == "absent"]
        for key in gone:
            path = paths[key]
            if current[key]["kind"] != "dir":
                if os.path.lexists(path):
                    os.unlink(path)
                done += 1
        left = []
        for key in sorted(gone, key=lambda k: len(paths[k]), reverse=True):
            path = paths[key]
            if current[key]["kind"] == "dir":
                if prune(path):
                    done += 1
                else:
                    left.append(key)
        for key in sorted(todo, key=lambda k: len(paths[k])):
            entry, path = goal[key], paths[key]
            if entry["kind"] == "dir":
                if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
                    os.unlink(path)  # what the apply left where a folder was
                if not os.path.isdir(path):
                    os.mkdir(path)
                os.chmod(path, int(entry["mode"]) & 0o7777)
                done += 1
        for folder in sorted({os.path.dirname(paths[k]) for k in todo}):
            sweep_leftovers(folder)
        if left:
            journal(where, f"left {named(left)}: they hold files the apply did not make")
        return set(left)
    except OSError as e:
        unstage(staged[swapped:], [])
        why = e.strerror or str(e)
        if done == 0:
            unstage([], made)
            raise Failure(
                "cannot-restore",
                f"cannot restore {os.path.basename(where)}: {path}: {why}; nothing was restored",
            ) from None
        journal(where, f"partially restored: {done} of {total}: {path}: {why}")
        raise Failure(
            "partial",
            f"{os.path.basename(where)} partially restored ({done} of {total} paths): "
            f"{path}: {why}",
        ) from None


# -- check what it restored -----------------------------------------------------------------


def check(
    where: str, names: list[str], keys: list[str], goal: dict[str, Entry], paths: dict[str, str]
) -> None:
    """After the swap: every path it put back is what the record says (each file hashed
    again), and no file of the distributions it put back lies outside the environment
    (an apply through a linked package folder wrote there, and no backup holds it). A
    restore that did not take is never reported as one: the backup stays `restoring`,
    and the failure names what is not back."""
    wrong = [k for k in keys if not same(describe(paths[k]), goal[k])]
    outside = dist_ways_out(names, Bounds())
    if not wrong and not outside:
        return
    said = []
    if wrong:
        said.append(f"{len(wrong)} path(s) are not as the backup recorded them: {named(wrong)}")
    if outside:
        said.append(f"{describe_ways(outside)}, outside this environment: no backup holds them")
    why = "; ".join(said)
    journal(where, f"not restored: {why}")
    raise Failure(
        "not-restored",
        f"{os.path.basename(where)} is not restored: {why}",
    )
