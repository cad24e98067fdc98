"""Ask the reference which of its files define the symbols a target's loads miss.

One short host-side run per failing load (envsync/hostside/nativequery.py), through the
reference's runner, only when the target has such a load: the reference's probe cannot
know in advance which of its thousands of symbols a target will miss.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from envsync.errors import CommandTimeout, EnvsyncError
from envsync.hostside import protocol
from envsync.model.environment import NativeFacts, Snapshot
from envsync.model.inventory import HostSpec
from envsync.runner import Runner, capped
from envsync.runner.bundle import host_argv, host_input

TIMEOUT = 120.0

# (load key, symbol) -> the file of the reference's lookup scope that defines it
Providers = Mapping[tuple[str, str], str]


def lookup_scope(facts: NativeFacts, key: str) -> list[str]:
    """The files a load's symbols are looked up in on this host, in the loader's order:
    the program, what earlier RTLD_GLOBAL loads added, then the load's own tree."""
    files = [facts.program]
    for load in facts.loads:
        if load.key == key:
            files += [load.path, *(s.path for s in load.steps if s.path)]
            break
        if load.global_ and load.verdict.kind == "ok":
            files += [load.path, *(s.path for s in load.steps if s.path)]
    return list(dict.fromkeys(files))


def reference_providers(
    host: HostSpec, runner: Runner, reference: Snapshot, questions: Sequence[tuple[str, str]]
) -> Providers:
    """{(load key, symbol): the reference's file that defines it}; what cannot be asked
    (the host does not answer) is left out: the finding then names no provider."""
    facts = reference.native
    if not isinstance(facts, NativeFacts) or not questions:
        return {}
    by_key: dict[str, list[str]] = {}
    for key, symbol in questions:
        by_key.setdefault(key, []).append(symbol)
    out: dict[tuple[str, str], str] = {}
    for key, symbols in by_key.items():
        asked: protocol.NativeQueryRequest = {"files": lookup_scope(facts, key), "symbols": symbols}
        argv = host_argv(host.python, protocol.NATIVE_QUERY, [json.dumps(asked)])
        try:
            with capped():  # a document, bounded as the probe's
                result = runner.run(argv, input=host_input(), timeout=TIMEOUT)
        except (CommandTimeout, EnvsyncError):
            continue
        text = result.stdout.decode("utf-8", "replace")
        marker = protocol.NATIVE_QUERY_MARKER
        line = next((ln for ln in reversed(text.splitlines()) if ln.startswith(marker)), None)
        try:
            answer = json.loads(line[len(marker) :]) if line else {}
        except ValueError:
            continue
        if isinstance(answer, dict):
            out.update({(key, s): str(p) for s, p in answer.items() if s in symbols})
    return out
