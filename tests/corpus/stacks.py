"""Real serving stacks for the corpus cases that need one (vLLM with its ~130 packages).

A stack is about 3 GB; building one per side of each case would take most of CI. So:
one base venv holds torch (the CPU build on the machine's disk; the reachability harness's
own, tests/corpus/venvs.py), one layer holds every package the cases' references share at
the same version, and each case's reference is a small venv of its own (the engine's wheel
and the packages only it pins) that sees the layer and the base through `.pth` files; all
three are installed by uv as hard links into its cache, which the harness's engines share
(vLLM 0.10.2 and 0.8.5 are on the disk once). A case's target is a hard-linked copy of the
reference's site-packages (a few MB) with the culprit installed over it by pip, so the two
differ in the culprit only. Built stacks are kept in examples/.cache/stacks, keyed by
their recipe.

    python -m tests.corpus.stacks      # build every stack (what the tests would build)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from examples.build_hosts import download, exclusive
from tests.corpus.venvs import VENVS, site, torch_base, uv_install

if TYPE_CHECKING:
    from tests.corpus.cases import Case

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = Path(os.environ.get("TEST_STACK_CACHE", REPO / "examples" / ".cache" / "stacks"))
INSTALLER = "uv, hard links"  # in the recipes: stacks pip once installed are built again
STAMP = ".envsync-stack.json"


def requirements(name: str) -> tuple[str, ...]:
    """A stack's pinned requirements (tests/corpus/stacks/NAME.txt)."""
    lines = (HERE / "stacks" / f"{name}.txt").read_text().splitlines()
    return tuple(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def _pip(python: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), *args],
        check=True,
        capture_output=True,
    )


def _install(python: Path, wheels: Path, reqs: Sequence[str]) -> None:
    """NAME==VERSION each from the wheel cache, without dependencies (they are pinned);
    what the cache lacks is downloaded into it first."""
    offline = ["install", "-q", "--no-deps", "--no-index", "--find-links", str(wheels)]
    try:
        _pip(python, *offline, *reqs)
    except subprocess.CalledProcessError:
        download(wheels, reqs)
        _pip(python, *offline, *reqs)


def _site(root: Path) -> Path:
    found = sorted((root / "lib").glob("python3*/site-packages"))
    assert found, root
    return found[0]


def _fresh(root: Path, recipe: object) -> bool:
    stamp = root / STAMP
    want = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()
    if stamp.is_file() and json.loads(stamp.read_text()).get("recipe") == want:
        return True
    if root.exists():
        shutil.rmtree(root)
    return False


def _done(root: Path, recipe: object) -> None:
    want = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()
    (root / STAMP).write_text(json.dumps({"recipe": want}) + "\n")


def _venv(root: Path, layers: Sequence[Path]) -> Path:
    """A venv that sees `layers` (site-packages folders) after its own, in that order."""
    venv.EnvBuilder(clear=True).create(root)
    for i, layer in enumerate(layers):
        (_site(root) / f"_envsync_layer{i}.pth").write_text(f"{layer}\n")
    return root / "bin" / "python"


def _base_site() -> Path:
    return site(VENVS / "base-torch-2.13.0")


def _layer_root(among: Sequence[str]) -> tuple[Path, list[str]]:
    reqs = sorted(set.intersection(*(set(requirements(s)) for s in among)))
    digest = hashlib.sha256("\n".join(reqs).encode()).hexdigest()[:12]
    return CACHE / f"layer-{digest}", reqs


def _layer_site(among: Sequence[str]) -> Path:
    root, _ = _layer_root(among)
    return site(root)


def base() -> Path:
    """The base venv (torch); its site-packages."""
    built = torch_base(VENVS)
    assert built == _base_site(), built
    return built


