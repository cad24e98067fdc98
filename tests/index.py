"""A real package index on loopback, of real wheels, served over HTTP on 127.0.0.1.

`build_index` writes a simple index: for each project an HTML page (PEP 503) and a JSON
page (PEP 691, with sizes and upload times). `IndexServer` serves it in a subprocess:
`python -m http.server` itself (HTML only, as a plain static index), or with `json=True`
this file's handler, a `http.server` handler that answers a JSON `Accept` with the JSON
page, as an index that speaks PEP 691 does. As a script:
`python tests/index.py [--json] DIR WHEEL...` builds the index and serves it.
"""

from __future__ import annotations

import hashlib
import html
import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from datetime import datetime, timezone
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from packaging.utils import parse_sdist_filename, parse_wheel_filename

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def _project(filename: str) -> str:
    if filename.endswith(".whl"):
        return str(parse_wheel_filename(filename)[0])
    return str(parse_sdist_filename(filename)[0])


def _requires_python(wheel: Path) -> str | None:
    """Requires-Python of a wheel's METADATA, as an index shows it."""
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
    """Copy the files under root/files; write root/simple/<project>/index.{html,json}."""
    store = root / "files"
    store.mkdir(parents=True, exist_ok=True)
    projects: dict[str, list[dict[str, object]]] = {}
    for path in files:
        shutil.copyfile(path, store / path.name)
        data = path.read_bytes()
        uploaded = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
        entry: dict[str, object] = {
            "filename": path.name,
            "url": f"../../files/{path.name}",
            "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
            "size": len(data),
            "upload-time": uploaded.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        }
        requires = _requires_python(path)
        if requires:
            entry["requires-python"] = requires
        projects.setdefault(_project(path.name), []).append(entry)
    for name, entries in projects.items():
        page = root / "simple" / name
        page.mkdir(parents=True, exist_ok=True)
        anchors = []
        for e in entries:
            required = e.get("requires-python")
            attr = f' data-requires-python="{html.escape(str(required))}"' if required else ""
            sha = e["hashes"]["sha256"]  # type: ignore[index]  # an entry is JSON-like dict[str, object]; its hashes are a dict
            anchors.append(f'<a href="{e["url"]}#sha256={sha}"{attr}>{e["filename"]}</a>')
        (page / "index.html").write_text(
            "<!DOCTYPE html><html><body>\n" + "<br>\n".join(anchors) + "\n</body></html>\n"
        )
        doc = {"meta": {"api-version": "1.1"}, "name": name, "files": entries}
        (page / "index.json").write_text(json.dumps(doc, indent=1))
    listing = "".join(f'<a href="{n}/">{n}</a>\n' for n in sorted(projects))
    (root / "simple" / "index.html").write_text(
        f"<!DOCTYPE html><html><body>\n{listing}</body></html>\n"
    )
    return root


class JsonIndexHandler(SimpleHTTPRequestHandler):
    """Static files, but a project page asked for as JSON (PEP 691) is the JSON page."""

    def send_head(self):
        if JSON_TYPE in self.headers.get("Accept", "") and self.path.startswith("/simple/"):
            page = Path(self.translate_path(self.path)) / "index.json"
            if page.is_file():
                body = page.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", JSON_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                import io

                return io.BytesIO(body)
        return super().send_head()


class IndexServer:
    """The index served on a free loopback port, in a subprocess."""

    def __init__(self, root: Path, *, json: bool = False) -> None:
        self.root = root
        self.json = json
        self.process: subprocess.Popen[str] | None = None
        self.port = 0

    def start(self) -> IndexServer:
        if self.json:
            argv = [sys.executable, "-u", __file__, "--serve-json", str(self.root)]
        else:
            argv = [sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1"]
            argv += ["--directory", str(self.root), "0"]
        self.process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
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


def _serve_json(root: str) -> None:
    import functools

    handler = functools.partial(JsonIndexHandler, directory=root)
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        print(f"Serving HTTP on 127.0.0.1 port {server.server_address[1]} (json)", flush=True)
        server.serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "--serve-json":
        _serve_json(sys.argv[2])
    else:
        as_json = sys.argv[1] == "--json"
        args = sys.argv[2:] if as_json else sys.argv[1:]
        server = IndexServer(build_index(Path(args[0]), map(Path, args[1:])), json=as_json)
        print(server.start().url, flush=True)
        try:
            server.process.wait()  # type: ignore[union-attr]  # process is None until start(), which the line above calls
        except KeyboardInterrupt:
            server.stop()
