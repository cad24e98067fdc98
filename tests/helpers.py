"""Test helpers: real wheels written for the purpose, real venvs, real pip installs."""

from __future__ import annotations

import base64
import hashlib
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
    files: dict[str, str],
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
    entries = dict(files)
    entries[f"{info}/METADATA"] = metadata
    entries[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: envsync-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    if top_level is not None:
        entries[f"{info}/top_level.txt"] = "".join(t + "\n" for t in top_level)
    record = "".join(
        f"{path},{_digest(text.encode())},{len(text.encode())}\n" for path, text in entries.items()
    )
    record += f"{info}/RECORD,,\n"
    entries[f"{info}/RECORD"] = record
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    directory.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name_, text in entries.items():
            zf.writestr(name_, text)
    return path


def fetch_wheel(cache: Path, requirement: str) -> Path:
    """The wheel of NAME==VERSION from the cache, downloaded once through this machine's
    own pip configuration (the example builder's own download)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "build_hosts", REPO / "examples" / "build_hosts.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.download(cache, requirement)  # type: ignore[no-any-return]


def make_venv(root: Path, *, with_pip: bool = False) -> Path:
    """A real venv; returns its python."""
    venv.EnvBuilder(with_pip=with_pip, clear=True).create(root)
    return root / "bin" / "python"


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
