"""Test helpers: real wheels written for the purpose, real venvs, real pip installs."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(
    directory: Path,
    name: str,
    version: str,
    files: dict[str, str] | dict[str, str | bytes],
    *,
    requires: tuple[str, ...] = (),
    top_level: tuple[str, ...] | None = None,
) -> Path:
    """Write a real, installable wheel with a correct RECORD."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    metadata += "\nA package written for envsync's tests.\n"
    entries: dict[str, str | bytes] = dict(files)
    entries[f"{info}/METADATA"] = metadata
    entries[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: envsync-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    if top_level is not None:
        entries[f"{info}/top_level.txt"] = "".join(t + "\n" for t in top_level)
    data = {
        path: text if isinstance(text, bytes) else text.encode() for path, text in entries.items()
    }
    record = "".join(f"{path},{_digest(b)},{len(b)}\n" for path, b in data.items())
    record += f"{info}/RECORD,,\n"
    entries[f"{info}/RECORD"] = record
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    directory.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name_, text in entries.items():
            zf.writestr(name_, text)
    return path


def fetch(cache: Path, requirement: str) -> Path:
    """The real wheel of `NAME==VERSION` from the package index, kept in `cache`."""
    from examples.build_hosts import wheel

    return wheel(cache, requirement)


# Every venv the tests made (their envsync state, lock and backups, live inside them).
VENVS: list[Path] = []


def make_venv(root: Path, *, with_pip: bool = False) -> Path:
    """A real venv; returns its python."""
    venv.EnvBuilder(with_pip=with_pip, clear=True).create(root)
    VENVS.append(root)
    return root / "bin" / "python"


def state_dir(python: Path) -> Path:
    """envsync's state folder of the venv of `python` (its lock, backups, service state)."""
    return python.parent.parent / ".envsync"


def pip_install(python: Path, *wheels: Path) -> None:
    """Install wheels into the venv of `python` with this interpreter's real pip, --no-deps."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            *map(str, wheels),
        ],
        check=True,
        capture_output=True,
    )


OLD_NS = 1_600_000_000_000_000_000  # a time the host's caches keep (not the last seconds)


def service_venv(root: Path) -> Path:
    """A real venv at `root` with a small service package (svc.main imports svc.util, which
    imports alpha: missing), its files dated back so that the host's caches may hold them."""
    python = make_venv(root)
    pkg = site_packages(python) / "svc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "main.py").write_text("import svc.util\nimport json\n")
    (pkg / "util.py").write_text("import alpha\n")
    for path in [pkg, *pkg.rglob("*"), pkg.parent]:
        os.utime(path, ns=(OLD_NS, OLD_NS))
    return python


def site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def run_cli(capsys: object, *argv: str) -> tuple[int, str, str]:
    """Run the envsync CLI in this process: (exit code, stdout, stderr)."""
    from envsync.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()  # type: ignore[attr-defined]
    return code, out, err


def build_example(dest: Path, wheels: Path, runtime: Path | None = None) -> None:
    """Build the built-in example's hosts into `dest` (examples/build_hosts.py)."""
    argv = [
        sys.executable,
        str(REPO / "examples" / "build_hosts.py"),
        "--dest",
        str(dest),
        "--wheels",
        str(wheels),
    ]
    if runtime is not None:
        argv += ["--runtime", str(runtime)]
    subprocess.run(argv, check=True, capture_output=True)


def comparable(snapshot: dict) -> dict:  # type: ignore[type-arg]
    """A snapshot's JSON without what describes one act of collection, nor the host name."""
    from envsync.model import TRANSPORT_FIELDS

    for key in (*TRANSPORT_FIELDS, "host"):
        snapshot.pop(key, None)
    return snapshot


def pep751_problems(doc: dict) -> list[str]:  # type: ignore[type-arg]
    """What makes a parsed pylock.toml invalid under PEP 751 (its required keys and types,
    one source per package); empty when it is valid."""
    import datetime

    out = []
    if doc.get("lock-version") != "1.0":
        out.append("lock-version must be '1.0'")
    if not isinstance(doc.get("created-by"), str):
        out.append("created-by must be a string")
    for key in ("requires-python",):
        if key in doc and not isinstance(doc[key], str):
            out.append(f"{key} must be a string")
    if not all(isinstance(m, str) for m in doc.get("environments", [])):
        out.append("environments must be strings")
    packages = doc.get("packages")
    if not isinstance(packages, list):
        return [*out, "packages must be an array of tables"]

    def file_problems(where: str, f: dict) -> list[str]:  # type: ignore[type-arg]
        bad = []
        if not f.get("hashes") or not isinstance(f["hashes"], dict):
            bad.append(f"{where}: hashes are required")
        if "url" not in f and "path" not in f:
            bad.append(f"{where}: url or path is required")
        if "upload-time" in f and not isinstance(f["upload-time"], datetime.datetime):
            bad.append(f"{where}: upload-time must be a datetime")
        if "size" in f and not isinstance(f["size"], int):
            bad.append(f"{where}: size must be an integer")
        return bad

    for i, p in enumerate(packages):
        where = f"packages[{i}] ({p.get('name')})"
        if not isinstance(p.get("name"), str):
            out.append(f"{where}: name is required")
        sources = [k for k in ("vcs", "directory", "archive") if k in p]
        files = [k for k in ("sdist", "wheels") if k in p]
        if len(sources) + (1 if files else 0) != 1:
            out.append(f"{where}: exactly one of vcs, directory, archive, or sdist/wheels")
        if files and not isinstance(p.get("version"), str):
            out.append(f"{where}: version is required with sdist or wheels")
        for wheel in p.get("wheels", []):
            out += file_problems(f"{where}.wheels", wheel)
        if "sdist" in p:
            out += file_problems(f"{where}.sdist", p["sdist"])
        if "archive" in p:
            out += file_problems(f"{where}.archive", p["archive"])
        if "vcs" in p and not {"type", "commit-id"} <= set(p["vcs"]):
            out.append(f"{where}.vcs: type and commit-id are required")
        if "directory" in p and "path" not in p["directory"]:
            out.append(f"{where}.directory: path is required")
    return out
