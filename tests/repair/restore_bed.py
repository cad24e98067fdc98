"""The bed of the restore tests: small real wheels, a target venv with pip, the CLI run in
processes of its own, and the whole environment compared path by path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.figures import add
from tests.helpers import make_venv, make_wheel, pip_install, site_packages
from tests.repair.conftest import env_listing, envsync

MANY = 1500  # files of pkg 1.0: a restore that takes long enough to be killed in its middle
PKG1 = {
    "pkg/__init__.py": "V = 1\n",
    "pkg/a.py": "A = 1\n",
    **{f"pkg/data/f{i:04d}.txt": f"{i}\n" * 20 for i in range(MANY)},
}
PKG2 = {"pkg/__init__.py": "V = 2\n", "pkg/b.py": "B = 2\n", "pkg/sub/__init__.py": ""}
NEW = {
    "newpkg/__init__.py": "",
    "newpkg/core/__init__.py": "",
    "newpkg/core/m.py": "M = 1\n",
}


def replayed(case: str) -> None:
    add("repair breaks replayed (byte-identical or refused)", case)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("restore-wheels")
    index = root / "index"
    return {
        "index": index,
        "pkg1": make_wheel(root / "w", "pkg", "1.0", PKG1),
        "pkg2": make_wheel(index, "pkg", "2.0", PKG2),
        "new": make_wheel(index, "newpkg", "1.0", NEW),
        "zzz": make_wheel(root / "w", "zzz", "1.0", {"zzz.py": ""}),
        "pkg3": make_wheel(root / "w3", "pkg", "3.0", {"pkg/__init__.py": "V = 3\n"}),
        "empty": root / "empty",
    }


@pytest.fixture
def tgt(wheels: dict[str, Path], tmp_path: Path) -> Path:
    python = make_venv(tmp_path / "tgt", with_pip=True)
    pip_install(python, wheels["pkg1"], wheels["zzz"])
    return python


def inventory(path: Path, target: Path, index: Path, reference: Path | None = None) -> Path:
    text = (
        f'[defaults]\ntarget = "tgt"\n[hosts.tgt]\npython = "{target}"\n'
        f'pip_options = ["--no-index", "--find-links", "{index}"]\n'
    )
    if reference is not None:
        text = text.replace("[defaults]\n", '[defaults]\nreference = "ref"\n')
        text += f'[hosts.ref]\npython = "{reference}"\n'
    path.write_text(text)
    return path


def requirements(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def cli(inv: Path, *argv: str, timeout: float = 600) -> tuple[int, str]:
    """envsync in a process of its own: (exit code, stderr)."""
    proc = envsync(inv, *argv)
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def listing(inv: Path) -> list[tuple[str, str, str]]:
    """`rollback --list tgt`: (mark, id, state) of each backup, newest first."""
    proc = envsync(inv, "rollback", "tgt", "--list")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    rows = out.strip().splitlines()[1:]
    return [(r[0], r[2:].split()[0], r[2:].split()[2]) for r in rows]


APPLY = ("repair", "--only", "all", "--prefer", "fix", "--apply", "--no-deploy")


def last_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert lines, "no line on stderr"
    assert "Traceback" not in err, err
    return lines[-1]


def assert_same(python: Path, before: dict[str, str]) -> None:
    now = env_listing(python)
    changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    assert changed == [], changed[:20]


def add_record_lines(python: Path, dist_info: str, *lines: str) -> None:
    record = site_packages(python) / dist_info / "RECORD"
    record.write_text(record.read_text() + "".join(f"{line},,\n" for line in lines))


def applied(inv: Path, ref: Path) -> None:
    code, err = cli(inv, *APPLY[:1], str(ref), "tgt", *APPLY[1:])
    assert code == 0, err
