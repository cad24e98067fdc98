"""What envsync keeps of what hosts sent: a changed graph stores its changed parts only,
the folder stays under its cap, and nothing kept is used unchecked."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from envsync.collect import wire
from envsync.hostside.caches.chunks import cut
from envsync.hostside.shared import text_digest


def _modules(count: int, seed: int = 0) -> dict[str, dict[str, object]]:
    """A graph's modules as the host writes them (facts first keyed by "kind")."""
    rng = random.Random(seed)
    out: dict[str, dict[str, object]] = {}
    for i in range(count):
        name = f"pkg{i % 40}.mod{i}"
        out[name] = {
            "kind": "source",
            "file": f"/venv/lib/site-packages/{name.replace('.', '/')}.py",
            "sha256": f"{rng.getrandbits(256):064x}",
            "defines": [f"name{j}" for j in range(rng.randrange(30))],
            "imports": [{"module": f"pkg{j}", "names": [], "line": j} for j in range(5)],
        }
    return out


def _text(modules: dict[str, dict[str, object]]) -> bytes:
    return json.dumps(modules, separators=(",", ":")).encode()


def _size(kind: str) -> int:
    return sum(p.stat().st_size for p in wire.folder().glob(f"{kind}-*.json"))


def test_chunks_are_the_text_cut_at_module_boundaries() -> None:
    text = _text(_modules(3000))
    parts = cut(text)
    assert b"".join(parts) == text
    assert 100 < len(parts) < 400  # about one in CHUNK_EVERY modules ends a chunk
    assert all(p.startswith(b'{"') or p.startswith(b'"pkg') for p in parts)


def test_one_changed_module_changes_its_chunk_alone() -> None:
    modules = _modules(3000)
    before = set(cut(_text(modules)))
    modules["pkg7.mod1007"]["defines"] = ["a_local_patch"]
    after = set(cut(_text(modules)))
    assert len(after - before) <= 2 and len(before - after) <= 2


def test_a_kept_graph_reads_back_checked() -> None:
    text = _text(_modules(2000))
    digest = text_digest(text)
    wire.keep("req", {"graph": digest}, {"graph": text})
    wire._MEMO.clear()
    assert wire.load(digest) == text
    assert wire.known("req") == {"graph": digest, "graphs": [digest]}
    chunk = next(iter(sorted(wire.folder().glob("chunk-*.json"))))
    chunk.write_bytes(chunk.read_bytes()[:-3])  # damaged: never used, sent again
    wire._MEMO.clear()
    with pytest.raises(wire.Stale):
        wire.load(digest)
    assert wire.known("req") == {}


def test_the_graphs_of_a_requests_last_states_are_named_while_held() -> None:
    """A host back in a past state has one of them: envsync names the newest few it holds,
    the last answer's first, and no graph it no longer holds."""
    modules = _modules(50)
    digests = []
    for i in range(wire.GRAPHS_KEPT + 2):
        modules["pkg0.mod0"]["defines"] = [f"state_{i}"]
        text = _text(modules)
        digests.append(text_digest(text))
        wire.keep("req", {"graph": digests[-1]}, {"graph": text})
    newest = digests[::-1][: wire.GRAPHS_KEPT]
    assert wire.known("req") == {"graph": digests[-1], "graphs": newest}
    wire.keep("req", {"graph": digests[-2]}, {})  # back in the state before: nothing sent
    assert wire.known("req")["graphs"] == [digests[-2], digests[-1], *newest[2:]]
    (wire.folder() / f"modules-{newest[2]}.json").unlink()
    assert newest[2] not in wire.known("req")["graphs"]
    # a warm answer (the same digests) writes nothing
    known = wire.folder() / "known-req"
    os.utime(known, ns=(1, 1))
    wire.keep("req", {"graph": digests[-2]}, {})
    assert known.stat().st_mtime_ns == 1


def test_fifty_changes_keep_their_changed_chunks_only() -> None:
    modules = _modules(6000)  # the example's graph has about as many
    first = _text(modules)
    names = sorted(modules)
    for i in range(50):
        modules[names[i * 53 % len(names)]]["defines"] = [f"patch_{i}"]
        text = _text(modules)
        wire.keep("req", {"graph": text_digest(text)}, {"graph": text})
    assert _size("chunk") + _size("modules") <= 2 * len(first)


def test_the_folder_stays_under_its_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVSYNC_CACHE_MB", "1")
    for seed in range(8):  # graphs that share nothing: ~0.5 MB each
        text = _text(_modules(1000, seed))
        wire.keep(f"req{seed}", {"graph": text_digest(text)}, {"graph": text})
        total = sum(p.stat().st_size for p in Path(wire.folder()).iterdir())
        assert total <= 1 << 20
    text = _text(_modules(1000, 7))  # the newest is whole
    wire._MEMO.clear()
    assert wire.load(text_digest(text)) == text


def test_a_failed_write_leaves_no_temporary_file(monkeypatch: pytest.MonkeyPatch) -> None:
    target = wire.folder() / "chunk-x.json"

    real = os.fdopen

    class Full:
        """A file on a disk that fills up part of the way through the write."""

        def __init__(self, fd: int, mode: str) -> None:
            self.file = real(fd, mode)

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *exc: object) -> None:
            self.file.close()

        def write(self, data: bytes) -> int:
            self.file.write(data[:10])
            raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched, pytest.raises(OSError):
        patched.setattr(os, "fdopen", Full)
        wire.write(target, b"x" * 100)
    assert list(wire.folder().iterdir()) == []
