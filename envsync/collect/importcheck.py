"""The real-import check (`--import-check`): import the startup modules in the target's interpreter.

Ground truth where the host's stack is importable; runs on the host like the probe
(envsync/hostside/importcheck.py), through the host's runner. Its answer is read from a
stdout that the imported code cannot write to, after the marker and a nonce new to each
run (handed over on stdin), so that no module's printing can hide or forge it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from envsync.errors import CollectError, CommandTimeout, DecodeError
from envsync.hostside import protocol
from envsync.model.codec import from_data
from envsync.model.environment import ImportOutcome
from envsync.model.inventory import HostSpec
from envsync.runner import Runner, capped
from envsync.runner.bundle import host_argv, host_input, marked

MARKER = protocol.IMPORT_CHECK_MARKER
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
    nonce = secrets.token_hex(16)
    try:
        argv = host_argv(host.python, protocol.IMPORT_CHECK, [json.dumps(list(modules))])
        with capped():  # a document, bounded as the probe's
            result = runner.run(argv, input=host_input(nonce.encode() + b"\n"), timeout=timeout)
    except CommandTimeout:
        return [
            ImportOutcome(
                module=modules[0],
                ok=False,
                exception="Timeout",
                message=f"importing the startup modules took over {timeout:g}s",
            )
        ]
    answer = marked(result, f"{MARKER}{nonce} ", host.name, "the import check")
    try:
        items = json.loads(answer)
        return [from_data(ImportOutcome, item, "import check") for item in items]
    except (ValueError, DecodeError, TypeError) as e:
        raise CollectError(f"{host.name}: the import check printed no valid outcome: {e}") from e
