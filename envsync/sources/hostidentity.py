"""What a host is, for its recorded past: where it is reached (its address or exec prefix,
and its interpreter) and which machine answers there (the digest of its machine id that
its probe reads); and what each host folder of the state folder says it is the past of.
The state folder itself is envsync/sources/states.py's."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from envsync.documents import read_plain
from envsync.model.environment import Snapshot, System
from envsync.model.inventory import HostSpec

__all__ = ["describe_folder", "identity", "identity_text", "machine_of", "migrated"]


def identity(spec: HostSpec, machine_id: str | None = None) -> str:
    """What a host is, not what it is called: its address (or this machine) and exec
    prefix, its interpreter, and its machine id where it can be read (12 hex digits)."""
    return with_machine(address_key(spec), machine_id)


def address_key(spec: HostSpec) -> str:
    """The identity of where a host is reached, whatever machine answers there."""
    data = [spec.ssh or "local", list(spec.exec), spec.python, None]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:12]


def with_machine(key: str, machine_id: str | None) -> str:
    """The identity of the machine `machine_id` reached at `key` (None: no machine id could
    be read there: the address alone, the same on every run)."""
    if machine_id is None:
        return key
    return hashlib.sha256(json.dumps([key, machine_id]).encode()).hexdigest()[:12]


def identity_text(spec: HostSpec) -> str:
    """The identity in words: `root@10.0.0.7:22, /opt/venv/bin/python`."""
    where = spec.ssh or "this machine"
    if spec.exec:
        where += " through " + " ".join(spec.exec)
    return f"{where}, {spec.python}"


def machine_of(snapshot: Snapshot) -> str | None:
    """The machine id the host's probe read (None: unreadable there, or not recorded)."""
    return snapshot.system.machine_id if isinstance(snapshot.system, System) else None


IDENTITY = "identity.json"  # in each host's folder: what it is the past of
MIGRATED = "migrated"  # beside it, in a folder taken over from the layout before identities


def machine_in(folder: Path) -> str | None:
    """The machine id a folder's identity.json names (None: none, or no such file)."""
    try:
        data = json.loads(read_plain(folder / IDENTITY, 1 << 16))
    except (OSError, ValueError):
        return None
    value = data.get("machine_id") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def migrated(folder: Path) -> Path | None:
    """The folder of the layout before identities that `folder` was taken over from."""
    try:
        return Path(read_plain(folder / MIGRATED, 4096).decode().strip())
    except (OSError, UnicodeDecodeError):
        return None


def describe_folder(folder: Path) -> str:
    """What a host's folder is the past of, in words, from its identity.json."""
    try:
        data = json.loads(read_plain(folder / IDENTITY, 1 << 16))
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    if "~" not in folder.name:
        return f"{folder} (recorded before envsync kept hosts by identity, under the name alone)"
    where = data.get("where") or "an address or interpreter no longer known"
    machine = data.get("machine_id")
    before = (
        "; its first states recorded before envsync kept hosts by identity"
        if (folder / MIGRATED).exists()
        else ""
    )
    return f"{folder} ({where}, machine id {machine or 'unknown'}{before})"
