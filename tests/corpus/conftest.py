"""The corpus pairs: real venvs from real wheels, built once per session."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from envsync.cli import main
from tests.corpus.cases import CASES, Case
from tests.helpers import fetch, make_venv, pip_install, site_packages


@dataclass(frozen=True, slots=True)
class Pair:
    case: Case
    root: Path

    @property
    def reference(self) -> Path:
        return self.root / "ref" / "bin" / "python"

    @property
    def target(self) -> Path:
        return self.root / "tgt" / "bin" / "python"

    def site(self, side: str) -> Path:
        return site_packages(self.reference if side == "ref" else self.target)


class Pairs:
    """Builds each case's pair on first use, and runs `envsync diff` on it once."""

    def __init__(self, root: Path, wheels: Path) -> None:
        self.root = root
        self.wheels = wheels
        self._pairs: dict[str, Pair] = {}
        self._findings: dict[str, dict[str, dict]] = {}

    def pair(self, case: Case) -> Pair:
        if case.id not in self._pairs:
            root = self.root / case.id
            sglang = fetch(self.wheels, case.engine)
            for side, requirements in (("ref", case.reference), ("tgt", case.target)):
                python = make_venv(root / side)
                pip_install(python, sglang, *(fetch(self.wheels, r) for r in requirements))
            self._pairs[case.id] = Pair(case=case, root=root)
        return self._pairs[case.id]

    def findings(self, case: Case, capsys: pytest.CaptureFixture[str]) -> dict[str, dict]:
        """`envsync diff` of the pair, as JSON findings by subject."""
        if case.id not in self._findings:
            pair = self.pair(case)
            inv = pair.root / "envsync.toml"
            command = ["{python}", "-m", "sglang.launch_server", "--model-path", "/m", *case.flags]
            inv.write_text(
                f'[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = ["sglang"]\n'
                f"[service]\ncommand = {json.dumps(command)}\n"
                f'[hosts.ref]\npython = "{pair.reference}"\n'
                f'[hosts.tgt]\npython = "{pair.target}"\n'
            )
            capsys.readouterr()
            assert main(["--inventory", str(inv), "-q", "diff", "--format", "json"]) == 1
            data = json.loads(capsys.readouterr().out)
            self._findings[case.id] = {f["subject"]: f for f in data["findings"]}
        return self._findings[case.id]


def pip_check(python: Path) -> list[str]:
    """`pip check` of a venv: the lines it prints."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "check"],
        capture_output=True,
        text=True,
        check=False,
    )
    return [line for line in out.stdout.splitlines() if line.strip()]


@pytest.fixture(autouse=True)
def probe_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """One cache folder for every corpus harness of the run (each test's HOME is its own):
    the engines' venvs, the stacks and the pairs share most files (torch, transformers,
    vLLM), whose facts the host keeps by their content, as it does across a user's runs;
    each graph and verdict is still keyed by the paths and files it read."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "corpus-cache"))


@pytest.fixture(scope="session")
def pairs(tmp_path_factory: pytest.TempPathFactory, wheel_cache: Path) -> Pairs:
    return Pairs(tmp_path_factory.mktemp("corpus"), wheel_cache)


__all__ = ["CASES", "Pair", "Pairs", "pip_check"]
