"""Pairs of real venvs whose packages hold real shared objects, for `envsync diff` tests of the
native layer: each distribution installed as pip leaves it (files, METADATA, RECORD), the
service a module `app` that imports them; the real loader's word taken in each venv."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from envsync.collect.importcheck import NO_IMPORT_CHECK, ImportCheck
from envsync.compare import targets as compare
from envsync.model.findings import Finding, Report
from envsync.runner import Runners
from envsync.sources.inventory import load_inventory
from envsync.sources.session import Session

SITE = f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"


def venv(root: Path) -> Path:
    """A real venv of this interpreter (no pip: nothing is installed from an index)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return root / SITE


def install(site: Path, name: str, version: str, files: dict[str, Path | str]) -> None:
    """`files` ({path in site-packages: a file to copy, or text}) as distribution NAME."""
    rows = []
    for rel, content in files.items():
        dest = site / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        data = content.read_bytes() if isinstance(content, Path) else content.encode()
        dest.write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{rel},sha256={digest},{len(data)}")
    meta = site / f"{name.replace('-', '_')}-{version}.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (meta / "INSTALLER").write_text("pip\n")
    tops = sorted({rel.split("/")[0].removesuffix(".py") for rel in files})
    (meta / "top_level.txt").write_text("\n".join(tops) + "\n")
    for extra in ("METADATA", "INSTALLER", "top_level.txt", "RECORD"):
        rows.append(f"{meta.name}/{extra},,")
    (meta / "RECORD").write_text("\n".join(rows) + "\n")


def real_import(root: Path, module: str = "app", env: dict[str, str] | None = None) -> str | None:
    """`import module` in the venv's own interpreter: None, or the exception's message."""
    code = (
        "import sys\ntry:\n    __import__(sys.argv[1])\n"
        "except Exception as e:\n    print(str(e).splitlines()[0])\n"
    )
    out = subprocess.run(
        [str(root / "bin" / "python"), "-c", code, module],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return out.stdout.strip() or None


@dataclass(frozen=True)
class Bed:
    folder: Path
    ref: Path  # the reference venv
    tgt: Path  # the target venv

    @property
    def ref_site(self) -> Path:
        return self.ref / SITE

    @property
    def tgt_site(self) -> Path:
        return self.tgt / SITE

    def inventory(self) -> Path:
        inv = self.folder / "envsync.toml"
        inv.write_text(
            '[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = []\n'
            '[service]\ncommand = ["{python}", "-m", "app"]\nport = 30999\n'
            f'[hosts.ref]\npython = "{self.ref}/bin/python"\n'
            f'[hosts.tgt]\npython = "{self.tgt}/bin/python"\n'
        )
        return inv

    def compare(
        self, import_check: bool = False, inventory: Path | None = None
    ) -> compare.Comparison:
        check = ImportCheck(run=True) if import_check else NO_IMPORT_CHECK
        path = inventory or self.inventory()
        with Session(inventory=load_inventory(str(path), {}), runners=Runners()) as session:
            return compare.diff(session, import_check=check)

    def diff(self, import_check: bool = False, inventory: Path | None = None) -> Report:
        return self.compare(import_check, inventory).report


def make_bed(folder: Path) -> Bed:
    return Bed(folder=folder, ref=folder / "ref", tgt=folder / "tgt")


def native(report: Report) -> list[Finding]:
    return [f for f in report.findings if f.kind == "native"]
