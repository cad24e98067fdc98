"""Every import-time error is ground truth, whatever its type, and is put down to the
difference whose code raised it or whose module it names.

Small packages written for the purpose, installed for real in real venvs; the import
check really imports the service's startup on both hosts. Each case differs between the
hosts in one package only:

- `regy` 2.0 registers a name its caller registers again (ValueError from a registry,
  as transformers 4.54's `aimv2` did to vLLM 0.9.2);
- `nativ` 2.0 loads a shared library that is not there (OSError from the loader);
- `opsx` is only on the target, and raises a RuntimeError from an operator registration
  that `hub`'s lazy module turns into "Could not import module 'Mixin'" (the culprit only
  in `__cause__`, as torchvision's nms under transformers' ProcessorMixin);
- `flaky` raises on both hosts: no difference explains it;
- the watched service's own file, patched on the target to raise.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envsync.cli import main
from tests.helpers import make_venv, make_wheel, pip_install

pytestmark = pytest.mark.slow

SVC_MAIN = """\
import os
if os.environ.get("SVC_FLAKY"):
    import flaky                                # fails on every host
import plugin                                   # registers "aimv2" with regy
import nativ
from hub import Mixin                           # lazy: hub.processing, which may use opsx
"""

REGY_1 = """\
_TABLE = {}


def register(key, value):
    if key in _TABLE:
        raise ValueError(f"{key!r} is already used by a config, pick another name.")
    _TABLE[key] = value
"""
# 2.0 ships the key itself: the caller's registration now collides.
REGY_2 = REGY_1 + '\nregister("aimv2", object)\n'

NATIV_1 = "VERSION = 1\n"
NATIV_2 = 'import ctypes\n\n_lib = ctypes.CDLL("libenvsync-absent.so.7")\n'

HUB_INIT = """\
import importlib


class _Lazy:
    _structure = {"Mixin": "processing"}

    def __getattr__(self, name):
        return self._get_module(self._structure[name], name)

    def _get_module(self, module_name, name):
        try:
            return getattr(importlib.import_module("." + module_name, "hub"), name)
        except Exception as e:
            raise ModuleNotFoundError(
                f"Could not import module '{name}'. Are this object's requirements defined correctly?"
            ) from e


_lazy = _Lazy()


def __getattr__(name):
    return getattr(_lazy, name)
"""
HUB_PROCESSING = """\
import importlib.util

if importlib.util.find_spec("opsx") is not None:    # an availability check
    import opsx  # noqa: F401


class Mixin:
    pass
"""
OPSX = """\
def _register_fake(name):
    raise RuntimeError(f"operator {name} does not exist")


