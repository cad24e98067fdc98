"""Every import context and severity, on small packages written for the purpose.

A service package `svc` imports its dependencies in each way Python allows. The reference
venv has every dependency at a good version; the target lacks or downgrades each one.
Both are real venvs with real wheels installed by pip; the probe reads them for real.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from envsync.cli import main
from envsync.collect import ProbeOptions, collect
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from tests.helpers import make_venv, make_wheel, pip_install, site_packages

SVC_MAIN = """\
import os
import alpha                                   # module level
from beta import needed                        # module level, a name
from lam import thing                          # a name re-exported through `import *`
import kappa                                   # module level; kappa has __getattr__
from kappa import whatever
from typing import TYPE_CHECKING
if os.environ.get("SVC_GAMMA"):
    import gamma                               # under a condition
try:
    import delta                               # guarded
except ImportError:
    delta = None
if TYPE_CHECKING:
    import zeta                                # never runs


def later():
    import epsilon                             # only when called
    return epsilon
"""

RULES = """\
[pack]
name = "svc"
entrypoints = ["svc.main"]

[[flags]]
flag = "--backend"
default = "a"
reason = "svc.main loads the backend at startup"
prefer = ["b", "none"]

[flags.values.a]
modules = ["svc.plugin_a"]

[flags.values.b]
modules = ["svc.plugin_b"]
gives_up = "backend a's speed"

[flags.values.c]
modules = ["svc.plugin_c"]
gives_up = "backend a's speed"

[flags.values.none]
modules = []
gives_up = "every backend"
"""


def _dep(wheels: Path, name: str, version: str, body: str) -> Path:
    return make_wheel(wheels, name, version, {f"{name}/__init__.py": body})


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("contexts")
    w = root / "wheels"
    svc = make_wheel(
        w,
        "svc",
        "1.0",
        {
            "svc/__init__.py": "",
            "svc/main.py": SVC_MAIN,
            "svc/plugin_a.py": "import eta\n",
            "svc/plugin_b.py": "X = 1\n",
            "svc/plugin_c.py": "import theta\n",  # theta is missing on both hosts
            "svc/unused.py": "Y = 1\n",
        },
    )
    good = [
        _dep(w / "good", "alpha", "1.0", ""),
        _dep(w / "good", "beta", "2.0", "def needed():\n    pass\n"),
        _dep(w / "good", "gamma", "1.0", ""),
        _dep(w / "good", "delta", "1.0", ""),
        _dep(w / "good", "epsilon", "1.0", ""),
        _dep(w / "good", "zeta", "1.0", ""),
        _dep(w / "good", "eta", "1.0", ""),
        _dep(w / "good", "omega", "2.0", ""),
        _dep(w / "good", "kappa", "2.0", "def __getattr__(name):\n    return name\n"),
        make_wheel(
            w / "good",
            "lam",
            "2.0",
            {"lam/__init__.py": "from .impl import *\n", "lam/impl.py": "thing = 1\n"},
        ),
    ]
    bad = [
        _dep(w / "bad", "beta", "1.0", "def other():\n    pass\n"),
        _dep(w / "bad", "omega", "1.0", ""),
        _dep(w / "bad", "kappa", "1.0", "def __getattr__(name):\n    raise AttributeError(name)\n"),
        make_wheel(
            w / "bad",
            "lam",
            "1.0",
            {"lam/__init__.py": "from .impl import *\n", "lam/impl.py": "other = 1\n"},
        ),
    ]
    ref = make_venv(root / "ref")
    tgt = make_venv(root / "tgt")
    pip_install(ref, svc, *good)
    pip_install(tgt, svc, *bad)
    sp = site_packages(ref)
    (sp / "svc" / "main.py").write_text(SVC_MAIN + "\n# local patch\n")
    (sp / "svc" / "unused.py").write_text("Y = 2  # local patch\n")
    (root / "svc-rules.toml").write_text(RULES)
    return root


def inventory(hosts: Path, tmp_path: Path, command: str) -> Path:
    path = tmp_path / "envsync.toml"
    path.write_text(
        f"""
