"""Lock files: a host's snapshot as deterministic TOML, PEP 751 key names where they apply.

A lock holds the same facts as a snapshot, minus the transport fields (when and how fast it
was collected), so that locking an unchanged host twice gives byte-identical files.
`[[packages]]` carries `name`, `version` and, for packages installed from a URL another
machine can reach, PEP 751's `archive` / `vcs`; every other fact lives under
`tool.envsync`. Facts of the machine itself (the interpreter's paths, prefix, `sys.path`,
where each package lies and when it was installed, local files and checkouts it was
installed from, where pip and uv are, the hostname) stand apart, in
`[tool.envsync.machine]`: nothing compared reads them, so a lock made on one machine
checks another without path noise, and `lock --portable` leaves them out.

A standard `pylock.toml` without envsync's facts (written by uv or pip) reads as a partial
reference: the names and versions of its packages.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from envsync.documents import loads_toml, read_text
from envsync.errors import DecodeError, LockError
from envsync.model.codec import from_data, to_data
from envsync.model.environment import TRANSPORT_FIELDS, Distribution, Snapshot, Unavailable

LOCK_VERSION = "1.0"
SUPPORTED_MAJOR = 1
# Not kept under [tool.envsync]: when and how a snapshot was taken, the startup import
# graph (diff and check read it from the live target), and what the lock holds elsewhere.
_NOT_IN_TOOL = (
    *TRANSPORT_FIELDS,
    "startup",
    "native",
    "crash",
    "distributions",
    "schema_version",
)
_PACKAGE_TOP = ("name", "version")
# Facts of the machine (its paths, its name): kept apart, never compared.
_INTERPRETER_PATHS = ("executable", "prefix", "base_prefix", "sys_path")
_DIST_PATHS = ("location", "shadowed", "installed_at")
# Packages kept out of [[packages]] (no installable source): listed here, read back alike.
UNLOCKED = "unlocked"
MACHINE = "machine"


def prune_table(table: dict[str, Any]) -> dict[str, Any]:
    pruned: dict[str, Any] = prune(table)
    return pruned


def prune(value: Any) -> Any:
    """TOML has no null: drop None values and empty lists, recursively."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            pruned = prune(item)
            if pruned is None or pruned == []:
                continue
            out[key] = pruned
        return out
    if isinstance(value, list):
        return [prune(v) for v in value]
    return value


def local_url(url: str | None) -> bool:
    """A file on the host itself: no other machine can install from it."""
    return url is not None and url.startswith("file:")


def pep751_source(direct_url: Mapping[str, Any] | None) -> dict[str, Any]:
    """A PEP 610 direct_url.json as PEP 751's package source keys, when another machine
    can install from it (a VCS remote, an archive URL); a path on the host is no source."""
    if not direct_url or "url" not in direct_url or local_url(direct_url["url"]):
        return {}
    url = direct_url["url"]
    if "vcs_info" in direct_url:
        vcs = direct_url["vcs_info"]
        return {
            "vcs": prune(
                {
                    "type": vcs.get("vcs"),
                    "url": url,
                    "requested-revision": vcs.get("requested_revision"),
                    "commit-id": vcs.get("commit_id"),
                }
            )
        }
    if "archive_info" in direct_url:
        archive: dict[str, Any] = {"url": url}
        hashes = direct_url["archive_info"].get("hashes")
        if hashes:
            archive["hashes"] = dict(sorted(hashes.items()))
        return {"archive": archive}
    return {}


def _take_machine(data: dict[str, Any]) -> dict[str, Any]:
    """Move the machine's facts out of snapshot data (in place) into one table."""
    paths: dict[str, Any] = {}
    interpreter = data.get("interpreter") or {}
    if "unavailable" not in interpreter:
        paths["interpreter"] = {
            k: interpreter.pop(k) for k in _INTERPRETER_PATHS if k in interpreter
        }
    torch = data.get("torch")
    if isinstance(torch, dict) and "location" in torch:
        paths["torch"] = {"location": torch.pop("location")}
    system = data.get("system")
    if isinstance(system, dict):
        mine = {k: system.pop(k) for k in ("hostname", "machine_id") if k in system}
        if mine:
            paths["system"] = mine
    if data.get("installers") is not None:  # where pip and uv are on this machine
        paths["installers"] = data.pop("installers")
    dists: dict[str, Any] = {}
    for dist in data["distributions"]:
        entry = {k: dist.pop(k) for k in _DIST_PATHS if k in dist}
        direct = dist.get("direct_url")
        if direct and local_url(direct.get("url")):
            direct = dict(direct)
            entry["url"] = direct.pop("url")
            dist["direct_url"] = direct
        source = dist.get("source")
        if isinstance(source, dict):  # a checkout: its folders, its work tree's root
            source = dict(source)
            entry["packages"] = source.pop("packages", {})
            git = source.get("git")
            if isinstance(git, dict) and "root" in git:
                git = dict(git)
                entry["git_root"] = git.pop("root")
                source["git"] = git
            dist["source"] = source
        dists[dist["name"]] = entry
    paths["distributions"] = dists
    return prune_table(paths)


