"""diff and repair between editable SGLang checkouts, and installing where there is no pip.

The checkouts hold the real SGLang 0.5.11 wheel's package, committed to a real git
repository (python/ layout, a minimal pyproject) and installed in editable mode: on the
reference by real pip, on the target, a venv made by uv (no pip), by real uv. The
reference carries a DFlash patch set: a commit changing server_args.py, an added
speculative/dflash_worker.py and a deleted file.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from envsync.collect import ProbeOptions, collect
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from tests.classify.test_sglang_wheels import fetch
from tests.helpers import make_venv, make_wheel, run_cli
from tests.repair.test_repair import state
from tests.source_trees import (
    backend_wheels,
    editable_install,
    git,
    uv,
    uv_install,
    uv_venv,
    write_project,
)

pytestmark = pytest.mark.slow

ADDED = "sglang/srt/speculative/dflash_worker.py"
PATCHED = "sglang/srt/server_args.py"
DELETED = "sglang/srt/speculative/ngram_info.py"


def checkout_from_wheel(wheel: Path, repo: Path) -> None:
    """The wheel's sglang/ package as a source checkout: python/sglang, one commit."""
    project = repo / "python"
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.startswith("sglang/") and not name.endswith("/") and name != ADDED:
                target = project / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(name))
    write_project(project, "sglang", {}, version="0.5.11")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "sglang 0.5.11")


def package_tree(root: Path) -> dict[str, str]:
    """sha256 of every file under a checkout's package folder (bytecode aside)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory, wheel_cache: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("checkouts")
    wheels = backend_wheels(wheel_cache)
    base = root / "upstream"
    checkout_from_wheel(fetch(wheel_cache, "sglang==0.5.11"), base)
    with zipfile.ZipFile(fetch(wheel_cache, "sglang==0.5.11")) as zf:
        worker = zf.read(ADDED)
    for host in ("ref", "tgt"):
        git(root, "clone", "-q", str(base), host)
    ref = root / "ref" / "python"
    with (ref / PATCHED).open("a") as f:
        f.write("\nDFLASH_DRAFT_WINDOW = 16  # DFlash patch\n")
    git(root / "ref", "commit", "-q", "-am", "DFlash: server args")
    (ref / ADDED).write_bytes(worker + b"\n# DFlash patch\n")
    (ref / DELETED).unlink()
    ref_python = make_venv(root / "ref-venv")
    editable_install(ref_python, ref, wheels, by="pip")
    return {"root": root, "ref": ref_python, "wheels": wheels, "ref_tree": ref}


def inventory(bed: dict[str, Path], target: Path, path: Path, extra: str = "") -> Path:
    path.write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = ["sglang"]\n'
        '[service]\ncommand = ["{python}", "-m", "sglang.launch_server", "--model-path", "m"]\n'
        'entrypoint = "sglang.launch_server"\n'
        f'[hosts.ref]\npython = "{bed["ref"]}"\n'
        f'[hosts.tgt]\npython = "{target}"\n{extra}'
    )
    return path


def test_two_editable_checkouts_diff_repair_and_roll_back(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], tmp_path: Path
) -> None:
    work = tmp_path / "tgt"
    git(bed["root"], "clone", "-q", str(bed["root"] / "upstream"), str(work))
    target = uv_venv(tmp_path / "tgt-venv")
    editable_install(target, work / "python", bed["wheels"], by="uv")
    inv = inventory(bed, target, tmp_path / "inv.toml")
    head = git(work, "rev-parse", "HEAD")
    git_before = (work / ".git" / "index").read_bytes()

    code, out, err = run_cli(capsys, "--inventory", str(inv), "-q", "diff", "--format", "json")
    assert code == 1, err
    found = {(f["subject"], f["kind"], f["severity"]) for f in json.loads(out)["findings"]}
    assert found == {
        ("sglang commit", "commit", "risky"),
        (PATCHED, "file", "risky"),  # startup imports server_args
        # the target's code imports it inside a function (only with
        # --speculative-algorithm DFLASH), and it is absent there: a feature that fails later
        # (issue 45: an import that cannot succeed, in a function, is degraded; was benign)
        (ADDED, "file", "degraded"),
        # on the target only, and imported inside a function startup may call:
        # CudaGraphRunner.get_spec_info, which a GPU's graph capture runs
        (DELETED, "file", "unknown"),
    }
    runner = work / "python" / "sglang" / "srt" / "model_executor" / "cuda_graph_runner.py"
    lines = runner.read_text().splitlines()
    assert lines[1360].strip() == "def get_spec_info(self, num_tokens: int):"
    assert lines[1414].strip() == "from sglang.srt.speculative.ngram_info import NgramVerifyInput"
    (deleted,) = [f for f in json.loads(out)["findings"] if f["subject"] == DELETED]
    assert "only through an import inside a function" in deleted["reason"]
    assert (
        "sglang.srt.model_executor.cuda_graph_runner -> sglang.srt.speculative.ngram_info"
        in (deleted["reason"])
    )
    commit = next(f for f in json.loads(out)["findings"] if f["kind"] == "commit")
    ref_head = git(bed["ref_tree"].parent, "rev-parse", "HEAD")
    assert commit["reason"].startswith(
        f"sglang at commit {ref_head[:12]} (main) on ref, {head[:12]} (main) on tgt"
    )

    before = package_tree(work / "python" / "sglang")
    code, out, err = run_cli(
        capsys, "--inventory", str(inv), "-q", "repair", "--apply", "--no-deploy"
    )
    assert code == 0, err
    assert package_tree(work / "python" / "sglang") == package_tree(bed["ref_tree"] / "sglang")
    assert watched(target, "sglang") == watched(bed["ref"], "sglang")
    # envsync never moves the checkout: HEAD and the index are as they were.
    assert git(work, "rev-parse", "HEAD") == head
    assert (work / ".git" / "index").read_bytes() == git_before
    code, out, _ = run_cli(capsys, "--inventory", str(inv), "-q", "diff", "--format", "json")
    left = {(f["subject"], f["kind"]) for f in json.loads(out)["findings"]}
    assert left == {("sglang commit", "commit")}  # same files, other commit

    code, _, err = run_cli(capsys, "--inventory", str(inv), "-q", "rollback", "tgt")
    assert code == 0, err
    assert package_tree(work / "python" / "sglang") == before


def test_a_wheel_install_and_an_editable_checkout_compare_by_package_path(
    capsys: pytest.CaptureFixture[str], bed: dict[str, Path], tmp_path: Path, wheel_cache: Path
) -> None:
    target = make_venv(tmp_path / "wheel-venv")
    uv_install(target, "--no-index", str(fetch(wheel_cache, "sglang==0.5.11")))
    inv = inventory(bed, target, tmp_path / "inv.toml")
    _code, out, _err = run_cli(capsys, "--inventory", str(inv), "-q", "diff", "--format", "json")
    found = {(f["subject"], f["kind"]) for f in json.loads(out)["findings"]}
    # The wheel has dflash_worker.py as released; the reference's is patched. Its tools/
    # top-level folder is no file of the checkout's package... and nothing else differs.
    assert {(PATCHED, "file"), (ADDED, "file"), (DELETED, "file")} <= found
    assert all(kind == "file" and s.startswith(("sglang/", "tools/")) for s, kind in found), found


# ---------------------------------------------------------------------------------------
# Installing on a venv made by uv (no pip)

APP = {"app/__init__.py": "", "app/main.py": "from dep import NEW\n"}


@pytest.fixture(scope="module")
def pins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pins")
    wheels = root / "wheels"
    app = make_wheel(wheels, "app", "1.0", APP)
    old = make_wheel(wheels, "dep", "1.0", {"dep/__init__.py": "OLD = 1\n"})
    new = make_wheel(wheels, "dep", "2.0", {"dep/__init__.py": "OLD = 1\nNEW = 2\n"})
    ref = uv_venv(root / "ref")
    uv_install(ref, str(app), str(new))
    return {"root": root, "wheels": wheels, "ref": ref, "app": app, "old": old}


def pin_inventory(pins: dict[str, Path], target: Path, path: Path) -> Path:
    path.write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = ["app"]\n'
        '[service]\ncommand = ["{python}", "-m", "app.main"]\nentrypoint = "app.main"\n'
        f'[hosts.ref]\npython = "{pins["ref"]}"\n'
        f'[hosts.tgt]\npython = "{target}"\n'
        f'pip_options = ["--no-index", "--find-links", "{pins["wheels"]}"]\n'
    )
    return path


@pytest.fixture
def bare(pins: dict[str, Path], tmp_path: Path) -> Path:
    target = uv_venv(tmp_path / "target")
    uv_install(target, str(pins["app"]), str(pins["old"]))
    return target


def dep_version(python: Path) -> str:
    return dict(state(python)[0])["dep"]


def watched(python: Path, name: str) -> dict[str, str]:
    """A watched distribution's files, as the probe keys them, read afresh."""
    snap = collect(
        HostSpec(name="t", python=str(python), watch=(name,)),
        LocalRunner("t"),
        ProbeOptions(cache_dir=""),
    )
    found = snap.distribution(name)
    assert found is not None and found.files is not None
    return dict(found.files)


