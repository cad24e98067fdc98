"""A known-good host as a pylock.toml, for real: locked from a local index of real wheels,
installed by real uv into a fresh venv, and that venv diffed against the host."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from envsync.model.vocab import PACKAGE_KINDS
from tests.helpers import REPO, fetch, make_venv, make_wheel, pep751_problems, pip_install
from tests.helpers import run_cli as run
from tests.index import IndexServer, build_index

pytestmark = pytest.mark.slow


def uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if not Path(found).exists():
        pytest.fail("uv is not installed (it is in the dev extras: pip install -e '.[dev]')")
    return found


def ensurepip_versions() -> list[str]:
    """pip and setuptools as a new venv of this Python gets them (the example's hosts)."""
    import ensurepip

    out = [f"pip=={ensurepip.version()}"]
    bundled = Path(ensurepip.__file__).parent / "_bundled"
    out += [f"setuptools=={w.name.split('-')[1]}" for w in bundled.glob("setuptools-*.whl")]
    return out


@pytest.fixture(scope="module", params=["html", "json"])
def index(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, wheel_cache: Path
) -> Iterator[IndexServer]:
    """The example's wheels (and six) on an index served on 127.0.0.1: HTML pages from
    `python -m http.server` (PEP 503), or JSON pages (PEP 691, sizes and upload times)."""
    wanted = ["sglang==0.5.11", "xgrammar==0.1.32", "soundfile==0.13.1", "six==1.17.0"]
    wheels = [fetch(wheel_cache, r) for r in [*wanted, *ensurepip_versions()]]
    root = build_index(tmp_path_factory.mktemp("index"), wheels)
    server = IndexServer(root, json=request.param == "json").start()
    yield server
    server.stop()


@pytest.fixture
def inventory(example_hosts: Path, tmp_path: Path, wheel_cache: Path) -> Path:
    """The example's inventory, plus `fresh` (empty) and `mixed` (installed from files)."""
    make_venv(tmp_path / "fresh")
    mixed = make_venv(tmp_path / "mixed", with_pip=True)  # its pip says where it installs from
    local = make_wheel(tmp_path / "w", "localpkg", "1.0+cu130", {"localpkg/__init__.py": ""})
    pip_install(mixed, fetch(wheel_cache, "six==1.17.0"), local)
    text = (
        (REPO / "examples" / "envsync.toml").read_text().replace('".hosts/', f'"{example_hosts}/')
    )
    text += f'\n[hosts.fresh]\npython = "{tmp_path}/fresh/bin/python"\n'
    text += f'\n[hosts.mixed]\npython = "{mixed}"\n'
    path = tmp_path / "envsync.toml"
    path.write_text(text)
    return path


@pytest.fixture
def host_index(index: IndexServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """The hosts' own pip configuration names the local index (PIP_INDEX_URL), nothing else."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    for name in ("PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)
    return index.url


def cli(capsys: pytest.CaptureFixture[str], inventory: Path, *args: str) -> tuple[int, str, str]:
    return run(capsys, "--inventory", str(inventory), *args)


def run_uv(tmp_path: Path, *args: str) -> None:
    """Real uv, with no configuration of its own: only what the command line says."""
    env = {**os.environ, "UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    done = subprocess.run([uv(), *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_pylock_round_trip_with_uv(
    capsys: pytest.CaptureFixture[str],
    inventory: Path,
    index: IndexServer,
    host_index: str,
    tmp_path: Path,
) -> None:
    lock = tmp_path / "pylock.toml"
    code, _, err = cli(capsys, inventory, "lock", "--format", "pylock", "ct129", "-o", str(lock))
    assert code == 0, err
    assert "warning" not in err  # every package of ct129 is served by its index
    doc = tomllib.loads(lock.read_text())
    assert pep751_problems(doc) == []
    for package in doc["packages"]:
        assert package["index"] == host_index
        (wheel,) = package["wheels"]
        assert wheel["url"].startswith(host_index.removesuffix("simple/") + "files/")
        assert len(wheel["hashes"]["sha256"]) == 64 and wheel["size"] > 0
    by_name = {p["name"]: p for p in doc["packages"]}
    if index.json:  # only a JSON page says when a file was uploaded: a TOML datetime
        assert all(isinstance(p["wheels"][0]["upload-time"], datetime) for p in doc["packages"])
    assert by_name["xgrammar"]["requires-python"] == "<4,>=3.8"  # from the index page
    assert by_name["xgrammar"]["wheels"][0]["name"].startswith("xgrammar-0.1.32-cp311-cp311-")
    assert {p["name"] for p in doc["packages"]} >= {"sglang", "xgrammar", "soundfile"}
    assert str(tmp_path) not in str({k: v for k, v in doc.items() if k != "tool"})

    fresh = tmp_path / "fresh" / "bin" / "python"
    run_uv(tmp_path, "pip", "sync", "--python", str(fresh), str(lock))

    code, out, err = cli(capsys, inventory, "diff", "ct129", "fresh", "--format", "json")
    kinds = {(f["kind"], f["subject"]) for f in json.loads(out)["findings"]}
    assert not [k for k in kinds if k[0] in PACKAGE_KINDS], kinds
    # What is left are the local patches of the watched package, which `repair` syncs.
    assert {k[0] for k in kinds} == {"file"}
    code, out, err = cli(
        capsys, inventory, "check", "--lock", str(lock), "fresh", "--format", "json"
    )
    assert code == 0, err
    assert not [f for f in json.loads(out)["findings"] if f["kind"] in PACKAGE_KINDS]


def test_local_files_unlocked_packages_and_file_names(
    capsys: pytest.CaptureFixture[str], inventory: Path, host_index: str, tmp_path: Path
) -> None:
    out_file = tmp_path / "mixed.lock.toml"
    code, _, err = cli(
        capsys, inventory, "lock", "--format", "pylock", "mixed", "-o", str(out_file)
    )
    assert code == 0, err
    assert "installers read only pylock.toml or pylock.NAME.toml" in err
    assert "warning: localpkg 1.0+cu130: no index of the host serves a local build" in err
    doc = tomllib.loads(out_file.read_text())
    assert pep751_problems(doc) == []
    by_name = {p["name"]: p for p in doc["packages"]}
    # six was installed from a local wheel file; the index serves the same file (same
    # hash): it is locked as that index wheel.
    assert by_name["six"]["index"] == host_index
    assert by_name["six"]["wheels"][0]["hashes"]["sha256"] == (
        "4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274"
    )
    assert "localpkg" not in by_name
    assert [p["name"] for p in doc["tool"]["envsync"]["unlocked"]] == ["localpkg"]
    # A file is not a host: its index configuration is unknown.
    code, _, err = cli(capsys, inventory, "lock", "--format", "pylock", str(out_file))
    assert code == 2 and "is a file" in err


def test_check_accepts_a_pylock_written_by_uv(
    capsys: pytest.CaptureFixture[str], inventory: Path, host_index: str, tmp_path: Path
) -> None:
    requirements = tmp_path / "requirements.in"
    requirements.write_text("xgrammar==0.1.32\nsoundfile==0.13.1\n")
    lock = tmp_path / "pylock.uv.toml"
    run_uv(
        tmp_path,
        "pip",
        "compile",
        "-q",
        "--no-deps",
        "--index-url",
        host_index,
        "--format",
        "pylock.toml",
        "--python-version",
        "3.11",
        str(requirements),
        "-o",
        str(lock),
    )
    assert tomllib.loads(lock.read_text())["created-by"] == "uv"
    code, out, err = cli(
        capsys, inventory, "check", "--lock", str(lock), "ct129", "--format", "json"
    )
    assert code == 0, err
    assert json.loads(out)["findings"] == []
    code, out, err = cli(
        capsys, inventory, "check", "--lock", str(lock), "ct200", "--format", "json"
    )
    got = {(f["subject"], f["kind"], f["severity"]) for f in json.loads(out)["findings"]}
    assert ("soundfile", "missing", "fatal") in got and ("xgrammar", "version", "fatal") in got
    assert code == 1


def test_a_second_lock_asks_no_index_for_what_it_chose_in_the_last_day(
    capsys: pytest.CaptureFixture[str],
    inventory: Path,
    index: IndexServer,
    host_index: str,
    tmp_path: Path,
) -> None:
    first, again = tmp_path / "pylock.first.toml", tmp_path / "pylock.again.toml"
    code, _, err = cli(capsys, inventory, "lock", "--format", "pylock", "ct129", "-o", str(first))
    assert code == 0 and "as chosen in the last day" not in err, err
    index.stop()  # no index at all now: only what was chosen
    try:
        code, _, err = cli(
            capsys, inventory, "lock", "--format", "pylock", "ct129", "-o", str(again)
        )
        assert code == 0 and "warning" not in err, err
        assert "as chosen in the last day" in err
        assert _packages(again) == _packages(first)
        # a day later the choices are asked for again: with no index, nothing is locked
        kept = next((Path.home() / ".cache" / "envsync" / "received").glob("chosen-*.json"))
        entries = json.loads(kept.read_text())
        kept.write_text(json.dumps({k: [v[0] - 86400, v[1]] for k, v in entries.items()}))
        code, _, err = cli(
            capsys, inventory, "lock", "--format", "pylock", "ct129", "-o", str(again)
        )
        assert "no index of the host serves this version" in err
    finally:
        index.start()


def _packages(lock: Path) -> list[object]:
    packages: list[object] = tomllib.loads(lock.read_text())["packages"]
    return packages
