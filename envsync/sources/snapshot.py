"""Take, load and save snapshots of what a HOST argument names (source.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO

from envsync.collect import ProbeOptions, collect
from envsync.documents import read_json_object
from envsync.errors import CollectError, DecodeError, SnapshotError, StateError
from envsync.model.codec import from_data, to_data
from envsync.model.environment import SNAPSHOT_SCHEMA_VERSION, Snapshot
from envsync.model.inventory import HostSpec
from envsync.runner import Runner
from envsync.sources.locks.lockfile import read_lock
from envsync.sources.requirements import read_requirements
from envsync.sources.source import HostSource, Source, StateSource
from envsync.sources.states import StateStore, load_named


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
    states: StateStore | None = None,
) -> Snapshot:
    """A snapshot of whatever `source` names: collected live, read from a file, or a
    recorded state from `states`."""
    if isinstance(source, HostSource):
        return collect(source.spec, runner_for(source.spec), options)
    if isinstance(source, StateSource):
        if states is None:
            raise StateError(
                f"{source.name}: no state folder is known here",
                tip="give the session a StateStore (the CLI: --state-dir, ENVSYNC_STATE_DIR)",
            )
        return load_named(states, source.spec.name, source.selector, source.name)
    if source.kind == "snapshot":
        # Read from a file, it stands for a host but cannot act as one (send files).
        return replace(load_snapshot(source.path), source="snapshot")
    if source.kind == "lock":
        return read_lock(source.path)
    return read_requirements(source.path)


def dumps_snapshot(snapshot: Snapshot) -> str:
    return json.dumps(to_data(snapshot), indent=2) + "\n"


class SnapshotDocument:
    """A multi-host snapshot document whose snapshots wait in a spool file, each written
    there as its host answers: the command holds at most `jobs` snapshots at a time, and
    the document still lists them in the order the hosts were named."""

    def __init__(self, spool: IO[bytes]) -> None:
        self.spool = spool
        self.placed: dict[int, tuple[int, int]] = {}  # host index -> (offset, length)
        self.errors: dict[int, tuple[str, CollectError]] = {}

    def add(self, i: int, snap: Snapshot) -> None:
        # Each line indented as json.dumps(indent=2) indents an item of "snapshots" (a JSON
        # string never holds a raw newline, so the replace touches only the layout).
        data = json.dumps(to_data(snap), indent=2).replace("\n", "\n    ").encode()
        self.spool.seek(0, os.SEEK_END)
        self.placed[i] = (self.spool.tell(), len(data))
        self.spool.write(data)

    def pieces(self) -> Iterator[str]:
        marks = {i: f"\0envsync-snapshot-{i}\0" for i in sorted(self.placed)}
        doc: dict[str, object] = {
            "schema_version": SNAPSHOT_SCHEMA_VERSION,
            "snapshots": list(marks.values()),
        }
        if self.errors:
            doc["errors"] = [
                {"host": name, "error": str(e)} for _, (name, e) in sorted(self.errors.items())
            ]
        text = json.dumps(doc, indent=2) + "\n"
        for i, mark in marks.items():
            before, text = text.split(json.dumps(mark), 1)
            yield before
            offset, length = self.placed[i]
            self.spool.seek(offset)
            yield self.spool.read(length).decode()
        yield text
