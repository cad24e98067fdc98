"""An Ansible inventory as envsync's hosts and groups, read through `ansible-inventory --list`.

ansible-core reads the inventory (INI, YAML, a dynamic inventory script, a folder of them,
with group_vars and host_vars); envsync maps each host's variables to its own fields:
`ansible_host`, `ansible_user` and `ansible_port` to `ssh`, `ansible_ssh_private_key_file`
to `identity`, ProxyJump (or `-J`) and `UserKnownHostsFile` in `ansible_ssh_common_args` /
`ansible_ssh_extra_args` to `jump` and `known_hosts`, `ansible_python_interpreter` to
`python` unless `envsync_python` is set; `envsync_*` variables carry the rest (exec, watch,
env, service, pip_options, installer, trust), and `envsync_*` variables of the group `all` are
the defaults (`envsync_reference`, `envsync_target`, `envsync_service`, ...). A group whose
own variables say `envsync_server: true` is the nodes of one multi-node server.

Host keys are verified as for envsync.toml: `StrictHostKeyChecking=no` or a known-hosts
file of /dev/null in the SSH arguments do not turn verification off.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from envsync.errors import CommandNotFound, CommandTimeout, InventoryError
from envsync.model.inventory import Inventory, parse_inventory

# How long a dynamic inventory script may take to answer.
INVENTORY_TIMEOUT = 120.0
# The connection plugins that are SSH to envsync (its own runner reaches those hosts).
SSH_CONNECTIONS = frozenset(
    (
        "ssh",
        "smart",
        "paramiko",
        "paramiko_ssh",
        "ansible.builtin.ssh",
        "ansible.builtin.paramiko_ssh",
    )
)
LOCAL_CONNECTIONS = frozenset(["local", "ansible.builtin.local"])
_ANSIBLE_SUFFIXES = (".ini", ".yml", ".yaml", ".json", ".cfg", ".py", ".sh")
# envsync_* host variables -> the inventory's host keys (envsync.toml's [hosts.NAME]).
HOST_VARIABLES = (
    "python",
    "exec",
    "jump",
    "identity",
    "known_hosts",
    "host_key_policy",
    "watch",
    "env",
    "service",
    "pip_options",
    "installer",
    "trust",
)
# envsync_* variables of the group `all` -> [defaults] (and envsync_service -> [service]).
DEFAULT_VARIABLES = ("reference", "target", "watch", "env", "rules", "trust")
_LISTS = frozenset(["exec", "watch", "env", "pip_options", "rules"])


def ansible_program(name: str) -> str:
    """An ansible-core program: the one installed beside this interpreter, else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise InventoryError(
            f"{name} not found: Ansible inventories and --engine ansible need ansible-core",
            tip="pip install 'envsync[ansible]' (or ansible-core) where envsync runs",
        )
    return found


def ansible_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment envsync runs ansible-core's programs in: an inventory that does not
    parse is an error (Ansible would warn and go on with none), no colour, no retry files."""
    env = dict(os.environ)
    env.update(
        {
            "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
            "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "True",
            "ANSIBLE_NOCOLOR": "True",
            "ANSIBLE_FORCE_COLOR": "False",
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "ANSIBLE_DEPRECATION_WARNINGS": "False",
            "ANSIBLE_HOST_KEY_CHECKING": "True",
            "ANSIBLE_SSH_HOST_KEY_CHECKING": "True",
            "ANSIBLE_PARAMIKO_HOST_KEY_CHECKING": "True",
        }
    )
    env.update(extra or {})
    return env


def is_ansible_inventory(path: Path) -> bool:
    """Whether `path` is an Ansible inventory rather than envsync.toml: a folder, an
    inventory's usual suffix, an executable (a dynamic inventory), or a file that is not TOML."""
    if path.is_dir():
        return True
    suffix = path.suffix.lower()
    if suffix == ".toml":
        return False
    if suffix in _ANSIBLE_SUFFIXES or os.access(path, os.X_OK):
        return True
    from envsync.documents import loads_toml

    try:
        loads_toml(path.read_text(encoding="utf-8"), str(path), InventoryError, "invalid TOML")
    except (InventoryError, UnicodeDecodeError):
        return True  # an INI inventory (`[gpu_nodes]` then bare host names) is not TOML
    except OSError:
        return False  # read as TOML: its reader says what is wrong with it
    return False