_register_fake("opsx::nms")
"""


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("truth")
    w = root / "wheels"
    svc = make_wheel(
        w,
        "svc",
        "1.0",
        {"svc/__init__.py": "", "svc/main.py": SVC_MAIN},
    )
    plugin = make_wheel(
        w, "plugin", "1.0", {"plugin/__init__.py": "import regy\n\nregy.register('aimv2', 1)\n"}
    )
    hub = make_wheel(
        w, "hub", "1.0", {"hub/__init__.py": HUB_INIT, "hub/processing.py": HUB_PROCESSING}
    )
    regy1 = make_wheel(w, "regy", "1.0", {"regy/__init__.py": REGY_1})
    regy2 = make_wheel(w / "2", "regy", "2.0", {"regy/__init__.py": REGY_2})
    nativ1 = make_wheel(w, "nativ", "1.0", {"nativ/__init__.py": NATIV_1})
    nativ2 = make_wheel(w / "2", "nativ", "2.0", {"nativ/__init__.py": NATIV_2})
    opsx = make_wheel(w, "opsx", "1.0", {"opsx/__init__.py": OPSX})
    flaky = make_wheel(w, "flaky", "1.0", {"flaky/__init__.py": "raise KeyError('no such GPU')\n"})
    common = (svc, plugin, hub, flaky)
    # one venv per host and per culprit: each pair differs in one package only
    layouts = {
        "regy": ((regy1, nativ1), (regy2, nativ1)),
        "nativ": ((regy1, nativ1), (regy1, nativ2)),
        "opsx": ((regy1, nativ1), (regy1, nativ1, opsx)),
        "same": ((regy1, nativ1), (regy1, nativ1)),
    }
    for name, (ref, tgt) in layouts.items():
        for side, wheels in (("ref", ref), ("tgt", tgt)):
            pip_install(make_venv(root / name / side), *common, *wheels)
    return root


def _diff(
    bed: Path, name: str, capsys: pytest.CaptureFixture[str], *args: str, watch: bool = False
) -> tuple[dict[str, dict], list[str]]:
    pair = bed / name
    inv = pair / "envsync.toml"
    inv.write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\n'
        + ('watch = ["svc"]\n' if watch else "watch = []\n")
        + '[service]\ncommand = ["{python}", "-m", "svc.main"]\n'
        f'[hosts.ref]\npython = "{pair / "ref" / "bin" / "python"}"\n'
        f'[hosts.tgt]\npython = "{pair / "tgt" / "bin" / "python"}"\n'
    )
    capsys.readouterr()
    main(["--inventory", str(inv), "-q", "diff", "--format", "json", *args])
    data = json.loads(capsys.readouterr().out)
    return {f["subject"]: f for f in data["findings"]}, data["notes"]


def test_a_valueerror_from_a_registry_is_fatal_with_its_frame(
    bed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    static, _ = _diff(bed, "regy", capsys)
    # only plugin (a third-party package) imports regy, and no reading of the code can
    # see a registry collide: not fatal without the import check
    assert static["regy"]["severity"] != "fatal"
    found, notes = _diff(bed, "regy", capsys, "--import-check")
    regy = found["regy"]
    assert (regy["severity"], regy["decided_by"]) == ("fatal", "import-check"), notes
    message = "ValueError: 'aimv2' is already used by a config, pick another name."
    assert message in regy["reason"]
    assert "regy/__init__.py:6 (regy 2.0)" in regy["reason"]  # the raising frame
    assert "on the reference ref they import cleanly" in regy["reason"]
    first = regy["evidence"][0]
    assert first["source"] == "import-check"
    assert first["detail"] == f"import svc.main: {message}"
    assert first["file"].endswith("regy/__init__.py") and first["line"] == 6
    assert first["statement"].startswith("raise ValueError(")


def test_an_oserror_from_the_loader_is_put_down_to_the_package_that_loads(
    bed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found, notes = _diff(bed, "nativ", capsys, "--import-check")
    nativ = found["nativ"]
    assert (nativ["severity"], nativ["decided_by"]) == ("fatal", "import-check"), notes
    assert "OSError: libenvsync-absent.so.7" in nativ["reason"]
    assert "nativ/__init__.py:3 (nativ 2.0)" in nativ["reason"]


def test_a_lazy_re_raise_is_traced_through_its_cause(
    bed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    static, _ = _diff(bed, "opsx", capsys)
    # only hub (a third-party package) imports opsx, under an availability check
    assert static["opsx"]["severity"] != "fatal"
    found, notes = _diff(bed, "opsx", capsys, "--import-check")
    opsx = found["opsx"]
    assert (opsx["severity"], opsx["decided_by"]) == ("fatal", "import-check"), notes
    # the exception names a class; its cause names the operator's namespace
    assert "ModuleNotFoundError: Could not import module 'Mixin'" in opsx["reason"]
    assert "`RuntimeError: operator opsx::nms does not exist` names opsx" in opsx["reason"]
    assert not [f for s, f in found.items() if s != "opsx" and f["severity"] == "fatal"]


def test_an_error_the_reference_shares_is_not_a_difference(
    bed: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SVC_FLAKY", "1")
    found, notes = _diff(bed, "regy", capsys, "--import-check")
    assert found["regy"]["severity"] != "fatal"  # flaky fails first, on both hosts
    (note,) = [n for n in notes if n.startswith("import check:")]
    assert "importing svc.main fails on the target (KeyError: 'no such GPU'" in note
    assert "flaky/__init__.py:1 (flaky 1.0)" in note
    assert "on the reference ref too the same way: not caused by a difference" in note


def test_a_failure_no_difference_explains_is_a_note_naming_the_frame(
    bed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the same packages on both hosts, but the target's copy of svc is patched to raise
    site = next((bed / "same" / "tgt" / "lib").glob("python*/site-packages"))
    main_py = site / "svc" / "main.py"
    main_py.write_text(main_py.read_text() + "raise ImportError('patched out')\n")
    found, notes = _diff(bed, "same", capsys, "--import-check")
    assert not found, found  # svc is not watched: envsync sees no difference at all
    (note,) = [n for n in notes if n.startswith("import check:")]
    assert note == (
        "import check: importing svc.main on the target fails: ImportError: patched out at "
        "svc/main.py:7 (svc 1.0); it imports cleanly on the reference ref, but no difference "
        "from the reference explains it (tried: the distributions of its frames (svc 1.0) are "
        "the same on both hosts and the target meets what they require; no module or "
        "distribution its message names differs; startup imports no other difference before "
        "it)"
    )
    # watched, the patched file is a difference, and the frame in it is the evidence
    found, notes = _diff(bed, "same", capsys, "--import-check", watch=True)
    patched = found["svc/main.py"]
    assert (patched["severity"], patched["decided_by"]) == ("fatal", "import-check"), notes
    assert "`ImportError: patched out` was raised in svc/main.py:7 (svc 1.0)" in patched["reason"]
