"""Where the corpus's real engine venvs live, and the one way they are installed.

The reachability harness (tests/corpus/reach.py) and the serving stacks (tests/corpus/
stacks.py) install the same engines (vLLM 0.10.2 and 0.8.5 in both): every venv sees one
base with torch (the CPU build, from the machine's disk through pip) through a `.pth`
file, and gets its packages from uv as hard links into one cache, so a wheel that several
venvs hold is on the disk once. Built once per machine and kept between runs; the folders
are resolved from the real home at import, before the tests' hermetic HOME.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from examples.build_hosts import exclusive

VENVS = Path(
    os.environ.get("TEST_REACH_VENVS") or Path.home() / ".cache" / "envsync-tests" / "reach"
)
UV_CACHE = Path(os.environ.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")
UV = Path(sys.executable).parent / "uv"
TORCH = "torch==2.13.0"  # `pip install torch==2.13.0` takes the file on this kind's disk
PYTHON = f"python{sys.version_info[0]}.{sys.version_info[1]}"

_BASE_LOCK = threading.Lock()  # the stacks' jobs ask for the base at once: one builds it


def run(argv: Sequence[str]) -> None:
    subprocess.run(list(argv), check=True, capture_output=True, timeout=1800)


def site(root: Path) -> Path:
    return root / "lib" / PYTHON / "site-packages"


def torch_base(root: Path = VENVS) -> Path:
    """The base venv under `root` (torch, built once); its site-packages."""
    base = root / "base-torch-2.13.0"
    with _BASE_LOCK, exclusive(base):
        if not (base / "ok").exists():
            shutil.rmtree(base, ignore_errors=True)
            run([sys.executable, "-m", "venv", str(base)])
            run([str(base / "bin" / "python"), "-m", "pip", "install", "-q", TORCH])
            (base / "ok").write_text("")
    return site(base)


def uv_install(python: Path, *args: str) -> None:
    """`uv pip install --no-deps ARGS` into the venv of `python`, hard-linked from the cache
    (the requirements are pinned: nothing is resolved)."""
    run(
        [
            str(UV),
            "pip",
            "install",
            "-q",
            "--python",
            str(python),
            "--link-mode",
            "hardlink",
            "--cache-dir",
            str(UV_CACHE),
            "--no-deps",
            *args,
        ]
    )
