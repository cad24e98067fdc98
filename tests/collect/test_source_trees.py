"""Editable and development installs, and the git state of their checkouts, read by the
probe from real installs (real pip, real uv, real setuptools) and real git repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from envsync.collect import ProbeOptions, collect
from envsync.collect.importcheck import check_imports
from envsync.model.environment import Distribution, GitState, Snapshot
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from tests.helpers import make_venv
from tests.source_trees import backend_wheels, editable_install, git, uv_venv, write_project

pytestmark = pytest.mark.slow

FILES = {
    "pkgx/__init__.py": "VERSION = 1\n",
    "pkgx/main.py": "from pkgx.core import serve\n",
    "pkgx/core.py": "def serve():\n    return 1\n",
    "pkgx/data/table.json": "{}\n",
}
KEYS = sorted(FILES)


def probe(python: Path, watch: str = "pkgx") -> Snapshot:
    return collect(
        HostSpec(name="t", python=str(python), watch=(watch,)),
        LocalRunner("t"),
        ProbeOptions(cache_dir="", roots=(f"{watch}.main",), internal=(watch,)),
    )


def dist(snap: Snapshot, name: str = "pkgx") -> Distribution:
    found = snap.distribution(name)
    assert found is not None
    return found


@pytest.fixture(scope="module")
def wheels(wheel_cache: Path) -> Path:
    return backend_wheels(wheel_cache)


@pytest.mark.parametrize(
    ("by", "src", "mode"),
    [
        ("pip", False, "editable-finder"),  # flat layout: setuptools' finder MAPPING
        ("pip", True, "editable-pth"),  # src layout: a .pth naming src/
        ("uv", False, "editable-finder"),
        ("uv", True, "editable-pth"),
    ],
)
def test_editable_installs_are_read_from_their_source_tree(
    tmp_path: Path, wheels: Path, by: str, src: bool, mode: str
) -> None:
    project = write_project(tmp_path / "checkout", "pkgx", FILES, src=src)
    # Not part of the package: bytecode and build metadata beside it.
    (project / ("src/pkgx" if src else "pkgx") / "__pycache__").mkdir()
    (project / ("src/pkgx" if src else "pkgx") / "__pycache__" / "core.cpython-311.pyc").write_text(
        ""
    )
    python = uv_venv(tmp_path / "venv") if by == "uv" else make_venv(tmp_path / "venv")
    editable_install(python, project, wheels, by=by)
    snap = probe(python)
    pkgx = dist(snap)
    assert pkgx.source is not None and pkgx.source.mode == mode
    assert sorted(pkgx.files or {}) == KEYS
    assert pkgx.file_path("pkgx/core.py") == str(
        project / ("src" if src else "") / "pkgx" / "core.py"
    ).replace("//", "/")
    assert pkgx.source.git is not None and not isinstance(pkgx.source.git, GitState)
    # The import graph and the name checks follow the editable install as the interpreter does.
    assert snap.startup is not None
    main = snap.startup.modules["pkgx.main"]
    core = snap.startup.modules["pkgx.core"]
    assert main.kind == "source" and core.kind == "source"
    assert core.file is not None and core.file.startswith(str(project))
    assert "serve" in (core.defines or ())
    (outcome,) = check_imports(
        HostSpec(name="t", python=str(python)), LocalRunner("t"), ["pkgx.main"]
    )
    assert outcome.ok


def test_develop_installs_and_source_trees_on_a_pth_are_read_too(
    tmp_path: Path, wheels: Path
) -> None:
    # `setup.py develop`: an .egg-link and easy-install.pth, the .egg-info in the checkout.
    project = write_project(tmp_path / "dev", "pkgx", FILES)
    (project / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    python = make_venv(tmp_path / "venv", with_pip=True)
    subprocess.run(
        [str(python), "setup.py", "-q", "develop", "--no-deps"],
        cwd=project,
        check=True,
        capture_output=True,
    )
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    assert list(site.glob("*.egg-link"))
    pkgx = dist(probe(python))
    assert pkgx.source is not None and pkgx.source.mode == "develop"
    assert sorted(pkgx.files or {}) == KEYS
    # A checkout put on sys.path by a hand-written .pth, with its egg_info metadata.
    tree = tmp_path / "tree"
    write_project(
        tree,
        "pkgy",
        {k.replace("pkgx", "pkgy"): v.replace("pkgx", "pkgy") for k, v in FILES.items()},
    )
    (tree / "pkgy.egg-info").mkdir()
    (tree / "pkgy.egg-info" / "PKG-INFO").write_text(
        "Metadata-Version: 2.1\nName: pkgy\nVersion: 1.0\n"
    )
    (tree / "pkgy.egg-info" / "top_level.txt").write_text("pkgy\n")
    (site / "tree.pth").write_text(f"{tree}\n")
    pkgy = dist(probe(python, "pkgy"), "pkgy")
    assert pkgy.source is not None
    assert sorted(pkgy.files or {}) == [k.replace("pkgx", "pkgy") for k in KEYS]


MARKER_SCRIPT = "#!/bin/sh\necho ran >> {marker}\ncat\n"


@pytest.mark.parametrize(("index_version", "packed"), [(2, False), (4, False), (2, True)])
def test_git_state_is_read_without_running_anything_the_checkout_controls(
    tmp_path: Path, wheels: Path, index_version: int, packed: bool
) -> None:
    project = write_project(tmp_path / "repo" / "python", "pkgx", FILES)
    repo = tmp_path / "repo"
    (repo / "README.md").write_text("outside the package\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "remote", "add", "origin", "https://user:s3cret@git.example.invalid/org/pkgx.git")
    if index_version != 2:
        git(repo, "update-index", "--index-version", str(index_version))
    if packed:
        git(repo, "gc", "-q")
    head = git(repo, "rev-parse", "HEAD")
    python = make_venv(tmp_path / "venv")
    editable_install(python, project, wheels)
    # Local changes: modified, staged-new, deleted, untracked (and junk that is no file of
    # the package).
    (project / "pkgx" / "core.py").write_text("def serve():\n    return 2\n")
    (project / "pkgx" / "staged.py").write_text("S = 1\n")
    index = repo / ".git" / "index"
    if not packed:
        blob = git(repo, "hash-object", "-w", "--no-filters", "python/pkgx/staged.py")
        git(
            repo,
            "update-index",
            "--add",
            "--cacheinfo",
            f"100644,{blob},python/pkgx/staged.py",
        )
    # The checkout's own config would run a program on `git status`: a monitor, a clean
    # filter for every file, hooks.
    marker = tmp_path / "marker"
    program = tmp_path / "mark.sh"
    program.write_text(MARKER_SCRIPT.format(marker=marker))
    program.chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(program))
    git(repo, "config", "filter.mark.clean", str(program))
    git(repo, "config", "filter.mark.smudge", str(program))
    (repo / ".git" / "info" / "attributes").write_text("* filter=mark\n")
    for hook in ("post-index-change", "pre-commit", "post-checkout", "reference-transaction"):
        (repo / ".git" / "hooks" / hook).write_text(program.read_text())
        (repo / ".git" / "hooks" / hook).chmod(0o755)
    (project / "pkgx" / "data" / "table.json").unlink()
    (project / "pkgx" / "dflash_worker.py").write_text("W = 1\n")
    (project / "pkgx.egg-info").mkdir(exist_ok=True)
    (project / "pkgx.egg-info" / "PKG-INFO").write_text("junk\n")
    assert not marker.exists()
    before = index.read_bytes()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PATH", str(tmp_path / "no-git-here"))  # the probe never needs git
        pkgx = dist(probe(python))
    assert not marker.exists(), "the probe ran a program of the checkout's config"
    assert index.read_bytes() == before
    assert pkgx.source is not None
    state = pkgx.source.git
    assert isinstance(state, GitState)
    assert (state.root, state.commit, state.branch) == (str(repo), head, "main")
    assert state.remote == "https://git.example.invalid/org/pkgx.git"
    assert state.modified == ("pkgx/core.py",)
    assert state.deleted == ("pkgx/data/table.json",)
    if packed:
        assert state.untracked == ("pkgx/dflash_worker.py", "pkgx/staged.py")
        assert not state.against_head
    else:
        assert state.added == ("pkgx/staged.py",)
        assert state.untracked == ("pkgx/dflash_worker.py",)
        assert state.against_head
    assert pkgx.patched == ("pkgx/core.py",)
    assert pkgx.missing == ("pkgx/data/table.json",)
    assert "pkgx.egg-info/PKG-INFO" not in (pkgx.files or {})
    # The trap is armed: git itself runs the checkout's program on a plain status.
    subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, check=True
    )
    assert marker.exists()
