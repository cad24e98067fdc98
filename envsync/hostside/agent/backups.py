"""A backup folder of this environment and its manifest: where each backup is, its state,
its journal, and the manifest a restore checks. Below backup.py and restore.py, which
both read them (so that neither imports the other back)."""

from __future__ import annotations

import json
import os
import re
import time

from ..shared import is_temp_name
from .failure import Failure, refuse
from .paths import STATE, open_log, write_json
from .record import path_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

MANIFEST_FORMAT = 2  # 1: a list of saved files and their sha256, no record

ROLLED_BACK = "rolled-back"

IDENT = re.compile(r"^[0-9A-Za-z_][0-9A-Za-z._-]*$")


def backup_names() -> list[str]:
    """The backups of this environment, oldest first (their ids begin with the time)."""
    backups = STATE.backups
    try:
        names = os.listdir(backups)
    except OSError:
        return []
    return sorted(n for n in names if os.path.isfile(os.path.join(backups, n, "manifest.json")))


def state_of(name: str) -> str | None:
    try:
        with open(os.path.join(STATE.backups, name, "manifest.json")) as f:
            manifest: Any = json.load(f)
    except (OSError, ValueError):
        return None
    return str(manifest.get("state")) if isinstance(manifest, dict) else None


def backup_dir(ident: object) -> str:
    """The backup folder of `ident`; "latest" is the newest apply not rolled back (the
    newest backup when every one is)."""
    if ident == "latest":
        names = backup_names()
        if not names:
            raise Failure("no-backup", "no envsync backup in this environment")
        pending = [n for n in names if state_of(n) != ROLLED_BACK]
        ident = (pending or names)[-1]
    if not isinstance(ident, str) or not IDENT.match(ident):
        raise Failure("bad-input", f"bad backup id {ident!r}")
    return os.path.join(STATE.backups, ident)


def no_space(e: BaseException) -> bool:
    import errno

    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)


def journal(where: str, event: str) -> None:
    with os.fdopen(open_log(os.path.join(where, "journal.jsonl")), "a") as f:
        f.write(json.dumps({"at": time.time(), "event": event}) + "\n")
        f.flush()
        os.fsync(f.fileno())


def set_state(where: str, manifest: dict[str, Any], state: str) -> None:
    manifest["state"] = state
    write_json(os.path.join(where, "manifest.json"), manifest)


def prune(folder: str) -> bool:
    """Remove a folder that holds nothing but bytecode and envsync's leftovers; whether it
    is gone (an empty package folder would still import, as a namespace package)."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    for name in names:
        full = os.path.join(folder, name)
        if name == "__pycache__" and os.path.isdir(full) and not os.path.islink(full):
            try:
                inner = os.listdir(full)
            except OSError:
                return False
            if not all(n.endswith((".pyc", ".pyo")) or is_temp_name(n) for n in inner):
                return False
            for n in inner:
                os.unlink(os.path.join(full, n))
            os.rmdir(full)
        elif is_temp_name(name):
            os.unlink(full)
        else:
            return False
    os.rmdir(folder)
    return True


def damaged(where: str, why: str) -> NoReturn:
    raise Failure("damaged-backup", f"backup {where} is damaged: {why}; nothing was restored")


KINDS = ("file", "symlink", "dir", "absent", "special")


def link(key: str) -> str:
    """ " (through L, a link to T)" when a link on the way of a record's key leads it out of
    the environment now (made after the apply: a package folder replaced by a link)."""
    from .escapes import Bounds

    if not isinstance(key, str) or "\0" in key:
        return ""
    out = Bounds().way_out(os.path.join(STATE.prefix, key))
    return f" (through {out[0]}, a link to {out[1]})" if out is not None and out[1] else ""


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
    if manifest.get("format") != MANIFEST_FORMAT:
        raise Failure(
            "old-backup",
            f"backup {where} was made by an older envsync (no record of what each path was); "
            "nothing was restored",
        )
    if not isinstance(manifest.get("tar_sha256"), str):
        damaged(where, "the manifest carries no hash to check its archive against")
    dists = manifest.get("dists")
    if not isinstance(dists, list) or not all(
        isinstance(d, dict) and isinstance(d.get("name"), str) for d in dists
    ):
        damaged(where, "the manifest lists no distributions")
    for field in ("before", "after"):
        record = manifest.get(field)
        if record is None and field == "after":
            continue
        if not isinstance(record, dict):
            damaged(where, f"the manifest holds no record {field} the apply")
        for key, entry in record.items():
            if path_of(key) is None:
                refuse(key, "the backup names a path outside the package directories" + link(key))
            if not isinstance(entry, dict) or entry.get("kind") not in KINDS:
                damaged(where, f"the record of {key} is malformed")
            if field == "before" and entry["kind"] == "file":
                if not isinstance(entry.get("sha256"), str) or not isinstance(
                    entry.get("member"), str
                ):
                    damaged(where, f"the record of {key} names no saved content")
                if not isinstance(entry.get("mode"), int):
                    damaged(where, f"the record of {key} has no mode")
            if entry["kind"] == "symlink" and not isinstance(entry.get("target"), str):
                damaged(where, f"the record of {key} has no link target")
    return manifest