def _run_list(path: Path, export: bool) -> dict[str, Any]:
    from envsync.runner.local import LocalRunner

    argv = [ansible_program("ansible-inventory"), "-i", str(path), "--list"]
    if export:
        argv.append("--export")  # each group's own variables, not merged into its hosts'
    runner = LocalRunner("ansible-inventory", env=ansible_env())
    try:
        result = runner.run(argv, timeout=INVENTORY_TIMEOUT)
    except CommandTimeout as e:
        raise InventoryError(
            f"{path}: ansible-inventory did not answer within {INVENTORY_TIMEOUT:g}s"
        ) from e
    except CommandNotFound as e:
        raise InventoryError(f"{path}: {e.message}") from e
    if result.returncode != 0:
        raise InventoryError(
            f"{path}: ansible-inventory cannot read it: {result.stderr_tail(3) or 'no output'}",
            tip="check it with `ansible-inventory -i PATH --list`",
        )
    try:
        data = json.loads(result.stdout)
    except ValueError as e:
        raise InventoryError(f"{path}: ansible-inventory printed no JSON: {e}") from e
    if not isinstance(data, dict):
        raise InventoryError(f"{path}: ansible-inventory printed no table of groups")
    return data


def read_inventory(path: Path) -> Inventory:
    """The inventory ansible-core reads at `path`, as envsync's."""
    with ThreadPoolExecutor(max_workers=2) as pool:  # two processes of ~1 s each, at once
        merged, own = pool.map(lambda export: _run_list(path, export), (False, True))
    data, connections = document(merged, own, path)
    inventory = parse_inventory(data, path, ansible=str(path))
    if not connections:
        return inventory
    hosts = {
        name: replace(spec, connection=connections[name]) if name in connections else spec
        for name, spec in inventory.hosts.items()
    }
    return replace(inventory, hosts=hosts)


