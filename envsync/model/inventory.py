"""The inventory's model and its TOML document: hosts, the service, defaults -> HostSpec."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from envsync.errors import DecodeError, InputError, InventoryError
from envsync.model.codec import decode
from envsync.model.vocab import INSTALLERS, Installer

DEFAULT_INVENTORY = "envsync.toml"
INVENTORY_ENV = "ENVSYNC_INVENTORY"
LOCAL = "local"
HOST_KEY_POLICIES = ("strict", "accept-new")
# Environment variables worth recording when the inventory names none.
DEFAULT_ENV = (
    "CUDA_*",
    "NCCL_*",
    "GLOO_*",
    "SGLANG_*",
    "TORCH_*",
    "HF_*",
    "PYTHONPATH",
    "LD_LIBRARY_PATH",
    "PIP_*",
    "VIRTUAL_ENV",
)

# How long deploy and smoke wait for the service to come up healthy, by default (seconds).
DEFAULT_DEADLINE = 300.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceSpec:
    command: tuple[str, ...] = ()
    port: int | None = None
    health: str = "/health"
    unit: str | None = None
    entrypoint: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    base_dir: str | None = None  # the inventory's folder: `{inventory_dir}` in command
    workdir: str | None = None  # the folder the service runs in on the host (default: home)
    # Where envsync asks for health when the port is not reachable at the host's name (a
    # container's published port, a Kubernetes service): http://HOST:PORT/PATH.
    health_url: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HostSpec:
    name: str
    python: str
    ssh: str | None = None  # None: this machine
    jump: str | None = None  # SSH jump host(s), like ProxyJump: user@bastion[:port][,...]
    # A command prefix that runs a program inside a container, pod or allocation
    # (`docker exec -i NAME`, `kubectl exec -i POD --`, `srun -w NODE --`); on `ssh` if set.
    exec: tuple[str, ...] = ()
    identity: str | None = None
    known_hosts: str | None = None
    host_key_policy: str = "strict"
    watch: tuple[str, ...] = ()
    env: tuple[str, ...] = DEFAULT_ENV
    service: ServiceSpec | None = None  # the inventory's [service] with this host's overrides
    pip_options: tuple[str, ...] = ()  # added to `pip install` on this host (index options)
    installer: Installer | None = None  # None: the target's pip, else uv on its PATH
    # An Ansible connection plugin envsync's own runners do not speak (`winrm`,
    # `community.docker.docker`): the host is reached only through `--engine ansible`.
    connection: str | None = None
    # Hosts that name the same trust are given the facts the others parsed (a new host's
    # first diff parses only what differs); None: this host's facts decide its verdicts only.
    trust: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    """Hosts named together (`[groups.NAME]`, or an Ansible group)."""

    name: str
    hosts: tuple[str, ...]
    server: bool = False  # the nodes of one multi-node server: they must agree (gate.py)


@dataclass(frozen=True, slots=True, kw_only=True)
class Inventory:
    path: Path | None  # None: no inventory file, only `local` and files can be named
    hosts: Mapping[str, HostSpec] = field(default_factory=dict)
    reference: str | None = None
    target: str | None = None
    service: ServiceSpec | None = None
    rules: tuple[str, ...] = ()  # user rule packs (paths), after the built-in ones
    groups: Mapping[str, Group] = field(default_factory=dict)
    # The Ansible inventory this was read from (`--engine ansible` runs against it), or
    # None for envsync.toml.
    ansible: str | None = None

    def servers(self) -> tuple[Group, ...]:
        """The groups marked as the nodes of one multi-node server."""
        return tuple(g for g in self.groups.values() if g.server)

    def host(self, name: str) -> HostSpec:
        if name in self.hosts:
            return self.hosts[name]
        if name == LOCAL:
            return local_host(service=self.service)
        known = ", ".join(sorted({*self.hosts, LOCAL}))
        where = f" in {self.path}" if self.path else " (no inventory file: ./envsync.toml)"
        raise InventoryError(
            f"unknown host {name!r}{where}; known hosts: {known}",
            tip="add it under [hosts.NAME], or name a snapshot, lock or requirements file",
        )


def local_host(
    watch: tuple[str, ...] = (),
    env: tuple[str, ...] = DEFAULT_ENV,
    service: ServiceSpec | None = None,
) -> HostSpec:
    """`local`: the active virtualenv's interpreter, else python3 on PATH; it runs the
    inventory's service like any other host."""
    venv = os.environ.get("VIRTUAL_ENV")
    python = None
    if venv and Path(venv, "bin", "python").exists():
        python = str(Path(venv, "bin", "python"))
    python = python or shutil.which("python3") or sys.executable
    return HostSpec(name=LOCAL, python=python, watch=watch, env=env, service=service)


# ---------------------------------------------------------------------------------------
# Parsing and validation: the document's shape is checked by the codec (every error names
# the dotted key: `hosts.ct200.service.env.X: expected a string`), its meaning here.


