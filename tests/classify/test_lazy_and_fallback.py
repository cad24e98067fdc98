"""Lazy modules and exception handlers, on small real packages written for the purpose.

`svc` imports names from packages built the way large libraries build themselves
(transformers' `_import_structure` and `define_import_structure`, a module `__getattr__`
over a table) and imports inside try/except in each way that matters. The reference has
every name; the target lacks some of them in the submodule that defines them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envsync.cli import main
from tests.helpers import make_venv, make_wheel, pip_install

SVC = """\
from lazyt import PretrainedConfig               # declared in lazyt.configuration_utils
from lazyt.vision import is_valid                # define_import_structure: lazyt.vision.processing
from lazyg import Engine                         # __getattr__ table: lazyg.engine
from lazyg import Unlisted                       # not in the table: cannot tell
try:
    from fb import new_api
except ImportError:
    from fb import old_api                       # fallback: runs when new_api is absent
try:
    from fb2 import new_api
except ImportError:
    from fb2 import old_api
try:
    import rr
except ImportError:
    print("rr is required")
    raise
"""

LAZYT_INIT = """\
from typing import TYPE_CHECKING
from ._lazy import LazyModule
_import_structure = {"configuration_utils": ["PretrainedConfig"], "vision": []}
if TYPE_CHECKING:
    from .configuration_utils import PretrainedConfig
else:
    import sys
    sys.modules[__name__] = LazyModule(__name__, _import_structure)
"""

VISION_INIT = """\
from typing import TYPE_CHECKING
from .._lazy import LazyModule, define_import_structure
if TYPE_CHECKING:
    from .processing import *
else:
    import sys
    sys.modules[__name__] = LazyModule(__name__, define_import_structure(__file__))
"""

LAZYG_INIT = """\
_TABLE = {"Engine": ".engine"}
def __getattr__(name):
    if name in _TABLE:
        import importlib
        return getattr(importlib.import_module(_TABLE[name], __name__), name)
    raise AttributeError(name)
"""


def lazyt(wheels: Path, version: str, vision_names: str) -> Path:
    return make_wheel(
        wheels,
        "lazyt",
        version,
        {
            "lazyt/__init__.py": LAZYT_INIT,
            "lazyt/_lazy.py": "LazyModule = define_import_structure = None\n",
            "lazyt/configuration_utils.py": "class PretrainedConfig:\n    pass\n",
            "lazyt/vision/__init__.py": VISION_INIT,
            "lazyt/vision/processing.py": vision_names,
        },
    )


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("lazy")
    w = root / "wheels"
    svc = make_wheel(w, "svc", "1.0", {"svc/__init__.py": "", "svc/main.py": SVC})
    lazyg = {"lazyg/__init__.py": LAZYG_INIT}
    good = [
        lazyt(w / "good", "2.0", "__all__ = ['is_valid']\ndef is_valid():\n    pass\n"),
        make_wheel(w / "good", "lazyg", "2.0", {**lazyg, "lazyg/engine.py": "Engine = 1\n"}),
        make_wheel(w / "good", "fb", "2.0", {"fb/__init__.py": "new_api = old_api = 1\n"}),
        make_wheel(w / "good", "fb2", "2.0", {"fb2/__init__.py": "new_api = old_api = 1\n"}),
        make_wheel(w / "good", "rr", "1.0", {"rr/__init__.py": ""}),
    ]
    bad = [
        lazyt(w / "bad", "1.0", "__all__ = ['other']\ndef other():\n    pass\n"),
        make_wheel(w / "bad", "lazyg", "1.0", {**lazyg, "lazyg/engine.py": "Motor = 1\n"}),
        make_wheel(w / "bad", "fb", "1.0", {"fb/__init__.py": "neither = 1\n"}),
        make_wheel(w / "bad", "fb2", "1.0", {"fb2/__init__.py": "old_api = 1\n"}),
    ]
    ref, tgt = make_venv(root / "ref"), make_venv(root / "tgt")
    pip_install(ref, svc, *good)
    pip_install(tgt, svc, *bad)
    inv = root / "envsync.toml"
    inv.write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\n'
        '[service]\ncommand = ["{python}", "-m", "svc.main"]\n'
        f'[hosts.ref]\npython = "{ref}"\n[hosts.tgt]\npython = "{tgt}"\n'
    )
    return str(inv)


def findings(capsys: pytest.CaptureFixture[str], inv: str) -> dict[str, dict]:
    assert main(["--inventory", inv, "-q", "diff", "--format", "json"]) == 1
    return {f["subject"]: f for f in json.loads(capsys.readouterr().out)["findings"]}


def test_lazy_names_are_checked_in_the_submodule_their_table_names(
    capsys: pytest.CaptureFixture[str],
    inventory: str,
) -> None:
    got = findings(capsys, inventory)
    lazyt_ = got["lazyt"]
    assert lazyt_["severity"] == "fatal"
    assert "lacks is_valid" in lazyt_["reason"]
    details = " ".join(e["detail"] for e in lazyt_["evidence"])
    assert "PretrainedConfig" not in details  # lazyt.configuration_utils defines it
    evidence, on_reference = [e for e in lazyt_["evidence"] if e["source"] == "name-check"]
    # on the reference the lazy table sends the name to the submodule that defines it
    assert on_reference["detail"] == (
        "on the reference, lazyt 2.0 defines is_valid (lazyt/vision/processing.py)"
    )
    assert on_reference["file"].endswith("lazyt/vision/processing.py")
    assert evidence["line"] == 2 and evidence["file"].endswith("svc/main.py")
    # the __getattr__ table sends Engine to lazyg.engine, which lacks it on the target;
    # Unlisted is in no table: "cannot tell", never "lacks"
    lazyg_ = got["lazyg"]
    assert lazyg_["severity"] == "fatal"
    assert "lacks Engine" in lazyg_["reason"] and "lazyg.engine" in lazyg_["evidence"][0]["detail"]
    assert "Unlisted" not in json.dumps(lazyg_)


def test_fallbacks_are_judged_with_their_try_and_re_raising_handlers_do_not_guard(
    capsys: pytest.CaptureFixture[str],
    inventory: str,
) -> None:
    got = findings(capsys, inventory)
    # fb: the try fails and so does its fallback: startup dies at the fallback's line
    assert got["fb"]["severity"] == "fatal"
    assert "lacks old_api" in got["fb"]["reason"]
    assert got["fb"]["evidence"][0]["line"] == 8
    # fb2: the try fails, the fallback works: a feature is degraded, startup goes on
    assert got["fb2"]["severity"] == "degraded"
    assert "old_api" not in json.dumps(got["fb2"]["evidence"])
    # rr: the handler prints and re-raises: nothing guards the import
    assert got["rr"]["severity"] == "fatal"
    assert got["rr"]["evidence"][0]["line"] == 14
