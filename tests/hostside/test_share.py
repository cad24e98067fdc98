"""The host's checks of a pack of facts it is given: each way a pack can lie, refused."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from envsync.hostside.caches.share import Share, Skip, module_path, record_rows
from envsync.hostside.caches.store import Store
from envsync.hostside.shared import text_digest

FACTS = {"defines": ["f"], "all": None, "dynamic": False, "stars": [], "imports": []}
TAG = "facts-abc-py311"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@pytest.fixture
def dist(tmp_path: Path) -> dict[str, object]:
    """A distribution `pkg` 1.0 on disk: pkg/__init__.py, pkg/mod.py and its RECORD."""
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    files = {"pkg/__init__.py": b"", "pkg/mod.py": b"def f(): pass\n"}
    rows = []
    for rel, data in files.items():
        (site / rel).write_bytes(data)
        rows.append(f"{rel},sha256={_b64(data)},{len(data)}")
    meta = site / "pkg-1.0.dist-info"
    meta.mkdir()
    (meta / "RECORD").write_text("\n".join([*rows, "pkg-1.0.dist-info/RECORD,,"]) + "\n")
    return {
        "name": "pkg",
        "version": "1.0",
        "location": str(site),
        "metadata_dir": meta.name,
        "top_level": ["pkg"],
        "sha": {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()},
        "record": hashlib.sha256((meta / "RECORD").read_bytes()).hexdigest(),
    }


def _text(identity: list[object], entries: Mapping[str, object], tag: str = TAG) -> bytes:
    pack = {"v": 1, "tag": tag, "id": identity, "entries": entries}
    return json.dumps(pack, sort_keys=True, separators=(",", ":")).encode()


def _share(dist: dict[str, object]) -> Share:
    return Share({"share": {}}, {}, [dist])


def test_record_rows_reads_the_digests_of_module_files(dist: dict[str, object]) -> None:
    meta = Path(str(dist["location"])) / str(dist["metadata_dir"])
    rows = record_rows((meta / "RECORD").read_text())
    assert rows == dist["sha"]
    assert module_path("pkg.mod", False) == "pkg/mod.py"
    assert module_path("pkg", True) == "pkg/__init__.py"


def test_a_pack_that_matches_the_hosts_record_is_taken(dist: dict[str, object]) -> None:
    sha = dist["sha"]["pkg/mod.py"]  # type: ignore[index]  # the fixture's dist is JSON-like dict[str, object]; its sha is a dict of paths
    entries = {f"{sha}:pkg.mod:0": FACTS}
    text = _text(["dist", "pkg", "1.0", dist["record"]], entries)
    assert _share(dist).check(text, text_digest(text), TAG) == entries


@pytest.mark.parametrize(
    ("lie", "why"),
    [
        ("digest", "does not match its digest"),
        ("entry", "does not match pkg's RECORD"),
        ("path", "does not match pkg's RECORD"),
        ("facts", "are not facts"),
        ("file", "another file's content"),
    ],
)
def test_a_pack_that_lies_is_refused(dist: dict[str, object], lie: str, why: str) -> None:
    sha = str(dist["sha"]["pkg/mod.py"])  # type: ignore[index]  # the fixture's dist is JSON-like dict[str, object]; its sha is a dict of paths
    identity: list[object] = ["dist", "pkg", "1.0", dist["record"]]
    entries: dict[str, object] = {f"{sha}:pkg.mod:0": FACTS}
    if lie == "entry":  # facts filed under content the host's file does not have
        entries = {f"{'0' * 64}:pkg.mod:0": FACTS}
    elif lie == "path":  # the content of pkg/mod.py, said to be another module's
        entries = {f"{sha}:pkg.other:0": FACTS}
    elif lie == "facts":
        entries = {f"{sha}:pkg.mod:0": {"defines": []}}
    elif lie == "file":
        identity = ["file", sha]
        entries = {f"{'1' * 64}:pkg.mod:0": FACTS}
    text = _text(identity, entries)
    digest = text_digest(text)
    if lie == "digest":
        text = text.replace(b'"f"', b'"g"')
    found = _share(dist).check(text, digest, TAG)
    assert isinstance(found, str) and not isinstance(found, Skip)
    assert why in found


@pytest.mark.parametrize("other", ["tag", "version"])
def test_a_pack_for_another_host_is_skipped_not_refused(
    dist: dict[str, object], other: str
) -> None:
    sha = dist["sha"]["pkg/mod.py"]  # type: ignore[index]  # the fixture's dist is JSON-like dict[str, object]; its sha is a dict of paths
    identity = ["dist", "pkg", "2.0" if other == "version" else "1.0", dist["record"]]
    text = _text(identity, {f"{sha}:pkg.mod:0": FACTS}, "other" if other == "tag" else TAG)
    assert isinstance(_share(dist).check(text, text_digest(text), TAG), Skip)


def test_a_pack_of_a_venv_whose_record_differs_gives_the_files_that_are_alike(
    dist: dict[str, object],
) -> None:
    """Two venvs of one version differ in their RECORD's script rows (a script names its
    venv's python): the pack made in the other is taken for the files whose rows here give
    the same content, entry by entry; an entry for content this host's file does not have
    is left out, not trusted, and a pack with none alike is skipped."""
    shas = dist["sha"]
    assert isinstance(shas, dict)
    sha, init = str(shas["pkg/mod.py"]), str(shas["pkg/__init__.py"])
    elsewhere: list[object] = ["dist", "pkg", "1.0", "f" * 64]  # the other venv's RECORD
    alike = {f"{sha}:pkg.mod:0": FACTS, f"{init}:pkg:1": FACTS}
    patched = {f"{'0' * 64}:pkg.mod:0": FACTS, f"{init}:pkg:1": FACTS}
    text = _text(elsewhere, alike)
    assert _share(dist).check(text, text_digest(text), TAG) == alike
    text = _text(elsewhere, patched)
    assert _share(dist).check(text, text_digest(text), TAG) == {f"{init}:pkg:1": FACTS}
    text = _text(elsewhere, {f"{'0' * 64}:pkg.mod:0": FACTS})
    assert isinstance(_share(dist).check(text, text_digest(text), TAG), Skip)


def test_seeds_are_kept_only_when_a_walk_uses_them(tmp_path: Path) -> None:
    text = _text(["file", "ab"], {"k": FACTS, "j": FACTS})
    unused = _text(["file", "cd"], {"u": FACTS})
    store = Store(str(tmp_path / TAG))
    store.seed_pack(text_digest(text), text, {"k": FACTS, "j": FACTS})
    store.seed_pack(text_digest(unused), unused, {"u": FACTS})
    assert store.get("other") is None
    assert store.get("k") == FACTS and store.seeded == 1
    store.keep_packs()
    # the used pack is kept whole, in one file with its keys; the unused one is not kept
    kept = sorted(p.name for p in (tmp_path / TAG / "packs").iterdir())
    assert kept == [f"{text_digest(text)}.keys", f"{text_digest(text)}.pack"]
    assert not list((tmp_path / TAG).rglob("*.json"))  # no entry file per seed
    fresh = Store(str(tmp_path / TAG))
    assert fresh.get("k") == FACTS and fresh.get("j") == FACTS and fresh.seeded == 0
    assert fresh.get("u") is None


def test_an_entry_a_few_readers_want_of_a_kept_pack_is_kept_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The native scan reads a few entries of many packs (modules read one level deep):
    each is kept as an entry of its own, so that its next run reads no pack whole."""
    text = _text(["file", "ab"], {"k": FACTS, "j": FACTS})
    store = Store(str(tmp_path / TAG))
    store.seed_pack(text_digest(text), text, {"k": FACTS, "j": FACTS})
    assert store.get("k") == FACTS
    store.keep_packs()
    reader = Store(str(tmp_path / TAG))
    assert reader.get_alone("k") == FACTS  # from the kept pack, and kept alone
    assert len(list((tmp_path / TAG).rglob("*.json"))) == 1
    packs: list[str] = []
    real = Store.from_kept_pack

    def counted(self: Store, key: str) -> object:
        packs.append(key)
        return real(self, key)

    monkeypatch.setattr(Store, "from_kept_pack", counted)
    again = Store(str(tmp_path / TAG))
    assert again.get_alone("k") == FACTS and packs == []  # its own entry: no pack read
    assert len(list((tmp_path / TAG).rglob("*.json"))) == 1  # nothing written again
    assert again.get_alone("j") == FACTS and packs == ["j"]


