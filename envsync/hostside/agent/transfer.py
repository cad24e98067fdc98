"""Files in and out of an environment: tar archives with their sha256, atomic writes.

Every file is written through a fresh temporary one (never through a planted symlink);
every archive entry is checked before the first is written, and every written file
against the sender's manifest after.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile

from ..shared import temp_name
from .backups import backup_dir
from .escapes import Bounds, describe, file_ways_out
from .failure import Failure, refuse
from .installer import note_writes
from .paths import STATE, dist_paths, in_package, inside, installed, package_root, relative

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import IO

    from ..protocol import PackRequest, UnpackReply, UnpackRequest, WriteReply, WriteRequest

MANIFEST_MEMBER = "__envsync_sha256__.json"


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def put(target: str, source: IO[bytes], mode: int, mtime: float | None = None) -> None:
    """Write a file through a fresh temporary one (never through a planted symlink)."""
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        os.makedirs(directory)
    tmp = temp_name(target)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(tmp, flags, 0o600)
    except FileExistsError:
        os.unlink(tmp)  # a leftover of a killed run (unlinking a link is harmless)
        fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            shutil.copyfileobj(source, f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode & 0o777)
        if mtime is not None:
            os.utime(tmp, (mtime, mtime))
        os.replace(tmp, target)
    except BaseException:
        unlink(tmp)
        raise


def unlink(path: str) -> None:
    """Remove a file if it is there (best effort)."""
    try:
        os.unlink(path)
    except OSError:
        return


def op_pack(op: PackRequest) -> bytes:
    if "paths" in op:
        for full in op["paths"].values():
            if not in_package(full):
                refuse(full, "not in a package directory of this environment")
            if os.path.islink(full) or not os.path.isfile(full):
                raise Failure("not-installed", f"{full} is not a file here")
        return pack(op["paths"])
    files = op.get("files")
    if files is None:
        found = installed(op["dist"])
        if found is None:
            raise Failure("not-installed", "{} is not installed here".format(op["dist"]))
        location, entry, record = found
        root = os.path.realpath(location)
        files = [os.path.relpath(p, root) for p in dist_paths(location, entry, record)]
    else:
        root = package_root(op["root"])
        for rel in files:
            relative(root, rel)
    entries = {}
    for rel in files:
        full = os.path.join(root, rel)
        # Scripts in bin/ carry this venv's own path: not copied.
        if inside(root, rel) and os.path.isfile(full) and not os.path.islink(full):
            entries[rel] = full
    return pack(entries)


def pack(entries: dict[str, str]) -> bytes:
    """A tar of files {name in the archive: path here}, with a manifest of their sha256."""
    hashes = {}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, full in sorted(entries.items()):
            hashes[name] = sha256(full)
            tar.add(full, arcname=name, recursive=False)
        data = json.dumps(hashes).encode()
        info = tarfile.TarInfo(MANIFEST_MEMBER)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def unpack(
    payload: bytes,
    place: Callable[[tarfile.TarInfo], str | None],
    remove: list[str],
    where: str | None = None,
    folder: str | None = None,
) -> UnpackReply:
    """Write each archived file where `place(member)` says (every entry checked before the
    first is written, none may leave the environment, nor `folder` they go into), delete
    `remove` (absolute paths), then check every written file's sha256 against the
    sender's manifest."""
    written = {}
    with tarfile.open(fileobj=io.BytesIO(payload)) as tar:
        members = tar.getmembers()
        expected: dict[str, str] = {}
        targets = []
        for member in members:
            if member.name == MANIFEST_MEMBER:
                if member.isfile():
                    source = tar.extractfile(member)
                    expected = json.loads(source.read().decode()) if source else {}
                continue
            if not member.isfile():
                refuse(member.name, "not a regular file")
            target = place(member)
            if target is None:
                refuse(member.name, "not a file of the plan")
            targets.append((member, target))
        stay_inside([*(t for _, t in targets), *remove], folder)
        note_writes(where, made(t for _, t in targets))  # the apply's own, for its rollback
        for member, target in targets:
            data = tar.extractfile(member)
            if data is None:
                continue
            put(target, data, member.mode)
            written[member.name] = sha256(target)
    for path in remove:
        if os.path.isfile(path) or os.path.islink(path):
            os.unlink(path)
    bad = sorted(rel for rel, digest in expected.items() if written.get(rel) != digest)
    if bad:
        raise Failure("hash-mismatch", "written files differ from the reference: " + ", ".join(bad))
    return {"written": sorted(written)}


def made(targets: Iterable[str]) -> list[str]:
    """The files about to be written, and the folders that writing them will make."""
    out = []
    for target in targets:
        out.append(target)
        parent = os.path.dirname(target)
        while parent and not os.path.isdir(parent) and parent != os.path.dirname(parent):
            out.append(parent)
            parent = os.path.dirname(parent)
    return out


def op_unpack(op: UnpackRequest, payload: bytes) -> UnpackReply:
    """Files under `root` (by their relative names), or each key at its own path; every
    path inside the environment's package directories (an editable's source tree too).
    With the apply's backup `id`, what it writes is noted there first."""
    where = None
    if op.get("id") is not None:
        where = backup_dir(op["id"])
    if "paths" in op:
        paths = op["paths"]
        for full in list(paths.values()) + list(op.get("remove", [])):
            if not in_package(full):
                refuse(full, "not in a package directory of this environment")
        result = unpack(payload, lambda m: paths.get(m.name), op.get("remove", []), where)
        missing = sorted(set(paths) - set(result["written"]))
        if missing:
            raise Failure("hash-mismatch", "the archive lacks " + ", ".join(missing))
        return result
    root = package_root(op["root"])
    remove = [relative(root, r) for r in op.get("remove", [])]
    return unpack(payload, lambda m: relative(root, m.name), remove, where, root)


def stay_inside(paths: list[str], folder: str | None = None) -> None:
    """Refuse, before the first write, a copy whose files or removals (or the `folder` it
    writes into) would land outside the environment, through a link on their way."""
    bounds = Bounds()
    found = file_ways_out(paths, bounds)
    out = bounds.way_out(folder, whole=True) if folder is not None else None
    if out is not None:
        found.setdefault(out, []).append(f"the folder {folder}")
    if found:
        raise Failure(
            "leaves-environment",
            f"refusing the copy: {describe(found)}: outside this environment "
            f"({STATE.prefix}); nothing was changed",
        )


def op_write(op: WriteRequest) -> WriteReply:
    """A file of envsync's own (a backup's constraints): only under ~/.envsync/backups."""
    path = op["path"]
    backups = STATE.backups
    if not isinstance(path, str) or not inside(backups, os.path.relpath(path, backups)):
        refuse(path, "not in this environment's backup folder")
    put(path, io.BytesIO(op["text"].encode()), 0o644)
    return {}
