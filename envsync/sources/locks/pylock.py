"""A host as a standard PEP 751 `pylock.toml`: the exact files its indexes serve for it.

One file serves both `uv pip sync pylock.toml` (the `[[packages]]` with their `wheels` or
`sdist`, `index` and hashes) and `envsync check --lock pylock.toml` (envsync's own facts
under `[tool.envsync]`). A package no index serves keeps its `archive` / `vcs` source when
another machine can install from it; otherwise it is listed under
`[tool.envsync].unlocked` with the reason, and the CLI warns about it: never dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import tomli_w

from envsync.model.environment import Distribution, GitState, Interpreter, Snapshot
from envsync.sources.locks.index import IndexFile, choose, redact
from envsync.sources.locks.lockfile import UNLOCKED, lock_document, pep751_source, prune_table

# Installers read only these names (PEP 751): pylock.toml, or pylock.NAME.toml.
FILE_NAME = re.compile(r"^pylock\.([^.]+\.)?toml$")
SOURCES = ("archive", "vcs", "directory", "wheels", "sdist")  # PEP 751's package sources


@dataclass(frozen=True, slots=True, kw_only=True)
class Located:
    """Where each package of a host comes from: a file of an index, or why none."""

    files: Mapping[str, IndexFile]  # distribution name -> the index file
    unlocked: Mapping[str, str]  # distribution name -> why no index file and no source
    # distribution name -> PEP 751 `vcs` of a clean checkout (its remote at its commit)
    vcs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


def recorded_sha256(dist: Distribution) -> str | None:
    """The hash of the file a package was installed from, when the installer recorded it."""
    info = (dist.direct_url or {}).get("archive_info") or {}
    hashes = info.get("hashes") or {}
    if "sha256" in hashes:
        return str(hashes["sha256"])
    algo, _, digest = str(info.get("hash", "")).partition("=")
    return digest if algo == "sha256" and digest else None


def checkout_vcs(dist: Distribution) -> tuple[dict[str, str] | None, str]:
    """A checkout's PEP 751 `vcs` source (its remote at its commit) when the installed
    files are exactly that commit; else None and why not."""
    git = dist.source.git if dist.source is not None else None
    if not isinstance(git, GitState):
        return None, "installed from a checkout on the host whose git state is unknown"
    if not git.remote or not git.commit or git.remote.startswith("file:"):
        return None, "installed from a checkout on the host with no remote to fetch it from"
    if git.modified or git.added or git.deleted or git.untracked or git.unavailable_changes:
        return None, "installed from a checkout on the host with local changes"
    vcs = {"type": "git", "url": git.remote, "commit-id": git.commit}
    if git.branch:
        vcs["requested-revision"] = git.branch
    url = str((dist.direct_url or {}).get("url", ""))
    if url.startswith("file://") and git.root:
        import posixpath
        import urllib.parse

        project = urllib.parse.unquote(url.removeprefix("file://"))
        sub = posixpath.relpath(project, git.root)
        if sub != "." and not sub.startswith(".."):
            vcs["subdirectory"] = sub
    return vcs, ""


def locate(
    snapshot: Snapshot,
    files_of: Callable[[str], Sequence[IndexFile]],
    tags: Sequence[str],
    size_of: Callable[[str], int | None] = lambda url: None,
    known: Mapping[str, IndexFile] | None = None,
) -> Located:
    """The index file of every package of the host (network through `files_of`; `known`:
    files chosen before, by distribution name, taken as they are)."""
    found: dict[str, IndexFile] = {}
    unlocked: dict[str, str] = {}
    vcs: dict[str, Mapping[str, str]] = {}
    for dist in snapshot.distributions:
        sha = recorded_sha256(dist)
        if dist.direct_url and sha is None and pep751_source(dist.direct_url):
            continue  # a VCS remote or an archive URL: its own source
        if dist.direct_url and "dir_info" in dist.direct_url:
            source, why = checkout_vcs(dist)
            if source is not None:
                vcs[dist.name] = source
            else:
                unlocked[dist.name] = why
            continue
        if dist.direct_url and sha is None:
            unlocked[dist.name] = "installed from a file on the host that no index serves"
            continue
        chosen = (known or {}).get(dist.name) or choose(
            files_of(dist.name), dist.name, dist.version, tags, sha
        )
        if chosen is None:
            if sha is not None and pep751_source(dist.direct_url):
                continue  # an archive URL with its hash: its own source
            label = "a local build" if "+" in dist.version else "this version"
            unlocked[dist.name] = (
                f"no index of the host serves {label} ({dist.version}) for its interpreter "
                "and platform"
            )
            continue
        if chosen.size is None:
            chosen = replace(chosen, size=size_of(chosen.url))
        found[dist.name] = chosen
    return Located(files=found, unlocked=unlocked, vcs=vcs)


def toml_datetime(text: str | None) -> datetime | None:
    """PEP 751 wants `upload-time` as a TOML datetime; the simple API gives ISO 8601 text."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None  # an index's odd timestamp: the key is optional


def _file_entry(f: IndexFile) -> dict[str, Any]:
    return prune_table(
        {
            "name": f.filename,
            "upload-time": toml_datetime(f.upload_time),
            "url": redact(f.url),
            "size": f.size,
            "hashes": dict(f.hashes),
        }
    )


def environment_marker(interpreter: Interpreter) -> str:
    """The host's environment as a PEP 508 marker: installers refuse the lock elsewhere."""
    system, _, machine = interpreter.platform.partition("_")
    minor = ".".join(interpreter.version.split(".")[:2])
    parts = [
        f"python_version == '{minor}'",
        f"implementation_name == '{interpreter.implementation}'",
    ]
    if system in ("linux", "darwin"):
        parts.insert(0, f"sys_platform == '{system}'")
    if machine:
        parts.insert(1, f"platform_machine == '{machine}'")
    return " and ".join(parts)


def pylock_document(snapshot: Snapshot, located: Located) -> dict[str, Any]:
    """The pylock.toml of a host (pure): envsync's lock with the index files as sources."""
    doc = lock_document(snapshot)
    if isinstance(snapshot.interpreter, Interpreter):
        doc["environments"] = [environment_marker(snapshot.interpreter)]
    packages = []
    unlocked = []
    for package in doc["packages"]:
        name = package["name"]
        chosen = located.files.get(name)
        if chosen is not None:
            for source in SOURCES:
                package.pop(source, None)
            package["index"] = chosen.index
            if chosen.requires_python:
                package["requires-python"] = chosen.requires_python
            key = "wheels" if chosen.filename.endswith(".whl") else "sdist"
            entry = _file_entry(chosen)
            package[key] = [entry] if key == "wheels" else entry
            tool = package.pop("tool")
            package["tool"] = tool  # tables after keys, for people reading the file
            packages.append(package)
        elif name in located.vcs:
            tool = package.pop("tool")
            package["vcs"] = dict(located.vcs[name])
            package["tool"] = tool
            packages.append(package)
        elif name in located.unlocked or not any(s in package for s in SOURCES):
            reason = located.unlocked.get(name, "no file of an index was located for it")
            unlocked.append({"reason": reason, **package})
        else:
            packages.append(package)
    doc["packages"] = packages
    if unlocked:
        doc["tool"]["envsync"][UNLOCKED] = unlocked
    return doc


def dumps_pylock(snapshot: Snapshot, located: Located) -> str:
    return tomli_w.dumps(pylock_document(snapshot, located))
