"""Backups of what a plan changes, their journal, and the restore that puts it all back.

A backup is a folder under ~/.envsync/backups/KEY/: a tar of every file it saved, a
manifest with the sha256 of each and of the archive (checked before a restore changes
anything), and a journal of the apply's steps.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import sys
import tarfile
import time

from .failure import Failure, refuse
from .paths import STATE, dist_paths, in_package, installed
from .service import op_set_service, read_service
from .transfer import put, sha256, sweep, write_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List, NoReturn, Tuple

    Members = List[Tuple[str, bytes, int, float]]  # (path, content, mode, mtime)


def backup_dir(ident: object) -> str:
    backups = STATE.backups
    if ident == "latest":
        names = sorted(
            n
            for n in (os.listdir(backups) if os.path.isdir(backups) else [])
            if os.path.isfile(os.path.join(backups, n, "manifest.json"))
        )
        if not names:
            raise Failure("no-backup", "no envsync backup on this host")
        ident = names[-1]
    if not isinstance(ident, str) or not re.match(r"^[0-9A-Za-z_][0-9A-Za-z._-]*$", ident):
        raise Failure("bad-input", f"bad backup id {ident!r}")
    return os.path.join(backups, ident)


def no_space(e: BaseException) -> bool:
    import errno

    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)


def op_backup(op: dict[str, Any]) -> dict[str, Any]:
    where = backup_dir(op["id"])
    for path in op.get("files", []):
        if not in_package(path):
            refuse(path, "not in a package directory of this environment")
    dists = []
    saved = []
    for name in op.get("dists", []):
        found = installed(name)
        if found is None:
            dists.append({"name": name, "present": False})
            continue
        location, entry, files = found
        paths = dist_paths(location, entry, files)
        dists.append({"name": name, "present": True, "location": location, "entry": entry})
        saved += [p for p in paths if os.path.isfile(p) and not os.path.islink(p)]
    absent = []
    for path in op.get("files", []):
        if os.path.isfile(path) and not os.path.islink(path):
            saved.append(path)
        else:
            absent.append(path)
    if os.path.isfile(STATE.service):
        saved.append(STATE.service)
    saved = sorted(set(saved))
    need = sum(os.path.getsize(p) for p in saved) + (1 << 20)
    os.makedirs(STATE.backups, mode=0o700, exist_ok=True)
    free = shutil.disk_usage(STATE.backups).free
    if free < need:
        raise Failure(
            "no-space",
            f"no space for the backup in {STATE.backups}: it needs {need >> 20} MB, "
            f"{free >> 20} MB are free; nothing was changed",
        )
    try:
        return write_backup(where, dists, saved, absent, op)
    except OSError as e:
        shutil.rmtree(where, ignore_errors=True)
        if no_space(e):
            raise Failure(
                "no-space",
                f"the disk filled up while backing up to {STATE.backups}; nothing was changed",
            ) from None
        raise


def write_backup(
    where: str,
    dists: list[dict[str, Any]],
    saved: list[str],
    absent: list[str],
    op: dict[str, Any],
) -> dict[str, Any]:
    os.makedirs(where, mode=0o700)
    with open(os.path.join(os.path.dirname(where), "prefix"), "w") as f:
        f.write(os.path.realpath(sys.prefix) + "\n")
    digests = {}
    tar_path = os.path.join(where, "files.tar")
    with tarfile.open(tar_path, "w") as tar:
        for path in saved:
            digests[path] = sha256(path)
            tar.add(path, arcname=path.lstrip("/"), recursive=False)
    with open(tar_path, "rb") as f:
        os.fsync(f.fileno())
    manifest = {
        "id": os.path.basename(where),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "dists": dists,
        "files": sorted(set(op.get("files", []))),
        "absent": absent,
        "service": os.path.isfile(STATE.service),
        "python": sys.executable,
        "state": "applying",
        "sha256": digests,
        "tar_sha256": sha256(tar_path),
    }
    write_json(os.path.join(where, "manifest.json"), manifest)
    open(os.path.join(where, "journal.jsonl"), "a").close()
    return {"backup": where, "saved": len(saved)}


def op_journal(op: dict[str, Any]) -> dict[str, Any]:
    where = backup_dir(op["id"])
    with open(os.path.join(where, "journal.jsonl"), "a") as f:
        f.write(json.dumps({"at": time.time(), "event": op["event"]}) + "\n")
        f.flush()
        os.fsync(f.fileno())
    if op.get("state"):
        path = os.path.join(where, "manifest.json")
        with open(path) as f:
            manifest = json.load(f)
        manifest["state"] = op["state"]
        write_json(path, manifest)
    return {}


def remove_installed(name: str) -> list[str]:
    found = installed(name)
    if found is None:
        return []
    location, entry, files = found
    removed = []
    for path in dist_paths(location, entry, files):
        try:
            os.unlink(path)
            removed.append(path)
        except FileNotFoundError:
            continue
        except IsADirectoryError:
            shutil.rmtree(path, ignore_errors=True)
    shutil.rmtree(os.path.join(location, entry), ignore_errors=True)
    return removed


def op_remove_dist(op: dict[str, Any]) -> dict[str, Any]:
    return {"removed": len(remove_installed(op["name"]))}


def damaged(where: str, why: str) -> NoReturn:
    raise Failure("damaged-backup", f"backup {where} is damaged: {why}; nothing was restored")


def read_manifest(where: str) -> dict[str, Any]:
    """A backup's manifest, refused unless it carries what a restore checks."""
    try:
        with open(os.path.join(where, "manifest.json")) as f:
            manifest: Any = json.load(f)
    except FileNotFoundError:
        damaged(where, "manifest.json is missing")
    except (OSError, ValueError) as e:
        damaged(where, f"manifest.json is unreadable ({e})")
    if not isinstance(manifest, dict):
        damaged(where, "manifest.json is not a manifest")
    digests = manifest.get("sha256")
    if not isinstance(digests, dict) or not isinstance(manifest.get("tar_sha256"), str):
        damaged(where, "the manifest carries no hashes to check it against")
    dists = manifest.get("dists")
    absent = manifest.get("absent")
    if not isinstance(dists, list) or not isinstance(absent, list):
        damaged(where, "the manifest lists no distributions or files")
    for dist in dists:
        if not isinstance(dist, dict) or not isinstance(dist.get("name"), str):
            damaged(where, "a distribution entry of the manifest is malformed")
    for path in absent:
        if not in_package(path):
            refuse(path, "the backup names a file outside the package directories")
    return manifest


