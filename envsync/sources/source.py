"""What a HOST argument names: a typed source, resolved once per command.

Wherever a host name stands, the user may name: an inventory host, `local`, a recorded
state of one (`HOST@good`, `HOST@-1`, `HOST@TIME`: states.py), a snapshot (`.json`), a lock
(`.lock`, `.toml`) or a pinned requirements file (`.txt`, `.in`); where a command takes
several hosts, a group of them too (the inventory's or Ansible's group, a node set such as
`gpu[001-087]`, a glob, set operations: nodeset.py). `resolve` is the one function that reads
such a name; a command calls it through `Session.resolve` (one host) or `Session.select`
(several), which resolve each name once and hand the stages the source, never the name
again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from envsync.documents import not_found
from envsync.errors import InventoryError, SnapshotError, StateError
from envsync.model.inventory import HostSpec, Inventory, ServiceSpec
from envsync.model.nodeset import is_pattern, select
from envsync.sources.states import Selector, parse_selector, split_name

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


@dataclass(frozen=True, slots=True)
class StateSource:
    """A recorded state of an inventory host (`ct129@good`): it stands for the host as it
    was, and like a file it cannot act as one."""

    spec: HostSpec  # the host whose state it is
    selector: Selector
    name: str  # as written: ct129@good

    @property
    def label(self) -> str:
        return self.name


Source = HostSource | FileSource | StateSource  # what stands for one host


@dataclass(frozen=True, slots=True)
class GroupSource:
    """A HOST argument that names several inventory hosts: a group (the inventory's, or an
    Ansible inventory's), a node set, a glob or a set expression. It stands for its
    members, in the order the inventory lists them."""

    name: str  # as written: gpus, @gpus, gpu[001-008], gpus:!gpu003
    members: tuple[HostSource, ...]

    @property
    def label(self) -> str:
        return self.name


Named = Source | GroupSource  # what one HOST argument names


def _state_source(name: str, inventory: Inventory) -> StateSource | None:
    """HOST@... as a state of an inventory host; None for a name with no @."""
    parts = split_name(name)
    if parts is None:
        return None
    host, selector = parts
    try:
        spec = inventory.host(host)
    except InventoryError as e:
        raise StateError(
            f"{name}: {e.message}",
            tip="HOST@good, HOST@-1 and HOST@TIME name a recorded state of an inventory host",
        ) from e
    return StateSource(spec, parse_selector(selector, name), name)


def resolve(name: str, inventory: Inventory) -> Named:
    """What a HOST argument names; raises InputError for unknown names and missing files."""
    if name in inventory.hosts:
        return HostSource(inventory.hosts[name])
    if name in inventory.groups or is_pattern(name):
        groups = {key: group.hosts for key, group in inventory.groups.items()}
        found = select(name, tuple(inventory.hosts), groups)  # InputError: names no host
        return GroupSource(name, tuple(HostSource(inventory.host(h)) for h in found))
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
            raise SnapshotError(not_found(path, f"{kind or 'HOST'} file"))
        if kind is None:
            raise SnapshotError(
                f"{name}: cannot tell what this file is",
                tip="name snapshots *.json, locks *.lock or *.toml, requirements *.txt",
            )
        return FileSource(path, kind)
    state = _state_source(name, inventory)
    if state is not None:
        return state
    return HostSource(inventory.host(name))  # raises for unknown names


def service_of(source: Source, inventory: Inventory) -> ServiceSpec | None:
    """The service a HOST runs: a host's own (the inventory's, with its overrides); for a
    file standing in for a host, the inventory's; for a host's state, the host's."""
    if isinstance(source, HostSource | StateSource):
        return source.spec.service
    return inventory.service
