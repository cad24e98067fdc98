"""A computed import whose name a call passes in: read with the name it will have.

The shape of SGLang's model registry (sglang/srt/models/registry.py:128-132 in the
example's wheel): a module-level object's method is called with a package's name, and the
function it calls imports that package and every module `pkgutil.iter_modules` finds under
it, each inside `try/except Exception`; a second call, under `if external_pkg :=
envs.SGLANG_EXTERNAL_MODEL_PACKAGE.get():`, registers a package named by the environment.

Following calls made at import opened both as doors with no name known ("startup may
import anything of the package"), and the story's missing ddtree_utils read `unknown`
where the real start never imports it. The first call binds the parameter to its string,
so the registry's modules are read as startup; the second opens only where the service's
environment sets the variable. Ground truth is a real import on each side.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from envsync.hostside.graph.analyse import analyze_source
from tests.figures import add
from tests.helpers import make_venv, make_wheel, pip_install, run_cli

pytestmark = pytest.mark.slow

SECTION = "startup truth (issue 45, cases held)"

REGISTRY = """\
import importlib
import os
import pkgutil


def load(package_name):
    package = importlib.import_module(package_name)
    for _, name, ispkg in pkgutil.iter_modules(package.__path__, package_name + "."):
        try:
            importlib.import_module(name)
        except Exception:
            pass


class Registry:
    def register(self, package_name):
        load(package_name)


REGISTRY = Registry()
REGISTRY.register("svc.models")

if plugin := os.environ.get("SVC_PLUGIN"):
    REGISTRY.register(plugin)
"""

FILES = {
    "svc/__init__.py": "",
    "svc/main.py": "import svc.registry\n",
    "svc/registry.py": REGISTRY,
    "svc/models/__init__.py": "",
    "svc/models/llama.py": "import svc.layers\n",
    "svc/layers.py": "",
    "svc/plugins/__init__.py": "import svc.extra\n",
}


def test_a_parameter_every_call_passes_a_string_names_the_import() -> None:
    facts = analyze_source(REGISTRY, "svc.registry", False)
    edges = {(e["module"], e["context"], e["line"]) for e in facts["imports"]}
    assert ("svc.models", "module", 7) in edges  # importlib.import_module(package_name)
    opened = [d for d in facts["doors"] if d["context"] != "function"]
    # the loop's names start with the package's: the probe reads every module under it
    assert {"line": 10, "context": "try", "prefix": "svc.models."}.items() <= opened[0].items()
    # the environment's package: a door only where SVC_PLUGIN is set
    assert {(d["line"], d.get("env"), d["prefix"]) for d in opened[1:]} == {
        (7, "SVC_PLUGIN", None),
        (10, "SVC_PLUGIN", None),
    }


def test_calls_that_pass_different_strings_are_read_each_with_its_own() -> None:
    source = REGISTRY.replace(
        'if plugin := os.environ.get("SVC_PLUGIN"):\n    REGISTRY.register(plugin)\n',
        'REGISTRY.register("svc.more")\n',
    )
    facts = analyze_source(source, "svc.registry", False)
    edges = {e["module"] for e in facts["imports"] if e["context"] != "function"}
    assert {"svc.models", "svc.more"} <= edges
    prefixes = {d["prefix"] for d in facts["doors"] if d["context"] != "function"}
    assert prefixes == {"svc.models.", "svc.more."}
    # a string envsync cannot read leaves the door open, as before
    source = REGISTRY.replace('REGISTRY.register("svc.models")', "REGISTRY.register(input())")
    facts = analyze_source(source, "svc.registry", False)
    assert any(
        d["prefix"] is None and "env" not in d for d in facts["doors"] if d["context"] != "function"
    )


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bound")
    reference = make_wheel(
        root / "ref-wheel", "svc", "1.0", {**FILES, "svc/extra.py": "VALUE = 1\n"}
    )
    target = make_wheel(root / "tgt-wheel", "svc", "1.0", FILES)
    pip_install(make_venv(root / "ref"), reference)
    pip_install(make_venv(root / "tgt"), target)
    return root


def _findings(
    bed: Path, capsys: pytest.CaptureFixture[str], env: str = ""
) -> dict[str, dict[str, object]]:
    inv = bed / "envsync.toml"
    inv.write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = ["svc"]\n'
        '[service]\ncommand = ["{python}", "-m", "svc.main"]\n'
        + (f"env = {{ SVC_PLUGIN = {json.dumps(env)} }}\n" if env else "")
        + f'[hosts.ref]\npython = "{bed / "ref" / "bin" / "python"}"\n'
        f'[hosts.tgt]\npython = "{bed / "tgt" / "bin" / "python"}"\n'
    )
    capsys.readouterr()
    code, out, err = run_cli(capsys, "--inventory", str(inv), "-q", "diff", "--format", "json")
    assert code in (0, 1, 4), err
    return {str(f["subject"]): f for f in json.loads(out)["findings"]}


def _imports(bed: Path, side: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    python = bed / side / "bin" / "python"
    code = "import sys, svc.main; print(sorted(m for m in sys.modules if m.startswith('svc')))"
    return subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=True,
    )


def test_a_module_no_call_names_stays_unreached_until_the_environment_names_it(
    bed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the real start: the registry's modules are imported; svc.extra only with the plugin
    started = _imports(bed, "ref", {})
    assert "svc.models.llama" in started.stdout and "svc.extra" not in started.stdout
    plugged = _imports(bed, "ref", {"SVC_PLUGIN": "svc.plugins"})
    assert "svc.extra" in plugged.stdout
    found = _findings(bed, capsys)["svc/extra.py"]
    assert found["severity"] == "benign", found
    found = _findings(bed, capsys, env="svc.plugins")["svc/extra.py"]
    assert found["severity"] == "unknown", found
    assert "svc.registry:7" in str(found["reason"]), found
    add(SECTION, "3 calls at import time: a door named by a call's string, on real venvs")
