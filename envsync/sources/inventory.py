"""The inventory (envsync.toml or an Ansible inventory) read from where the user points.

The model and the TOML document are in model/inventory.py; this module picks the file and its kind.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from envsync.documents import read_toml
from envsync.errors import InventoryError
from envsync.model.inventory import (
    DEFAULT_DEADLINE,
    DEFAULT_ENV,
    DEFAULT_INVENTORY,
    HOST_KEY_POLICIES,
    INVENTORY_ENV,
    LOCAL,
    Group,
    HostSpec,
    Inventory,
    ServiceSpec,
    jump_hops,
    local_host,
    parse_inventory,
    parse_target,
)


def inventory_path(explicit: str | None, environ: Mapping[str, str]) -> tuple[Path, bool]:
    """The inventory to read and whether the user named it (then it must exist)."""
    if explicit:
        return Path(explicit), True
    if environ.get(INVENTORY_ENV):
        return Path(environ[INVENTORY_ENV]), True
    return Path(DEFAULT_INVENTORY), False


def load_inventory(
    explicit: str | None = None, environ: Mapping[str, str] | None = None
) -> Inventory:
    environ = os.environ if environ is None else environ
    path, required = inventory_path(explicit, environ)
    if not path.exists():
        if required:
            from envsync.documents import not_found

            origin = "--inventory" if explicit else INVENTORY_ENV
            raise InventoryError(
                not_found(path, "inventory file", origin),
                tip="check --inventory / ENVSYNC_INVENTORY, or create envsync.toml",
            )
        return Inventory(path=None)
    from envsync.ansible import is_ansible_inventory  # an Ansible inventory, by its content

    if is_ansible_inventory(path):
        from envsync.ansible import read_inventory

        return read_inventory(path)
    return parse_inventory(read_toml(path, InventoryError, "inventory", "invalid TOML"), path)


__all__ = [
    "DEFAULT_DEADLINE",
    "DEFAULT_ENV",
    "DEFAULT_INVENTORY",
    "HOST_KEY_POLICIES",
    "INVENTORY_ENV",
    "LOCAL",
    "Group",
    "HostSpec",
    "Inventory",
    "ServiceSpec",
    "inventory_path",
    "jump_hops",
    "load_inventory",
    "local_host",
    "parse_inventory",
    "parse_target",
]