@dataclass(frozen=True, slots=True, kw_only=True)
class _ServiceTable:
    """[service], or a host's `service` table: each key it sets overrides [service]'s."""

    command: tuple[str, ...] | None = None
    port: int | None = None
    health: str | None = None
    unit: str | None = None
    entrypoint: str | None = None
    env: Mapping[str, str] | None = None
    workdir: str | None = None
    health_url: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _HostTable:
    python: str | None = None  # required: checked with its own message
    ssh: str | None = None
    jump: str | None = None
    exec: tuple[str, ...] | None = None
    identity: str | None = None
    known_hosts: str | None = None
    host_key_policy: str = "strict"
    watch: tuple[str, ...] | None = None
    env: tuple[str, ...] | None = None
    service: _ServiceTable | None = None
    pip_options: tuple[str, ...] = ()
    installer: str | None = None
    trust: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _DefaultsTable:
    reference: str | None = None
    target: str | None = None
    watch: tuple[str, ...] = ()
    env: tuple[str, ...] = DEFAULT_ENV
    rules: tuple[str, ...] = ()
    trust: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _GroupTable:
    hosts: tuple[str, ...] | str = ()  # names or node sets: "gpu[001-004]"
    server: bool = False


# The tables a user writes, by their heading (the docs list their keys from these).
TABLES = {
    "defaults": _DefaultsTable,
    "service": _ServiceTable,
    "hosts": _HostTable,
    "groups": _GroupTable,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Document:
    defaults: _DefaultsTable = field(default_factory=_DefaultsTable)
    service: _ServiceTable | None = None
    hosts: Mapping[str, _HostTable] = field(default_factory=dict)
    groups: Mapping[str, _GroupTable] = field(default_factory=dict)


def _service(table: _ServiceTable, where: str, path: Path, base: ServiceSpec | None) -> ServiceSpec:
    service = base or ServiceSpec(base_dir=str(path.parent.absolute()))
    changes: dict[str, Any] = {
        f.name: getattr(table, f.name)
        for f in fields(table)
        if getattr(table, f.name) is not None and f.name != "env"
    }
    if table.env is not None:
        changes["env"] = {**service.env, **table.env}
    if "port" in changes and not 0 < changes["port"] < 65536:
        raise InventoryError(f"{path}: {where}.port must be between 1 and 65535")
    if "health_url" in changes:
        _check_url(changes["health_url"], f"{where}.health_url", path)
    return replace(service, **changes)


def _check_url(url: str, where: str, path: Path) -> None:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a bad port)
    except ValueError as e:
        raise InventoryError(f"{path}: {where} is not a URL: {e}") from e
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InventoryError(
            f"{path}: {where} must be an http:// or https:// URL with a host, got {url!r}",
            tip='e.g. health_url = "http://sglang.inference.svc:30000/health"',
        )


def parse_target(target: str) -> tuple[str | None, str, int | None]:
    """`user@host:port` (user and port optional; `[v6addr]:port` too); ValueError if not."""
    user, at, rest = target.rpartition("@")
    host, port = rest, None
    if rest.startswith("["):
        inner, _, tail = rest[1:].partition("]")
        host = inner
        if tail.startswith(":") and tail[1:].isdigit():
            port = int(tail[1:])
    elif rest.count(":") == 1:
        name, _, number = rest.partition(":")
        if number.isdigit():
            host, port = name, int(number)
    if not host or (at and not user) or any(c.isspace() for c in target):
        raise ValueError(f"{target!r}: not an SSH target; expected user@host[:port]")
    return (user if at else None), host, port


def jump_hops(jump: str) -> tuple[str, ...]:
    """The hops of a jump setting (`a,b` like ProxyJump: a first); () for none."""
    if jump.strip().lower() == "none":
        return ()
    return tuple(hop.strip() for hop in jump.split(","))


# Container and pod CLIs whose exec passes stdin only with -i and mangles output with -t.
_STDIN_FLAGS = {"docker": "-i", "podman": "-i", "nerdctl": "-i", "kubectl": "-i", "oc": "-i"}


def _exec_prefix(value: list[Any], where: str, path: Path) -> tuple[str, ...]:
    example = (
        'e.g. exec = ["docker", "exec", "-i", "sglang"] or '
        '["kubectl", "exec", "-i", "-n", "inference", "pod/sglang-0", "--"]'
    )
    if not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise InventoryError(
            f"{path}: {where} must be a non-empty list of non-empty strings "
            f"(the command that runs a program inside), got {value!r}",
            tip=example,
        )
    prefix = tuple(value)
    tool = os.path.basename(prefix[0])
    if tool in _STDIN_FLAGS and "exec" in prefix:
        given = set(prefix)
        if given & {"-t", "--tty", "-it", "-ti", "--tty=true"}:
            raise InventoryError(
                f"{path}: {where} asks {tool} for a terminal (-t): it would alter envsync's "
                "binary output and merge its error output",
                tip="use -i alone",
            )
        if not given & {"-i", "--interactive", "--stdin", "-i=true", "--stdin=true"}:
            raise InventoryError(
                f"{path}: {where} runs `{tool} exec` without -i: envsync sends its probe and "
                "archives on stdin, which would not reach the command",
                tip=f"add -i after `{tool} exec`",
            )
    return prefix


