"""`--engine ansible`: collect many hosts through Ansible itself, each result as it arrives.

One `ansible-playbook` run for the whole request: Ansible's forks fan out, its connection
plugins reach the hosts (ssh with ControlPersist, paramiko, docker, kubectl, winrm...), its
`become` applies, its inventory (group_vars, host_vars, dynamic scripts) says how. The task
is envsync's own module (`library/envsync_run.py`) running the same probe command envsync's
own runners run, with the host side's bundle on its stdin; envsync's callback
(`plugins/envsync_stream.py`) prints each host's result as one JSON line the moment it
comes back, and each is turned into a snapshot as the others still run.

Host keys are verified whatever the inventory, ansible.cfg or the environment say, for
each connection plugin: the task forces Ansible's host-key checking on and puts
`StrictHostKeyChecking=yes` (or `accept-new`, as envsync's own runner would) first on the
ssh command line, where OpenSSH's first value wins; paramiko's automatic adding of unknown
keys is off (unless --accept-new-host-keys), in the environment, which beats ansible.cfg.
Every value envsync hands Ansible (the generated inventory, the task's variables) is tagged
`!unsafe`: none is ever rendered as a template.

The agent's operations (apply, rollback, deploy) stay on envsync's own runners: see
docs/how-to/ansible.md ("What stays on Fabric").
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from envsync.ansible.inventory import ansible_env, ansible_program, generated_inventory
from envsync.collect import ProbeOptions, offer, probe_argv, probe_source, read_result
from envsync.collect.share import Offer
from envsync.errors import CollectError, EnvsyncError
from envsync.model.environment import Snapshot
from envsync.model.inventory import HostSpec, Inventory
from envsync.runner import CommandResult, tail
from envsync.runner.exec import exec_argv

HERE = Path(__file__).parent
# What Ansible's ssh connection uses by default, then envsync's host-key rule (first wins).
SSH_ARGS = "-C -o ControlMaster=auto -o ControlPersist=60s"
# Extra seconds Ansible's task timeout allows past the probe's own (connecting, copying).
SLACK = 60.0

PLAYBOOK = """\
- name: envsync
  hosts: all
  gather_facts: false
  strategy: free
  tasks:
    - name: envsync_run
      envsync_run:
        request: "{{ envsync_requests[inventory_hostname] }}"
        stdin: "{{ envsync_stdin }}"
      timeout: "{{ envsync_timeout }}"
      vars:
        ansible_host_key_checking: true
        ansible_ssh_host_key_checking: true
        ansible_paramiko_host_key_checking: true
        ansible_ssh_args: "{{ envsync_ssh_args[inventory_hostname] }}"
        ansible_python_interpreter: "{{ envsync_interpreters[inventory_hostname] }}"
