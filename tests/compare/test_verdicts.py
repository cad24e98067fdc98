"""A verdict is computed once per input: the same (reference, target, startup, providers,
envsync's code) give the kept report; any change of any of them computes it again; a kept
report that does not read back is computed again; import checks are never kept.

The unit tests key real recorded snapshots (tests/data/snapshots); the last test runs the
built-in example twice through the CLI, with the classifier counted.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from envsync import seal
from envsync.classify import Startup, classify
from envsync.classify.rules import load_packs
from envsync.collect import LazyModules, wire
from envsync.compare import verdicts
from envsync.model.changes import differences
from envsync.model.codec import from_data
from envsync.model.environment import Snapshot, StartupGraph
from envsync.model.findings import Report
from tests.figures import held
from tests.helpers import REPO
from tests.helpers import run_cli as run

SNAPSHOTS = Path(__file__).resolve().parent.parent / "data" / "snapshots"


def _snap(name: str) -> Snapshot:
    return from_data(Snapshot, json.loads((SNAPSHOTS / f"{name}.json").read_text()), name)


def _graph(digest: str, *missing: str) -> StartupGraph:
    raw = {m: {"kind": "missing"} for m in missing}
    modules = LazyModules(raw, "t", digest=digest)
    return StartupGraph(roots=("sglang.launch_server",), internal=("sglang",), modules=modules)


REFERENCE = _snap("ct129")
TARGET = replace(
    REFERENCE,
    host="ct200",
    distributions=tuple(
        replace(d, version="0.1.10") if d.name == "xgrammar" else d for d in REFERENCE.distributions
    ),
    startup=_graph("a" * 32),
)
STARTUP = Startup(
    entrypoint="sglang.launch_server",
    command=("python", "-m", "sglang.launch_server", "--model-path", "/m"),
    packs=load_packs(()),
)


class Counted:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *inputs: object) -> Report:
        self.calls += 1
        ref, tgt, run_ = inputs[0], inputs[1], inputs[2]
        return classify(ref, tgt, differences(ref, tgt), run_)  # type: ignore[arg-type]  # Counted takes classify's inputs as object; they are the snapshots and the startup


def _once(counted: Counted, *inputs: object) -> Report:
    return verdicts.once(inputs, lambda: (counted(*inputs), True))


def test_the_same_inputs_give_the_kept_report() -> None:
    counted = Counted()
    first = _once(counted, REFERENCE, TARGET, STARTUP, {})
    second = _once(counted, REFERENCE, TARGET, STARTUP, {})
    assert counted.calls == 1
    assert second == first and second.findings
    assert "xgrammar" in {f.subject for f in second.findings}
    # what is kept is what was computed, read back
    (kept,) = wire.folder().glob("verdict-*.json")
    assert from_data(Report, json.loads(kept.read_text())["report"], "kept") == first


# Each input changed on its own: another key, computed again.
CHANGES = {
    "reference version": lambda r, t, s, p: (
        replace(
            r,
            distributions=tuple(
                replace(d, version="9.9") if d.name == "soundfile" else d for d in r.distributions
            ),
        ),
        t,
        s,
        p,
    ),
    "target graph": lambda r, t, s, p: (r, replace(t, startup=_graph("b" * 32, "vllm")), s, p),
    "target host": lambda r, t, s, p: (r, replace(t, host="ct201"), s, p),
    "service flags": lambda r, t, s, p: (
        r,
        t,
        replace(s, command=(*s.command, "--grammar-backend", "none")),
        p,
    ),
    "entrypoint": lambda r, t, s, p: (r, t, replace(s, entrypoint="sglang.srt.server"), p),
    "rule packs": lambda r, t, s, p: (r, t, replace(s, packs=s.packs[:-1]), p),
    "providers": lambda r, t, s, p: (r, t, s, {"libfoo.so.1": "/lib/libfoo.so.1"}),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_any_input_changed_computes_it_again(change: str) -> None:
    counted = Counted()
    inputs: tuple[object, ...] = (REFERENCE, TARGET, STARTUP, {})
    _once(counted, *inputs)
    changed = CHANGES[change](*inputs)
    assert changed != inputs
    _once(counted, *changed)
    assert counted.calls == 2
    _once(counted, *inputs)  # the first is kept still
    assert counted.calls == 2


def test_when_it_was_collected_does_not_count() -> None:
    counted = Counted()
    _once(counted, REFERENCE, TARGET, STARTUP, {})
    later = replace(TARGET, collected_at="2031-01-01T00:00:00Z", duration_s=9.5)
    _once(counted, REFERENCE, later, STARTUP, {})
    assert counted.calls == 1


def test_another_envsync_code_computes_it_again(monkeypatch: pytest.MonkeyPatch) -> None:
    counted = Counted()
    _once(counted, REFERENCE, TARGET, STARTUP, {})
    monkeypatch.setattr(verdicts, "code_key", lambda: "another envsync")
    _once(counted, REFERENCE, TARGET, STARTUP, {})
    assert counted.calls == 2


def test_the_code_key_follows_the_source_files(tmp_path: Path) -> None:
    import os

    code = tmp_path / "envsync"
    (code / "classify").mkdir(parents=True)
    (code / "classify" / "graph.py").write_text("X = 1\n")
    (code / "rules.toml").write_text("")
    keys = [verdicts.files_key(code)]
    (code / "classify" / "graph.py").write_text("X = 2\n")  # same size, another time
    os.utime(code / "classify" / "graph.py", ns=(1, 2))
    keys.append(verdicts.files_key(code))
    (code / "classify" / "new.py").write_text("")
    keys.append(verdicts.files_key(code))
    (code / "rules.toml").write_text("[x]\n")
    keys.append(verdicts.files_key(code))
    (code / "__pycache__").mkdir()
    (code / "__pycache__" / "graph.cpython-311.pyc").write_bytes(b"\0")
    keys.append(verdicts.files_key(code))
    assert len(set(keys)) == 4 and keys[-1] == keys[-2]  # bytecode does not count
    # the whole package: the classifier's modules too (it held only compare/ once the
    # stages had rooms, so a changed classifier gave the verdicts kept before it)
    import envsync

    package = Path(envsync.__file__).resolve().parent
    assert verdicts.code_key() == verdicts.files_key(package)
    assert (package / "classify" / "packages.py").is_file()


@pytest.mark.parametrize("damage", [b"", b"{", b'{"findings": 3}', b"[]"])
def test_a_kept_report_that_does_not_read_back_is_computed_again(damage: bytes) -> None:
    counted = Counted()
    first = _once(counted, REFERENCE, TARGET, STARTUP, {})
    (kept,) = wire.folder().glob("verdict-*.json")
    kept.write_bytes(damage)
    assert _once(counted, REFERENCE, TARGET, STARTUP, {}) == first
    assert counted.calls == 2
    assert from_data(Report, json.loads(kept.read_text())["report"], "kept") == first


def test_a_report_made_without_a_hosts_answer_is_never_kept() -> None:
    """A question to the target left unanswered (the calls made at import, when its host
    could not answer): the report is given, not kept, and asked again next time."""
    counted = Counted()
    inputs: tuple[object, ...] = (REFERENCE, TARGET, STARTUP, {})
    for _ in range(2):
        verdicts.once(inputs, lambda: (counted(*inputs), False))
    assert counted.calls == 2
    assert not list(wire.folder().glob("verdict-*.json"))
    verdicts.once(inputs, lambda: (counted(*inputs), True))
    _once(counted, *inputs)
    assert counted.calls == 3


def test_a_graph_without_a_digest_is_never_kept() -> None:
    counted = Counted()
    graph = _graph("c" * 32, "vllm")
    bare = replace(TARGET, startup=replace(graph, modules=dict(graph.modules)))
    assert verdicts.key(REFERENCE, bare, STARTUP, {}) is None
    for _ in range(2):
        _once(counted, REFERENCE, bare, STARTUP, {})
    assert counted.calls == 2
    assert not list(wire.folder().glob("verdict-*.json"))


def test_the_example_diff_is_classified_once_and_the_same(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    example_hosts: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The built-in example, diffed three times: the classifier runs on the first only,
    the reports are equal; --no-cache computes it again and agrees; a flag that changes
    the startup (--grammar-backend none) is another verdict. A kept verdict asks the
    target nothing more (the calls made at import: soundfile is missing only on ct200,
    and it reads the whole graph to ask about it)."""
    import envsync.compare.targets

    calls: list[int] = []
    asked: list[int] = []
    from envsync.compare.calls import asked_calls as real_asked

    real = envsync.compare.targets.classify

    def counted(*args: object, **kwargs: object) -> Report:
        calls.append(1)
        return real(*args, **kwargs)

    def counted_asked(*args: Any, **kwargs: Any) -> Any:
        asked.append(1)
        return real_asked(*args, **kwargs)

    monkeypatch.setattr(envsync.compare.targets, "classify", counted)
    monkeypatch.setattr(envsync.compare.targets, "asked_calls", counted_asked)
    text = (REPO / "examples" / "envsync.toml").read_text()
    inv = tmp_path / "envsync.toml"
    inv.write_text(
        text.replace('".hosts/', f'"{example_hosts}/').replace(
            "{inventory_dir}", str(REPO / "examples")
        )
    )
    reports = []
    for extra in ((), (), ("--no-cache",)):
        code, out, err = run(
            capsys, "--inventory", str(inv), "-q", "diff", *extra, "--format", "json"
        )
        assert code == 1, err
        reports.append(json.loads(out)["findings"])
    assert len(calls) == 2  # the first run and --no-cache
    assert len(asked) == 2
    assert reports[0] == reports[1] == reports[2]
    assert {f["subject"]: f["severity"] for f in reports[0]}["xgrammar"] == "fatal"
    flagged = text.replace('"DFLASH"]', '"DFLASH", "--grammar-backend", "none"]')
    inv.write_text(
        flagged.replace('".hosts/', f'"{example_hosts}/').replace(
            "{inventory_dir}", str(REPO / "examples")
        )
    )
    code, out, err = run(capsys, "--inventory", str(inv), "-q", "diff", "--format", "json")
    assert len(calls) == 3
    severities = {f["subject"]: f["severity"] for f in json.loads(out)["findings"]}
    assert severities.get("xgrammar") != "fatal"


