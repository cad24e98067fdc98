"""Backups of what a plan changes, their journal, the record an apply leaves, and the list.

A backup is a folder in the environment's state (`PREFIX/.envsync/backups/ID/`): a
manifest holding the record of every path the apply may change as it was before (record.py:
file with mode and sha256, link, folder, absent), a tar of those files' contents (checked
against the manifest's sha256 before a restore changes anything), and the journal of the
apply's steps. Once applied, the manifest also holds the record of what the apply left, so
that a rollback sees what changed since (restore.py).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
import time

from .backups import (
    MANIFEST_FORMAT,
    backup_dir,
    backup_names,
    journal,
    no_space,
    prune,
    read_manifest,
    set_state,
    state_of,
)
from .escapes import Bounds, describe, dist_ways_out, leaving
from .failure import Failure, refuse
from .installer import start_tracing
from .paths import (
    STATE,
    canonical,
    dist_files,
    in_package,
    installations,
    open_log,
    state_dir,
    within,
    write_json,
)
from .provenance import appeared, attribute
from .record import (
    close_over,
    dists_scope,
    key_of,
    listing,
    open_regular,
    path_of,
    take,
)
from .restore import frozen, op_restore
from .service import read_service
from .transfer import sha256
from .uninstall import uninstall_set

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any

    from ..protocol import (
        BackupEntry,
        BackupReply,
        BackupRequest,
        BackupsReply,
        BackupsRequest,
        JournalReply,
        JournalRequest,
        RemoveDistReply,
        RemoveDistRequest,
    )


def op_backup(op: BackupRequest) -> BackupReply:
    where = backup_dir(op["id"])
    if os.path.exists(where):
        raise Failure("bad-input", f"backup {os.path.basename(where)} exists already")
    files = op.get("files", [])
    names = [str(n) for n in op.get("dists", [])]
    refuse_leaving(names, [p for p in files if isinstance(p, str)])
    for path in files:
        if not in_package(path):
            refuse(path, "not in a package directory of this environment")
    finish_unfinished()
    owned, notes = dists_scope(names)
    # pip's uninstall set, whole: a RECORD's folder lines too (unless one claims another
    # distribution's files: then pip is never run over it, and the claim says so)
    removed, claims = uninstall_set(names)
    plan_files = sorted({canonical(p) for p in files})
    paths = close_over(
        sorted({p for ps in owned.values() for p in ps} | set(plan_files) | set(removed))
    )
    folders = [p for p in paths if os.path.isdir(p) and not os.path.islink(p)]
    refuse_frozen(sorted({p for ps in owned.values() for p in ps} | set(plan_files) | set(removed)))
    before = take(paths, hashed=False)
    need = sum(int(e.get("size", 0)) for e in before.values()) + (1 << 20)
    state_dir(STATE.root)
    state_dir(STATE.backups)
    free = shutil.disk_usage(STATE.backups).free
    if free < need:
        raise Failure(
            "no-space",
            f"no space for the backup in {STATE.backups}: it needs {need >> 20} MB, "
            f"{free >> 20} MB are free; nothing was changed",
        )
    dists = [
        {"name": n, "present": bool(owned[n]), "paths": [key_of(p) for p in owned[n]]}
        for n in names
    ]
    manifest = {
        "format": MANIFEST_FORMAT,
        "id": os.path.basename(where),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "summary": str(op.get("summary") or ""),
        "python": sys.executable,
        "prefix": STATE.prefix,
        "state": "applying",
        "dists": dists,
        "files": [key_of(p) for p in plan_files],
        "before": before,
        # the names in each package directory and in each folder of the plan's
        # distributions, for created_since
        "listing": listing(folders),
        "after": None,
        "flags_before": read_service().get("flags"),
        "notes": notes,
        "claims": claims,
    }
    try:
        write_backup(where, manifest)
        start_tracing(where)
    except OSError as e:
        shutil.rmtree(where, ignore_errors=True)
        if no_space(e):
            raise Failure(
                "no-space",
                f"the disk filled up while backing up to {STATE.backups}; nothing was changed",
            ) from None
        raise
    saved = sum(1 for e in before.values() if e["kind"] == "file")
    return {"backup": where, "saved": saved, "notes": notes, "claims": claims}


def refuse_leaving(names: list[str], files: list[str]) -> None:
    """Refuse, before anything changes (an unfinished apply's rollback too), a plan whose
    installer or copy would write or remove a path outside the environment: through a
    linked package folder or site-packages, or a RECORD line naming one."""
    why = leaving(names, files)
    if why is not None:
        raise Failure("leaves-environment", f"refusing the plan: {why}; nothing was changed")


def refuse_frozen(paths: list[str]) -> None:
    """Refuse, before anything changes, an apply that could not finish: a path it changes
    (or the folder that holds it) that no write, rename or removal can change."""

    for path in [*paths, *sorted({os.path.dirname(p) for p in paths})]:
        if frozen(path):
            raise Failure(
                "cannot-change",
                f"{path} is immutable or append-only (chattr +i/+a): the apply could not change it",
            )


UNFINISHED = ("applying", "restoring")


def finish_unfinished() -> None:
    """dpkg's rule: a backup left applying or restoring (its apply or rollback was killed,
    with the lock's holder) is undone before anything else may change the environment;
    then this apply is refused, its plan being made from the half-changed state."""
    left = [n for n in backup_names() if state_of(n) in UNFINISHED]
    if not left:
        return

    done = []
    for name in reversed(left):
        try:
            answer = op_restore({"id": name, "force": True})
        except Failure as e:
            raise Failure(
                "unfinished",
                f"backup {name} of an earlier apply did not finish and could not be rolled "
                f"back now: {e.message}",
            ) from None
        done.append(f"{name} ({answer['changed']} path(s) put back)")
    raise Failure(
        "unfinished",
        f"an earlier apply had not finished (killed with its lock's holder): rolled back "
        f"{', '.join(done)} first, to what it was before; nothing else was changed",
    )


class Hashing:
    """A file read through, its sha256 taken on the way (one read per file)."""

    def __init__(self, f: IO[bytes]) -> None:
        import hashlib

        self.f = f
        self.hash = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.f.read(size)
        self.hash.update(data)
        return data


def write_backup(where: str, manifest: dict[str, Any]) -> None:
    """The tar of every file of the record (members named by number), then the manifest
    with each file's sha256 as it was written, then an empty journal."""
    os.makedirs(where, mode=0o700)

    tar_path = os.path.join(where, "files.tar")
    with tarfile.open(tar_path, "w", format=tarfile.PAX_FORMAT) as tar:
        for n, (key, entry) in enumerate(sorted(manifest["before"].items())):
            if entry["kind"] != "file":
                continue
            path = path_of(key)
            if path is None:
                continue
            with os.fdopen(open_regular(path), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                info = tarfile.TarInfo(f"f/{n}")
                info.size, info.mode, info.mtime = size, entry["mode"], int(entry["mtime"])
                source = Hashing(f)
                tar.addfile(info, source)
            entry.update(sha256=source.hash.hexdigest(), size=size, member=info.name)
    with open(tar_path, "rb") as f:
        os.fsync(f.fileno())
    manifest["tar_sha256"] = sha256(tar_path)
    write_json(os.path.join(where, "manifest.json"), manifest)
    os.close(open_log(os.path.join(where, "journal.jsonl")))


def after_record(where: str, manifest: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """What the apply left: every path of the backup's record, every path its
    distributions own now, and what its installer wrote besides; and the keys of what
    appeared meanwhile that it did not write (a hand install: never undone by it)."""
    names = [d["name"] for d in manifest["dists"]]
    owned, _ = dists_scope(names)
    recorded = [p for p in (path_of(k) for k in manifest["before"]) if p is not None]
    mine = {p for ps in owned.values() for p in ps}
    new = [p for p in appeared(where, manifest) if p not in mine]
    made, found = attribute(where, manifest, new)
    paths = set(recorded) | mine | set(made)
    return take(close_over(sorted(paths))), [key_of(p) for p in found]


def op_journal(op: JournalRequest) -> JournalReply:
    where = backup_dir(op["id"])
    journal(where, str(op["event"]))
    if op.get("state"):
        manifest = read_manifest(where)
        if op["state"] == "applied":
            manifest["after"], manifest["found"] = after_record(where, manifest)
            manifest["flags_after"] = read_service().get("flags")
        set_state(where, manifest, str(op["state"]))
    return {}


def op_remove_dist(op: RemoveDistRequest) -> RemoveDistReply:
    """Uninstall a distribution's own files (inside its location: never a script in bin/,
    never a folder a RECORD line names), as the backup `id` recorded them; folders it
    leaves empty go too."""
    where = backup_dir(op["id"])
    manifest = read_manifest(where)
    out = dist_ways_out([str(op["name"])], Bounds())
    if out:
        raise Failure(
            "leaves-environment",
            f"refusing to remove {op['name']}: {describe(out)}; nothing was changed",
        )
    recorded = {k for d in manifest["dists"] for k in d.get("paths", [])}
    removed = 0
    folders = set()
    for location, entry, record in installations(op["name"]):
        root = os.path.realpath(location)
        for path in dist_files(location, entry, record)[0]:
            if not within(path, root) or key_of(path) not in recorded:
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                folders.add(path)
                continue
            try:
                os.unlink(path)
                removed += 1
            except FileNotFoundError:
                continue
            parent = os.path.dirname(path)
            while parent != root and within(parent, root):
                folders.add(parent)
                parent = os.path.dirname(parent)
    for folder in sorted(folders, key=len, reverse=True):
        prune(folder)
    return {"removed": removed}


def op_backups(op: BackupsRequest) -> BackupsReply:
    """Every backup of this environment, oldest first: id, when, state, what it covers."""
    out: list[BackupEntry] = []
    for name in backup_names():
        try:
            with open(os.path.join(STATE.backups, name, "manifest.json")) as f:
                manifest: Any = json.load(f)
        except (OSError, ValueError):
            out.append({"id": name, "state": "damaged"})
            continue
        if not isinstance(manifest, dict):
            out.append({"id": name, "state": "damaged"})
            continue
        dists: Any = manifest.get("dists") if isinstance(manifest.get("dists"), list) else []
        out.append(
            {
                "id": name,
                "created": str(manifest.get("created") or ""),
                "state": str(manifest.get("state") or "")
                if manifest.get("format") == MANIFEST_FORMAT
                else "old",
                "summary": str(manifest.get("summary") or ""),
                "dists": [str(d.get("name")) for d in dists if isinstance(d, dict)],
                "files": len(manifest.get("files") or []),
            }
        )
    return {"backups": out}