"""

Request = tuple[int, HostSpec, ProbeOptions]


@dataclass(frozen=True, slots=True, kw_only=True)
class AnsibleEngine:
    """Collects hosts of `inventory` through ansible-playbook, `forks` at once."""

    inventory: Inventory
    forks: int = 8
    accept_new: bool = False  # --accept-new-host-keys: StrictHostKeyChecking=accept-new

    def collect(self, requests: Sequence[Request]) -> Iterator[tuple[int, Snapshot | CollectError]]:
        """Each request's snapshot (or its CollectError) as its host answers."""
        if not requests:
            return
        by_host: dict[str, list[Request]] = {}
        for request in requests:
            by_host.setdefault(request[1].name, []).append(request)
        # One task per host: a host asked twice (with other options) runs in a second round.
        rounds: list[list[Request]] = []
        for asked in by_host.values():
            for n, request in enumerate(asked):
                while len(rounds) <= n:
                    rounds.append([])
                rounds[n].append(request)
        for batch in rounds:
            yield from self._round(batch)

    def _round(self, batch: Sequence[Request]) -> Iterator[tuple[int, Snapshot | CollectError]]:
        pending = {spec.name: (i, spec, options) for i, spec, options in batch}
        # one round: no asking again (a store made anew is given every pack at once)
        offers = {spec.name: offer(spec, options, check=False) for _, spec, options in batch}
        with tempfile.TemporaryDirectory(prefix="envsync-ansible-") as folder:
            argv = self._write(Path(folder), batch, offers)
            env = ansible_env(
                {
                    "ANSIBLE_LIBRARY": str(HERE / "library"),
                    "ANSIBLE_CALLBACK_PLUGINS": str(HERE / "plugins"),
                    "ANSIBLE_STDOUT_CALLBACK": "envsync_stream",
                    "ANSIBLE_LOCAL_TEMP": str(Path(folder) / "local"),
                    "ANSIBLE_FORKS": str(max(1, self.forks)),
                    # paramiko's connection adds an unknown key when this says so (it has
                    # no variable to override it; the environment beats ansible.cfg).
                    "ANSIBLE_PARAMIKO_HOST_KEY_AUTO_ADD": str(self.accept_new),
                }
            )
            with open(Path(folder) / "stderr", "w+b") as errors:
                try:
                    proc = subprocess.Popen(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=errors,
                        env=env,
                        start_new_session=True,
                    )
                except OSError as e:
                    raise CollectError(f"ansible-playbook: cannot run {argv[0]}: {e}") from e
                try:
                    yield from self._read(proc, pending, offers)
                    proc.wait()
                finally:
                    _end(proc)  # a caller that stopped early: Ansible is stopped
                leftover = _tail(errors)
            for name, (i, _, _) in pending.items():
                yield (
                    i,
                    CollectError(
                        f"{name}: Ansible gave no result for this host"
                        + (f": {leftover}" if leftover else ""),
                        tip="run the same with -vvv: ansible-playbook's own output says why",
                    ),
                )

    def _write(
        self, folder: Path, batch: Sequence[Request], offers: dict[str, Offer | None]
    ) -> list[str]:
        """The playbook, its variables and (for envsync.toml) the inventory; the command."""
        requests: dict[str, str] = {}
        ssh_args: dict[str, str] = {}
        interpreters: dict[str, str] = {}
        longest = 0.0
        for _, spec, options in batch:
            offered = offers.get(spec.name)
            argv = probe_argv(spec, options, offered=offered)
            if spec.exec:
                argv = list(exec_argv(spec.exec, argv))
            request: dict[str, Any] = {"argv": argv, "timeout": options.timeout}
            if offered is not None:  # after the bundle on its stdin
                request["payload"] = base64.b64encode(offered.payload()).decode()
            requests[spec.name] = base64.b64encode(json.dumps(request).encode()).decode()
            accept = self.accept_new or spec.host_key_policy == "accept-new"
            policy = "accept-new" if accept else "yes"
            ssh_args[spec.name] = f"-o StrictHostKeyChecking={policy} {SSH_ARGS}"
            # The module runs with the service's interpreter (3.8+, and there for sure);
            # behind an exec prefix that one is inside: Ansible finds one outside.
            interpreters[spec.name] = "auto_silent" if spec.exec else spec.python
            longest = max(longest, options.timeout)
        variables = {
            "envsync_requests": requests,
            "envsync_stdin": base64.b64encode(
                probe_source(any(options.cache_dir != "" for _, _, options in batch))
            ).decode(),
            "envsync_ssh_args": ssh_args,
            "envsync_interpreters": interpreters,
            "envsync_timeout": int(longest + SLACK),
        }
        (folder / "vars.yml").write_text(unsafe_yaml(variables))
        (folder / "playbook.yml").write_text(PLAYBOOK)
        names = [spec.name for _, spec, _ in batch]
        (folder / "limit").write_text("".join(f"{n}\n" for n in names))
        if self.inventory.ansible is not None:
            source = self.inventory.ansible
        else:
            source = str(folder / "inventory.yml")
            specs = [spec for _, spec, _ in batch]
            (folder / "inventory.yml").write_text(unsafe_yaml(generated_inventory(specs)))
        return [
            ansible_program("ansible-playbook"),
            "-i",
            source,
            str(folder / "playbook.yml"),
            "-e",
            f"@{folder / 'vars.yml'}",
            "--limit",
            f"@{folder / 'limit'}",
            "--forks",
            str(max(1, self.forks)),
        ]

    def _read(
        self,
        proc: subprocess.Popen[bytes],
        pending: dict[str, Request],
        offers: dict[str, Offer | None],
    ) -> Iterator[tuple[int, Snapshot | CollectError]]:
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # a warning Ansible printed on stdout
            if not isinstance(line, dict) or line.get("host") not in pending:
                continue
            i, spec, options = pending.pop(line["host"])
            result = line.get("result") or {}
            offered = offers.get(spec.name)
            yield i, _snapshot(spec, options, str(line.get("status")), result, offered)


