"""Raw differences between two snapshots, computed with deepdiff (pure)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from envsync.hostside.shared import package_file
from envsync.model.environment import Distribution, GitState, GpuInfo, Nccl, Snapshot, Unavailable
from envsync.model.findings import Difference, short_hash
from envsync.model.vocab import KIND_RANK, Kind

# The kind of a difference in each section of facts (environment variables: system).
_FACT_KINDS: dict[str, Kind] = {
    "python": "python",
    "torch": "torch",
    "gpu": "gpu",
    "system": "system",
    "nccl": "system",
    "env": "system",
}

_INTERPRETER_KEYS = ("version", "implementation", "interpreter_tag", "abi_tag", "platform")
_TORCH_KEYS = ("version", "cuda", "git_version", "hip", "arch_list", "cudnn", "nccl")
_SYSTEM_KEYS = ("os", "kernel", "machine", "glibc")


def _known(value: object) -> bool:
    return value is not None and not isinstance(value, Unavailable)


def _facts(obj: object, keys: tuple[str, ...]) -> dict[str, Any]:
    if not _known(obj):
        return {}
    out: dict[str, Any] = {}
    for key in keys:
        value = getattr(obj, key)
        if isinstance(value, tuple):
            value = " ".join(value)
        if _known(value):
            out[key] = value
    return out


# Written by the installer, not shipped by the package: how it was installed (already a
# fact of the distribution), not what it contains.
_INSTALL_RECORDS = (
    "/direct_url.json",
    "/INSTALLER",
    "/REQUESTED",
    "/uv_cache.json",
    "/uv_build.json",
)
_METADATA_DIRS = (".dist-info", ".egg-info")


@functools.lru_cache(maxsize=1 << 16)
def _package_file(path: str) -> bool:
    # Pure on a path, and a fleet's hosts hold the same paths: each is judged once.
    if path.startswith("../"):
        return False  # scripts in bin/ carry each venv's own interpreter path
    first, sep, _ = path.partition("/")
    if not sep and (path.startswith("__editable__") or path.endswith(".pth")):
        return False  # an editable install's hook into sys.path, not the package
    if first.endswith(".dist-info"):
        return not path.endswith(_INSTALL_RECORDS)
    return package_file(path)


def _comparable(
    dist: Distribution, either_source: bool, peer: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The files of a watched distribution that belong to the package. When either host
    runs it from a source tree, the metadata folders differ by how it was installed
    (a wheel's against an editable build's), not by what the package holds. A file that
    hashes the same in `peer` (the other host's files of the same version) is left out
    first: it can never differ, and it is most of them."""
    assert dist.files is not None
    same = peer or {}
    return {
        path: digest
        for path, digest in dist.files.items()
        if same.get(path) != digest
        and _package_file(path)
        and not (either_source and path.partition("/")[0].endswith(_METADATA_DIRS))
    }


def comparable_files(dist: Distribution) -> dict[str, str]:
    """A watched distribution's files that a diff compares (on its own, no peer)."""
    return _comparable(dist, dist.source is not None)


def _commit(dist: Distribution | None) -> str | None:
    if dist is None or dist.source is None or not isinstance(dist.source.git, GitState):
        return None
    return dist.source.git.commit


def _commit_differences(reference: Snapshot, target: Snapshot) -> list[Difference]:
    """A watched package checked out at another commit on each host."""
    out = []
    for ref in reference.distributions:
        tgt = target.distribution(ref.name)
        a, b = _commit(ref), _commit(tgt)
        if a and b and a != b:
            out.append(
                Difference(
                    kind="commit",
                    section="commits",
                    key=ref.name,
                    dist=ref.name,
                    reference=a,
                    target=b,
                )
            )
    return out


def view(
    snapshot: Snapshot,
    *,
    partial_names: set[str] | None = None,
    other: Snapshot | None = None,
) -> dict[str, Any]:
    """The comparable part of a snapshot: what may drift, keyed for stable deepdiff paths."""
    dists = {}
    files = {}
    for dist in snapshot.distributions:
        if partial_names is not None and dist.name not in partial_names:
            continue
        dists[dist.name] = dist.version
        if dist.files is not None:
            peer = other.distribution(dist.name) if other is not None else None
            either = dist.source is not None or (peer is not None and peer.source is not None)
            same = peer.files if peer is not None and peer.version == dist.version else None
            files[dist.name] = _comparable(dist, either, same)
    gpu: dict[str, Any] = {}
    if isinstance(snapshot.gpu, GpuInfo):
        gpu = {
            "driver": snapshot.gpu.driver_version,
            "cuda_driver": snapshot.gpu.cuda_driver_version,
            "gpus": ", ".join(
                sorted({f"{g.name} (sm {g.compute_capability})" for g in snapshot.gpu.gpus})
            )
            or None,
            "count": len(snapshot.gpu.gpus),
        }
        gpu = {k: v for k, v in gpu.items() if v is not None}
    return {
        "distributions": dists,
        "files": files,
        "python": _facts(snapshot.interpreter, _INTERPRETER_KEYS),
        "torch": _facts(snapshot.torch, _TORCH_KEYS),
        "gpu": gpu,
        "system": _facts(snapshot.system, _SYSTEM_KEYS),
        "nccl": _nccl(snapshot.nccl),
        "env": dict(snapshot.env),
    }