def _poison(kept: Path, **changes: object) -> None:
    entry = json.loads(kept.read_text())
    entry["report"] = {**entry["report"], **changes}
    kept.write_text(json.dumps(entry))


@pytest.mark.parametrize(
    "poison",
    [
        "emptied findings",
        "emptied findings, its digest made again without the key",
        "another machine's entry",
        "another input's entry",
    ],
)
def test_a_poisoned_entry_never_lowers_a_verdict(poison: str, tmp_path: Path) -> None:
    """A kept report edited (its findings emptied, as a CI cache restored from another
    job may hold), signed by another key, or moved under another input's name: dropped,
    computed again, the drift still found."""
    import hashlib

    counted = Counted()
    first = _once(counted, REFERENCE, TARGET, STARTUP, {})
    assert first.findings
    (kept,) = wire.folder().glob("verdict-*.json")
    entry = json.loads(kept.read_text())
    if poison == "emptied findings":
        _poison(kept, findings=[])
    elif poison.startswith("emptied findings, "):
        entry["report"]["findings"] = []
        text = json.dumps(entry["report"], sort_keys=True, separators=(",", ":")).encode()
        entry["mac"] = hashlib.sha256(entry["inputs"].encode() + b"\n" + text).hexdigest()
        kept.write_text(json.dumps(entry))
    elif poison == "another machine's entry":
        seal.secret_path().write_bytes(b"k" * 64)  # this machine's key is another now
        _poison(kept, findings=[])
        entry2 = json.loads(kept.read_text())
        text = json.dumps(entry2["report"], sort_keys=True, separators=(",", ":")).encode()
        entry2["mac"] = seal.mac(b"x" * 64, entry2["inputs"], text)  # signed elsewhere
        kept.write_text(json.dumps(entry2))
    else:
        other = replace(TARGET, host="ct201")
        clean = Counted()
        _once(clean, REFERENCE, other, STARTUP, {})
        moved = wire.folder() / f"verdict-{verdicts.key(REFERENCE, other, STARTUP, {})}.json"
        moved.unlink()
        kept.rename(moved)  # a verified entry of other inputs, under this one's name...
        _poison(moved, findings=[])  # ...with its findings emptied
        assert _once(clean, REFERENCE, other, STARTUP, {}).findings
        assert clean.calls == 2
        held("7 kept verdicts bound to their inputs")
        return
    again = _once(counted, REFERENCE, TARGET, STARTUP, {})
    assert again == first and again.findings
    assert counted.calls == 2  # dropped, computed again
    assert _once(counted, REFERENCE, TARGET, STARTUP, {}) == first and counted.calls == 2
    held("7 kept verdicts bound to their inputs")


