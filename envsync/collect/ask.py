"""One question to a host-side program that reads the host's startup (reach, follow): its
payload as the program's argument, the bundle on stdin, its answer after the marker."""

from __future__ import annotations

import json
from typing import Any

from envsync.collect import ProbeOptions
from envsync.model.inventory import HostSpec
from envsync.runner import Runner, capped
from envsync.runner.bundle import host_argv, host_input, marked


def ask(
    host: HostSpec,
    runner: Runner,
    options: ProbeOptions,
    program: str,
    payload: dict[str, Any],
    marker: str,
    what: str,
) -> str:
    """The answer of `program` on `host` to `payload` (CollectError naming `what` where
    the program died before answering), with the probe's cache folder and time limit."""
    argv = host_argv(host.python, program, [json.dumps(payload)], cache_dir=options.cache_dir)
    with capped():
        result = runner.run(
            argv, input=host_input(sealed=options.cache_dir != ""), timeout=options.timeout
        )
    return marked(result, marker, host.name, what)