def checked_backup(where: str) -> tuple[dict[str, Any], Members]:
    """The manifest and archive members of a backup, verified before anything changes."""
    manifest = read_manifest(where)
    digests = manifest["sha256"]
    service = os.path.realpath(STATE.service)
    tar_path = os.path.join(where, "files.tar")
    try:
        actual = sha256(tar_path)
    except FileNotFoundError:
        damaged(where, "files.tar is missing")
    if actual != manifest["tar_sha256"]:
        damaged(where, "files.tar differs from the manifest's sha256 (truncated or altered)")
    members: Members = []
    with tarfile.open(tar_path) as tar:
        for member in tar.getmembers():
            target = "/" + member.name
            allowed = in_package(target) or os.path.realpath(target) == service
            if not member.isfile() or ".." in member.name.split("/") or not allowed:
                refuse(target, "the backup holds an entry outside the package directories")
            source = tar.extractfile(member)
            data = source.read() if source is not None else b""
            if hashlib.sha256(data).hexdigest() != digests.get(target):
                damaged(where, f"{target} differs from the manifest's sha256")
            members.append((target, data, member.mode, member.mtime))
    if sorted(t for t, _, _, _ in members) != sorted(digests):
        damaged(where, "files.tar does not hold every file of the manifest")
    return manifest, members


def op_restore(op: dict[str, Any]) -> dict[str, Any]:
    # The last crash is an observation, not something a plan changed: it stays as it is.
    crash = read_service().get("crash")
    where = backup_dir(op.get("id", "latest"))
    manifest, members = checked_backup(where)
    for dist in manifest["dists"]:
        # Whatever version is there now goes: the backed-up one comes back below.
        while remove_installed(dist["name"]):
            pass
    for path in manifest["absent"]:
        if os.path.isfile(path) or os.path.islink(path):
            os.unlink(path)
    if not manifest.get("service") and os.path.isfile(STATE.service):
        os.unlink(STATE.service)
    for target, data, mode, mtime in members:
        put(target, io.BytesIO(data), mode, mtime)
    touched = [t for t, _, _, _ in members] + manifest["absent"] + manifest.get("files", [])
    sweep(sorted({os.path.dirname(t) for t in touched if in_package(t)}))
    if crash is not None or os.path.isfile(STATE.service):
        op_set_service({"crash": crash})
    manifest["state"] = "rolled-back"
    write_json(os.path.join(where, "manifest.json"), manifest)
    with open(os.path.join(where, "journal.jsonl"), "a") as f:
        f.write(json.dumps({"at": time.time(), "event": "rolled back"}) + "\n")
    return {"backup": where, "dists": [d["name"] for d in manifest["dists"]]}