def _nccl(nccl: Nccl | Unavailable | None) -> dict[str, Any]:
    """NCCL as a diff compares it: its version, the library's hash, the net plugins."""
    if not isinstance(nccl, Nccl):
        return {}
    out: dict[str, Any] = {
        "version": nccl.version,
        "library": nccl.sha256,
        "net plugins": ", ".join(f"{p.name} {short_hash(p.sha256)}" for p in nccl.net_plugins)
        or "none",
    }
    return {k: v for k, v in out.items() if v is not None}


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return None
    return str(value)


def differences(reference: Snapshot, target: Snapshot) -> list[Difference]:
    """What differs between reference and target, in a stable order.

    A partial reference (a requirements file) is compared on its own packages only; a
    fact that either side could not collect is not a difference.
    """
    partial = {d.name for d in reference.distributions} if reference.partial else None
    ref = view(reference, other=target)
    tgt = view(target, partial_names=partial, other=reference)
    if reference.partial:
        for key in ("files", "python", "torch", "gpu", "system", "nccl", "env"):
            ref[key] = tgt[key] = {}
    for section in ("python", "torch", "gpu", "system", "nccl"):
        # Unknown on one side (unavailable, or from a lock without it) is not drift.
        if not ref[section] or not tgt[section]:
            ref[section] = tgt[section] = {}
    files_ref, files_tgt = ref["files"], tgt["files"]
    for name in set(files_ref) | set(files_tgt):
        # Files are compared only between equal versions: another version's files differ
        # by definition, and its `version` difference already says so.
        if (
            name not in files_ref
            or name not in files_tgt
            or (ref["distributions"].get(name) != tgt["distributions"].get(name))
        ):
            files_ref.pop(name, None)
            files_tgt.pop(name, None)
    for name in files_ref:
        # Thousands of files hash the same on both sides: leave them out of deepdiff's work.
        a, b = files_ref[name], files_tgt[name]
        same = [p for p, digest in a.items() if b.get(p) == digest]
        for path in same:
            del a[path], b[path]
    out: list[Difference] = []
    tree: Mapping[str, Any] = {}
    if ref != tgt:
        from deepdiff import DeepDiff  # tens of milliseconds to import: only when needed

        tree = DeepDiff(ref, tgt, view="tree")
    for change, levels in tree.items():
        for level in levels:
            path = level.path(output_format="list")
            before = None if change == "dictionary_item_added" else level.t1
            after = None if change == "dictionary_item_removed" else level.t2
            out.extend(_expand(path, before, after))
    if not reference.partial:
        out += _commit_differences(reference, target)
    return sorted(out, key=lambda d: (KIND_RANK[d.kind], d.subject))


def _expand(path: list[Any], before: Any, after: Any) -> list[Difference]:
    """deepdiff reports two tables with no key in common as one changed value: split it."""
    if isinstance(before, dict) or isinstance(after, dict):
        if len(path) >= 3 or (
            path and path[0] not in ("distributions", "files") and len(path) >= 2
        ):
            return _to_differences(path, before, after)
        b = before if isinstance(before, dict) else {}
        a = after if isinstance(after, dict) else {}
        out: list[Difference] = []
        for key in sorted(set(b) | set(a), key=str):
            if b.get(key) != a.get(key):
                out.extend(_expand([*path, key], b.get(key), a.get(key)))
        return out
    return _to_differences(path, before, after)


def _to_differences(path: list[Any], before: Any, after: Any) -> list[Difference]:
    section = path[0]
    if len(path) < 2:
        return []
    values = {"reference": _text(before), "target": _text(after)}
    kind: Kind
    if section == "distributions":
        kind = "missing" if after is None else "extra" if before is None else "version"
        return [Difference(kind=kind, section=section, key=path[1], **values)]
    if section == "files":
        if len(path) < 3:
            return []  # both sides hold the same distributions' tables (see differences())
        return [Difference(kind="file", section=section, key=path[2], dist=path[1], **values)]
    kind = _FACT_KINDS[section]
    return [Difference(kind=kind, section=section, key=str(path[1]), **values)]
