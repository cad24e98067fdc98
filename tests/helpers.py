"""Test helpers: real wheels written for the purpose, real venvs, real pip installs."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

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
    """A real venv; returns its python. `with_pip`: with what ensurepip installs (pip and
    setuptools), copied from a venv ensurepip made once per test process (6 s each time
    on this machine; the copy, file for file the same, takes a fraction of it)."""
    venv.EnvBuilder(clear=True).create(root)
    VENVS.append(root)
    python = root / "bin" / "python"
    if with_pip:
        _copy_pip(_pip_template(), root)
    return python


_TEMPLATE: list[Path] = []


def _pip_template() -> Path:
    """A venv that ensurepip gave pip to, made at first use, removed at exit."""
    if not _TEMPLATE:
        import atexit
        import shutil
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="envsync-pip-template-"))
        atexit.register(shutil.rmtree, folder, True)
        venv.EnvBuilder(with_pip=True, clear=True).create(folder / "venv")
        _TEMPLATE.append(folder / "venv")
    return _TEMPLATE[0]


def _copy_pip(template: Path, root: Path) -> None:
    """What ensurepip wrote into `template` (its site-packages, its bin/pip* scripts with
    their interpreter line) written into the venv at `root`, as ensurepip would."""
    import shutil

    source, dest = (
        site_packages(template / "bin" / "python"),
        site_packages(root / "bin" / "python"),
    )
    for entry in source.iterdir():
        if entry.is_dir():
            shutil.copytree(entry, dest / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, dest / entry.name)
    scripts: dict[str, bytes] = {}
    for script in (template / "bin").glob("pip*"):
        head, _, body = script.read_text().partition("\n")
        data = f"#!{root / 'bin' / Path(head[2:]).name}\n{body}".encode()
        (root / "bin" / script.name).write_bytes(data)
        (root / "bin" / script.name).chmod(0o755)
        scripts[script.name] = data
    _record_scripts(dest, scripts)


def _record_scripts(site: Path, scripts: dict[str, bytes]) -> None:
    """Each RECORD in `site` that names one of `scripts` (bin/NAME: its text) given the
    digest and size of that text."""
    for record in site.glob("*.dist-info/RECORD"):
        lines = record.read_text().splitlines(keepends=True)
        changed = False
        for i, line in enumerate(lines):
            path = line.split(",", 1)[0]
            name = path.rsplit("/", 1)[-1]
            if path.startswith("../") and "/bin/" in path and name in scripts:
                lines[i] = f"{path},{_digest(scripts[name])},{len(scripts[name])}\n"
                changed = True
        if changed:
            record.write_text("".join(lines))


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


def date_back(root: Path) -> None:
    """`root` and everything under it dated OLD_NS (links themselves, not their targets)."""
    for path in [root, *root.rglob("*")]:
        os.utime(path, ns=(OLD_NS, OLD_NS), follow_symlinks=False)


def service_site(root: Path, main: str) -> Path:
    """A site-packages folder at `root`: a copy of the real rich package and a small service
    (svc.main, with the text `main`, and svc.util), every file dated back: what the
    in-process tests of the host's graph cache walk."""
    import rich

    shutil.copytree(Path(rich.__file__).parent, root / "rich")
    (root / "svc").mkdir()
    (root / "svc" / "__init__.py").write_text("")
    (root / "svc" / "main.py").write_text(main)
    (root / "svc" / "util.py").write_text("import os\n\nVALUE = 1\n")
    date_back(root)
    return root


def put_back(path: Path, data: bytes, n: int) -> None:
    """Write `path` as a rollback or a reinstall does: a new file renamed over it (another
    inode), dated OLD_NS + n seconds, as its folder (not the last seconds, which no cache
    trusts)."""
    new = path.with_name(path.name + ".new")
    new.write_bytes(data)
    os.utime(new, ns=(OLD_NS + n * 10**9, OLD_NS + n * 10**9))
    os.replace(new, path)
    os.utime(path.parent, ns=(OLD_NS + n * 10**9, OLD_NS + n * 10**9))


