"""The built-in example, built from real wheels: the story's drift is in the snapshots."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from envsync.cli import main
from envsync.model.codec import to_data
from envsync.model.environment import TRANSPORT_FIELDS
from envsync.sources.locks.lockfile import read_lock
from tests.helpers import REPO, build_example

pytestmark = pytest.mark.slow

SGLANG_PATCHES = ("sglang/srt/server_args.py", "sglang/srt/speculative/dflash_worker.py")
SGLANG_ADDED = ("sglang/srt/speculative/ddtree_utils.py",)


@pytest.fixture
def inventory(example_hosts: Path, tmp_path: Path) -> Path:
    text = (REPO / "examples" / "envsync.toml").read_text()
    path = tmp_path / "envsync.toml"
    path.write_text(text.replace('".hosts/', f'"{example_hosts}/'))
    return path


def snapshot(capsys: pytest.CaptureFixture[str], inventory: Path, host: str) -> dict:
    assert main(["--inventory", str(inventory), "-q", "snapshot", host]) == 0
    return json.loads(capsys.readouterr().out)


def versions(snap: dict) -> dict[str, str]:
    return {d["name"]: d["version"] for d in snap["distributions"]}


def test_example_hosts_replay_the_story(
    capsys: pytest.CaptureFixture[str], inventory: Path
) -> None:
    ct129 = snapshot(capsys, inventory, "ct129")
    ct200 = snapshot(capsys, inventory, "ct200")
    assert versions(ct129)["sglang"] == versions(ct200)["sglang"] == "0.5.11"
    assert versions(ct129)["xgrammar"] == "0.1.32"
    assert versions(ct200)["xgrammar"] == "0.1.10"
    assert "soundfile" in versions(ct129) and "soundfile" not in versions(ct200)
    sg129 = next(d for d in ct129["distributions"] if d["name"] == "sglang")
    sg200 = next(d for d in ct200["distributions"] if d["name"] == "sglang")
    assert tuple(sg129["patched"]) == SGLANG_PATCHES
    assert tuple(sg129["added"]) == SGLANG_ADDED
    assert (sg200["patched"], sg200["added"], sg200["missing"]) == ([], [], [])
    assert len(sg129["files"]) > 1000  # every installed file of the watched package is hashed
    # the same wheel on both sides: every package file that is not patched hashes the same
    # (scripts in bin/ carry each venv's own interpreter path in their shebang)
    differ = sorted(
        p
        for p in sg200["files"]
        if sg129["files"][p] != sg200["files"][p] and not p.startswith("../")
    )
    assert differ == sorted(SGLANG_PATCHES)


def test_example_lock_is_byte_identical_and_round_trips(
    capsys: pytest.CaptureFixture[str], inventory: Path, tmp_path: Path
) -> None:
    assert main(["--inventory", str(inventory), "-q", "lock"]) == 0  # defaults.reference
    first = capsys.readouterr().out
    assert main(["--inventory", str(inventory), "-q", "lock", "ct129"]) == 0
    assert capsys.readouterr().out == first
    lock = tmp_path / "ct129.lock"
    lock.write_text(first)
    live = snapshot(capsys, inventory, "ct129")
    again = to_data(read_lock(lock))
    for key in TRANSPORT_FIELDS:
        live.pop(key)
        again.pop(key)
    assert again == live


@pytest.mark.parametrize(
    ("name", "xgrammar", "soundfile", "patched"),
    [("ct129", "0.1.32", True, SGLANG_PATCHES), ("ct200", "0.1.10", False, ())],
)
def test_committed_example_locks_carry_the_story(
    name: str, xgrammar: str, soundfile: bool, patched: tuple[str, ...]
) -> None:
    path = REPO / "lockfiles" / f"{name}.lock"
    snap = read_lock(path)
    assert snap.host == name
    # Made with --portable: no path of the machine that made them.
    text = path.read_text()
    assert "[tool.envsync.machine" not in text
    assert not re.search(r'"(/|file:)', text)
    assert snap.distribution("xgrammar").version == xgrammar  # type: ignore[union-attr]  # distribution() is None for a name not installed; xgrammar is (else the test fails here)
    assert (snap.distribution("soundfile") is not None) is soundfile
    sglang = snap.distribution("sglang")
    assert sglang is not None and sglang.version == "0.5.11" and sglang.patched == patched


# What a portable lock still takes from the machine that made it: the kernel's release, and
# the hashes of the console scripts in bin/ (their first line names the venv's interpreter).
MACHINE_BOUND = re.compile(r'^(kernel = |"\.\./\.\./\.\./bin/[^"]+" = )"[^"]*"$', re.M)


def machine_free(text: str) -> str:
    return MACHINE_BOUND.sub(lambda m: f'{m[1]}"(this machine)"', text)


@pytest.fixture(scope="module")
def runtime_inventory(tmp_path_factory: pytest.TempPathFactory, wheel_cache: Path) -> Path:
    """The example's hosts as the quick start builds them: with the shared runtime."""
    runtime = REPO / "examples" / ".hosts" / "runtime"
    if not (runtime / ".envsync-example.json").is_file():
        pytest.skip("the example's runtime is built by `bash examples/quickstart.sh` first")
    dest = tmp_path_factory.mktemp("runtime-hosts")
    build_example(dest, wheel_cache, runtime=runtime)
    path = dest / "envsync.toml"
    path.write_text(
        (REPO / "examples" / "envsync.toml").read_text().replace('".hosts/', f'"{dest}/')
    )
    return path


@pytest.mark.parametrize("name", ["ct129", "ct200"])
def test_committed_example_locks_are_current(
    capsys: pytest.CaptureFixture[str], runtime_inventory: Path, name: str
) -> None:
    """lockfiles/NAME.lock is what `envsync lock --portable NAME` writes of the example now
    (lockfiles/README.md says how to make them again)."""
    assert main(["--inventory", str(runtime_inventory), "-q", "lock", "--portable", name]) == 0
    fresh = capsys.readouterr().out
    committed = (REPO / "lockfiles" / f"{name}.lock").read_text()
    assert machine_free(fresh) == machine_free(committed), (
        f"lockfiles/{name}.lock is not current: make it again (lockfiles/README.md)"
    )
    assert MACHINE_BOUND.search(committed)  # the rule still names lines that are there
