"""Every launch shape the docs list, read on real venvs: the verdict follows the code
the command really starts, and no shape envsync cannot read yields `benign`.

Ground truth, read from the real wheels: rich 15.0.0 defines `split_graphemes` at
rich/cells.py:161 (`def split_graphemes(`); rich 13.7.1 has no such name in rich/cells.py.
"""

from __future__ import annotations

import json
import shlex
import zipfile
from pathlib import Path

import pytest

from envsync.model.launch import launch_of
from tests.classify.test_sglang_wheels import fetch
from tests.helpers import make_venv, make_wheel, pip_install
from tests.helpers import run_cli as run

pytestmark = pytest.mark.slow

SCRIPT = "import os\nfrom rich.cells import split_graphemes\nprint('serving', os.getpid())\n"
CLI = {
    "svcli/__init__.py": "",
    "svcli/main.py": "import sys\nfrom rich.cells import split_graphemes\n\n"
    "def main():\n    print(sys.argv)\n",
}
ENTRY_POINTS = "[console_scripts]\nsvc-serve = svcli.main:main\n"


def _with_entry_points(wheel: Path) -> Path:
    """The purpose-built wheel, with a console script (as setuptools would write it)."""
    with zipfile.ZipFile(wheel) as zf:
        items = {n: zf.read(n) for n in zf.namelist()}
    info = next(n.split("/")[0] for n in items if n.endswith(".dist-info/METADATA"))
    items[f"{info}/entry_points.txt"] = ENTRY_POINTS.encode()
    import base64
    import hashlib

    def digest(data: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = "".join(
        f"{n},sha256={digest(d)},{len(d)}\n" for n, d in items.items() if not n.endswith("RECORD")
    )
    items[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in items.items():
            zf.writestr(name, data)
    return wheel


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, wheel_cache: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("launch")
    new, old = fetch(wheel_cache, "rich==15.0.0"), fetch(wheel_cache, "rich==13.7.1")
    with zipfile.ZipFile(new) as zf:
        line = zf.read("rich/cells.py").decode().splitlines()[160]
    assert line.startswith("def split_graphemes(")  # rich/cells.py:161 in 15.0.0
    with zipfile.ZipFile(old) as zf:
        assert "split_graphemes" not in zf.read("rich/cells.py").decode()
    cli = _with_entry_points(make_wheel(root / "w", "svcli", "1.0", CLI))
    ref, tgt = make_venv(root / "ref"), make_venv(root / "tgt")
    pip_install(ref, new, cli)
    pip_install(tgt, old, cli)
    srv = root / "srv"
    srv.mkdir()
    (srv / "serve.py").write_text(SCRIPT)
    return {"root": root, "ref": ref, "tgt": tgt, "srv": srv}


def diff(
    capsys: pytest.CaptureFixture[str], hosts: dict[str, Path], command: list[str], **service: str
) -> dict:
    inv = hosts["root"] / "envsync.toml"
    extra = "".join(f'{k} = "{v}"\n' for k, v in service.items())
    inv.write_text(
        f'[defaults]\nreference = "ref"\ntarget = "tgt"\n'
        f"[service]\ncommand = {json.dumps(command)}\nport = 8000\n{extra}"
        f'[hosts.ref]\npython = "{hosts["ref"]}"\n[hosts.tgt]\npython = "{hosts["tgt"]}"\n'
    )
    code, out, err = run(capsys, "--inventory", str(inv), "-q", "diff", "--format", "json")
    assert code == 1, err
    return json.loads(out)


def rich_finding(report: dict) -> dict:
    return next(f for f in report["findings"] if f["subject"] == "rich")


@pytest.mark.parametrize(
    ("command", "service"),
    [
        (["{python}", "SRV/serve.py", "--port", "{port}"], {}),
        (["{python}", "-u", "-X", "dev", "-W", "ignore", "-O", "SRV/serve.py"], {}),
        (["{python}", "serve.py", "--port", "{port}"], {"workdir": "SRV"}),
        (["{python}", "{inventory_dir}/srv/serve.py", "--port", "{port}"], {}),
        (["env", "CUDA_VISIBLE_DEVICES=1", "{python}", "SRV/serve.py"], {}),
        (["bash", "-c", "exec {python} SRV/serve.py --port {port}"], {}),
        (["torchrun", "--nproc-per-node", "2", "--standalone", "SRV/serve.py"], {}),
        (["{python}", "-m", "torch.distributed.run", "--nnodes=1", "SRV/serve.py"], {}),
        (["{python}", "-m", "svcli.main", "--port", "{port}"], {}),
        (["BIN/svc-serve", "--port", "{port}"], {}),
        (["svc-serve", "--port", "{port}"], {}),
        (["torchrun", "--nproc_per_node", "2", "-m", "svcli.main"], {}),
    ],
)
def test_each_launch_shape_reaches_the_import_that_breaks(
    capsys: pytest.CaptureFixture[str],
    hosts: dict[str, Path],
    command: list[str],
    service: dict[str, str],
) -> None:
    def fill(text: str) -> str:
        return text.replace("SRV", str(hosts["srv"])).replace("BIN", str(hosts["tgt"].parent))

    report = diff(
        capsys, hosts, [fill(t) for t in command], **{k: fill(v) for k, v in service.items()}
    )
    finding = rich_finding(report)
    assert (finding["severity"], finding["decided_by"]) == ("fatal", "name-check"), finding
    assert "rich 13.7.1 lacks split_graphemes" in finding["reason"]
    evidence = finding["evidence"][0]
    assert evidence["statement"] == "from rich.cells import split_graphemes"
    assert evidence["line"] == 2
    assert not report["notes"], report["notes"]


@pytest.mark.parametrize(
    ("command", "note"),
    [
        (["sh", "-c", "cd /srv && python serve.py"], "set entrypoint = "),
        (["{python}", "-c", "import serve"], "set entrypoint = "),
        (["{python}", "SRV/missing.py"], "does not resolve on tgt"),
        (["no-such-script", "serve"], "does not resolve on tgt"),
    ],
)
def test_a_startup_envsync_cannot_read_is_unknown_never_benign(
    capsys: pytest.CaptureFixture[str], hosts: dict[str, Path], command: list[str], note: str
) -> None:
    report = diff(capsys, hosts, [t.replace("SRV", str(hosts["srv"])) for t in command])
    assert rich_finding(report)["severity"] == "unknown"
    assert [f for f in report["findings"] if f["severity"] == "benign"] == []
    assert any(note in n for n in report["notes"]), report["notes"]
    assert report["summary"]["unknown"] >= 1


def test_the_launch_shapes_of_the_docs_table() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "reference" / "hosts.md"
    table = page.read_text().split("## Launch shapes", 1)[1]
    rows = [r for r in table.splitlines() if r.startswith("| `")]
    assert len(rows) >= 8
    for row in rows:
        command, shape = row.split("|")[1].strip().strip("`"), row.split("|")[2].strip()
        assert launch_of(shlex.split(command)).shape == shape, row
