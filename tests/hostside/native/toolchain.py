"""Real shared libraries for the native layer's tests (the system compiler), and the real loader.

`real_load` and `real_import` ask a fresh interpreter's own dlopen; `static_load` asks
envsync's model of it, for the same interpreter and the same preloads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from benchmarks.native_precision import loader_facts, system_cache
from envsync.hostside.native.loader import Environment, Linker
from envsync.hostside.native.verdicts import Fails, Load

EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
PYTHON_INCLUDE = sysconfig.get_paths()["include"]

# One fresh interpreter per load: preloads first (RTLD_GLOBAL ones, then RTLD_LOCAL ones),
# then the dlopen (ctypes adds RTLD_NOW) or the import; the loader's own message back.
_REAL = r"""
import ctypes, json, os, sys
spec = json.loads(sys.argv[1])
try:
    for path in spec["global"]:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    for path in spec["local"]:
        ctypes.CDLL(path)
    if spec["module"]:
        if spec["lazy"]:
            sys.setdlopenflags(os.RTLD_LAZY)
        sys.path[:0] = spec["sys_path"]
        __import__(spec["module"])
    else:
        ctypes.CDLL(spec["target"])
except (OSError, ImportError) as e:
    print(json.dumps({"error": str(e)}))
else:
    print(json.dumps({"error": None}))
"""


def compiler() -> str:
    """gcc, which .ci/run installs; without it the tests skip (in CI they fail)."""
    found = shutil.which("gcc")
    if found is None or not os.path.exists(os.path.join(PYTHON_INCLUDE, "Python.h")):
        if os.environ.get("CI"):
            pytest.fail("gcc and the Python headers must be installed in CI (.ci/run)")
        pytest.skip("gcc or the Python headers are missing")
    return found


def build(
    out: Path,
    source: str,
    *,
    soname: str | None = None,
    link: tuple[Path, ...] = (),
    runpath: str | None = None,
    rpath: str | None = None,
    version_script: str | None = None,
    flags: tuple[str, ...] = (),
    python: bool = False,
    cxx: bool = False,
    include: str = PYTHON_INCLUDE,
) -> Path:
    """Compile `source` (C, or C++ with `cxx`) into the shared object `out`, written in
    place atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.parent / f".build-{out.name}"
    work.mkdir(exist_ok=True)
    src = work / ("source.cc" if cxx else "source.c")
    src.write_text(source)
    tool = compiler() if not cxx else (shutil.which("g++") or compiler())
    argv = [tool, "-shared", "-fPIC", "-o", str(work / "out.so"), str(src)]
    if python:
        argv.insert(1, f"-I{include}")
    if soname:
        argv.append(f"-Wl,-soname,{soname}")
    if version_script is not None:
        script = work / "version.map"
        script.write_text(version_script)
        argv.append(f"-Wl,--version-script,{script}")
    if runpath is not None:
        argv += [f"-Wl,-rpath,{runpath}", "-Wl,--enable-new-dtags"]
    if rpath is not None:
        argv += [f"-Wl,-rpath,{rpath}", "-Wl,--disable-new-dtags"]
    argv += [str(p) for p in link]
    argv += list(flags)
    subprocess.run(argv, check=True, capture_output=True)
    os.replace(work / "out.so", out)
    shutil.rmtree(work)
    return out


def build_32(out: Path, source: str, *, soname: str) -> Path:
    """A 32-bit (i386) shared object, compiled and linked without a 32-bit libc."""
    out.parent.mkdir(parents=True, exist_ok=True)
    obj = out.with_suffix(".o32")
    src = out.with_suffix(".c32")
    src.write_text(source)
    subprocess.run(
        [compiler(), "-m32", "-fPIC", "-c", "-o", str(obj), "-x", "c", str(src)],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["ld", "-m", "elf_i386", "-shared", "-soname", soname, "-o", str(out), str(obj)],
        check=True,
        capture_output=True,
    )
    obj.unlink()
    src.unlink()
    return out


def extension(
    folder: Path, name: str, body: str, include: str = PYTHON_INCLUDE, **kwargs: Any
) -> Path:
    """A real Python C extension module `name` whose module function calls `body`'s code."""
    source = f"""#include <Python.h>
{body}
static PyObject *value(PyObject *self, PyObject *args) {{ return PyLong_FromLong(module_value()); }}
static PyMethodDef methods[] = {{{{"value", value, METH_NOARGS, NULL}}, {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, methods}};
PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&module); }}
"""
    return build(folder / f"{name}{EXT_SUFFIX}", source, python=True, include=include, **kwargs)


def _real(
    spec: Mapping[str, object], env: dict[str, str] | None, python: str = sys.executable
) -> str | None:
    full: dict[str, object] = {
        "global": [],
        "local": [],
        "module": None,
        "sys_path": [],
        "lazy": False,
        "target": None,
    }
    full.update(spec)
    proc = subprocess.run(
        [python, "-c", _REAL, json.dumps(full)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise AssertionError(f"the real load crashed: {proc.returncode} {proc.stderr[-2000:]}")
    error: str | None = json.loads(proc.stdout.strip().splitlines()[-1])["error"]
    return error


def real_load(
    path: Path,
    *,
    global_: tuple[Path, ...] = (),
    local: tuple[Path, ...] = (),
    env: dict[str, str] | None = None,
) -> str | None:
    """dlopen(path, RTLD_NOW) in a fresh interpreter: None, or the loader's message."""
    spec = {
        "global": [str(p) for p in global_],
        "local": [str(p) for p in local],
        "target": str(path),
    }
    return _real(spec, env)


def real_import(
    module: str,
    folder: Path,
    *,
    global_: tuple[Path, ...] = (),
    lazy: bool = False,
    env: dict[str, str] | None = None,
    python: str = sys.executable,
) -> str | None:
    """`import module` from `folder` in a fresh interpreter: None, or the ImportError."""
    spec = {
        "global": [str(p) for p in global_],
        "module": module,
        "sys_path": [str(folder)],
        "lazy": lazy,
    }
    return _real(spec, env, python)


# This machine's loader (ld.so --help) and its ld.so.cache, as the probe reads them.
facts = loader_facts


def static_load(
    path: Path,
    *,
    global_: tuple[Path, ...] = (),
    local: tuple[Path, ...] = (),
    library_path: str | None = None,
    now: bool = True,
    python: str = sys.executable,
) -> Load:
    """envsync's verdict on dlopen(path) in `python`, after the same preloads."""
    linker = Linker(Environment(facts=facts(), cache=system_cache(), library_path=library_path))
    process, started = linker.start(python)
    assert process is not None and started.verdict.kind == "ok", started
    for lib in global_:
        process, load = linker.dlopen(process, str(lib), global_=True)
        assert load.verdict.kind == "ok", load
    for lib in local:
        process, load = linker.dlopen(process, str(lib))
        assert load.verdict.kind == "ok", load
    return linker.dlopen(process, str(path), now=now)[1]


def message(load: Load) -> str | None:
    """The verdict's first message, as the loader words it (None when it loads)."""
    verdict = load.verdict
    if verdict.kind == "ok":
        return None
    assert verdict.kind == "fails" and isinstance(verdict, Fails), verdict
    return verdict.message()
