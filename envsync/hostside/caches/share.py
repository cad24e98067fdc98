"""Facts shared across hosts: packs of parsed facts, given by envsync, made and sent back.

A pack holds the parsed facts (store.py's entries, by content) of the startup graph's
files of one distribution, as its RECORD lists them (identity ["dist", name, version,
RECORD's sha256]), or of one file outside every RECORD (patched, editable, untracked:
["file", sha256]). Its text is known by its digest (shared.text_digest), and it names the
store it was made for (this host side's digest and Python: `tag`).

envsync gives a host the packs other hosts sent (collect/share.py), on stdin after the
bundle, with their digests and the digests envsync holds (read_payload). A walk
takes a pack's entries (store.Store.seeds) only when its text matches its digest, it was
made for this store's tag, and its entries match this host's files: a distribution's pack
only where this host has that distribution with a RECORD of that sha256 and every entry's
content digest is the one RECORD lists for the module's file; a file's pack only with
entries of that content. Anything else is refused, with a note, and ignored. Even a pack
taken is only a hint: an entry is used for a file whose own content digest is the entry's
(the store's key), so a pack can spare a parse, never change the facts of another file.

After a walk the graph's packs are made again (a pack whose entries are the same as one
made before is not encoded again: its digest is kept by its keys), and those envsync does
not hold (`held`) are sent back (collect.py, dumps_facts).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys

from ..facts.files import file_sha256, keep_digest, known_digest
from ..shared import text_digest
from .store import read_file, touch, write_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Tuple

    from .store import Store

    Pack = Tuple[List[Any], Optional[bytes], str]  # identity, text (None: not encoded), digest
    HashCache = Dict[str, List[Any]]

FIELDS = ("defines", "all", "dynamic", "stars", "imports")  # what a walk reads of facts


def read_payload(options: dict[str, Any]) -> dict[str, Any]:
    """What envsync gave on stdin after the bundle ("share": {"bytes": N} says how much,
    read exactly: a runner may leave stdin open): a line of JSON, {"give": [DIGEST...],
    "sizes": [...], "held": [DIGEST...]}, then each pack's text and a newline."""
    share = options.get("share")
    size = share.get("bytes") if isinstance(share, dict) else None
    if not isinstance(size, int) or size <= 0:
        return {}
    data = sys.stdin.buffer.read(size)
    head, _, data = data.partition(b"\n")
    try:
        told = json.loads(head.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(told, dict):
        return {}
    texts = []
    for n in told.get("sizes") or []:
        n = n if isinstance(n, int) and n > 0 else 0
        texts.append(data[: max(0, n - 1)])
        data = data[n:]
    told["texts"] = texts
    return told


def store_id(folder: str | None) -> str | None:
    """The id of the facts store in `folder`, made with it: a store made anew (removed,
    pruned whole, a new disk) has another, so envsync knows it holds none of what it was
    given (None: no store)."""
    if not folder:
        return None
    path = os.path.join(folder, "id")
    try:
        found = read_file(path)[0][:64].decode("ascii", "replace").strip()
        if len(found) == 32:
            touch(path)
            return found
    except (OSError, ValueError):  # none, or not sealed by this run's key: a new store
        pass
    made = base64.b16encode(os.urandom(16)).decode().lower()
    return made if write_file(path, made.encode()) else None


def stale(options: dict[str, Any], given: dict[str, Any], folder: str | None) -> str | None:
    """This store's id, where envsync named another (what it says this host holds is not
    here: it asks again, giving every pack); None: go on."""
    expected = given.get("store")
    if not isinstance(options.get("share"), dict) or not isinstance(expected, str):
        return None
    here = store_id(folder)
    return here if here is not None and here != expected else None


class Skip(str):
    """Why a pack is not for this host (not a refusal)."""


class Share:
    """What this run shares: the packs given (checked when a walk needs them), the
    distributions they are checked against, and the packs made after the walk."""

    def __init__(
        self,
        options: dict[str, Any],
        given: dict[str, Any],
        distributions: list[dict[str, Any]],
        hashes: HashCache | None = None,
    ) -> None:
        share = options.get("share")
        self.enabled = isinstance(share, dict)
        # envsync knows nothing this host holds: walk even a graph cached whole
        self.walk = isinstance(share, dict) and share.get("walk") is True
        self.give = [str(d) for d in given.get("give") or []]
        self.held = {str(d) for d in given.get("held") or []}
        self.given: list[bytes] = list(given.get("texts") or [])
        self.distributions = distributions
        self.hashes = hashes
        self.refused: list[str] = []
        self.store: str | None = None  # the facts store's id (store_id)
        self.seeded_by: Store | None = None  # the store seeded (its count of seeds used)
        self.taken = 0  # packs taken into the store's seeds
        self.packs: list[Pack] = []
        self.made = False  # a walk ran and made the graph's packs
        self._records: dict[str, dict[str, str] | None] = {}
        self._record_shas: dict[str, str | None] = {}
        self._dists: dict[tuple[str, str], dict[str, Any]] = {
            (str(d.get("name")), str(d.get("version"))): d for d in distributions
        }

    # -- given packs, checked and taken

    def seed(self, store: Store) -> None:
        """Take the given packs' entries into `store`'s seeds (before a walk)."""
        if not store.folder:
            return
        self.store = store_id(store.folder)
        self.seeded_by = store
        tag = os.path.basename(store.folder)
        for n, digest in enumerate(self.give):
            text = self.given[n] if n < len(self.given) else b""
            why = self.check(text, digest, tag)
            if isinstance(why, Skip):
                continue  # not for this host: another Python, another version
            if isinstance(why, str):
                self.refused.append(f"pack {digest[:12]}: {why}")
                continue
            self.taken += 1
            store.seed_pack(digest, text, why)
        self.given = []

    def check(self, text: bytes, digest: str, tag: str) -> dict[str, Any] | str:
        """A given pack's entries, or why it is refused (a Skip: why it is not for this
        host, which is no fault of the pack)."""
        if text_digest(text) != digest:
            return "its text does not match its digest"
        try:
            pack = json.loads(text.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            return "not JSON"
        if not isinstance(pack, dict) or not isinstance(pack.get("entries"), dict):
            return "not a pack"
        if pack.get("tag") != tag:
            return Skip("made for another host side or Python")
        identity = pack.get("id")
        entries: dict[str, Any] = pack["entries"]
        if isinstance(identity, list) and identity[:1] == ["mentions"]:
            return mention_entries(entries)
        for key, facts in entries.items():
            if not isinstance(facts, dict) or not all(f in facts for f in FIELDS):
                return f"the facts of {key.split(':')[1:2]} are not facts"
        if isinstance(identity, list) and len(identity) == 2 and identity[0] == "file":
            sha = str(identity[1])
            if any(key.split(":", 1)[0] != sha for key in entries):
                return "an entry is for another file's content"
            return entries
        if not (isinstance(identity, list) and len(identity) == 4 and identity[0] == "dist"):
            return "no identity"
        _, name, version, record_sha = identity
        dist = self._dists.get((str(name), str(version)))
        if dist is None:
            return Skip(f"{name} {version} is not installed here")
        rows = self.record(dist, str(record_sha))
        if rows is None:
            return self._alike(name, version, dist, entries)
        for key in entries:
            if not _matches(key, rows):
                return f"{key.split(':')[1:2]} does not match {name}'s RECORD here"
        return entries

    def _alike(
        self, name: Any, version: Any, dist: dict[str, Any], entries: dict[str, Any]
    ) -> dict[str, Any] | str:
        """The entries of a pack made where the distribution's RECORD is another: those
        whose file this host's RECORD gives the same content. Two venvs of one version
        differ at least in their scripts' rows (a script names its venv's python), so
        the rest of the files are taken by their rows, one by one."""
        rows = self.record(dist)
        if rows is None:
            return Skip(f"{name} {version} has no RECORD here")
        taken = {key: facts for key, facts in entries.items() if _matches(key, rows)}
        return taken or Skip(f"{name} {version}'s files differ here")

    # -- RECORD: a distribution's files and their digests

    def record_sha(self, dist: dict[str, Any]) -> str | None:
        """The sha256 of a distribution's RECORD file (None: it has none), once a run."""
        if not dist.get("location") or not dist.get("metadata_dir"):
            return None
        path = os.path.join(dist["location"], dist["metadata_dir"], "RECORD")
        if path not in self._record_shas:
            self._record_shas[path] = self._hash_record(path)
        return self._record_shas[path]

    def _hash_record(self, path: str) -> str | None:
        try:
            st = os.lstat(path)
            known = known_digest(path, st, self.hashes)
            if known is not None:
                return known
            sha = file_sha256(path)
        except OSError:
            return None
        keep_digest(path, st, sha, self.hashes)
        return sha

    def record(self, dist: dict[str, Any], expected: str | None = None) -> dict[str, str] | None:
        """{path as RECORD spells it: sha256 hex} of a distribution (None: no RECORD, or
        not the one `expected` names)."""
        sha = self.record_sha(dist)
        if sha is None or (expected is not None and sha != expected):
            return None
        if sha not in self._records:
            path = os.path.join(dist["location"], dist["metadata_dir"], "RECORD")
            try:
                with open(path, "rb") as f:
                    text = f.read().decode("utf-8", "replace")
            except OSError:
                self._records[sha] = None
                return None
            self._records[sha] = record_rows(text)
        return self._records[sha]

    # -- the graph's packs, made after a walk

    def make(
        self,
        keys: dict[str, str],
        modules: dict[str, Any],
        store: Store,
        mentions: dict[str, Any] | None = None,
    ) -> None:
        """The packs of the graph's files (`keys`: module -> its facts' store key), and
        one of its text searches' answers (`mentions`: key -> answers, mentions.py)."""
        if not self.enabled or not store.folder:
            return
        self.made = True
        self.store = store_id(store.folder)
        tag = os.path.basename(store.folder)
        owners: dict[str, list[dict[str, Any]]] = {}
        for dist in self.distributions:
            for top in dist.get("top_level") or []:
                owners.setdefault(str(top), []).append(dist)
        groups: dict[str, tuple[list[Any], dict[str, Any]]] = {}
        for name, key in sorted(keys.items()):
            facts = store.get(key)
            info = modules.get(name) or {}
            sha = info.get("sha256")
            if facts is None or not isinstance(sha, str):
                continue
            identity = self.owner(name, key, info.get("file"), sha, owners)
            group = groups.setdefault(json.dumps(identity), (identity, {}))
            group[1][key] = facts
        for identity, entries in groups.values():
            mark = (
                "pack:"
                + hashlib.sha256(
                    json.dumps([tag, identity, sorted(entries)]).encode("utf-8")
                ).hexdigest()
            )
            digest = store.get(mark)
            if isinstance(digest, str) and digest in self.held:
                self.packs.append((identity, None, digest))
                continue
            pack = {"v": 1, "tag": tag, "id": identity, "entries": entries}
            text = json.dumps(pack, sort_keys=True, separators=(",", ":")).encode("utf-8")
            digest = text_digest(text)
            if store.get(mark) != digest:
                store.put(mark, digest)
            self.packs.append((identity, text, digest))
        if mentions:
            # keyed by the module's files and their digests: a host whose files are not
            # these (another image, other paths) never looks one up
            found = {k: v for k, v in sorted(mentions.items()) if v}
            identity = ["mentions", text_digest(json.dumps(sorted(found)).encode())]
            pack = {"v": 1, "tag": tag, "id": identity, "entries": found}
            text = json.dumps(pack, sort_keys=True, separators=(",", ":")).encode("utf-8")
            self.packs.append((identity, text, text_digest(text)))

    def owner(
        self,
        name: str,
        key: str,
        path: Any,
        sha: str,
        owners: dict[str, list[dict[str, Any]]],
    ) -> list[Any]:
        """The pack a module's facts go in: its distribution's, where RECORD lists its file
        at the module's own path with this content; else its file's own."""
        parts = key.split(":")
        if isinstance(path, str) and len(parts) >= 3:
            rel = module_path(name, parts[2] == "1")
            for dist in owners.get(name.partition(".")[0], ()):
                location = dist.get("location") or ""
                if os.path.join(location, rel) != path:
                    continue
                rows = self.record(dist)
                if rows is not None and rows.get(rel) == sha:
                    return ["dist", dist["name"], dist["version"], self.record_sha(dist)]
        return ["file", sha]

    def header(self) -> dict[str, Any] | None:
        """What the first line says of sharing (None: nothing to say)."""
        if not self.enabled or not (self.made or self.give or self.refused):
            return None
        return {
            "store": self.store,
            "index": [
                [identity, digest, text is not None and digest not in self.held]
                for identity, text, digest in self.packs
            ],
            "taken": self.taken,
            "seeded": self.seeded_by.seeded if self.seeded_by is not None else 0,
            "refused": self.refused,
        }

    def lines(self) -> list[bytes]:
        """The texts of the packs sent, in the index's order."""
        return [
            text + b"\n"
            for _, text, digest in self.packs
            if text is not None and digest not in self.held
        ]


def mention_entries(entries: dict[str, Any]) -> dict[str, Any] | str:
    """A pack of text searches' answers (mentions.py), or why it is refused: each key is
    of the files it searched and their digests, so that only a host whose files are those
    looks it up; each answer a tier, 0 to 2."""
    for key, answers in entries.items():
        if not key.startswith("mentions:") or not isinstance(answers, dict):
            return "an entry of its answers is not one"
        if not all(isinstance(v, int) and 0 <= v <= 2 for v in answers.values()):
            return "an answer is not a tier"
    return entries


def _matches(key: str, rows: dict[str, str]) -> bool:
    """Whether a pack's entry (`SHA:MODULE:IS_PACKAGE`) is for the content that this
    host's RECORD gives the module's file."""
    parts = key.split(":")
    return len(parts) >= 3 and rows.get(module_path(parts[1], parts[2] == "1")) == parts[0]


def module_path(name: str, is_package: bool) -> str:
    """Where a module's file is, relative to its sys.path entry, as RECORD spells it."""
    rel = name.replace(".", "/")
    return rel + "/__init__.py" if is_package else rel + ".py"


def record_rows(text: str) -> dict[str, str]:
    """RECORD's .py rows as {path: sha256 hex} (the only rows a pack's entries can name)."""
    rows: dict[str, str] = {}
    for line in text.splitlines():
        if ",sha256=" not in line or '"' in line:
            continue  # no digest, or a quoted path (a comma in it): not a module's
        path, _, rest = line.partition(",sha256=")
        if not path.endswith(".py"):
            continue
        b64 = rest.split(",", 1)[0]
        try:
            raw = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4))
        except (ValueError, TypeError):
            continue
        rows[path] = raw.hex()
    return rows
