"""The story end to end on the built-in example with its real runtime (torch CPU, real
xgrammar 0.1.10/0.1.32, soundfile): ct200 dies on soundfile, then on StructuralTag, each
traced to its finding; `repair --apply` brings it up."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from envsync.cli import main
from tests.helpers import REPO, build_example
from tests.helpers import run_cli as run
from tests.sshd import free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory, wheel_cache: Path) -> Path:
    dest = tmp_path_factory.mktemp("story")
    build_example(dest, wheel_cache, runtime=REPO / "examples" / ".hosts" / "runtime")
    text = (REPO / "examples" / "envsync.toml").read_text().replace('".hosts/', f'"{dest}/')
    text = text.replace(
        '"{inventory_dir}/demo_server.py"', f'"{REPO / "examples" / "demo_server.py"}"'
    )
    # Free ports, not fixed ones: other runs of the suite may share this machine.
    text = text.replace("port = 30001", f"port = {free_port()}")
    text = text.replace("port = 30002", f"port = {free_port()}")
    inv = dest / "envsync.toml"
    inv.write_text(text)
    return inv


def test_the_story(capsys: pytest.CaptureFixture[str], story: Path, wheel_cache: Path) -> None:
    inv = str(story)
    try:
        code, out, _ = run(capsys, "--inventory", inv, "-q", "deploy", "ct200", "--deadline", "120")
        assert code == 5
        assert "CRASHED" in out and "ModuleNotFoundError: No module named 'soundfile'" in out
        assert "next: envsync repair ct129 ct200 --prefer fix --apply" in out
        # soundfile by hand: the next crash is the story's second one, from the real xgrammar
        python = story.parent / "ct200" / "bin" / "python"
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-index",
                "--find-links",
                str(wheel_cache),
                "soundfile==0.13.1",
            ],
            check=True,
            capture_output=True,
        )
        code, out, _ = run(capsys, "--inventory", inv, "-q", "deploy", "ct200", "--deadline", "120")
        assert code == 5
        assert "ImportError: cannot import name 'StructuralTag' from 'xgrammar'" in out
        assert "xgrammar 0.1.10 lacks StructuralTag" in out
        assert "next: envsync repair ct129 ct200 --prefer fix --apply" in out
        assert "next: envsync repair ct129 ct200 --prefer workaround --apply" in out
        # the workaround (auto: nothing in the command uses structured output) brings it up
        code, out, err = run(
            capsys, "--inventory", inv, "-q", "repair", "--apply", "--deadline", "120"
        )
        assert code == 0, out + err
        assert "ct200: ready in " in out and "tokens/s" in out
        # and the reference starts as it always did
        code, out, _ = run(capsys, "--inventory", inv, "-q", "deploy", "ct129", "--deadline", "120")
        assert code == 0 and "ct129: ready in " in out
    finally:
        for host in ("ct129", "ct200"):
            main(["--inventory", inv, "-q", "stop", host])