def with_extension(site: Path, importer: str, data: bytes = b"\x7fELF not read") -> Path:
    """An extension module svc.fast (a file the walk never reads: its content is `data`)
    in a `service_site`, imported by svc.`importer`, every file dated back: its path."""
    from importlib.machinery import EXTENSION_SUFFIXES

    fast = site / "svc" / f"fast{EXTENSION_SUFFIXES[0]}"
    fast.write_bytes(data)
    os.utime(fast, ns=(OLD_NS, OLD_NS))
    module = site / "svc" / f"{importer}.py"
    put_back(module, module.read_bytes() + b"from svc import fast\n", 1)
    return fast


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


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the envsync CLI in this process: (exit code, stdout, stderr)."""
    from envsync.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def pair_findings(capsys: pytest.CaptureFixture[str], pair: Path, *args: str) -> dict[str, dict]:
    """`envsync diff --format json` of a pair of venvs (`pair`/ref, `pair`/tgt) whose
    service is `python -m svc.main`: the findings by subject (the diff exits 1 or 4)."""
    inv = pair / "envsync.toml"
    inv.write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = []\n'
        '[service]\ncommand = ["{python}", "-m", "svc.main"]\n'
        f'[hosts.ref]\npython = "{pair / "ref" / "bin" / "python"}"\n'
        f'[hosts.tgt]\npython = "{pair / "tgt" / "bin" / "python"}"\n'
    )
    capsys.readouterr()
    code, out, err = run_cli(
        capsys, "--inventory", str(inv), "-q", "diff", "--format", "json", *args
    )
    assert code in (1, 4), err
    return {f["subject"]: f for f in json.loads(out)["findings"]}


def import_service(python: Path) -> subprocess.CompletedProcess[str]:
    """A real `import svc.main` in `python`."""
    return subprocess.run([str(python), "-c", "import svc.main"], capture_output=True, text=True)


_EXAMPLES: dict[str, Path] = {}


def build_example(dest: Path, wheels: Path, runtime: Path | None = None) -> None:
    """The built-in example's hosts in `dest`, as examples/build_hosts.py builds them: built
    once per test process (two venvs, ensurepip and pip installs: half a minute), then
    cloned for each caller, which may change its copy as it likes."""
    template = _EXAMPLES.get(str(wheels))
    if template is None:
        import atexit
        import shutil
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="envsync-example-template-"))
        atexit.register(shutil.rmtree, folder, True)
        argv = [sys.executable, str(REPO / "examples" / "build_hosts.py"), "--dest", str(folder)]
        subprocess.run([*argv, "--wheels", str(wheels)], check=True, capture_output=True)
        template = _EXAMPLES[str(wheels)] = folder
    from examples.build_hosts import RUNTIME_PTH, build_runtime

    shared = build_runtime(runtime.resolve()) if runtime is not None else None
    dest.mkdir(parents=True, exist_ok=True)
    for host in sorted(template.iterdir()):
        if (host / "bin" / "python").exists():
            clone_venv(host, dest / host.name)
            if shared is not None:
                (site_packages(dest / host.name / "bin" / "python") / RUNTIME_PTH).write_text(
                    f"{shared}\n"
                )


def example_inventory(dest: Path, wheels: Path) -> Path:
    """The example's ct129 and ct200 built into `dest` with the shared runtime, and an
    inventory of them: free ports, the demo server by its path, ct200 installing from the
    real wheels in the cache (as its index would serve them)."""
    from tests.sshd import free_port

    build_example(dest, wheels, runtime=REPO / "examples" / ".hosts" / "runtime")
    text = (REPO / "examples" / "envsync.toml").read_text().replace('".hosts/', f'"{dest}/')
    text = text.replace(
        '"{inventory_dir}/demo_server.py"', f'"{REPO / "examples" / "demo_server.py"}"'
    )
    text = text.replace("port = 30001", f"port = {free_port()}")
    text = text.replace(
        "service = { port = 30002 }",
        f"service = {{ port = {free_port()} }}\n"
        f'pip_options = ["--no-index", "--find-links", "{wheels}"]',
    )
    inv = dest / "envsync.toml"
    inv.write_text(text)
    return inv


def clone_venv(source: Path, root: Path) -> None:
    """A copy of the venv at `source` at `root` that names its own place, as a venv built
    there would: its scripts' interpreter line, their digests in RECORD, pyvenv.cfg's
    command (a .pyc's source path is fixed by the interpreter as it loads it)."""
    import shutil

    shutil.copytree(source, root, symlinks=True)
    old, new = f"#!{source}/bin/".encode(), f"#!{root}/bin/".encode()
    scripts: dict[str, bytes] = {}
    for script in (root / "bin").iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        with script.open("rb") as f:
            head = f.read(len(old))
        if head == old:
            data = new + script.read_bytes()[len(old) :]
            script.write_bytes(data)
            scripts[script.name] = data
        elif script.name.startswith("activate"):  # VIRTUAL_ENV=... (no RECORD names them)
            script.write_text(script.read_text().replace(str(source), str(root)))
    cfg = root / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace(str(source), str(root)))
    _record_scripts(next((root / "lib").glob("python3*/site-packages")), scripts)


def comparable(snapshot: dict) -> dict:
    """A snapshot's JSON without what describes one act of collection, nor the host name."""
    from envsync.model.environment import TRANSPORT_FIELDS

    for key in (*TRANSPORT_FIELDS, "host"):
        snapshot.pop(key, None)
    return snapshot


def pep751_problems(doc: dict) -> list[str]:
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

    def file_problems(where: str, f: dict) -> list[str]:
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


def within(seconds: float, call: Callable[[], object]) -> object:
    """`call()`'s value, failing the test where it does not end in time (a FIFO waited on)."""
    import threading

    import pytest

    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"still waiting after {seconds:g}s")
    return out[0] if out else None


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (read from /proc)."""
    import contextlib

    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat_file.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat_file.parent.name))
    return found
