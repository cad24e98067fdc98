"""The git state of a source checkout: commit, branch, remote, files that differ from HEAD.

Read from .git without running git (gitindex.py reads its files).
"""

from __future__ import annotations

import os
import re

from ..shared import strip_credentials
from .files import read_text
from .gitindex import blob_id, head_files, read_index

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .gitindex import IndexEntry


def git_dir(start: str) -> tuple[str, str, str] | None:
    """(work tree root, git dir, common dir) of the repository holding `start`, or None."""
    path = os.path.abspath(start)
    while True:
        dot = os.path.join(path, ".git")
        if os.path.isdir(dot):
            gitdir = dot
            break
        if os.path.isfile(dot):
            text = read_text(dot).strip()
            if not text.startswith("gitdir:"):
                return None
            gitdir = os.path.normpath(os.path.join(path, text[7:].strip()))
            break
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    common = gitdir
    if os.path.isfile(os.path.join(gitdir, "commondir")):
        common = os.path.normpath(
            os.path.join(gitdir, read_text(os.path.join(gitdir, "commondir")).strip())
        )
    return path, gitdir, common


def resolve_ref(common: str, gitdir: str, ref: str) -> str | None:
    for base in (gitdir, common):
        path = os.path.join(base, ref)
        if os.path.isfile(path):
            value = read_text(path).strip()
            if value.startswith("ref:"):
                return resolve_ref(common, gitdir, value[4:].strip())
            return value
    try:
        packed = read_text(os.path.join(common, "packed-refs"))
    except OSError:
        return None
    for line in packed.splitlines():
        if line and line[0] not in "#^":
            sha, _, name = line.partition(" ")
            if name.strip() == ref:
                return sha
    return None


def git_remote(common: str) -> str | None:
    """The origin's URL (else the first remote's), without its credentials."""
    try:
        text = read_text(os.path.join(common, "config"))
    except OSError:
        return None
    remotes: dict[str, str] = {}
    section = None
    for line in text.splitlines():
        line = line.strip()
        match = re.match(r'^\[remote\s+"([^"]+)"\]', line)
        if match:
            section = match.group(1)
            continue
        if line.startswith("["):
            section = None
            continue
        key, sep, value = line.partition("=")
        if section and sep and key.strip().lower() == "url":
            remotes.setdefault(section, value.strip())
    url = remotes.get("origin") or (remotes[sorted(remotes)[0]] if remotes else None)
    return strip_credentials(url) if url else None


class Keys:
    """Repository-relative paths -> the package's file keys (`sglang/srt/server_args.py`)."""

    def __init__(self, packages: dict[str, str], root: str) -> None:
        self.prefixes: dict[str, str] = {}
        for name, path in packages.items():
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if rel.startswith(".."):
                continue
            folder = os.path.isdir(path)
            self.prefixes[rel + ("/" if folder else "")] = name + (
                "/" if folder else os.path.splitext(path)[1]
            )

    def key(self, rel: str) -> str | None:
        for prefix, key in self.prefixes.items():
            if rel == prefix.rstrip("/") and not prefix.endswith("/"):
                return key
            if prefix.endswith("/") and rel.startswith(prefix):
                return key + rel[len(prefix) :]
        return None


def git_state(packages: dict[str, str], present: set[str]) -> dict[str, Any]:
    """Commit, branch, remote and the package's files that differ from HEAD.

    `packages` maps import names to their folders; `present` holds the package's file
    keys as hashed. Paths come back as package keys (`sglang/srt/server_args.py`).
    """
    first = sorted(packages.values())[0]
    found = git_dir(first if os.path.isdir(first) else os.path.dirname(first))
    if found is None:
        return {"unavailable": "not in a git checkout"}
    root, gitdir, common = found
    try:
        head = read_text(os.path.join(gitdir, "HEAD")).strip()
    except OSError as e:
        return {"unavailable": f"cannot read {gitdir}/HEAD: {e.strerror}"}
    branch = None
    if head.startswith("ref:"):
        ref = head[4:].strip()
        branch = ref[len("refs/heads/") :] if ref.startswith("refs/heads/") else ref
        commit = resolve_ref(common, gitdir, ref)
    else:
        commit = head
    state: dict[str, Any] = {
        "root": root,
        "commit": commit,
        "branch": branch,
        "remote": git_remote(common),
        "modified": [],
        "added": [],
        "deleted": [],
        "untracked": [],
        "against_head": False,
    }
    keys = Keys(packages, root)
    try:
        entries, width, cached = read_index(os.path.join(gitdir, "index"), tuple(keys.prefixes))
        index_mtime = os.stat(os.path.join(gitdir, "index")).st_mtime_ns
    except FileNotFoundError:
        entries, width, cached, index_mtime = [], 20, {}, 0
    except (OSError, ValueError, IndexError) as e:
        state["unavailable_changes"] = f"cannot read the git index: {e}"
        return state
    indexed = working_changes(entries, keys, root, index_mtime, width, state)
    state["untracked"] = sorted(k for k in present if k not in indexed)
    head_ids = head_files(common, commit, list(keys.prefixes), width, cached) if commit else None
    if head_ids == "same":
        state["against_head"] = True
    elif isinstance(head_ids, dict):
        state["against_head"] = True
        in_head = {keys.key(p): oid for p, oid in head_ids.items()}
        for key, entry in indexed.items():
            if key not in in_head:
                state["added"].append(key)
            elif in_head[key] != entry["sha"] and key not in state["modified"]:
                state["modified"].append(key)  # staged
        state["deleted"] += [k for k in in_head if k and k not in indexed]
    for field in ("modified", "added", "deleted"):
        state[field] = sorted(set(state[field]))
    # A file HEAD does not have is added, whatever its working copy holds.
    state["modified"] = [k for k in state["modified"] if k not in state["added"]]
    return state


def working_changes(
    entries: list[IndexEntry],
    keys: Keys,
    root: str,
    index_mtime: int,
    width: int,
    state: dict[str, Any],
) -> dict[str, IndexEntry]:
    """The package's index entries by key; working-tree files that differ from their
    entry go to state["modified"], those gone to state["deleted"]."""
    indexed = {}
    for entry in entries:
        key = keys.key(entry["path"])
        if key is None or entry["stage"] > 1 or entry["mode"] & 0o170000 == 0o040000:
            continue
        indexed[key] = entry
        full = os.path.join(root, entry["path"])
        try:
            st = os.lstat(full)
        except OSError:
            if not entry["skip"]:
                state["deleted"].append(key)
            continue
        if entry["assume"] or entry["skip"]:
            continue
        # Same size, times and inode as when git last hashed it: unchanged. Otherwise the
        # content decides (a stat-only change, or an entry staged without stat data).
        nsec = entry["mtime"][1]
        same_stat = (
            st.st_size == entry["size"]
            and int(st.st_mtime) == entry["mtime"][0]
            and (not nsec or st.st_mtime_ns % 10**9 == nsec)  # 0: a git built without nsec
            and (st.st_ino & 0xFFFFFFFF) == entry["ino"]
        )
        # git's "racy" rule: a file modified no earlier than the index was written may
        # have changed after git hashed it.
        if same_stat and st.st_mtime_ns < index_mtime:
            continue
        try:
            if blob_id(full, entry["mode"], width) != entry["sha"]:
                state["modified"].append(key)
        except OSError:
            state["modified"].append(key)
    return indexed