def test_the_key_is_private_and_outside_the_cache_folder() -> None:
    counted = Counted()
    _once(counted, REFERENCE, TARGET, STARTUP, {})
    path = seal.secret_path()
    assert path.stat().st_mode & 0o777 == 0o600
    assert wire.folder() not in path.parents
    held("7 kept verdicts bound to their inputs")


def test_a_failed_write_leaves_no_temporary_file_and_old_ones_are_swept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os
    import subprocess
    import sys

    where = wire.folder()
    where.mkdir(parents=True)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    left = where / f"verdict-x.json.12345.envsync-{dead}.tmp"
    left.write_text("{")
    old = where / f"graph-y.envsync-{os.getpid()}.tmp"
    old.write_text("{")
    os.utime(old, (1, 1))
    counted = Counted()
    real = os.replace

    def full(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("envsync.documents.os.replace", full)
    _once(counted, REFERENCE, TARGET, STARTUP, {})
    monkeypatch.setattr("envsync.documents.os.replace", real)
    assert sorted(p.name for p in where.iterdir()) == []
    held("17 temporary files removed and swept")


def test_a_poisoned_kept_verdict_never_turns_drift_into_no_drift(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, example_hosts: Path
) -> None:
    """The example's diff and check, with every kept report's findings emptied between two
    runs (a CI cache restored from another job): the drift is still reported, exit 1."""
    text = (REPO / "examples" / "envsync.toml").read_text()
    inv = tmp_path / "envsync.toml"
    inv.write_text(
        text.replace('".hosts/', f'"{example_hosts}/').replace(
            "{inventory_dir}", str(REPO / "examples")
        )
    )
    lock = tmp_path / "ct129.lock"
    code, _, err = run(capsys, "--inventory", str(inv), "-q", "lock", "ct129", "-o", str(lock))
    assert code == 0, err
    for command in (["diff"], ["check", "--lock", str(lock), "ct200"]):
        code, _, err = run(capsys, "--inventory", str(inv), "-q", *command)
        assert code == 1, err
        kept = list(wire.folder().glob("verdict-*.json"))
        assert kept
        for path in kept:
            _poison(path, findings=[])
        code, out, err = run(capsys, "--inventory", str(inv), "-q", *command)
        assert code == 1, (out, err)
        assert "xgrammar" in out + err
        held("7 kept verdicts bound to their inputs")
