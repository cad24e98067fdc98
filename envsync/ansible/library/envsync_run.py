#!/usr/bin/python
"""envsync's Ansible module: run one envsync host-side command with its stdin, return its output.

A WANT_JSON module (Ansible hands it the path of its arguments as JSON; it prints one JSON
object): stdlib only, for the interpreter Ansible runs modules with on the host (3.8+).
The command is exactly the one envsync's own runners run (`python -c GUARD ... BOOT`, the
host side's bundle on stdin), started in the login's home folder as sshd starts it, so that
a snapshot taken through Ansible is the one taken over SSH. The request and the output
travel base64-encoded (the output zlib-compressed too): Ansible templates none of it, and
the bytes arrive as they were.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import zlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Set by Ansible in the module's environment: not the command's business.
_ANSIBLE_ENV = ("ANSIBLE_", "_ANSIBLE_")


def _answer(result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(_ANSIBLE_ENV)}


def run(request: dict[str, Any], stdin: bytes) -> dict[str, Any]:
    argv: list[str] = [str(a) for a in request["argv"]]
    timeout = float(request.get("timeout", 300))
    started = time.time()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=os.path.expanduser("~"),
            env=_env(),
            start_new_session=True,
        )
    except OSError as e:
        return {"changed": False, "rc": 127, "not_found": True, "msg": str(e)}
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return {
            "changed": False,
            "rc": -9,
            "timed_out": True,
            "stderr": base64.b64encode(err[-65536:]).decode("ascii"),
            "duration": time.time() - started,
        }
    return {
        "changed": bool(request.get("changes")),
        "rc": proc.returncode,
        "stdout_z": base64.b64encode(zlib.compress(out, 1)).decode("ascii"),
        "stderr": base64.b64encode(err[-65536:]).decode("ascii"),
        "duration": time.time() - started,
    }


def main() -> None:
    # WANT_JSON: Ansible passes the path of a JSON file of the task's arguments.
    with open(sys.argv[1], encoding="utf-8") as f:
        args = json.load(f)
    try:
        request = json.loads(base64.b64decode(args["request"]))
        stdin = base64.b64decode(args.get("stdin") or "")
        stdin += base64.b64decode(request.get("payload") or "")  # after the bundle
    except (KeyError, ValueError, TypeError) as e:
        _answer({"failed": True, "msg": f"envsync_run: a malformed request: {e}"})
        return
    _answer(run(request, stdin))


if __name__ == "__main__":
    main()
