"""Build the built-in example: two local venvs, ct129 and ct200, that replay the story.

Both get the same real SGLang wheel; ct129 (the reference, where the service works) gets
xgrammar 0.1.32, soundfile, and three local DFlash/DDTree patches to SGLang's files;
ct200 gets xgrammar 0.1.10, no soundfile and no patches. Wheels are real, fetched once
with `pip download` through this machine's own pip configuration into a cache, and
installed with `--no-deps`. The venvs are rebuilt only when this recipe changes.

    python examples/build_hosts.py [--dest DIR] [--wheels DIR] [--force] [--fleet]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from collections.abc import Iterator, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
SGLANG = "sglang==0.5.11"
HOSTS = {
    "ct129": [SGLANG, "xgrammar==0.1.32", "soundfile==0.13.1"],
    "ct200": [SGLANG, "xgrammar==0.1.10"],
}
# The local speculative-decoding patches that live only on ct129: two edited files and
# one file SGLang's RECORD does not know.
PATCHES = {
    "ct129": {
        "sglang/srt/server_args.py": (
            "append",
            "\n# local patch (DDTree): tree-shaped drafts for DFLASH\nDDTREE_DEFAULT_BUDGET = 64\n",
        ),
        "sglang/srt/speculative/dflash_worker.py": (
            "append",
            "\n# local patch (DFlash): keep the draft KV cache across verify steps\n"
            "DFLASH_KEEP_DRAFT_CACHE = True\n",
        ),
        "sglang/srt/speculative/ddtree_utils.py": (
            "create",
            '"""DDTree draft-tree helpers (local patch, not part of any SGLang release)."""\n\n'
            "def tree_budget(depth: int, topk: int) -> int:\n"
            "    return sum(topk**i for i in range(1, depth + 1))\n",
        ),
    },
    "ct200": {},
}
# A larger fleet for the fleet view (`--fleet`): ct201 has ct129's packages without its
# local patches; ct202 has the patches and soundfile but ct200's old xgrammar.
FLEET = {
    "ct201": [SGLANG, "xgrammar==0.1.32", "soundfile==0.13.1"],
    "ct202": [SGLANG, "xgrammar==0.1.10", "soundfile==0.13.1"],
}
HOSTS.update(FLEET)
PATCHES.update({"ct201": {}, "ct202": PATCHES["ct129"]})
STAMP = ".envsync-example.json"
# What real xgrammar and soundfile need to import (torch CPU, transformers, ...): one shared
# runtime venv that both hosts see through a .pth file, so that ct200 dies on the story's
# real ImportError and ct129 starts. Only with --runtime (the demo server needs it).
# Every package pinned, the ones the runtime needs and what they need (as one install resolved
# them on 2026-12-06): the committed locks list them, so an index's newer release must not
# change them (lockfiles/README.md). torch is the CPU build this machine's pip finds.
RUNTIME = [
    "annotated-doc==0.0.7",
    "annotated-types==0.8.0",
    "anyio==4.16.0",
    "certifi==2026.10.19.post1",
    "cffi==2.1.1",
    "charset-normalizer==3.5.3",
    "click==8.5.1",
    "filelock==4.3.2",
    "fsspec==2026.9.0",
    "h11==0.16.0",
    "hf-xet==1.8.0",
    "httpcore2==2.17.0",
    "httpx2==2.17.0",
    "huggingface_hub==2.4.0",
    "idna==3.21",
    "Jinja2==3.1.6",
    "kernels==0.19.1",
    "markdown-it-py==4.3.0",
    "MarkupSafe==3.0.4",
    "mdurl==0.1.2",
    "mpmath==1.3.0",
    "networkx==3.6.1",
    "numpy==2.4.6",
    "packaging==26.4",
    "pycparser==3.12",
    "pydantic==2.14.4",
    "pydantic_core==2.50.5",
    "Pygments==2.21.0",
    "PyYAML==6.0.4",
    "regex==2026.12.2",
    "requests==2.34.2",
    "rich==15.0.0",
    "safetensors==0.8.0",
    "sentencepiece==0.2.3",
    "shellingham==1.5.4",
    "sympy==1.14.0",
    "tiktoken==0.14.0",
    "tokenizers==0.23.3",
    "tomlkit==0.15.3",
    "torch==2.13.0",
    "tqdm==4.70.1",
    "transformers==5.25.0",
    "triton==3.9.0",
    "truststore==0.10.5",
    "typer==0.29.2",
    "typing-inspection==0.4.5",
    "typing_extensions==4.16.0",
    "urllib3==2.8.0",
]
RUNTIME_PTH = "zz-envsync-example-runtime.pth"


def recipe(name: str) -> str:
    data = {
        "recipe": 2,
        "python": sys.version.split()[0],
        "packages": HOSTS[name],
        "patches": PATCHES[name],
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def run(argv: list[str]) -> None:
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Held by one process (or thread) at a time: the builder of `path`. Two runs that build
    the same cached folder at once (the tests' parallel workers, two quick starts) take
    turns, and the second finds it built."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.building", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def wheel(wheels: Path, req: str) -> Path:
    """The wheel of `NAME==VERSION` in `wheels`, downloaded from the package index once."""
    name, version = req.split("==")
    stem = f"{name.replace('-', '_')}-{version}-"
    hits = sorted(wheels.glob(stem + "*.whl"))
    if not hits:
        print(f"downloading {req} ...", file=sys.stderr)
        download(wheels, [req], ["--only-binary=:all:"])
        hits = sorted(wheels.glob(stem + "*.whl"))
    if not hits:
        raise SystemExit(f"build_hosts: pip download {req} gave no wheel in {wheels}")
    return hits[0]


def download(wheels: Path, reqs: Sequence[str], options: Sequence[str] = ()) -> None:
    """`pip download --no-deps` of `reqs` into `wheels`, each file put in whole: another
    process reading the folder meanwhile (a parallel test worker) never sees half a wheel."""
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=wheels) as landing:
        argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", *options]
        run([*argv, "-d", landing, *reqs])
        for got in Path(landing).iterdir():
            os.replace(got, wheels / got.name)


def fetch(wheels: Path) -> dict[str, Path]:
    """Download every wheel once; map each requirement to its wheel file."""
    return {req: wheel(wheels, req) for req in sorted({r for reqs in HOSTS.values() for r in reqs})}


def site_packages(root: Path) -> Path:
    out = subprocess.run(
        [
            str(root / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def build(name: str, dest: Path, wheels: dict[str, Path], force: bool) -> Path:
    root = dest / name
    stamp = root / STAMP
    want = recipe(name)
    if not force and stamp.is_file() and json.loads(stamp.read_text()).get("recipe") == want:
        return root
    if root.exists():
        shutil.rmtree(root)
    print(f"building {name} in {root} ...", file=sys.stderr)
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    python = str(root / "bin" / "python")
    run(
        [
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            # By requirement from the folder of wheels, as from an index: pip then
            # records no direct_url.json, as on a host installed from its index.
            "--find-links",
            str(next(iter(wheels.values())).parent),
            *HOSTS[name],
        ]
    )
    sp = site_packages(root)
    for rel, (mode, text) in PATCHES[name].items():
        path = sp / rel
        if mode == "append":
            with path.open("a", encoding="utf-8") as f:
                f.write(text)
        else:
            path.write_text(text, encoding="utf-8")
    stamp.write_text(json.dumps({"recipe": want, "packages": HOSTS[name]}) + "\n")
    return root


def build_runtime(dest: Path) -> Path:
    """The shared runtime venv (cached); returns its site-packages."""
    with exclusive(dest):
        return _build_runtime(dest)


def _build_runtime(dest: Path) -> Path:
    stamp = dest / STAMP
    want = hashlib.sha256(json.dumps(RUNTIME).encode()).hexdigest()
    if not (stamp.is_file() and json.loads(stamp.read_text()).get("recipe") == want):
        if dest.exists():
            shutil.rmtree(dest)
        print(f"building the runtime in {dest} (torch CPU, transformers, ...) ...", file=sys.stderr)
        venv.EnvBuilder(with_pip=True, clear=True).create(dest)
        run(
            [
                str(dest / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                *RUNTIME,
            ]
        )
        stamp.write_text(json.dumps({"recipe": want, "packages": RUNTIME}) + "\n")
    return site_packages(dest)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=HERE / ".hosts")
    parser.add_argument("--wheels", type=Path, default=HERE / ".cache" / "wheels")
    parser.add_argument("--force", action="store_true", help="rebuild even when cached")
    parser.add_argument(
        "--runtime",
        type=Path,
        metavar="DIR",
        help="also build (once) a runtime venv in DIR that both hosts see, for the demo server",
    )
    parser.add_argument(
        "--fleet", action="store_true", help=f"also build {', '.join(FLEET)} (the fleet view)"
    )
    args = parser.parse_args()
    wheels = fetch(args.wheels)
    runtime = build_runtime(args.runtime.resolve()) if args.runtime else None
    for name in HOSTS:
        if name in FLEET and not args.fleet:
            continue
        root = build(name, args.dest, wheels, args.force)
        pth = site_packages(root) / RUNTIME_PTH
        if runtime is not None:
            pth.write_text(f"{runtime}\n")
        elif pth.exists():
            pth.unlink()
        print(f"{name}: {root / 'bin' / 'python'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