def unsafe_yaml(value: Any) -> str:
    """`value` as YAML (JSON's flow style) with every string tagged `!unsafe`: Ansible
    never renders one as a template (`{{ lookup('pipe', CMD) }}` in an inventory value
    would run CMD here), whichever variable it ends up in. Mapping keys are names (hosts,
    variables), never rendered."""
    if isinstance(value, dict):
        items = (f"{json.dumps(str(k))}: {unsafe_yaml(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(unsafe_yaml(v) for v in value) + "]"
    if isinstance(value, str):
        return "!unsafe " + json.dumps(value)
    return json.dumps(value)


def _snapshot(
    spec: HostSpec,
    options: ProbeOptions,
    status: str,
    result: dict[str, Any],
    offered: Offer | None = None,
) -> Snapshot | CollectError:
    """One host's answer as its snapshot, or why there is none."""
    message = str(result.get("msg") or "").strip()
    if status == "unreachable":
        return CollectError(
            f"{spec.name}: Ansible could not reach it: {_first(message) or 'unreachable'}",
            tip="check it with `ansible HOST -m ping -i INVENTORY`",
        )
    if result.get("timed_out"):
        return CollectError(
            f"{spec.name}: the probe did not finish within {options.timeout:g}s (through Ansible)"
        )
    answered = "stdout_z" in result or "not_found" in result
    if not answered or status not in ("ok", "failed"):
        lines = str(result.get("module_stderr") or "").strip().splitlines()
        why = " | ".join(line.strip() for line in lines[-3:] if line.strip())
        return CollectError(
            f"{spec.name}: envsync's Ansible module did not run: {why or message or status}",
            tip="is the interpreter Ansible runs modules with there a Python 3.8+?",
        )
    if result.get("not_found"):
        return CollectError(
            f"{spec.name}: python {spec.python!r} not found",
            tip=f"set envsync_python (or hosts.{spec.name}.python) to the service's interpreter",
        )
    try:
        stdout = zlib.decompress(base64.b64decode(result.get("stdout_z") or ""))
        stderr = base64.b64decode(result.get("stderr") or "")
    except (ValueError, zlib.error) as e:
        return CollectError(f"{spec.name}: Ansible returned a damaged result: {e}")
    command = CommandResult(
        argv=(spec.python,),
        returncode=int(result["rc"]),
        stdout=stdout,
        stderr=stderr,
        duration_s=float(result.get("duration") or 0.0),
    )
    try:
        return read_result(spec, command, options, offered)
    except CollectError as e:
        return e
    except EnvsyncError as e:
        return CollectError(str(e))


def _first(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _tail(errors: IO[bytes]) -> str:
    errors.seek(0)
    return tail(errors.read()[-8192:], 3)


def _end(proc: subprocess.Popen[bytes]) -> None:
    """End ansible-playbook and its children if it still runs."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, 9)
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