@pytest.mark.parametrize("uv_on_path", [True, False])
def test_a_uv_venv_without_pip_is_repaired_with_uv_or_by_copying(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    pins: dict[str, Path],
    bare: Path,
    tmp_path: Path,
    uv_on_path: bool,
) -> None:
    inv = pin_inventory(pins, bare, tmp_path / "inv.toml")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if uv_on_path:
        (bin_dir / "uv").symlink_to(uv())
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    code, out, _ = run_cli(capsys, "--inventory", str(inv), "-q", "repair")
    assert code == 1
    if uv_on_path:
        assert "pin dep==2.0: uv pip install --no-deps" in out
        # the plan names no program: uv is found on the host when the plan is applied
        assert str(bin_dir) not in out
    else:
        assert "sync-dist: copy dep 2.0 from the reference (the target's Python has no pip" in out
    code, _, err = run_cli(
        capsys, "--inventory", str(inv), "-q", "repair", "--apply", "--no-deploy"
    )
    assert code == 0, err
    assert dep_version(bare) == "2.0"
    code, _, _ = run_cli(capsys, "--inventory", str(inv), "-q", "diff")
    assert code == 0


def test_a_plan_that_cannot_install_is_refused_before_anything_changes(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    pins: dict[str, Path],
    bare: Path,
    tmp_path: Path,
) -> None:
    from tests.repair.test_repair import tree_hash

    inv = pin_inventory(pins, bare, tmp_path / "inv.toml")
    lock = tmp_path / "ref.lock"
    assert run_cli(capsys, "--inventory", str(inv), "-q", "lock", "ref", "-o", str(lock))[0] == 0
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    before = tree_hash(bare)
    code, _, err = run_cli(
        capsys, "--inventory", str(inv), "-q", "repair", str(lock), "tgt", "--apply", "--no-deploy"
    )
    assert code == 4
    line = err.strip().splitlines()[-1]
    assert line.startswith("envsync: tgt: cannot install dep==2.0: the target's Python has no pip")
    assert "nothing was changed" in line and "-m ensurepip" in line
    assert tree_hash(bare) == before
    assert dep_version(bare) == "1.0"