def parse_inventory(
    data: Mapping[str, Any], path: Path, *, ansible: str | None = None
) -> Inventory:
    """The inventory of a document (envsync.toml's, or one made of an Ansible inventory:
    `ansible`, its path)."""
    try:
        document = decode(_Document, data)
    except DecodeError as e:
        raise InventoryError(f"{path}: {e}") from e
    defaults = document.defaults
    watch, env = defaults.watch, defaults.env
    service = _service(document.service, "service", path, None) if document.service else None
    hosts: dict[str, HostSpec] = {}
    for name, table in document.hosts.items():
        hosts[name] = replace(
            _host(name, table, path, watch, env, service),
            trust=(table.trust if table.trust is not None else defaults.trust) or None,
        )
    if LOCAL not in hosts:
        hosts[LOCAL] = local_host(watch, env, service)
    for key, named in (("reference", defaults.reference), ("target", defaults.target)):
        if named is not None and named not in hosts:
            raise InventoryError(
                f"{path}: defaults.{key} names {named!r}, which is not a host; "
                f"expected one of: {', '.join(sorted(hosts))}"
            )
    return Inventory(
        path=path,
        hosts=hosts,
        reference=defaults.reference,
        target=defaults.target,
        service=service,
        rules=tuple(_local_path(p, path) or p for p in defaults.rules),
        groups={name: _group(name, table, hosts, path) for name, table in document.groups.items()},
        ansible=ansible,
    )


def _group(name: str, table: _GroupTable, hosts: Mapping[str, HostSpec], path: Path) -> Group:
    from envsync.model.nodeset import expand

    words = (table.hosts,) if isinstance(table.hosts, str) else table.hosts
    try:
        members = tuple(dict.fromkeys(n for w in words for n in expand(w)))
    except InputError as e:
        raise InventoryError(f"{path}: groups.{name}.hosts: {e.message}", tip=e.tip) from e
    unknown = [m for m in members if m not in hosts]
    if unknown:
        raise InventoryError(
            f"{path}: groups.{name} names host(s) that are not in [hosts]: {', '.join(unknown)}"
        )
    if name in hosts:
        raise InventoryError(f"{path}: groups.{name}: a host has that name too")
    return Group(name=name, hosts=members, server=table.server)


def _host(
    name: str,
    table: _HostTable,
    path: Path,
    watch: tuple[str, ...],
    env: tuple[str, ...],
    service: ServiceSpec | None,
) -> HostSpec:
    where = f"hosts.{name}"
    if table.python is None:
        raise InventoryError(
            f"{path}: {where} has no 'python'; expected the path of the host's interpreter, "
            'e.g. python = "/opt/venv/bin/python"'
        )
    policy = table.host_key_policy
    if policy not in HOST_KEY_POLICIES:
        raise InventoryError(
            f"{path}: {where}.host_key_policy must be one of {', '.join(HOST_KEY_POLICIES)}, "
            f"got {policy!r}"
        )
    ssh, jump = table.ssh, table.jump
    targets = [("ssh", ssh)] if ssh else []
    targets += [("jump", hop) for hop in jump_hops(jump or "none")]
    for key, target in targets:
        try:
            parse_target(target)
        except ValueError as e:
            raise InventoryError(f"{path}: {where}.{key}: {e}") from e
    if jump and ssh is None:
        raise InventoryError(
            f"{path}: {where}.jump needs ssh: the jump host leads to the SSH target",
            tip=f'set ssh = "user@host" in [hosts.{name}], or remove jump',
        )
    prefix = _exec_prefix(list(table.exec), f"{where}.exec", path) if table.exec is not None else ()
    python = table.python
    if ssh is None and not prefix:
        # A path on this machine: relative paths are relative to the inventory file.
        python = (
            str((path.parent / os.path.expanduser(python)).absolute()) if "/" in python else python
        )
    return HostSpec(
        name=name,
        python=python,
        ssh=ssh,
        jump=jump,
        exec=prefix,
        identity=_local_path(table.identity, path),
        known_hosts=_local_path(table.known_hosts, path),
        host_key_policy=policy,
        watch=table.watch if table.watch is not None else watch,
        env=table.env if table.env is not None else env,
        service=_service(table.service, f"{where}.service", path, service)
        if table.service is not None
        else service,
        pip_options=table.pip_options,
        installer=_installer(table.installer, where, path),
    )


def _installer(value: str | None, where: str, path: Path) -> Installer | None:
    for known in INSTALLERS:
        if value == known:
            return known
    if value is not None:
        raise InventoryError(
            f"{path}: {where}.installer must be one of {', '.join(INSTALLERS)}, not {value!r}",
            tip="leave it out to use the target's own pip, else uv on the host's PATH",
        )
    return None


def _local_path(value: str | None, inventory: Path) -> str | None:
    if value is None:
        return None
    return str((inventory.parent / os.path.expanduser(value)).absolute())
