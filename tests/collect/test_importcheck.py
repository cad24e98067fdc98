"""The import check's answer travels on a channel of its own, whatever the imported code
does to stdout.

Packages written for the purpose, installed in real venvs and really imported:

- `logtake` takes over `sys.stdout` with a logging stream while it is imported, as
  applications' loggers do (OpenShot's `StreamToLogger`, openshot-qt#3734): every line
  printed after it carries a time and a level in front. The check's answer read from stdout
  was wrapped in those prefixes, and every diff with `--import-check` exited 3 ("the import
  check died (exit 0)"), on a failing case and on its negative control alike;
- `shut` closes `sys.stdout` and points descriptor 1 at /dev/null;
- `forge` prints an answer of its own, that every module imported cleanly, while it is
  imported and again at exit, then raises: the answer must stay its failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envsync.collect.importcheck import check_imports
from envsync.runner.local import LocalRunner
from envsync.sources.inventory import HostSpec
from tests.figures import add
from tests.helpers import make_venv, make_wheel, pip_install, run_cli

pytestmark = pytest.mark.slow

SECTION = "startup truth (issue 45, cases held)"

LOGTAKE = """\
import logging
import sys


class StreamToLogger:
    \"\"\"Every line written to it goes to a logger: its time and level in front.\"\"\"

    def __init__(self, logger, level):
        self.logger = logger
        self.level = level

    def write(self, buf):
        for line in buf.rstrip().splitlines():
            self.logger.log(self.level, line.rstrip())

    def flush(self):
        pass


_handler = logging.StreamHandler(sys.__stdout__)
_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
_log = logging.getLogger("app.stdout")
_log.addHandler(_handler)
_log.setLevel(logging.INFO)
_log.propagate = False
sys.stdout = StreamToLogger(_log, logging.INFO)
print("logging set up")
"""

SVC_MAIN = "import logtake\nimport regy\n"
REGY_1 = "VERSION = 1\n"
REGY_2 = "raise RuntimeError('regy 2.0 needs a GPU driver of 550 or newer')\n"

SHUT = """\
import os
import sys

sys.stdout.close()
_null = os.open(os.devnull, os.O_WRONLY)
os.dup2(_null, 1)
"""

FORGE = """\
import atexit
import os
import sys

_FORGED = '@@envsync-import-check@@[{"module": "forge", "ok": true}]'


def _again():
    for stream in (sys.stdout, sys.__stdout__):
        stream.write("\\n" + _FORGED + "\\n")
        stream.flush()
    os.write(1, ("\\n" + _FORGED + "\\n").encode())


print(_FORGED)
atexit.register(_again)
raise RuntimeError("forge needs a GPU")
"""


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("channel")
    w = root / "wheels"
    svc = make_wheel(w, "svc", "1.0", {"svc/__init__.py": "", "svc/main.py": SVC_MAIN})
    logtake = make_wheel(w, "logtake", "1.0", {"logtake/__init__.py": LOGTAKE})
    regy1 = make_wheel(w, "regy", "1.0", {"regy/__init__.py": REGY_1})
    regy11 = make_wheel(w / "11", "regy", "1.1", {"regy/__init__.py": REGY_1 + "MINOR = 1\n"})
    regy2 = make_wheel(w / "2", "regy", "2.0", {"regy/__init__.py": REGY_2})
    shut = make_wheel(w, "shut", "1.0", {"shut/__init__.py": SHUT})
    forge = make_wheel(w, "forge", "1.0", {"forge/__init__.py": FORGE})
    pip_install(make_venv(root / "ref"), svc, logtake, regy1, shut, forge)
    pip_install(make_venv(root / "fails"), svc, logtake, regy2)
    pip_install(make_venv(root / "starts"), svc, logtake, regy11)
    return root


def _diff(bed: Path, target: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    inv = bed / f"{target}.toml"
    inv.write_text(
        '[defaults]\nreference = "ref"\ntarget = "tgt"\nwatch = []\n'
        '[service]\ncommand = ["{python}", "-m", "svc.main"]\n'
        f'[hosts.ref]\npython = "{bed / "ref" / "bin" / "python"}"\n'
        f'[hosts.tgt]\npython = "{bed / target / "bin" / "python"}"\n'
    )
    capsys.readouterr()
    code, out, err = run_cli(
        capsys, "--inventory", str(inv), "-q", "diff", "--format", "json", "--import-check"
    )
    return code, (json.loads(out) if out.strip() else {}), err


def test_a_logger_that_takes_over_stdout_leaves_the_verdict_right(
    bed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ground truth: the real start, on each side
    import subprocess

    for side, dies in (("ref", False), ("fails", True), ("starts", False)):
        python = bed / side / "bin" / "python"
        run = subprocess.run([str(python), "-m", "svc.main"], capture_output=True, text=True)
        assert (run.returncode != 0) == dies, (side, run.stderr)
        assert "INFO app.stdout: logging set up" in run.stdout  # the logger did take over
        if dies:
            assert "RuntimeError: regy 2.0 needs a GPU driver" in run.stderr
    code, data, err = _diff(bed, "fails", capsys)
    assert "the import check died" not in err, err
    regy = {f["subject"]: f for f in data["findings"]}["regy"]
    assert (regy["severity"], regy["decided_by"]) == ("fatal", "import-check"), data["notes"]
    assert "RuntimeError: regy 2.0 needs a GPU driver of 550 or newer" in regy["reason"]
    add(SECTION, "3 the import check's own channel: a failing start under a logger on stdout")
    # the negative control: the same logger, a minor version that imports cleanly
    code, data, err = _diff(bed, "starts", capsys)
    assert "the import check died" not in err, err
    assert code == 1, err  # drift, and no import failure
    regy = {f["subject"]: f for f in data["findings"]}["regy"]
    assert regy["severity"] != "fatal", regy
    assert not [n for n in data["notes"] if n.startswith("import check:")], data["notes"]
    add(SECTION, "3 the import check's own channel: its negative control")


def test_nothing_the_modules_do_to_stdout_hides_or_forges_the_answer(bed: Path) -> None:
    host = HostSpec(name="ref", python=str(bed / "ref" / "bin" / "python"))
    runner = LocalRunner("ref")
    # stdout closed, descriptor 1 on /dev/null: the answer still arrives
    outcome = check_imports(host, runner, ["shut", "logtake", "regy"])
    assert [(o.module, o.ok) for o in outcome] == [
        ("shut", True),
        ("logtake", True),
        ("regy", True),
    ]
    # a module that prints a clean answer, at import and at exit, then fails: it failed
    (forged,) = check_imports(host, runner, ["forge"])
    assert (forged.ok, forged.exception, forged.message) == (
        False,
        "RuntimeError",
        "forge needs a GPU",
    )
    add(SECTION, "3 the import check's own channel: stdout closed, an answer forged", 2)
