"""Unit tests of the probe's pure parsing functions, on recorded and crafted input."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from envsync.hostside import shared
from envsync.hostside.facts import dists, gitindex, machine
from envsync.hostside.facts import git as checkout

DATA = Path(__file__).resolve().parent.parent / "data"


def test_probe_source_is_python38_syntax() -> None:
    for path in Path(shared.__file__).parent.rglob("*.py"):
        ast.parse(path.read_text(), feature_version=(3, 8))


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("SoundFile", "soundfile"),
        ("pip_api", "pip-api"),
        ("zope.interface", "zope-interface"),
        ("A__B--c", "a-b-c"),
    ],
)
def test_normalize(raw: str, normalized: str) -> None:
    assert shared.normalize(raw) == normalized


def test_metadata_headers_stop_at_body_and_fold_continuations() -> None:
    text = (
        "Metadata-Version: 2.1\nName: xgrammar\nVersion: 0.1.32\n"
        "Requires-Dist: torch>=1.10\nRequires-Dist: pydantic\nLicense: Apache\n  2.0\n\n"
        "Name: not-a-header\n"
    )
    headers = dists.parse_metadata_headers(text)
    assert headers["name"] == ["xgrammar"]
    assert headers["requires-dist"] == ["torch>=1.10", "pydantic"]
    assert headers["license"] == ["Apache\n2.0"]


def test_metadata_header_without_colon_is_malformed() -> None:
    with pytest.raises(ValueError, match="malformed header"):
        dists.parse_metadata_headers("Name: x\nthis is not a header\n")


def test_record_rows_decode_urlsafe_base64_digests() -> None:
    record = (
        "pkg/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n"
        '"pkg/a,b.py",sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n'
        "pkg-1.dist-info/RECORD,,\n"
    )
    rows = dists.parse_record(record)
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert rows == [
        ("pkg/__init__.py", empty),
        ("pkg/a,b.py", empty),
        ("pkg-1.dist-info/RECORD", None),
    ]


@pytest.mark.parametrize(
    ("paths", "names"),
    [
        (["sglang/__init__.py", "sglang/srt/x.py", "sglang-0.5.11.dist-info/METADATA"], ["sglang"]),
        (["six.py", "__pycache__/six.cpython-311.pyc"], ["six"]),
        (["_cffi_backend.cpython-311-x86_64-linux-gnu.so"], ["_cffi_backend"]),
        (["../../bin/envsync", "pkg.data/scripts/x", "distutils-precedence.pth"], []),
        (
            ["soundfile.py", "_soundfile_data/libsndfile.so", "_soundfile.py"],
            ["_soundfile", "_soundfile_data", "soundfile"],
        ),
    ],
)
def test_top_level_from_record_paths(paths: list[str], names: list[str]) -> None:
    assert dists.top_level_from_files(paths) == names


def test_egg_requires_sections_become_markers() -> None:
    text = 'requests>=2\n\n[socks]\nPySocks!=1.5.7\n\n[:python_version < "3.8"]\nzipp\n'
    assert dists.egg_requires(text) == [
        "requests>=2",
        'PySocks!=1.5.7; extra == "socks"',
        'zipp; python_version < "3.8"',
    ]


def test_gpu_csv_recorded_blackwell_host() -> None:
    gpus = machine.parse_gpu_csv((DATA / "nvidia-smi" / "ct200-query.csv").read_text())
    assert len(gpus) == 8
    assert gpus[0] == {
        "index": 0,
        "name": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        "compute_capability": "12.0",
        "driver_version": "580.95.05",
        "memory_mib": 97887,
    }


def test_gpu_csv_not_available_fields_are_none() -> None:
    (gpu,) = machine.parse_gpu_csv((DATA / "nvidia-smi" / "old-driver-query.csv").read_text())
    assert gpu["compute_capability"] is None
    assert gpu["name"] == "Tesla T4"


def test_gpu_csv_garbage_is_an_error() -> None:
    with pytest.raises(ValueError, match="unexpected nvidia-smi line"):
        machine.parse_gpu_csv("NVIDIA-SMI has failed because it couldn't communicate\n")


def test_cuda_version_from_the_nvidia_smi_banner() -> None:
    text = (DATA / "nvidia-smi" / "ct200-nvidia-smi.txt").read_text()
    assert machine.parse_cuda_version(text) == "13.0"
    assert machine.parse_cuda_version("no banner") is None


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("HF_TOKEN", "hf_abcdef", "<redacted>"),
        ("AWS_SECRET_ACCESS_KEY", "x", "<redacted>"),
        ("WANDB_API_KEY", "x", "<redacted>"),
        ("DB_PASSWORD", "x", "<redacted>"),
        ("SSH_AUTH_SOCK", "/tmp/agent", "<redacted>"),
        ("CUDA_VISIBLE_DEVICES", "1", "1"),
        ("KEYBOARD_LAYOUT", "us", "us"),
        (
            "PIP_INDEX_URL",
            "https://user:pa55@pkgs.example/simple",
            "https://<redacted>@pkgs.example/simple",
        ),
    ],
)
def test_secret_environment_values_are_redacted(name: str, value: str, shown: str) -> None:
    assert shared.redact_env(name, value) == shown


def test_direct_url_credentials_are_redacted() -> None:
    data = {"url": "git+https://tok:x-oauth@git.example/org/sglang.git", "vcs_info": {"vcs": "git"}}
    assert shared.redact_data(data)["url"] == "git+https://<redacted>@git.example/org/sglang.git"


@pytest.mark.parametrize(
    ("url", "clean"),
    [
        ("https://user:tok@git.example.invalid/org/x.git", "https://git.example.invalid/org/x.git"),
        ("https://tok@git.example.invalid/x", "https://git.example.invalid/x"),
        ("git@git.example.invalid:org/x.git", "git@git.example.invalid:org/x.git"),
        ("/srv/git/x.git", "/srv/git/x.git"),
    ],
)
def test_remote_urls_lose_their_credentials(url: str, clean: str) -> None:
    assert shared.strip_credentials(url) == clean


def test_git_state_of_a_linked_worktree_with_an_intent_to_add_entry(tmp_path: Path) -> None:
    """A v3 index (extended flags) and a `.git` file pointing into the main repository."""
    from tests.source_trees import git

    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "a.py").write_text("A = 1\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "one")
    git(repo, "worktree", "add", "-q", "-b", "side", str(tmp_path / "side"))
    side = tmp_path / "side"
    (side / "pkg" / "b.py").write_text("B = 1\n")
    git(side, "add", "-N", "pkg/b.py")
    head = git(side, "rev-parse", "HEAD")
    entries, width, _ = gitindex.read_index(
        str(Path(git(side, "rev-parse", "--absolute-git-dir")) / "index"), ("pkg/",)
    )
    assert width == 20 and [e["path"] for e in entries] == ["pkg/a.py", "pkg/b.py"]
    state = checkout.git_state({"pkg": str(side / "pkg")}, {"pkg/a.py", "pkg/b.py"})
    assert (state["root"], state["commit"], state["branch"]) == (str(side), head, "side")
    assert state["added"] == ["pkg/b.py"] and state["modified"] == []
    assert state["untracked"] == [] and state["deleted"] == []