def truthy(value: object) -> bool:
    """Ansible's booleans: true, yes, on, 1 (INI variables are strings)."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "on", "1", "y", "t")


def _words(value: object, where: str, path: Path) -> list[str]:
    """A list variable: a YAML list, or (INI) a JSON list or comma-separated words."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError as e:
                raise InventoryError(f"{path}: {where} is not a JSON list: {e}") from e
        else:
            return [w.strip() for w in text.split(",") if w.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InventoryError(f"{path}: {where} must be a list of strings, got {value!r}")
    return list(value)


def _table(value: object, where: str, path: Path) -> object:
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            return json.loads(value)
        except ValueError as e:
            raise InventoryError(f"{path}: {where} is not a JSON table: {e}") from e
    return value


def ssh_options(*texts: object) -> dict[str, str]:
    """The `-o Key=Value` (and `-J`, `-i`) options of SSH argument strings, keys lowercase;
    the first value of a key wins, as it does for OpenSSH."""
    out: dict[str, str] = {}
    for text in texts:
        if not isinstance(text, str):
            continue
        try:
            words = shlex.split(text)
        except ValueError:
            continue
        i = 0
        while i < len(words):
            word = words[i]
            option: str | None = None
            if word in ("-o", "-J", "-i") and i + 1 < len(words):
                option = {"-o": "", "-J": "proxyjump=", "-i": "identityfile="}[word] + words[i + 1]
                i += 2
            elif word.startswith(("-o", "-J", "-i")) and len(word) > 2:
                option = {"-o": "", "-J": "proxyjump=", "-i": "identityfile="}[word[:2]] + word[2:]
                i += 1
            else:
                i += 1
                continue
            key, sep, value = option.partition("=")
            if not sep:
                key, _, value = option.partition(" ")
            out.setdefault(key.strip().lower(), value.strip())
    return out


def _members(groups: Mapping[str, Any]) -> dict[str, list[str]]:
    """Every group's hosts, its children's included."""
    out: dict[str, list[str]] = {}

    def hosts_of(name: str, seen: frozenset[str]) -> list[str]:
        if name in out:
            return out[name]
        group = groups.get(name)
        if not isinstance(group, dict) or name in seen:
            return []
        found = [h for h in group.get("hosts", []) if isinstance(h, str)]
        for child in group.get("children", []):
            found += hosts_of(str(child), seen | {name})
        out[name] = list(dict.fromkeys(found))
        return out[name]

    for name in groups:
        if name != "_meta":
            hosts_of(name, frozenset())
    return out


def _ssh_target(name: str, variables: Mapping[str, Any]) -> str:
    host = str(variables.get("ansible_host") or variables.get("ansible_ssh_host") or name)
    user = variables.get("ansible_user") or variables.get("ansible_ssh_user")
    port = variables.get("ansible_port") or variables.get("ansible_ssh_port")
    where = f"[{host}]" if ":" in host and port else host
    return f"{user + '@' if user else ''}{where}{f':{port}' if port else ''}"


def _python(name: str, variables: Mapping[str, Any], path: Path) -> str:
    for key in ("envsync_python", "ansible_python_interpreter"):
        value = variables.get(key)
        if isinstance(value, str) and value and not value.startswith("auto") and "{{" not in value:
            return value
    raise InventoryError(
        f"{path}: host {name!r} has neither envsync_python nor ansible_python_interpreter: "
        "envsync needs the interpreter of the service's environment",
        tip="set envsync_python (e.g. in group_vars/all.yml: envsync_python: /opt/venv/bin/python)",
    )


def host_table(
    name: str, variables: Mapping[str, Any], path: Path
) -> tuple[dict[str, Any], str | None]:
    """A host's table as envsync.toml would write it, and the Ansible connection plugin
    envsync's runners do not speak (None: SSH or this machine)."""
    table: dict[str, Any] = {"python": _python(name, variables, path)}
    connection = str(variables.get("ansible_connection") or "ssh")
    options = ssh_options(
        variables.get("ansible_ssh_common_args"), variables.get("ansible_ssh_extra_args")
    )
    unspoken = None
    if connection in SSH_CONNECTIONS:
        table["ssh"] = _ssh_target(name, variables)
        key = variables.get("ansible_ssh_private_key_file") or variables.get(
            "ansible_private_key_file"
        )
        if key or options.get("identityfile"):
            table["identity"] = str(key or options["identityfile"])
        if options.get("proxyjump"):
            table["jump"] = options["proxyjump"]
        known = options.get("userknownhostsfile", "").split()
        if known and known[0] != "/dev/null":  # /dev/null: nothing known, every key refused
            table["known_hosts"] = known[0]
        if options.get("stricthostkeychecking", "").lower() == "accept-new":
            table["host_key_policy"] = "accept-new"
    elif connection not in LOCAL_CONNECTIONS:
        unspoken = connection
    for key in HOST_VARIABLES:
        value = variables.get(f"envsync_{key}")
        if value is None:
            continue
        where = f"host {name!r}: envsync_{key}"
        if key in _LISTS:
            value = _words(value, where, path)
        elif key == "service":
            value = _table(value, where, path)
        table[key] = value
    return table, unspoken


def document(
    merged: Mapping[str, Any], own: Mapping[str, Any], path: Path
) -> tuple[dict[str, Any], dict[str, str]]:
    """envsync.toml's document of an inventory as `ansible-inventory --list` prints it
    (`merged`: each host's variables with its groups'; `own`: with --export, each group's
    own), and the hosts reached through a connection envsync's runners do not speak."""
    meta = merged.get("_meta", {})
    hostvars = meta.get("hostvars", {}) if isinstance(meta, dict) else {}
    groups = _members(merged)
    names = list(dict.fromkeys([*hostvars, *(h for hs in groups.values() for h in hs)]))
    hosts: dict[str, Any] = {}
    connections: dict[str, str] = {}
    for name in names:
        variables = hostvars.get(name, {})
        table, unspoken = host_table(name, variables if isinstance(variables, dict) else {}, path)
        hosts[name] = table
        if unspoken:
            connections[name] = unspoken
    every = own.get("all", {})
    top = every.get("vars", {}) if isinstance(every, dict) else {}
    defaults: dict[str, Any] = {}
    for key in DEFAULT_VARIABLES:
        value = top.get(f"envsync_{key}")
        if value is not None:
            defaults[key] = (
                _words(value, f"all: envsync_{key}", path) if key in _LISTS else str(value)
            )
    data: dict[str, Any] = {"defaults": defaults, "hosts": hosts}
    if top.get("envsync_service") is not None:
        data["service"] = _table(top["envsync_service"], "all: envsync_service", path)
    data["groups"] = {
        name: {
            "hosts": members,
            "server": truthy((own.get(name) or {}).get("vars", {}).get("envsync_server", False)),
        }
        for name, members in groups.items()
        if name not in hosts and name != "local"
    }
    return data, connections


def generated_inventory(specs: Sequence[Any]) -> dict[str, Any]:
    """An Ansible inventory (YAML plugin's JSON) of envsync hosts: for `--engine ansible`
    over envsync.toml. Each host's transport as envsync's own runner would use it."""
    from envsync.model.inventory import jump_hops, parse_target

    hosts: dict[str, Any] = {}
    for spec in specs:
        variables: dict[str, Any] = {}
        if spec.ssh is None:
            variables["ansible_connection"] = "local"
        else:
            user, host, port = parse_target(spec.ssh)
            variables["ansible_host"] = host
            if user:
                variables["ansible_user"] = user
            if port:
                variables["ansible_port"] = port
            if spec.identity:
                variables["ansible_ssh_private_key_file"] = spec.identity
            args = []
            if spec.known_hosts:
                args.append(f"-o UserKnownHostsFile={shlex.quote(spec.known_hosts)}")
            hops = jump_hops(spec.jump) if spec.jump else ()
            if hops:
                args.append(f"-o ProxyJump={shlex.quote(','.join(hops))}")
            if args:
                variables["ansible_ssh_common_args"] = " ".join(args)
        # The module runs with the service's interpreter (3.8+, there for sure); inside a
        # container the one outside is not known: Ansible finds one.
        variables["ansible_python_interpreter"] = "auto_silent" if spec.exec else spec.python
        hosts[spec.name] = variables
    return {"all": {"hosts": hosts}}
