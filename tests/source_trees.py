"""Test helpers for source checkouts: real projects, real editable installs by real pip
and uv, real git repositories (git runs here in the tests; envsync itself never runs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.classify.test_sglang_wheels import fetch

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    out = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def uv() -> str:
    """The uv that envsync's dev extras install beside this interpreter."""
    found = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    assert Path(found).exists(), "uv is not installed (pip install -e '.[dev]')"
    return found


# The build backend of the test projects, fetched into the wheel cache once: editable
# builds then run offline (build isolation installs it from --find-links).
SETUPTOOLS = "setuptools==80.9.0"


def backend_wheels(cache: Path) -> Path:
    fetch(cache, SETUPTOOLS)
    return cache


def uv_install(python: Path, *args: str) -> None:
    """`uv pip install --no-deps` into the venv of `python`."""
    subprocess.run(
        [uv(), "pip", "install", "-q", "--python", str(python), "--no-deps", *args],
        check=True,
        capture_output=True,
    )


def write_project(
    root: Path, name: str, files: dict[str, str], *, src: bool = False, version: str = "1.0"
) -> Path:
    """A setuptools project (flat layout, or src/ layout) with the given package files."""
    base = root / "src" if src else root
    for rel, text in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    find = "" if src else f'[tool.setuptools.packages.find]\ninclude = ["{name}*"]\n'
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\n{find}'
    )
    return root


def editable_install(python: Path, project: Path, wheels: Path, *, by: str = "pip") -> None:
    """`pip install -e` (this interpreter's pip, aimed at the venv) or `uv pip install -e`."""
    offline = ["--no-index", "--find-links", str(wheels)]
    if by == "uv":
        argv = [uv(), "pip", "install", "-q", "--python", str(python), *offline]
    else:
        argv = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", *offline]
        argv.append("--disable-pip-version-check")
    subprocess.run([*argv, "-e", str(project)], check=True, capture_output=True)


def uv_venv(root: Path) -> Path:
    """A venv made by `uv venv`: no pip inside."""
    subprocess.run(
        [uv(), "venv", "-q", "--python", sys.executable, str(root)], check=True, capture_output=True
    )
    return root / "bin" / "python"
