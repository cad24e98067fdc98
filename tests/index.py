"""A real package index on loopback: a PEP 503 simple index of real wheels, served by
`python -m http.server` on 127.0.0.1 (a fixture of the pylock tests; also a script:
`python tests/index.py DIR WHEEL...` builds the index and serves it until interrupted)."""

from __future__ import annotations

import hashlib
import html
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path

from packaging.utils import parse_sdist_filename, parse_wheel_filename


def _project(filename: str) -> str:
    if filename.endswith(".whl"):
        return str(parse_wheel_filename(filename)[0])
    return str(parse_sdist_filename(filename)[0])


def _requires_python(wheel: Path) -> str | None:
    """Requires-Python of a wheel's METADATA, as an index shows it (PEP 503)."""
    if wheel.suffix != ".whl":
        return None
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        for line in zf.read(name).decode("utf-8", "replace").splitlines():
            if line.startswith("Requires-Python:"):
                return line.partition(":")[2].strip()
            if not line:
                return None
    return None


def build_index(root: Path, files: Iterable[Path]) -> Path:
    """Copy the files under root/files and write root/simple/<project>/index.html."""
    store = root / "files"
    store.mkdir(parents=True, exist_ok=True)
    projects: dict[str, list[str]] = {}
    for path in files:
        shutil.copyfile(path, store / path.name)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        requires = _requires_python(path)
        data = f' data-requires-python="{html.escape(requires)}"' if requires else ""
        anchor = (
            f'<a href="../../files/{path.name}#sha256={digest}"{data}>{html.escape(path.name)}</a>'
        )
        projects.setdefault(_project(path.name), []).append(anchor)
    for name, anchors in projects.items():
        page = root / "simple" / name
        page.mkdir(parents=True, exist_ok=True)
        (page / "index.html").write_text(
            "<!DOCTYPE html><html><body>\n" + "<br>\n".join(anchors) + "\n</body></html>\n"
        )
    listing = "".join(f'<a href="{n}/">{n}</a>\n' for n in sorted(projects))
    (root / "simple" / "index.html").write_text(
        f"<!DOCTYPE html><html><body>\n{listing}</body></html>\n"
    )
    return root


class IndexServer:
    """`python -m http.server` serving an index directory on a free loopback port."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.process: subprocess.Popen[str] | None = None
        self.port = 0

    def start(self) -> IndexServer:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-u",
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                "--directory",
                str(self.root),
                "0",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N (...)"
        self.port = int(line.split(" port ")[1].split()[0])
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/simple/"

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


if __name__ == "__main__":
    server = IndexServer(build_index(Path(sys.argv[1]), map(Path, sys.argv[2:]))).start()
    print(server.url, flush=True)
    try:
        server.process.wait()  # type: ignore[union-attr]
    except KeyboardInterrupt:
        server.stop()
