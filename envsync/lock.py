"""Lock files: a host's snapshot as deterministic TOML, PEP 751 key names where they apply.

A lock holds the same facts as a snapshot, minus the transport fields (when and how fast it
was collected), so that locking an unchanged host twice gives byte-identical files.
`[[packages]]` carries `name`, `version` and, for direct-URL installs, PEP 751's
`directory` / `archive` / `vcs`; everything else lives under `tool.envsync`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from envsync.documents import loads_toml, read_text
from envsync.errors import LockError
from envsync.model import TRANSPORT_FIELDS, DecodeError, Snapshot, from_data, to_data

LOCK_VERSION = "1.0"
SUPPORTED_MAJOR = 1
# Not kept under [tool.envsync]: when and how a snapshot was taken, the startup import
# graph (diff and check read it from the live target), and what the lock holds elsewhere.
_NOT_IN_TOOL = (*TRANSPORT_FIELDS, "startup", "crash", "distributions", "schema_version")
_PACKAGE_TOP = ("name", "version")


def _prune(value: Any) -> Any:
    """TOML has no null: drop None values and empty lists, recursively."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            pruned = _prune(item)
            if pruned is None or pruned == []:
                continue
            out[key] = pruned
        return out
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def _pep751_source(direct_url: Mapping[str, Any] | None) -> dict[str, Any]:
    """Project a PEP 610 direct_url.json onto PEP 751's package source keys."""
    if not direct_url or "url" not in direct_url:
        return {}
    url = direct_url["url"]
    if "vcs_info" in direct_url:
        vcs = direct_url["vcs_info"]
        return {
            "vcs": _prune(
                {
                    "type": vcs.get("vcs"),
                    "url": url,
                    "requested-revision": vcs.get("requested_revision"),
                    "commit-id": vcs.get("commit_id"),
                }
            )
        }
    if "dir_info" in direct_url:
        path = url.removeprefix("file://")
        return {
            "directory": {"path": path, "editable": bool(direct_url["dir_info"].get("editable"))}
        }
    if "archive_info" in direct_url:
        archive: dict[str, Any] = {"url": url}
        hashes = direct_url["archive_info"].get("hashes")
        if hashes:
            archive["hashes"] = dict(sorted(hashes.items()))
        return {"archive": archive}
    return {}


def dumps_lock(snapshot: Snapshot) -> str:
    data = to_data(snapshot)
    packages = []
    for dist in data["distributions"]:
        package = {key: dist[key] for key in _PACKAGE_TOP}
        package.update(_pep751_source(dist.get("direct_url")))
        rest = {k: v for k, v in dist.items() if k not in _PACKAGE_TOP}
        package["tool"] = {"envsync": rest}
        packages.append(_prune(package))
    tool = {k: v for k, v in data.items() if k not in _NOT_IN_TOOL}
    doc: dict[str, Any] = {"lock-version": LOCK_VERSION, "created-by": "envsync"}
    interpreter = data.get("interpreter") or {}
    if "version" in interpreter:
        doc["requires-python"] = f"=={interpreter['version']}"
    doc["packages"] = packages
    doc["tool"] = {"envsync": {"schema_version": data["schema_version"], **_prune(tool)}}
    return tomli_w.dumps(doc)


def loads_lock(text: str, origin: str) -> Snapshot:
    doc = loads_toml(text, origin, LockError, "corrupt lock file")
    version = doc.get("lock-version")
    if not isinstance(version, str):
        raise LockError(
            f"{origin}: not an envsync lock (no lock-version key)",
            tip="create one with `envsync lock HOST > env.lock`",
        )
    major = version.split(".", 1)[0]
    if not major.isdigit() or int(major) != SUPPORTED_MAJOR:
        raise LockError(
            f"{origin}: lock-version {version} is not supported (this envsync reads "
            f"{SUPPORTED_MAJOR}.x)",
            tip="upgrade envsync, or re-create the lock with this version",
        )
    tool = _table(doc, "tool").get("envsync")
    if not isinstance(tool, dict):
        raise LockError(f"{origin}: not an envsync lock (no [tool.envsync] table)")
    data = dict(tool)
    data["source"] = "lock"
    distributions = []
    packages = doc.get("packages", [])
    if not isinstance(packages, list):
        raise LockError(f"{origin}: packages must be an array of tables")
    for i, package in enumerate(packages):
        if not isinstance(package, dict) or not all(k in package for k in _PACKAGE_TOP):
            raise LockError(f"{origin}: packages[{i}] needs a name and a version")
        extra = _table(_table(package, "tool"), "envsync")
        distributions.append({**{k: package[k] for k in _PACKAGE_TOP}, **extra})
    data["distributions"] = distributions
    try:
        return from_data(Snapshot, data, "lock")
    except DecodeError as e:
        raise LockError(f"{origin}: corrupt lock file: {e}") from e


def _table(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """doc[key] when it is a table; {} when absent or of another type (decoding says why)."""
    value = doc.get(key, {})
    return value if isinstance(value, dict) else {}


def read_lock(path: Path) -> Snapshot:
    return loads_lock(read_text(path, LockError, "lock file"), str(path))
