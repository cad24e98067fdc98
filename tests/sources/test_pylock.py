"""`envsync lock --format pylock`: the index, the file chosen, the document (pure parts)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from envsync.errors import CollectError
from envsync.model.codec import to_data
from envsync.model.environment import Interpreter
from envsync.runner import CommandResult
from envsync.sources.inventory import HostSpec
from envsync.sources.locks.index import (
    IndexFile,
    choose,
    parse_config,
    parse_page,
    read_config,
    redact,
)
from envsync.sources.locks.lockfile import loads_lock
from envsync.sources.locks.pylock import (
    FILE_NAME,
    Located,
    dumps_pylock,
    environment_marker,
    locate,
    toml_datetime,
)
from envsync.sources.snapshot import load_snapshot
from tests.helpers import pep751_problems

DATA = Path(__file__).resolve().parent.parent / "data"
SNAPSHOT = DATA / "snapshots" / "ct129.json"
INDEX = "http://127.0.0.1:9/simple/"
TAGS = ("cp311-cp311-manylinux_2_28_x86_64", "cp311-abi3-manylinux_2_17_x86_64", "py3-none-any")


def test_pip_config_precedence() -> None:
    lines = [
        "global.index-url='http://a/simple'",
        "global.extra-index-url='http://b/simple http://c/simple'",
        "install.index-url='http://d/simple'",
        "global.cert='/etc/ca.pem'",
    ]
    assert parse_config(lines, "http://default/simple") == (
        ("http://d/simple", "http://b/simple", "http://c/simple"),
        "/etc/ca.pem",
    )
    # PIP_INDEX_URL beats every file; without any index-url, pip's default applies.
    assert (
        parse_config([*lines, ":env:.index-url='http://e/simple'"], None)[0][0] == "http://e/simple"
    )
    assert parse_config([], "http://default/simple") == (("http://default/simple",), None)
    assert parse_config(["global.no-index='true'"], "http://default/simple") == ((), None)


def test_json_and_html_pages_give_the_same_files() -> None:
    sha = "a" * 64
    page = INDEX + "six/"
    json_page = json.dumps(
        {
            "meta": {"api-version": "1.1"},
            "files": [
                {
                    "filename": "six-1.17.0-py2.py3-none-any.whl",
                    "url": "../../files/six-1.17.0-py2.py3-none-any.whl",
                    "hashes": {"sha256": sha},
                    "size": 11050,
                    "upload-time": "2024-12-04T17:35:26.475Z",
                    "requires-python": ">=2.7",
                },
                {"filename": "six-1.16.0.tar.gz", "url": "x", "hashes": {}, "yanked": "bad"},
            ],
        }
    ).encode()
    html_page = (
        b'<a href="../../files/six-1.17.0-py2.py3-none-any.whl#sha256=' + sha.encode() + b'" '
        b'data-requires-python="&gt;=2.7">six-1.17.0-py2.py3-none-any.whl</a>'
        b'<a href="x" data-yanked="">six-1.16.0.tar.gz</a>'
    )
    (a,) = parse_page(json_page, "application/vnd.pypi.simple.v1+json", page, INDEX)
    (b,) = parse_page(html_page, "text/html", page, INDEX)
    assert a.url == b.url == "http://127.0.0.1:9/files/six-1.17.0-py2.py3-none-any.whl"
    assert a.hashes == b.hashes == {"sha256": sha}
    assert a.requires_python == b.requires_python == ">=2.7"
    assert (a.size, a.upload_time) == (11050, "2024-12-04T17:35:26.475Z")
    assert (b.size, b.upload_time) == (None, None)  # HTML pages never say: a HEAD request does


def _file(name: str, sha: str = "0" * 64) -> IndexFile:
    return IndexFile(filename=name, url=INDEX + name, index=INDEX, hashes={"sha256": sha})


def test_the_wheel_of_the_hosts_best_tag_else_the_sdist_else_the_recorded_hash() -> None:
    files = [
        _file("xgrammar-0.1.32-cp311-cp311-manylinux_2_17_x86_64.whl"),  # not the host's tag
        _file("xgrammar-0.1.32-cp311-abi3-manylinux_2_17_x86_64.whl"),
        _file("xgrammar-0.1.32-cp311-cp311-manylinux_2_28_x86_64.whl"),
        _file("xgrammar-0.1.32-cp312-cp312-manylinux_2_28_x86_64.whl"),
        _file("xgrammar-0.1.31-cp311-cp311-manylinux_2_28_x86_64.whl"),
        _file("xgrammar-0.1.32.tar.gz", "1" * 64),
    ]
    best = choose(files, "xgrammar", "0.1.32", TAGS)
    assert (
        best is not None
        and best.filename == "xgrammar-0.1.32-cp311-cp311-manylinux_2_28_x86_64.whl"
    )
    assert choose(files, "xgrammar", "0.1.32", ("py3-none-any",)) == files[5]
    assert choose(files, "xgrammar", "0.1.30", TAGS) is None
    assert choose(files, "xgrammar", "0.1.32", TAGS, sha256="1" * 64) == files[5]
    assert choose(files, "xgrammar", "0.1.32", TAGS, sha256="2" * 64) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-12-04T17:35:26.475123Z", "2024-12-04T17:35:26.475123+00:00"),
        ("2026-11-18T11:06:54Z", "2026-11-18T11:06:54+00:00"),
        ("yesterday", None),
        (None, None),
    ],
)
def test_upload_time_is_a_toml_datetime(text: str | None, expected: str | None) -> None:
    value = toml_datetime(text)
    assert (value.isoformat() if value else None) == expected


def test_credentials_never_reach_the_lock() -> None:
    assert redact("https://user:secret@index.internal/simple/") == "https://index.internal/simple/"


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("pylock.toml", True),
        ("pylock.ct129.toml", True),
        ("ct129.toml", False),
        ("pylock.a.b.toml", False),
    ],
)
def test_installers_read_only_pylock_names(name: str, ok: bool) -> None:
    assert bool(FILE_NAME.match(name)) is ok


def test_pylock_document_sources_unlocked_packages_and_paths() -> None:
    snap = load_snapshot(SNAPSHOT)
    sglang = replace(
        _file("sglang-0.5.11-py3-none-any.whl", "5" * 64), upload_time="2026-05-01T10:00:00Z"
    )
    served = {"sglang": [sglang], "soundfile": [], "torch": [], "xgrammar": []}
    located = locate(snap, lambda name: served[name], TAGS, lambda url: 1234)
    # torch 2.11.0+cu130 came from a local file whose hash no index serves; xgrammar from a
    # git remote (its own vcs source); soundfile from an index that does not serve it.
    assert set(located.files) == {"sglang"}
    assert set(located.unlocked) == {"soundfile", "torch"}
    text = dumps_pylock(snap, located)
    doc = tomllib.loads(text)
    assert doc["lock-version"] == "1.0" and doc["created-by"] == "envsync"
    assert doc["environments"] == [
        "sys_platform == 'linux' and platform_machine == 'x86_64' and python_version == '3.11' "
        "and implementation_name == 'cpython'"
    ]
    assert pep751_problems(doc) == []
    by_name = {p["name"]: p for p in doc["packages"]}
    assert set(by_name) == {"sglang", "xgrammar"}  # every package has one source
    assert by_name["sglang"]["index"] == INDEX
    assert by_name["sglang"]["wheels"] == [
        {
            "name": "sglang-0.5.11-py3-none-any.whl",
            "upload-time": datetime(2026, 5, 1, 10, 0, tzinfo=timezone.utc),
            "url": INDEX + "sglang-0.5.11-py3-none-any.whl",
            "size": 1234,
            "hashes": {"sha256": "5" * 64},
        }
    ]
    assert by_name["xgrammar"]["vcs"]["commit-id"] == "4b3e9a1c0d2f"
    unlocked = {p["name"]: p["reason"] for p in doc["tool"]["envsync"]["unlocked"]}
    assert "local build (2.11.0+cu130)" in unlocked["torch"]
    # No path of the machine outside [tool.envsync]'s host facts.
    outside = {k: v for k, v in doc.items() if k != "tool"}
    assert "/opt/" not in str(outside) and "file:" not in str(outside)
    # The same file is an envsync lock: every fact comes back, unlocked packages too.
    back = loads_lock(text, "pylock.toml")
    assert to_data(back.distributions) == to_data(snap.distributions)


def test_a_package_without_a_source_is_listed_never_dropped() -> None:
    snap = load_snapshot(SNAPSHOT)
    doc = tomllib.loads(dumps_pylock(snap, Located(files={}, unlocked={})))
    assert pep751_problems(doc) == []
    assert [p["name"] for p in doc["packages"]] == ["xgrammar"]  # its vcs source
    unlocked = [p["name"] for p in doc["tool"]["envsync"]["unlocked"]]
    assert unlocked == ["sglang", "soundfile", "torch"]
    assert isinstance(snap.interpreter, Interpreter), snap.interpreter
    assert environment_marker(snap.interpreter).startswith("sys_platform == 'linux'")


class _Replay:
    """A runner that replays one output of the index script (a fake of envsync's seam)."""

    host = "h"

    def __init__(self, stdout: bytes) -> None:
        self.stdout = stdout

    def run(self, argv: object, *, input: bytes | None = None, timeout: float) -> CommandResult:
        return CommandResult(
            argv=("python",), returncode=0, stdout=self.stdout, stderr=b"", duration_s=0.0
        )


def test_the_hosts_config_is_read_with_its_own_pip() -> None:
    spec = HostSpec(name="h", python="/opt/venv/bin/python")
    out = {
        "tags": ["cp311-cp311-linux_x86_64"],
        "default": "http://default/simple/",
        "config": [":env:.index-url='http://127.0.0.1:1/simple/'"],
        "error": None,
    }
    config = read_config(spec, _Replay(json.dumps(out).encode()))
    assert config.indexes == ("http://127.0.0.1:1/simple/",)
    assert config.tags == ("cp311-cp311-linux_x86_64",)
    no_pip: dict[str, object] = {
        "tags": [],
        "default": None,
        "config": [],
        "error": "ModuleNotFoundError: No module named 'pip'",
    }
    with pytest.raises(
        CollectError,
        match=r"h: cannot read the host's pip configuration: ModuleNotFoundError.*Tip: install pip",
    ):
        read_config(spec, _Replay(json.dumps(no_pip).encode()))
    with pytest.raises(CollectError, match="cannot read the host's pip configuration"):
        read_config(spec, _Replay(b"Traceback ..."))


def test_the_validator_finds_what_pep751_forbids() -> None:
    bad = {
        "lock-version": "2",
        "packages": [
            {"name": "a", "version": "1", "wheels": [{"url": "u"}], "vcs": {"type": "git"}},
            {"name": "b", "wheels": [{"url": "u", "hashes": {"sha256": "0"}, "upload-time": "x"}]},
        ],
    }
    assert pep751_problems(bad) == [
        "lock-version must be '1.0'",
        "created-by must be a string",
        "packages[0] (a): exactly one of vcs, directory, archive, or sdist/wheels",
        "packages[0] (a).wheels: hashes are required",
        "packages[0] (a).vcs: type and commit-id are required",
        "packages[1] (b): version is required with sdist or wheels",
        "packages[1] (b).wheels: upload-time must be a datetime",
    ]


def test_a_clean_checkout_is_its_remote_at_its_commit() -> None:
    from envsync.model.codec import from_data
    from envsync.model.environment import Snapshot

    data = to_data(load_snapshot(SNAPSHOT))
    for dist in data["distributions"]:
        if dist["name"] == "sglang":
            dist["direct_url"] = {
                "url": "file:///home/me/sglang/python",
                "dir_info": {"editable": True},
            }
            dist["source"] = {
                "mode": "editable-finder",
                "packages": {"sglang": "/home/me/sglang/python/sglang"},
                "git": {
                    "root": "/home/me/sglang",
                    "commit": "abc123",
                    "branch": "main",
                    "remote": "https://git.example/sgl-project/sglang.git",
                },
            }
    clean = from_data(Snapshot, data)
    located = locate(clean, lambda name: [], TAGS)
    assert located.vcs["sglang"] == {
        "type": "git",
        "url": "https://git.example/sgl-project/sglang.git",
        "commit-id": "abc123",
        "requested-revision": "main",
        "subdirectory": "python",
    }
    doc = tomllib.loads(dumps_pylock(clean, located))
    assert pep751_problems(doc) == []
    assert next(p for p in doc["packages"] if p["name"] == "sglang")["vcs"]["commit-id"] == "abc123"
    assert "/home/me" not in str({k: v for k, v in doc.items() if k != "tool"})
    # A checkout with local changes is not that commit: unlocked, with the reason.
    data["distributions"][0]["source"]["git"]["modified"] = ["sglang/srt/server_args.py"]
    changed = locate(from_data(Snapshot, data), lambda name: [], TAGS)
    assert changed.unlocked["sglang"] == "installed from a checkout on the host with local changes"
    assert "/home/me" not in str(
        tomllib.loads(dumps_pylock(from_data(Snapshot, data), changed))["tool"]["envsync"][
            "unlocked"
        ]
    )
