"""Raw differences between two snapshots, computed with deepdiff (pure)."""

from __future__ import annotations

from typing import Any

from deepdiff import DeepDiff

from envsync.findings import Difference
from envsync.model import GpuInfo, Snapshot, Unavailable
from envsync.vocab import KIND_RANK, Kind

# The kind of a difference in each section of facts (environment variables: system).
_FACT_KINDS: dict[str, Kind] = {
    "python": "python",
    "torch": "torch",
    "gpu": "gpu",
    "system": "system",
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
_INSTALL_RECORDS = ("/direct_url.json", "/INSTALLER", "/REQUESTED")


def _package_file(path: str) -> bool:
    if path.startswith("../"):
        return False  # scripts in bin/ carry each venv's own interpreter path
    return not (".dist-info/" in path and path.endswith(_INSTALL_RECORDS))


def view(snapshot: Snapshot, *, partial_names: set[str] | None = None) -> dict[str, Any]:
    """The comparable part of a snapshot: what may drift, keyed for stable deepdiff paths."""
    dists = {}
    files = {}
    for dist in snapshot.distributions:
        if partial_names is not None and dist.name not in partial_names:
            continue
        dists[dist.name] = dist.version
        if dist.files is not None:
            files[dist.name] = {
                path: digest for path, digest in dist.files.items() if _package_file(path)
            }
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
        "env": dict(snapshot.env),
    }


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
    ref = view(reference)
    tgt = view(target, partial_names=partial)
    if reference.partial:
        for key in ("files", "python", "torch", "gpu", "system", "env"):
            ref[key] = tgt[key] = {}
    for section in ("python", "torch", "gpu", "system"):
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
    tree = DeepDiff(ref, tgt, view="tree")
    out: list[Difference] = []
    for change, levels in tree.items():
        for level in levels:
            path = level.path(output_format="list")
            before = None if change == "dictionary_item_added" else level.t1
            after = None if change == "dictionary_item_removed" else level.t2
            out.extend(_expand(path, before, after))
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