[defaults]
reference = "ref"
target = "tgt"
watch = ["svc"]
rules = ["{hosts / "svc-rules.toml"}"]

[service]
command = {json.dumps(["{python}", "-m", "svc.main", *command.split()])}

[hosts.ref]
python = "{hosts / "ref" / "bin" / "python"}"

[hosts.tgt]
python = "{hosts / "tgt" / "bin" / "python"}"
"""
    )
    return path


def findings(capsys: pytest.CaptureFixture[str], inv: Path) -> dict[str, dict]:
    code = main(["--inventory", str(inv), "-q", "diff", "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    return {f["subject"]: f for f in data["findings"]}


EXPECTED = {
    "alpha": ("missing", "fatal", "import-graph"),
    "beta": ("version", "fatal", "name-check"),
    "lam": ("version", "fatal", "name-check"),
    "eta": ("missing", "fatal", "import-graph"),
    "gamma": ("missing", "risky", "import-graph"),
    # kappa 1.0's __getattr__ raises for every name: `from kappa import whatever` cannot
    # succeed (issue 45: a __getattr__ is read path by path), as the real import shows
    "kappa": ("version", "fatal", "name-check"),
    "svc/main.py": ("file", "risky", "import-graph"),
    "delta": ("missing", "degraded", "import-graph"),
    "epsilon": ("missing", "degraded", "import-graph"),
    "zeta": ("missing", "benign", "import-graph"),
    "omega": ("version", "benign", "import-graph"),
    "svc/unused.py": ("file", "benign", "import-graph"),
}


def test_every_context_gets_its_severity(
    capsys: pytest.CaptureFixture[str], hosts: Path, tmp_path: Path
) -> None:
    got = findings(capsys, inventory(hosts, tmp_path, ""))
    assert {s: (f["kind"], f["severity"], f["decided_by"]) for s, f in got.items()} == EXPECTED
    beta = got["beta"]
    evidence, on_reference = [e for e in beta["evidence"] if e["source"] == "name-check"]
    assert on_reference["detail"] == "on the reference, beta 2.0 defines needed (beta/__init__.py)"
    assert (
        evidence["line"] == 3
        and evidence["statement"]
        == "from beta import needed                        # module level, a name"
    )
    assert evidence["file"].endswith("svc/main.py")
    assert "beta 1.0 lacks needed" in beta["reason"]
    assert [x["kind"] for x in beta["fixes"]] == ["pin", "sync-dist"]
    assert beta["fixes"][0]["requirement"] == "beta==2.0"
    gamma = next(e for e in got["gamma"]["evidence"] if e["source"] == "import-graph")
    assert gamma["context"].startswith("if") and "SVC_GAMMA" in gamma["context"]
    for side, fails in (("ref", False), ("tgt", True)):
        python = hosts / side / "bin" / "python"
        real = subprocess.run(
            [str(python), "-c", "from kappa import whatever"], capture_output=True, text=True
        )
        assert (real.returncode != 0) == fails, real.stderr
    assert "ImportError: cannot import name 'whatever' from 'kappa'" in real.stderr


def test_flag_workaround_is_offered_only_where_it_avoids_every_failing_import(
    capsys: pytest.CaptureFixture[str], hosts: Path, tmp_path: Path
) -> None:
    eta = findings(capsys, inventory(hosts, tmp_path, ""))["eta"]
    flags = [(f["flag"], f["value"], f["gives_up"]) for f in eta["fixes"] if f["kind"] == "flag"]
    # b keeps a backend and comes first; c would import theta, missing: never offered.
    assert flags == [
        ("--backend", "b", "backend a's speed"),
        ("--backend", "none", "every backend"),
    ]
    assert "--backend a, the default" in eta["reason"]
    # module-level failures that no flag controls get no flag fix
    alpha = findings(capsys, inventory(hosts, tmp_path, ""))["alpha"]
    assert not [f for f in alpha["fixes"] if f["kind"] == "flag"]


def test_a_flag_already_set_changes_the_verdict(
    capsys: pytest.CaptureFixture[str], hosts: Path, tmp_path: Path
) -> None:
    got = findings(capsys, inventory(hosts, tmp_path, "--backend b"))
    assert got["eta"]["severity"] == "benign"
    assert got["alpha"]["severity"] == "fatal"


def test_second_run_reads_the_graph_from_the_host_cache(hosts: Path) -> None:
    spec = HostSpec(name="tgt", python=str(hosts / "tgt" / "bin" / "python"))
    options = ProbeOptions(roots=("svc.main", "svc.plugin_a"), internal=("svc",))
    first = collect(spec, LocalRunner("tgt"), options).startup
    second = collect(spec, LocalRunner("tgt"), options).startup
    assert first is not None and second is not None
    assert first.parsed >= 3 and second.parsed == 0 and second.cached == first.parsed + first.cached
    assert first.modules == second.modules
    cache = list((Path.home() / ".cache" / "envsync").glob("facts-*"))
    assert len(cache) == 1 and cache[0].is_dir()
    uncached = collect(spec, LocalRunner("tgt"), replace(options, cache_dir="")).startup
    assert uncached is not None and uncached.parsed == first.parsed


def test_graph_records_modules_and_edges(hosts: Path) -> None:
    spec = HostSpec(name="tgt", python=str(hosts / "tgt" / "bin" / "python"))
    graph = collect(
        spec, LocalRunner("tgt"), ProbeOptions(roots=("svc.main",), internal=("svc",))
    ).startup
    assert graph is not None
    main_ = graph.modules["svc.main"]
    contexts = {e.module: e.context for e in main_.imports}
    assert contexts == {
        "alpha": "module",
        "beta": "module",
        "lam": "module",
        "kappa": "module",
        "gamma": "if",
        "delta": "try",
        "zeta": "typing",
        "epsilon": "function",
    }
    assert graph.modules["alpha"].kind == "missing"
    assert graph.modules["kappa"].dynamic is True
    assert graph.modules["lam"].stars == ("lam.impl",)
    assert "other" in (graph.modules["lam.impl"].defines or ())
    assert "os" not in graph.modules and "typing" not in graph.modules  # stdlib left out


def test_import_check_is_ground_truth(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = tmp_path / "wheels"
    svc2 = make_wheel(
        w,
        "svc2",
        "1.0",
        {
            "svc2/__init__.py": "",
            "svc2/main.py": "import os\nif os.environ.get('SVC_GAMMA'):\n    import gamma\n",
        },
    )
    ref, tgt = make_venv(tmp_path / "ref"), make_venv(tmp_path / "tgt")
    pip_install(ref, svc2, _dep(w, "gamma", "1.0", ""))
    pip_install(tgt, svc2)
    inv = tmp_path / "envsync.toml"
    inv.write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\n'
        '[service]\ncommand = ["{python}", "-m", "svc2.main"]\n'
        f'[hosts.ref]\npython = "{ref}"\n[hosts.tgt]\npython = "{tgt}"\n'
    )
    monkeypatch.setenv("SVC_GAMMA", "1")  # the condition holds on this host
    assert main(["--inventory", str(inv), "-q", "diff", "--format", "json"]) == 1
    static = json.loads(capsys.readouterr().out)["findings"][0]
    assert (static["subject"], static["severity"]) == ("gamma", "risky")
    assert main(["--inventory", str(inv), "-q", "diff", "--format", "json", "--probe"]) == 1
    probed = json.loads(capsys.readouterr().out)["findings"][0]
    assert (probed["severity"], probed["decided_by"]) == ("fatal", "import-check")
    first = probed["evidence"][0]
    assert first["source"] == "import-check"
    assert first["detail"] == "import svc2.main: ModuleNotFoundError: No module named 'gamma'"
    assert first["file"].endswith("svc2/main.py") and first["line"] == 3
    monkeypatch.delenv("SVC_GAMMA")
    assert main(["--inventory", str(inv), "-q", "diff", "--format", "json", "--probe"]) == 1
    assert json.loads(capsys.readouterr().out)["findings"][0]["severity"] == "risky"
