"""Paths from a plan, an archive or a backup manifest never leave the package directories.

Crafted operations go to the real agent, run by a real venv's interpreter: `..`, absolute
paths, symlinks planted in the package and archive entries that are links. Each is refused
before anything is written, and the files outside stay as they were.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from envsync.errors import AgentError, RollbackError
from envsync.hostside.agent.transfer import MANIFEST_MEMBER
from envsync.repair.transaction import rollback
from envsync.runner.agent import Agent
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from tests.figures import add
from tests.helpers import make_venv, make_wheel, pip_install, site_packages, state_dir

PKG = {"pkg/__init__.py": "", "pkg/mod.py": "X = 1\n"}


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("paths")
    python = make_venv(root / "venv")
    pip_install(python, make_wheel(root / "wheels", "pkg", "1.0", PKG))
    return python


@pytest.fixture
def agent(venv: Path) -> Agent:
    return Agent(HostSpec(name="t", python=str(venv)), LocalRunner("t"))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside every package directory that a crafted path aims at."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    return victim


def archive(entries: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
        hashes = {n: hashlib.sha256(d).hexdigest() for n, d in entries.items()}
        data = json.dumps(hashes).encode()
        info = tarfile.TarInfo(MANIFEST_MEMBER)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def package_state(venv: Path) -> dict[str, str]:
    sp = site_packages(venv)
    return {
        str(p.relative_to(sp)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(sp.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def refused(agent: Agent, op: dict[str, object], payload: bytes | None = None) -> str:
    add("hostile input", "crafted paths refused")
    with pytest.raises(AgentError) as e:
        agent.call(op, payload)
    assert e.value.kind == "unsafe-path"
    assert "refusing" in e.value.message and "nothing was changed" in e.value.message
    return e.value.message


def escapes(venv: Path, outside: Path) -> list[str]:
    """Relative paths from the package directory that aim at `outside`."""
    sp = site_packages(venv)
    up = "/".join([".."] * len(sp.parts))
    return [
        f"../../../../../../../..{outside}",
        f"pkg/{up}{outside}",
        str(outside),  # absolute
        f"pkg/../{up}{outside}",
    ]


def test_unpack_refuses_entries_outside_the_package(
    agent: Agent, venv: Path, outside: Path
) -> None:
    sp = str(site_packages(venv))
    before = package_state(venv)
    for name in escapes(venv, outside):
        payload = archive({"pkg/mod.py": b"X = 2\n", name: b"owned\n"})
        refused(agent, {"op": "unpack", "root": sp}, payload)
    # an entry that is a link, even one pointing inside
    refused(agent, {"op": "unpack", "root": sp}, archive({}, {"pkg/mod.py": str(outside)}))
    # a root that is not a package directory of the environment
    for root in (str(outside.parent), "/etc", f"{sp}/pkg", f"{sp}/.."):
        refused(agent, {"op": "unpack", "root": root}, archive({"x.py": b"owned\n"}))
    assert outside.read_text() == "precious\n"
    assert package_state(venv) == before  # nothing inside was written either


def test_unpack_refuses_removals_outside_the_package(
    agent: Agent, venv: Path, outside: Path
) -> None:
    sp = str(site_packages(venv))
    before = package_state(venv)
    for rel in escapes(venv, outside):
        refused(agent, {"op": "unpack", "root": sp, "remove": ["pkg/mod.py", rel]}, archive({}))
    refused(agent, {"op": "unpack", "root": sp, "remove": [""]}, archive({}))
    assert outside.read_text() == "precious\n"
    assert package_state(venv) == before


def test_a_symlink_planted_in_the_package_is_not_followed(
    agent: Agent, venv: Path, outside: Path
) -> None:
    sp = site_packages(venv)
    link = sp / "pkg" / "planted.py"
    link.symlink_to(outside)
    linked_dir = sp / "pkg" / "planted_dir"
    linked_dir.symlink_to(outside.parent, target_is_directory=True)
    try:
        for name in ("pkg/planted.py", f"pkg/planted_dir/{outside.name}"):
            refused(agent, {"op": "unpack", "root": str(sp)}, archive({name: b"owned\n"}))
            refused(agent, {"op": "unpack", "root": str(sp), "remove": [name]}, archive({}))
            with pytest.raises(AgentError, match="refusing"):
                agent.raw({"op": "pack", "root": str(sp), "files": [name]})
        with pytest.raises(AgentError, match="refusing"):
            agent.call({"op": "backup", "id": "b1", "dists": [], "files": [str(link)]})
        assert outside.read_text() == "precious\n"
    finally:
        link.unlink()
        linked_dir.unlink()


def test_pack_reads_nothing_outside_the_package(agent: Agent, venv: Path, outside: Path) -> None:
    sp = str(site_packages(venv))
    for rel in escapes(venv, outside):
        with pytest.raises(AgentError, match="refusing"):
            agent.raw({"op": "pack", "root": sp, "files": [rel]})
    with pytest.raises(AgentError, match="not a package directory"):
        agent.raw({"op": "pack", "root": str(outside.parent), "files": [outside.name]})


def test_backup_and_write_stay_in_their_folders(agent: Agent, outside: Path) -> None:
    for path in (str(outside), "/etc/hostname", "relative/path.py"):
        refused(agent, {"op": "backup", "id": "b2", "dists": [], "files": [path]})
    assert not (agent_state(agent) / "backups" / "b2").exists()
    refused(agent, {"op": "write", "path": str(outside), "text": "owned\n"})
    refused(agent, {"op": "write-dropin", "path": str(outside), "text": "owned\n"})
    for ident in ("..", "../x", "/etc", ".hidden"):
        with pytest.raises(AgentError, match="bad backup id"):
            agent.call({"op": "backup", "id": ident, "dists": [], "files": []})
    assert outside.read_text() == "precious\n"


def agent_state(agent: Agent) -> Path:
    return state_dir(Path(agent.spec.python))


def _backup(agent: Agent, venv: Path, ident: str) -> Path:
    mod = str(site_packages(venv) / "pkg" / "mod.py")
    where = agent.call({"op": "backup", "id": ident, "dists": ["pkg"], "files": [mod]})
    return Path(str(where["backup"]))


def test_a_crafted_backup_manifest_cannot_delete_or_write_outside(
    agent: Agent, venv: Path, outside: Path
) -> None:
    spec = HostSpec(name="t", python=str(venv))
    where = _backup(agent, venv, "crafted1")
    before = package_state(venv)
    pristine = json.loads((where / "manifest.json").read_text())
    member = next(e["member"] for e in pristine["before"].values() if e["kind"] == "file")
    crafted = {
        # restore would delete it
        "absent": {"kind": "absent"},
        # restore would write the saved content there
        "file": {**next(e for e in pristine["before"].values() if e["kind"] == "file")},
        "symlink": {"kind": "symlink", "target": "/etc/passwd"},
    }
    for kind, entry in crafted.items():
        for key in (str(outside), f"lib/../../{outside}", "../" + outside.name, ".envsync/x"):
            manifest = json.loads(json.dumps(pristine))
            manifest["before"][key] = {**entry, "member": member} if kind == "file" else entry
            (where / "manifest.json").write_text(json.dumps(manifest))
            with pytest.raises(RollbackError, match=r"refusing .*outside the package directories"):
                rollback(spec, LocalRunner("t"), "crafted1")
            add("hostile input", "crafted backup records refused")
    assert outside.read_text() == "precious\n"
    assert package_state(venv) == before


@pytest.mark.slow
def test_a_saved_plan_naming_a_path_outside_is_refused_before_anything_changes(
    capsys: pytest.CaptureFixture[str],
    bed: dict[str, Path],
    target: Path,
    tmp_path: Path,
    outside: Path,
) -> None:
    from tests.repair.conftest import inventory, run, tree_hash

    inv = inventory(bed, target, tmp_path / "inv.toml")
    plan = tmp_path / "plan.json"
    assert (
        run(capsys, "--inventory", str(inv), "-q", "repair", "--prefer", "fix", "-o", str(plan))[0]
        == 1
    )
    saved = json.loads(plan.read_text())
    (step,) = [s for s in saved["steps"] if s["kind"] == "sync-file"]
    before = tree_hash(target)
    for field, rel in (("files", f"../../../../../../..{outside}"), ("remove", str(outside))):
        crafted = json.loads(json.dumps(saved))
        (crafted_step,) = [s for s in crafted["steps"] if s["kind"] == "sync-file"]
        crafted_step[field] = [*step[field], rel]
        plan.write_text(json.dumps(crafted))
        code, _, err = run(
            capsys, "--inventory", str(inv), "-q", "repair", "--plan", str(plan), "--apply"
        )
        assert code == 2, err
        assert f"tgt: refusing the plan: step sync-file names {rel!r}" in err
    assert tree_hash(target) == before
    assert outside.read_text() == "precious\n"
    assert not list((state_dir(target) / "backups").glob("*"))