def test_a_kept_pack_that_does_not_match_its_digest_is_removed(tmp_path: Path) -> None:
    text = _text(["file", "ab"], {"k": FACTS})
    store = Store(str(tmp_path / TAG))
    store.seed_pack(text_digest(text), text, {"k": FACTS})
    assert store.get("k") == FACTS
    store.keep_packs()
    pack = tmp_path / TAG / "packs" / f"{text_digest(text)}.pack"
    pack.write_bytes(text.replace(b"defines", b"definez"))
    fresh = Store(str(tmp_path / TAG))
    assert fresh.get("k") is None and fresh.dropped == 1
    assert not pack.exists()


@pytest.mark.parametrize(
    ("entries", "why"),
    [
        ({"mentions:ab": {"name": 3}}, "an answer is not a tier"),
        ({"ab:pkg.mod:0": {"name": 1}}, "an entry of its answers is not one"),
        ({"mentions:ab": ["name"]}, "an entry of its answers is not one"),
    ],
)
def test_a_pack_of_text_search_answers_that_are_not_is_refused(
    dist: dict[str, object], entries: dict[str, object], why: str
) -> None:
    text = _text(["mentions", "x"], entries)
    assert _share(dist).check(text, text_digest(text), TAG) == why


def test_a_pack_of_text_search_answers_is_taken(dist: dict[str, object]) -> None:
    entries = {"mentions:ab": {"name": 2, "other": 0}}
    text = _text(["mentions", "x"], entries)
    assert _share(dist).check(text, text_digest(text), TAG) == entries
