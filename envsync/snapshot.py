"""Take, load and save snapshots; resolve what a HOST argument names.

Wherever a host name stands, the user may name: an inventory host, `local`, a snapshot
(`.json`), a lock (`.lock`, `.toml`) or a pinned requirements file (`.txt`, `.in`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from envsync.collect import ProbeOptions, collect
from envsync.documents import read_json_object
from envsync.errors import OutputError, SnapshotError
from envsync.inventory import HostSpec, Inventory, ServiceSpec
from envsync.lock import read_lock
from envsync.model import SNAPSHOT_SCHEMA_VERSION, DecodeError, Snapshot, from_data, to_data
from envsync.requirements import read_requirements
from envsync.runner import Runner

SNAPSHOT_SUFFIXES = (".json",)
LOCK_SUFFIXES = (".lock", ".toml")
REQUIREMENTS_SUFFIXES = (".txt", ".in")


@dataclass(frozen=True, slots=True)
class HostSource:
    spec: HostSpec

    @property
    def label(self) -> str:
        return self.spec.name


@dataclass(frozen=True, slots=True)
class FileSource:
    path: Path
    kind: str  # snapshot | lock | requirements

    @property
    def label(self) -> str:
        return str(self.path)


Source = HostSource | FileSource


def resolve(name: str, inventory: Inventory) -> Source:
    """What a HOST argument names; raises InputError for unknown names and missing files."""
    if name in inventory.hosts:
        return HostSource(inventory.hosts[name])
    path = Path(name)
    suffix = path.suffix.lower()
    kind = (
        "snapshot"
        if suffix in SNAPSHOT_SUFFIXES
        else "lock"
        if suffix in LOCK_SUFFIXES
        else "requirements"
        if suffix in REQUIREMENTS_SUFFIXES
        else None
    )
    if kind is not None or os.sep in name:
        if not path.is_file():
            raise SnapshotError(f"{name}: no such file")
        if kind is None:
            raise SnapshotError(
                f"{name}: cannot tell what this file is",
                tip="name snapshots *.json, locks *.lock or *.toml, requirements *.txt",
            )
        return FileSource(path, kind)
    return HostSource(inventory.host(name))  # raises for unknown names


def service_of(source: Source, inventory: Inventory) -> ServiceSpec | None:
    """The service a HOST runs: a host's own (the inventory's, with its overrides); for a
    file standing in for a host, the inventory's."""
    return source.spec.service if isinstance(source, HostSource) else inventory.service


def load_snapshot(path: Path) -> Snapshot:
    data = read_json_object(path, SnapshotError, "snapshot")
    if "schema_version" not in data:
        raise SnapshotError(f"{path}: not an envsync snapshot (no schema_version)")
    version = data["schema_version"]
    if version != SNAPSHOT_SCHEMA_VERSION:
        raise SnapshotError(
            f"{path}: snapshot schema_version {version!r} is not supported "
            f"(this envsync reads {SNAPSHOT_SCHEMA_VERSION})",
            tip="re-create it with `envsync snapshot HOST -o FILE`",
        )
    try:
        return from_data(Snapshot, data, "snapshot")
    except DecodeError as e:
        raise SnapshotError(f"{path}: not an envsync snapshot: {e}") from e


def take(
    source: Source,
    runner_for: Callable[[HostSpec], Runner],
    options: ProbeOptions | None = None,
) -> Snapshot:
    """A snapshot of whatever `source` names: collected live, or read from a file."""
    if isinstance(source, HostSource):
        return collect(source.spec, runner_for(source.spec), options)
    if source.kind == "snapshot":
        # Read from a file, it stands for a host but cannot act as one (send files).
        return replace(load_snapshot(source.path), source="snapshot")
    if source.kind == "lock":
        return read_lock(source.path)
    return read_requirements(source.path)


def dumps_snapshot(snapshot: Snapshot) -> str:
    return json.dumps(to_data(snapshot), indent=2) + "\n"


def check_writable(path: Path) -> None:
    """Fail before a long collection when `path` can never be written."""
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise OutputError(f"{path}: cannot write: Is a directory")
    if not parent.is_dir():
        why = "Not a directory" if parent.exists() else "No such file or directory"
        raise OutputError(f"{path}: cannot write: {why}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: cannot write: Permission denied")


def write_pieces(f: IO[str], text: str | Iterable[str]) -> None:
    """Write a string, or its pieces as they are made, to an open text file."""
    if isinstance(text, str):
        f.write(text)
    else:
        for piece in text:
            f.write(piece)


def write_atomic(path: Path, text: str | Iterable[str]) -> None:
    """Write `text` (a string, or its pieces as they are made) to `path` through a
    temporary file and os.replace: all or nothing.

    A target that exists and is not a regular file (/dev/stdout, a FIFO) is written in
    place: replacing it would swap a device node for a file.
    """
    if path.exists() and not path.is_file() and not path.is_dir():
        try:
            with path.open("w", encoding="utf-8") as f:
                write_pieces(f, text)
        except OSError as e:
            raise OutputError(f"{path}: cannot write: {e.strerror}") from e
        return
    import tempfile

    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as e:
        raise OutputError(f"{path}: cannot write: {e.strerror}") from e
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            write_pieces(f, text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as e:  # a piece that fails to be made leaves no half file either
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise OutputError(f"{path}: cannot write: {e.strerror}") from e
        raise