def layer(stacks: Sequence[str]) -> Path:
    """The packages every one of `stacks` pins at the same version; its site-packages."""
    root, reqs = _layer_root(stacks)
    recipe = {"requirements": reqs, "installer": INSTALLER, "base": str(_base_site())}
    with exclusive(root):
        if not _fresh(root, recipe):
            python = _venv(root, (base(),))
            uv_install(python, *reqs)
            _done(root, recipe)
    return _site(root)


def build_all(cases: Sequence[Case], wheels: Path) -> dict[str, Path]:
    """Every case's pair, the base, the layer and each reference installed side by side
    (an install is one core's work: unpacking wheels); each case's folder by its id."""
    from concurrent.futures import ThreadPoolExecutor

    names = [c.id for c in cases]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        jobs = [pool.submit(base), pool.submit(layer, names)]
        jobs += [pool.submit(_reference, c.id, c.engine, names) for c in cases]
        for job in jobs:
            job.result()
    return {c.id: build(c.id, c.engine, c.target, wheels, names, c.removed) for c in cases}


def _own(name: str, among: Sequence[str]) -> list[str]:
    shared = set.intersection(*(set(requirements(s)) for s in among))
    return sorted(set(requirements(name)) - shared)


def _reference(name: str, engine: str, among: Sequence[str]) -> Path:
    """A case's reference: the engine and the packages only it pins (the layer and the
    base through .pth files, which need not exist yet while it installs)."""
    shared = _layer_site(among)
    recipe = {
        "engine": engine,
        "own": _own(name, among),
        "layers": [str(shared), str(_base_site())],
        "installer": INSTALLER,
    }
    root = CACHE / name / "ref"
    with exclusive(root):
        if not _fresh(root, recipe):
            _venv(root, (shared, _base_site()))
            uv_install(root / "bin" / "python", engine, *_own(name, among))
            _done(root, recipe)
    return root


def build(
    name: str,
    engine: str,
    culprit: Sequence[str],
    wheels: Path,
    among: Sequence[str],
    remove: Sequence[str] = (),
) -> Path:
    """The pair of stack `name` (its folder: ref/ and tgt/): the engine and the stack's own
    pins on the reference, the culprit requirements installed over a hard-linked copy of
    it on the target (`remove`: distributions the target lacks). `among`: every stack the
    session builds, whose shared packages go in the one layer."""
    shared = layer(among)
    recipe = {
        "reference": str(_reference(name, engine, among)),
        "own": _own(name, among),
        "culprit": list(culprit),
        "remove": list(remove),
        "layer": str(shared),
        "installer": INSTALLER,
    }
    root = CACHE / name
    with exclusive(root / "tgt"):
        _target(root, recipe, wheels, culprit, remove)
    return root


def _target(
    root: Path,
    recipe: object,
    wheels: Path,
    culprit: Sequence[str],
    remove: Sequence[str],
) -> None:
    tgt_root = root / "tgt"
    if _fresh(tgt_root, recipe):
        return
    python = _venv(tgt_root, ())
    site = _site(tgt_root)
    shutil.rmtree(site)
    subprocess.run(["cp", "-al", str(_site(root / "ref")), str(site)], check=True)
    for script in (root / "ref" / "bin").iterdir():
        if script.name.startswith(("python", "pip", "activate", "Activate")) or script.is_dir():
            continue
        text = script.read_bytes()
        if text.startswith(b"#!"):
            _, _, rest = text.partition(b"\n")
            copy = tgt_root / "bin" / script.name
            copy.write_bytes(b"#!" + str(python).encode() + b"\n" + rest)
            copy.chmod(0o755)
    if remove:
        _pip(python, "uninstall", "-q", "-y", *remove)
    if culprit:
        _install(python, wheels, culprit)
    _done(tgt_root, recipe)


if __name__ == "__main__":
    from tests.corpus.cases import STACKS

    cache = Path(os.environ.get("TEST_WHEEL_CACHE", REPO / "examples" / ".cache" / "wheels"))
    for path in build_all(STACKS, cache).values():
        print(path)
