"""Facts shared across hosts: the packs of parsed facts hosts sent, given to hosts that lack them.

A host that walked its startup graph sends the packs of its files' facts that envsync does
not hold (hostside/caches/share.py: one per distribution, by name, version and RECORD digest, and
one per file outside its RECORD), each known by the digest of its text. envsync keeps them
in its received folder, beside the parts (wire.py, under the same cap and LRU rule), and
keeps two records:

- per host (its name, interpreter, cache folder and host side): which packs it holds, those
  it sent and those it was given;
- per command (the startup roots a probe walks, and the host side): every pack its hosts'
  graphs had, newest last.

A probe is given the command's packs its host does not hold: a host never seen gets what
the hosts of its command showed envsync (a target against a warm reference parses only
what differs), and a host that is known gets what others learned since (a version another
host had). A pack is given once per host: the host keeps the entries it uses. The host
checks every pack against its own files and refuses one that does not match; envsync
checks every copy against its digest before giving it (a damaged copy is removed).

    received/pack-DIGEST.json          a pack as a host sent it
    received/packs-host-KEY.json       {"held": [...], "index": [...]}: one host's packs
    received/packs-command-KEY.json    {"index": [...]}: the packs of a command's graphs

A record carries an HMAC made with this machine's key of kept verdicts (verdicts.py): a
record planted in the cache folder, or restored from another machine's, names no pack
that is given. A pack is trusted as the host that sent it is: its facts are checked
against the receiving host's files (their content digests), not parsed again. So packs
travel only within a trust: the hosts that name the same `trust` in the inventory (one
image, one owner). A host that names none is given only what it sent itself: a host whose
interpreter lies in what it sends can then change no other host's verdict (the cost: a
new host's first diff parses its whole startup, as no other host's facts are given it).

`waves` (collect/__init__.py): of several hosts of one command that envsync does not know,
one is collected first where it holds no pack of the command, and of the rest, one per
image (the interpreter's path) before the others of that image, which are then given its
packs (a fleet of one image parses each file once, against a warm reference too).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envsync.collect import wire
from envsync.errors import CollectError
from envsync.hostside.shared import text_digest
from envsync.model.inventory import HostSpec
from envsync.runner.bundle import bundle

INDEX_SIZE = 8192  # packs a command's record lists (the newest)
_LOCK = threading.Lock()
_NOTES: dict[str, str] = {}  # host -> what sharing did on its last collection here


@dataclass(frozen=True, slots=True, kw_only=True)
class Offer:
    """What a probe is given: the packs' digests and texts, and the digests envsync holds
    for its host (not sent back)."""

    host: str  # the host's record key
    command: str  # the command's record key
    give: tuple[str, ...] = ()
    texts: tuple[bytes, ...] = ()
    held: tuple[str, ...] = ()
    # the id of the host's facts store as it last said (None: not checked): a store made
    # anew since answers "again" (Again), and is given every pack
    store: str | None = None
    # envsync holds no record of the host: its graph is walked even where its own cache
    # holds it whole (cheap with its facts at hand), so that it sends its packs
    walk: bool = False

    def options(self) -> dict[str, Any]:
        """The probe's "share" option: how much follows the bundle on its stdin."""
        return {"bytes": len(self.payload()), "walk": self.walk}

    def payload(self) -> bytes:
        """What follows the bundle on the probe's stdin: a line of JSON (the digests given,
        their sizes, those held), then each text on a line."""
        sizes = [len(text) + 1 for text in self.texts]
        head = {
            "give": list(self.give),
            "sizes": sizes,
            "held": list(self.held),
            "store": self.store,
        }
        return b"".join([json.dumps(head).encode() + b"\n", *(t + b"\n" for t in self.texts)])


def _key(*parts: object) -> str:
    return text_digest(json.dumps([*parts, bundle().digest]).encode())


def host_key(host: HostSpec, cache_dir: str | None) -> str:
    """Whose store a record is of: the host, its interpreter, its cache folder."""
    return _key("host", host.name, host.python, list(host.exec), cache_dir)


def circle(host: HostSpec, cache_dir: str | None) -> str:
    """Whose packs a host may be given: those of the hosts of its trust (the inventory's
    `trust`), else its own only (a host's facts decide its own verdicts alone)."""
    return f"trust {host.trust}" if host.trust else "host " + host_key(host, cache_dir)


def command_key(roots: Sequence[str], internal: Sequence[str], main: str | None, trust: str) -> str:
    """Which graphs' packs serve a host: those of the same startup roots, sent by the
    hosts of its trust (`circle`)."""
    return _key("command", list(roots), list(internal), main, trust)


def secret() -> bytes | None:
    """This machine's key, that of kept verdicts too (seal.py)."""
    from envsync.seal import secret as machine_secret

    return machine_secret()


def _mac(key: bytes, body: dict[str, Any]) -> str:
    text = json.dumps(body, sort_keys=True).encode()
    return hmac.new(key, b"envsync-packs\n" + text, hashlib.sha256).hexdigest()


def _read(path: Path) -> dict[str, Any] | None:
    """A record, if this machine's envsync wrote it (its HMAC, with the key of kept
    verdicts): a record planted in the cache folder, or restored from another machine's,
    is not read, so that no pack it names is given to a host."""
    key = secret()
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if key is None or not isinstance(data, dict) or not isinstance(data.get("mac"), str):
        return None
    body = data.get("body")
    if not isinstance(body, dict) or not hmac.compare_digest(data["mac"], _mac(key, body)):
        return None
    return body


