"""The real-import check (`--import-check`): import the startup modules in the target's interpreter.

Ground truth where the host's stack is importable; runs on the host like the probe, through
the host's runner.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from envsync.codec import from_data
from envsync.errors import CollectError, CommandTimeout, DecodeError
from envsync.inventory import HostSpec
from envsync.model import ImportOutcome
from envsync.runner import Runner

MARKER = "@@envsync-import-check@@"
# Each module in turn, in one process, stopping at the first failure as startup would;
# the outcome line is marked because the modules may print to stdout themselves.
SCRIPT = (
    "import sys;sys.path[:1]==['']and sys.path.pop(0)\n"
    "import importlib,json,traceback\n"
    "out=[]\n"
    "for name in json.loads(sys.argv[1]):\n"
    "    try:\n"
    "        importlib.import_module(name)\n"
    "        out.append({'module':name,'ok':True})\n"
    "    except BaseException as e:\n"
    "        tb=traceback.extract_tb(e.__traceback__)\n"
    "        last=tb[-1] if tb else None\n"
    "        out.append({'module':name,'ok':False,'exception':type(e).__name__,"
    "'message':str(e).splitlines()[0] if str(e) else '',"
    "'file':last.filename if last else None,'line':last.lineno if last else None})\n"
    "        break\n"
    f"sys.stdout.write('\\n{MARKER}'+json.dumps(out)+'\\n')\n"
)
DEFAULT_TIMEOUT = 180.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportCheck:
    """Whether `diff` and `check` also import the startup modules in the target's
    interpreter (--import-check), giving up after `timeout` seconds."""

    run: bool = False
    timeout: float = DEFAULT_TIMEOUT


NO_IMPORT_CHECK = ImportCheck()  # the default: the import graph is read, nothing imported


def check_imports(
    host: HostSpec, runner: Runner, modules: Sequence[str], timeout: float = DEFAULT_TIMEOUT
) -> list[ImportOutcome]:
    try:
        result = runner.run([host.python, "-c", SCRIPT, json.dumps(list(modules))], timeout=timeout)
    except CommandTimeout:
        return [
            ImportOutcome(
                module=modules[0],
                ok=False,
                exception="Timeout",
                message=f"importing the startup modules took over {timeout:g}s",
            )
        ]
    text = result.stdout.decode("utf-8", "replace")
    line = next((ln for ln in reversed(text.splitlines()) if ln.startswith(MARKER)), None)
    if line is None:
        raise CollectError(
            f"{host.name}: the import check died (exit {result.returncode}): "
            f"{result.stderr_tail() or 'no output'}"
        )
    try:
        items = json.loads(line[len(MARKER) :])
        return [from_data(ImportOutcome, item, "import check") for item in items]
    except (ValueError, DecodeError, TypeError) as e:
        raise CollectError(f"{host.name}: the import check printed no valid outcome: {e}") from e
