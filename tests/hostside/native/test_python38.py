"""The native layer runs on the oldest interpreter a host may have (Python 3.8), as the host
side runs there: its own package, relative imports only, and judges as the newest does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envsync.hostside.native.verdicts import encode_load
from tests.helpers import REPO
from tests.hostside.native.toolchain import build, facts, static_load, system_cache

PYTHON38 = Path("/root/.pyenv/versions/3.8.18/bin/python")

SCRIPT = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from hostpkg.native import cache, codec, demangle, dynsym, elf, ldcache, ldso, loader, search, verdicts
facts = ldso.loader_facts(*sys.argv[2:3], *ldso.ldso_help(sys.argv[2]), os.uname().machine)
env = loader.Environment(facts=facts, cache=ldcache.read_ldcache(facts.cache))
loads = [loader.Linker(env).judge(sys.argv[3], [loader.Request(p)])[1][0] for p in sys.argv[4:]]
print(json.dumps([verdicts.encode_load(demangle.with_demangled(l)) for l in loads]))
"""


def test_the_native_layer_under_python_38(tmp_path: Path) -> None:
    if not PYTHON38.exists():
        pytest.skip("no Python 3.8 here")
    package = tmp_path / "hostpkg"
    shutil.copytree(
        REPO / "envsync" / "hostside", package, ignore=shutil.ignore_patterns("__pycache__")
    )
    ok = build(tmp_path / "lib" / "libp.so.1", "int g(void) { return 1; }\n", soname="libp.so.1")
    consumer = build(
        tmp_path / "libc.so",
        "extern int g(void);\nint u(void) { return g(); }\n",
        link=(ok,),
        runpath="$ORIGIN/lib",
    )
    missing = build(
        tmp_path / "libm2.so", "extern int g(void);\nint u(void) { return g(); }\n", link=(ok,)
    )
    paths = [str(consumer), str(missing)]
    program = os.path.realpath(sys.executable)
    proc = subprocess.run(
        [str(PYTHON38), "-c", SCRIPT, str(tmp_path), facts().interpreter, program, *paths],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    old = json.loads(proc.stdout)
    new = [encode_load(static_load(Path(p))) for p in paths]
    assert [o["verdict"] for o in old] == [n["verdict"] for n in new]
    assert old[0]["verdict"]["kind"] == "ok" and old[1]["verdict"]["kind"] == "fails"
    assert system_cache() is not None


NATIVESCAN = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import _ctypes
import hostpkg.shared
hostpkg.shared.KEY = b"0" * 64  # the run's key, as boot sets it from stdin
from hostpkg.graph.finder import ModuleFinder
from hostpkg.native.scan import native_facts
graph = {"roots": ["app"], "modules": {
    "app": {"kind": "source", "file": sys.argv[2],
            "imports": [{"module": "_ctypes", "names": [], "line": 1, "context": "module"}]},
    "_ctypes": {"kind": "extension", "file": _ctypes.__file__},
}}
facts = native_facts({}, ModuleFinder(list(sys.path)), graph, None, [], sys.argv[3], "d")
print(json.dumps(facts))
"""


def test_the_probes_native_scan_under_python_38(tmp_path: Path) -> None:
    """nativescan.py, as the probe runs it there: the startup's loads planned and judged."""
    if not PYTHON38.exists():
        pytest.skip("no Python 3.8 here")
    package = tmp_path / "hostpkg"
    shutil.copytree(
        REPO / "envsync" / "hostside", package, ignore=shutil.ignore_patterns("__pycache__")
    )
    app = tmp_path / "app.py"
    app.write_text("import _ctypes\n")
    argv = [str(PYTHON38), "-c", NATIVESCAN, str(tmp_path), str(app), str(tmp_path / "cache")]
    for _ in range(2):  # cold, then from the cache it wrote
        out = subprocess.run(argv, capture_output=True, text=True, check=True)
        facts = json.loads(out.stdout)
        (load,) = facts["loads"]
        assert load["module"] == "_ctypes" and load["origin"] == "import"
        assert load["verdict"] == {"kind": "ok"}
    assert list((tmp_path / "cache").glob("native-d-*.json"))