def _write(path: Path, body: dict[str, Any]) -> None:
    key = secret()
    if key is None:
        return
    wire.write(path, json.dumps({"body": body, "mac": _mac(key, body)}).encode())


def _digests(record: dict[str, Any] | None, field: str) -> list[str]:
    found = (record or {}).get(field)
    if not isinstance(found, list):
        return []
    return [d for d in found if isinstance(d, str) and len(d) == 32]


def _pack(where: Path, digest: str) -> Path:
    return where / f"pack-{digest}.json"


class Again(CollectError):
    """The host's facts store is not the one envsync's record is of (made anew): what the
    record says it holds is not there. Asked again with every pack."""


def offer(
    host: HostSpec,
    cache_dir: str | None,
    roots: Sequence[str],
    internal: Sequence[str],
    main: str | None,
    *,
    check: bool = True,
    fresh: bool = False,
) -> Offer | None:
    """What to give `host`'s probe (None: no cache, or no graph: nothing is shared).
    `check`: the probe checks that its store is the one the record is of (the caller asks
    again on Again); `fresh`: asked again, the record set aside, every pack given."""
    if cache_dir == "" or not roots or secret() is None:
        return None  # no records can be kept (no key for their HMAC): nothing shared
    mine = host_key(host, cache_dir)
    ours = command_key(roots, internal, main, circle(host, cache_dir))
    where = wire.folder()
    record = _read(where / f"packs-host-{mine}.json")
    command = _read(where / f"packs-command-{ours}.json")
    store = (record or {}).get("store") if check and not fresh else None
    if fresh:
        record = None  # what it held is not there
    held = {d for d in _digests(record, "held") if _pack(where, d).is_file()}
    give: list[str] = []
    texts: list[bytes] = []
    for digest in dict.fromkeys(_digests(command, "index") + _digests(record, "index")):
        if digest in held:
            continue
        path = _pack(where, digest)
        try:
            text = wire.read_used(path)
        except OSError:
            continue
        if text_digest(text) != digest:
            with contextlib.suppress(OSError):
                path.unlink()  # damaged here: never given, learned again
            continue
        give.append(digest)
        texts.append(text)
    return Offer(
        host=mine,
        command=ours,
        give=tuple(give),
        texts=tuple(texts),
        held=tuple(sorted(held | set(give))),
        store=store if isinstance(store, str) else None,
        walk=record is None,
    )


def receive(host: str, offered: Offer, told: Any, lines: list[bytes]) -> None:
    """Keep the packs a host sent (`lines`: their texts, in the index's order) and what it
    now holds; a pack whose text does not match its digest is not kept."""
    if not isinstance(told, dict) or not isinstance(told.get("index"), list):
        return
    where = wire.folder()
    index: list[str] = []
    lost = 0
    kept: set[str] = set()
    try:
        for entry in told["index"]:
            if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[1], str)):
                continue
            digest, sent = entry[1], entry[2] is True
            if sent:
                text = lines.pop(0) if lines else b""
                if text_digest(text) != digest:
                    lost += 1
                    continue
                path = _pack(where, digest)
                kept.add(str(path))
                if not path.is_file():
                    wire.write(path, text)
            index.append(digest)
        with _LOCK:
            mine = where / f"packs-host-{offered.host}.json"
            before = _read(mine) or {}
            store = told.get("store") if isinstance(told.get("store"), str) else None
            if store is not None and store != before.get("store"):
                before = {}  # another store: it holds what it was given and sent now
            held = _digests(before, "held") + list(offered.give) + index
            held = list(dict.fromkeys(held))[-INDEX_SIZE:]
            record = {"held": held, "index": index, "store": store or before.get("store")}
            _write(mine, record)
            ours = where / f"packs-command-{offered.command}.json"
            old = [d for d in _digests(_read(ours), "index") if d not in set(index)]
            union = (old + index)[-INDEX_SIZE:]
            _write(ours, {"index": union})
        wire.bound(where, keep=kept)
    except OSError:
        return
    _note(host, told, lost)


def _note(host: str, told: dict[str, Any], lost: int) -> None:
    refused = [str(r) for r in told.get("refused") or []]
    bits = []
    if told.get("seeded"):  # the packs' facts a walk used (those of its files)
        bits.append(f"{told['seeded']} files' facts from other hosts")
    if refused:
        bits.append(f"{len(refused)} refused ({'; '.join(refused[:3])})")
    if lost:
        bits.append(f"{lost} sent that do not match their digest, not kept")
    with _LOCK:
        if bits:
            _NOTES[host] = ", ".join(bits)
        else:
            _NOTES.pop(host, None)


def note(host: str) -> str | None:
    """What sharing did on `host`'s last collection in this process (None: nothing)."""
    with _LOCK:
        return _NOTES.pop(host, None)


def known_host(host: HostSpec, cache_dir: str | None) -> bool:
    return (wire.folder() / f"packs-host-{host_key(host, cache_dir)}.json").is_file()


def known_command(
    roots: Sequence[str], internal: Sequence[str], main: str | None, trust: str
) -> bool:
    """Whether envsync holds packs of this command in the trust `trust` (True where it
    keeps no records: then no host is collected before the others, as nothing would be
    given them)."""
    if secret() is None:
        return True
    path = wire.folder() / f"packs-command-{command_key(roots, internal, main, trust)}.json"
    return bool(_digests(_read(path), "index"))