def _put_machine(tool: dict[str, Any], dists: list[dict[str, Any]]) -> None:
    """Put the machine's facts back (in place); a portable lock gets empty paths."""
    paths = tool.pop(MACHINE, {})
    if not isinstance(paths, dict):
        raise LockError(f"[tool.envsync.{MACHINE}] must be a table")

    def table(within: dict[str, Any], key: str, at: str = "") -> dict[str, Any]:
        value = within.get(key, {})
        if not isinstance(value, dict):
            raise LockError(f"[tool.envsync.{MACHINE}{at}.{key}] must be a table")
        return value

    interpreter = tool.get("interpreter")
    if isinstance(interpreter, dict) and "unavailable" not in interpreter:
        for key in ("executable", "prefix", "base_prefix"):
            interpreter.setdefault(key, "")
        interpreter.update(table(paths, "interpreter"))
    torch = tool.get("torch")
    if isinstance(torch, dict) and "unavailable" not in torch:
        torch.setdefault("location", "")
        torch.update(table(paths, "torch"))
    system = tool.get("system")
    if isinstance(system, dict) and "unavailable" not in system:
        system.update(table(paths, "system"))
    if "installers" in paths:
        tool["installers"] = paths["installers"]
    known = table(paths, "distributions")
    for dist in dists:
        name = dist.get("name")
        entry = dict(table(known, name, ".distributions") if isinstance(name, str) else {})
        url = entry.pop("url", None)
        direct = dist.get("direct_url")
        if isinstance(direct, dict) and "url" not in direct:
            dist["direct_url"] = {**direct, "url": url or "file://"}
        packages = entry.pop("packages", {})
        root = entry.pop("git_root", "")
        source = dist.get("source")
        if isinstance(source, dict):
            source = {**source, "packages": packages}
            git = source.get("git")
            if isinstance(git, dict) and "unavailable" not in git:
                source["git"] = {**git, "root": root}
            dist["source"] = source
        dist.update(entry)


def _package(dist: dict[str, Any]) -> dict[str, Any]:
    package = {key: dist[key] for key in _PACKAGE_TOP}
    package.update(pep751_source(dist.get("direct_url")))
    package["tool"] = {"envsync": {k: v for k, v in dist.items() if k not in _PACKAGE_TOP}}
    return prune_table(package)


def lock_document(snapshot: Snapshot, *, portable: bool = False) -> dict[str, Any]:
    """The lock as TOML-ready data: `portable` leaves the machine's facts out."""
    data = to_data(snapshot)
    machine = _take_machine(data)
    tool = {k: v for k, v in data.items() if k not in _NOT_IN_TOOL}
    if not portable:
        tool[MACHINE] = machine
    doc: dict[str, Any] = {"lock-version": LOCK_VERSION, "created-by": "envsync"}
    if not isinstance(snapshot.interpreter, Unavailable):
        doc["requires-python"] = f"=={data['interpreter']['version']}"
    doc["packages"] = [_package(d) for d in data["distributions"]]
    doc["tool"] = {"envsync": {"schema_version": data["schema_version"], **prune(tool)}}
    return doc


def dumps_lock(snapshot: Snapshot, *, portable: bool = False) -> str:
    return tomli_w.dumps(lock_document(snapshot, portable=portable))


def _check_version(doc: dict[str, Any], origin: str) -> None:
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


def _packages(doc: dict[str, Any], origin: str) -> list[dict[str, Any]]:
    packages = doc.get("packages", [])
    if not isinstance(packages, list):
        raise LockError(f"{origin}: packages must be an array of tables")
    for i, package in enumerate(packages):
        if not isinstance(package, dict) or not isinstance(package.get("name"), str):
            raise LockError(f"{origin}: packages[{i}] needs a name")
    return packages


def _standard_lock(packages: list[dict[str, Any]], origin: str) -> Snapshot:
    """A pylock.toml of another tool: its packages' names and versions, a partial reference."""
    from packaging.utils import canonicalize_name

    why = Unavailable(reason="not recorded in a pylock.toml without envsync's facts")
    dists: dict[str, Distribution] = {}
    for package in packages:
        name = canonicalize_name(package["name"])
        version = package.get("version")
        if isinstance(version, str) and name not in dists:
            dists[name] = Distribution(name=name, display_name=package["name"], version=version)
    if not dists:
        raise LockError(f"{origin}: the lock names no package with a version")
    return Snapshot(
        host=origin,
        source="lock",
        partial=True,
        interpreter=why,
        distributions=tuple(sorted(dists.values(), key=lambda d: d.name)),
        gpu=why,
        system=why,
        torch=why,
    )


def loads_lock(text: str, origin: str) -> Snapshot:
    doc = loads_toml(text, origin, LockError, "corrupt lock file")
    _check_version(doc, origin)
    packages = _packages(doc, origin)
    tool = _table(doc, "tool").get("envsync")
    if tool is None:
        return _standard_lock(packages, origin)
    if not isinstance(tool, dict):
        raise LockError(f"{origin}: [tool.envsync] must be a table")
    data = dict(tool)
    data["source"] = "lock"
    unlocked = data.pop(UNLOCKED, [])
    if not isinstance(unlocked, list):
        raise LockError(f"{origin}: [tool.envsync].{UNLOCKED} must be an array of tables")
    distributions = []
    for i, package in enumerate([*packages, *unlocked]):
        if not isinstance(package, dict) or not all(k in package for k in _PACKAGE_TOP):
            raise LockError(f"{origin}: packages[{i}] needs a name and a version")
        extra = _table(_table(package, "tool"), "envsync")
        distributions.append({**{k: package[k] for k in _PACKAGE_TOP}, **extra})
    data["distributions"] = sorted(distributions, key=lambda d: str(d["name"]))
    _put_machine(data, data["distributions"])
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
