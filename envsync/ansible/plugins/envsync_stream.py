"""envsync's stdout callback for ansible-playbook: one JSON line per host result, as it
arrives (envsync reads them while the other hosts are still running)."""

from __future__ import annotations

import json
import sys
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: envsync_stream
type: stdout
short_description: one JSON line per host result, for envsync
description: envsync runs ansible-playbook with this callback and reads its lines.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "envsync_stream"

    def _emit(self, status: str, result: Any) -> None:
        line = {"host": result._host.get_name(), "status": status, "result": result._result}
        sys.stdout.write(json.dumps(line, default=str) + "\n")
        sys.stdout.flush()

    def v2_runner_on_ok(self, result: Any) -> None:
        self._emit("ok", result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._emit("failed", result)

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._emit("unreachable", result)

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._emit("skipped", result)
