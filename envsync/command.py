"""The service's launch command: its entrypoint, its flags, and what a host really runs.

One place for every rule about the command: the inventory's `[service].command` with its
placeholders (`{python}`, `{port}`, `{inventory_dir}`) filled for a host and the launch
flags envsync keeps for that host (from `repair`) applied. diff, repair, plan and deploy
all ask this module, so they agree on the command a host runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from envsync.inventory import HostSpec, ServiceSpec


def entrypoint_of(command: Sequence[str]) -> str | None:
    """The module a command runs with `-m MODULE`, if any."""
    for i, token in enumerate(command):
        if token == "-m" and i + 1 < len(command):
            return command[i + 1]
        if token.startswith("-m") and len(token) > 2 and not token.startswith("--"):
            return token[2:]
    return None


def entrypoint(service: ServiceSpec | None) -> str | None:
    """The service's entrypoint module: `entrypoint` in the inventory, else the command's."""
    if service is None:
        return None
    return service.entrypoint or entrypoint_of(service.command)


def parse_flags(command: Sequence[str]) -> dict[str, str]:
    """`--flag value`, `--flag=value` and bare `--flag` (value "true"); the last one wins."""
    flags: dict[str, str] = {}
    tokens = list(command)
    for i, token in enumerate(tokens):
        if not token.startswith("--") or token == "--":
            continue
        name, eq, value = token.partition("=")
        if eq:
            flags[name] = value
        elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            flags[name] = tokens[i + 1]
        else:
            flags[name] = "true"
    return flags


def with_flag(command: Sequence[str], flag: str, value: str) -> tuple[str, ...]:
    """The command with `flag` set to `value` (replaced in place, else appended)."""
    out = list(command)
    for i, token in enumerate(out):
        if token == flag and i + 1 < len(out) and not out[i + 1].startswith("--"):
            out[i + 1] = value
            return tuple(out)
        if token.startswith(flag + "="):
            out[i] = f"{flag}={value}"
            return tuple(out)
    return (*out, flag, value)


def with_flags(command: Sequence[str], flags: Mapping[str, str] | None) -> tuple[str, ...]:
    """The command with each of `flags` set (see with_flag)."""
    out = tuple(command)
    for flag, value in (flags or {}).items():
        out = with_flag(out, flag, value)
    return out


def effective_command(
    service: ServiceSpec, spec: HostSpec | None, flags: Mapping[str, str] | None
) -> tuple[str, ...]:
    """The command the host runs: placeholders filled for `spec`, the kept flags applied.

    Without a host (a lock or snapshot file stands for the target) `{python}` stays as is.
    """
    values = {"{port}": str(service.port or ""), "{inventory_dir}": service.base_dir or "."}
    if spec is not None:
        values["{python}"] = spec.python
    command = tuple(service.command)
    for key, value in values.items():
        command = tuple(t.replace(key, value) for t in command)
    return with_flags(command, flags)
