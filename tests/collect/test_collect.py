"""The probe on real venvs, with real wheels written for the purpose and installed by pip."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from envsync.collect import ProbeOptions, collect
from envsync.errors import CollectError
from envsync.hostside.shared import SEAL_SIZE
from envsync.model.environment import Gpu, GpuInfo, Interpreter, System, Torch, Unavailable
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from tests.helpers import make_venv, make_wheel, pip_install, site_packages

DATA = Path(__file__).resolve().parent.parent / "data"

FAKE_TORCH_INIT = """
import os
if os.environ.get("TORCH_IMPORT_MARKER"):
    open(os.environ["TORCH_IMPORT_MARKER"], "w").write("imported")
class _C:
    @staticmethod
    def _cuda_getArchFlags():
        return "sm_80 sm_90 sm_100 sm_120"
class backends:
    class cudnn:
        @staticmethod
        def version():
            return 91002
class cuda:
    class nccl:
        @staticmethod
        def version():
            return (2, 27, 7)
"""
FAKE_TORCH_VERSION = (
    "from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n"
    "__version__ = '2.11.0+cu130'\ndebug = False\ncuda: Optional[str] = '13.0'\n"
    "git_version = '70d99e998b7d0e8b8bf0fa0d7b6e9a4c1b2f2f10'\nhip: Optional[str] = None\n"
)


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("collect")
    python = make_venv(root / "venv")
    wheels = root / "wheels"
    pip_install(
        python,
        make_wheel(
            wheels,
            "watched-pkg",
            "1.0",
            {
                "watched_pkg/__init__.py": "VERSION = 1\n",
                "watched_pkg/core.py": "def run():\n    return 1\n",
                "watched_pkg/sub/mod.py": "X = 1\n",
            },
        ),
        make_wheel(wheels, "plain", "2.0", {"plain.py": "Y = 2\n"}, requires=("watched-pkg>=1",)),
        make_wheel(
            wheels,
            "torch",
            "2.11.0+cu130",
            {
                "torch/__init__.py": FAKE_TORCH_INIT,
                "torch/version.py": FAKE_TORCH_VERSION,
            },
        ),
    )
    sp = site_packages(python)
    # Local drift on the watched package: one patched, one deleted, one added file.
    (sp / "watched_pkg" / "core.py").write_text("def run():\n    return 2  # local patch\n")
    (sp / "watched_pkg" / "sub" / "mod.py").unlink()
    (sp / "watched_pkg" / "extra.py").write_text("Z = 3\n")
    # A legacy setuptools install: an .egg-info directory.
    egg = sp / "Legacy_Lib-0.3.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: Legacy_Lib\nVersion: 0.3\n")
    (egg / "requires.txt").write_text("plain>=1\n\n[fast]\nujson\n")
    (egg / "top_level.txt").write_text("legacy_lib\n")
    return python


def host(python: Path, **kw: Any) -> HostSpec:
    return HostSpec(name="testhost", python=str(python), watch=("watched-pkg",), **kw)


def test_distributions_and_their_metadata(venv_python: Path) -> None:
    snap = collect(host(venv_python), LocalRunner("testhost"))
    names = [d.name for d in snap.distributions]
    assert names == sorted(names)
    assert {"watched-pkg", "plain", "torch", "legacy-lib"} <= set(names)
    plain = snap.distribution("plain")
    assert plain is not None
    assert (plain.version, plain.installer, plain.requires, plain.top_level) == (
        "2.0",
        "pip",
        ("watched-pkg>=1",),
        ("plain",),
    )
    assert plain.location == str(site_packages(venv_python))
    assert plain.files is None  # not watched: no hashing
    torch = snap.distribution("torch")
    assert torch is not None and torch.version == "2.11.0+cu130"  # local label kept
    legacy = snap.distribution("legacy-lib")
    assert legacy is not None
    assert legacy.display_name == "Legacy_Lib"
    assert legacy.requires == ("plain>=1", 'ujson; extra == "fast"')
    assert legacy.top_level == ("legacy_lib",)
    assert isinstance(snap.interpreter, Interpreter), snap.interpreter
    assert snap.interpreter.in_venv
    assert snap.interpreter.prefix == str(venv_python.parent.parent)


def test_watched_distribution_files_are_hashed_and_compared_with_record(venv_python: Path) -> None:
    snap = collect(host(venv_python), LocalRunner("testhost"))
    dist = snap.distribution("watched-pkg")
    assert dist is not None and dist.files is not None
    assert dist.patched == ("watched_pkg/core.py",)
    assert dist.missing == ("watched_pkg/sub/mod.py",)
    assert dist.added == ("watched_pkg/extra.py",)
    sp = site_packages(venv_python)
    for rel in ("watched_pkg/core.py", "watched_pkg/extra.py", "watched_pkg/__init__.py"):
        assert dist.files[rel] == hashlib.sha256((sp / rel).read_bytes()).hexdigest()
    assert "watched_pkg/sub/mod.py" not in dist.files
    assert not any(p.endswith("RECORD") for p in dist.files)


def test_torch_facts_come_from_version_py_without_importing_torch(
    venv_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "imported"
    monkeypatch.setenv("TORCH_IMPORT_MARKER", str(marker))
    snap = collect(host(venv_python), LocalRunner("testhost"))
    assert isinstance(snap.torch, Torch)
    assert (snap.torch.version, snap.torch.cuda, snap.torch.hip) == ("2.11.0+cu130", "13.0", None)
    assert snap.torch.git_version == "70d99e998b7d0e8b8bf0fa0d7b6e9a4c1b2f2f10"
    assert snap.torch.arch_list is None
    assert not marker.exists()

    deep = collect(host(venv_python), LocalRunner("testhost"), ProbeOptions(deep=True))
    assert isinstance(deep.torch, Torch)
    assert deep.torch.arch_list == ("sm_80", "sm_90", "sm_100", "sm_120")
    assert (deep.torch.cudnn, deep.torch.nccl) == ("9.10.2", "2.27.7")
    assert marker.exists()


def _fake_nvidia_smi(bin_dir: Path, script: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_gpu_facts_from_recorded_nvidia_smi(
    venv_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = DATA / "nvidia-smi" / "ct200-query.csv"
    banner = DATA / "nvidia-smi" / "ct200-nvidia-smi.txt"
    _fake_nvidia_smi(
        tmp_path / "bin",
        f'if [ $# -gt 0 ]; then cat "{query}"; else cat "{banner}"; fi\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    snap = collect(host(venv_python), LocalRunner("testhost"))
    assert isinstance(snap.gpu, GpuInfo)
    assert len(snap.gpu.gpus) == 8
    assert snap.gpu.gpus[1] == Gpu(
        index=1,
        name="NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        compute_capability="12.0",
        driver_version="580.95.05",
        memory_mib=97887,
    )
    assert (snap.gpu.driver_version, snap.gpu.cuda_driver_version) == ("580.95.05", "13.0")


def test_gpu_unavailable_is_recorded_with_its_reason(
    venv_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    snap = collect(host(venv_python), LocalRunner("testhost"))
    assert snap.gpu == Unavailable(reason="nvidia-smi not found on PATH")

    _fake_nvidia_smi(
        tmp_path / "bin",
        'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\n'
        "exit 9\n",
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    snap = collect(host(venv_python), LocalRunner("testhost"))
    assert isinstance(snap.gpu, Unavailable)
    assert "exited 9" in snap.gpu.reason and "couldn't communicate" in snap.gpu.reason


def test_system_facts(venv_python: Path) -> None:
    snap = collect(host(venv_python), LocalRunner("testhost"))
    assert isinstance(snap.system, System), snap.system
    assert snap.system.kernel == os.uname().release
    assert snap.system.machine == os.uname().machine
    assert snap.system.glibc and snap.system.glibc[0].isdigit()


def test_requested_environment_is_recorded_with_secrets_redacted(
    venv_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_very_secret_value")
    monkeypatch.setenv("HF_HOME", "/models/hf")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("UNRELATED", "x")
    snap = collect(host(venv_python, env=("HF_*", "CUDA_VISIBLE_DEVICES")), LocalRunner("t"))
    assert snap.env == {
        "CUDA_VISIBLE_DEVICES": "1",
        "HF_HOME": "/models/hf",
        "HF_TOKEN": "<redacted>",
    }
    raw = LocalRunner("t").run(
        [str(venv_python), "-c", "import os; print(os.environ['HF_TOKEN'])"], timeout=30
    )
    assert raw.stdout.strip() == b"hf_very_secret_value"  # the variable really was set


def test_first_sys_path_entry_wins_and_the_shadowed_copy_is_recorded(
    venv_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = tmp_path / "overlay"
    info = extra / "plain-9.9.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plain\nVersion: 9.9\n")
    monkeypatch.setenv("PYTHONPATH", str(extra))
    snap = collect(host(venv_python), LocalRunner("t"))
    plain = snap.distribution("plain")
    assert plain is not None
    assert plain.version == "9.9"
    assert plain.shadowed == (str(site_packages(venv_python) / "plain-2.0.dist-info"),)


def test_modules_in_the_current_directory_do_not_shadow_the_probe(
    venv_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "json.py").write_text("raise RuntimeError('shadowed!')\n")
    monkeypatch.chdir(tmp_path)
    snap = collect(host(venv_python), LocalRunner("t"))
    assert snap.distribution("plain") is not None


def test_broken_metadata_is_recorded_not_fatal_to_the_probe(
    venv_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overlay = tmp_path / "overlay"
    (broken_info := overlay / "halfgone-1.0.dist-info").mkdir(parents=True)
    (broken_info / "METADATA").write_text("Metadata-Version: 2.1\nName: halfgone\n")
    (overlay / "empty-2.0.dist-info").mkdir()
    (overlay / "unreadable-3.0.dist-info" / "METADATA").mkdir(parents=True)
    (overlay / "badurl-4.0.dist-info").mkdir()
    (overlay / "badurl-4.0.dist-info" / "METADATA").write_text("Name: badurl\nVersion: 4.0\n")
    (overlay / "badurl-4.0.dist-info" / "direct_url.json").write_text("{oops")
    monkeypatch.setenv("PYTHONPATH", str(overlay))
    snap = collect(host(venv_python), LocalRunner("t"))
    reasons = {Path(b.path).name: b.reason for b in snap.broken}
    assert reasons.pop("badurl-4.0.dist-info").startswith("direct_url.json is not valid JSON")
    assert reasons == {
        "halfgone-1.0.dist-info": "metadata has no Version",
        "empty-2.0.dist-info": "no METADATA file",
        "unreadable-3.0.dist-info": "no METADATA file",
    }
    assert snap.distribution("halfgone") is None


def test_probe_runs_on_python_3_8(tmp_path: Path) -> None:
    found = sorted(glob.glob(os.path.expanduser("~root/.pyenv/versions/3.8.*/bin/python3.8")))
    found += [p for p in ("/usr/bin/python3.8",) if os.path.exists(p)]
    if not found:
        pytest.skip("no Python 3.8 interpreter on this machine")
    snap = collect(HostSpec(name="old", python=found[0]), LocalRunner("old"))
    assert isinstance(snap.interpreter, Interpreter), snap.interpreter
    assert snap.interpreter.version.startswith("3.8.")
    assert snap.distributions


def test_probe_refuses_python_older_than_3_8() -> None:
    found = sorted(glob.glob(os.path.expanduser("~root/.pyenv/versions/3.[67].*/bin/python3.[67]")))
    if not found:
        pytest.skip("no Python 3.6/3.7 interpreter on this machine")
    with pytest.raises(CollectError, match=r"needs Python 3\.8 or newer"):
        collect(HostSpec(name="old", python=found[0]), LocalRunner("old"))


def test_snapshot_json_is_plain_data(venv_python: Path) -> None:
    from envsync.sources.snapshot import dumps_snapshot

    data = json.loads(dumps_snapshot(collect(host(venv_python), LocalRunner("t"))))
    assert data["schema_version"] == 1
    assert data["host"] == "testhost"


def test_hash_cache_is_reused_and_never_hides_a_change(venv_python: Path, tmp_path: Path) -> None:
    sp = site_packages(venv_python)
    target = sp / "watched_pkg" / "__init__.py"
    old = 1_600_000_000_000_000_000
    for path in (sp / "watched_pkg").rglob("*.py"):
        os.utime(path, ns=(old, old))  # old enough not to be "racy"
    spec = host(venv_python)
    first = collect(spec, LocalRunner("t"))
    (path,) = (Path.home() / ".cache" / "envsync").glob("hashes-v1-*.json")  # this venv's
    cache = json.loads(path.read_bytes()[:-SEAL_SIZE])  # sealed (hostside/shared.py)
    watched = first.distribution("watched-pkg")
    assert watched is not None and watched.files is not None
    assert cache[str(target)][4] == watched.files["watched_pkg/__init__.py"]
    # same size, same mtime, new content: ctime gives it away
    original = target.read_text()
    target.write_text(original.replace("1", "7"))
    os.utime(target, ns=(old, old))
    second = collect(spec, LocalRunner("t"))
    dist = second.distribution("watched-pkg")
    assert dist is not None and dist.files is not None
    assert dist.files["watched_pkg/__init__.py"] == hashlib.sha256(target.read_bytes()).hexdigest()
    assert "watched_pkg/__init__.py" in dist.patched
    target.write_text(original)
    third = collect(spec, LocalRunner("t"), ProbeOptions(cache_dir=""))
    assert third.distribution("watched-pkg").files == first.distribution("watched-pkg").files  # type: ignore[union-attr]  # distribution() is None for a name not installed; watched-pkg is (else the test fails here)
