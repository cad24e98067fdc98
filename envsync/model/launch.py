"""The service's launch command: what it starts, its flags, and what a host really runs.

One place for every rule about the command: what it starts (`launch_of`; where startup
begins, with the rule packs' console scripts, is classify/launched.py's `entrypoint`), the
inventory's `[service].command` with its placeholders (`{python}`, `{port}`,
`{inventory_dir}`) filled for a host, and the launch flags envsync keeps for that host (from
`repair`) applied. diff, repair, plan and deploy all ask this module, so they agree on the
command a host runs.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from envsync.model.inventory import HostSpec, ServiceSpec

Shape = Literal["module", "script", "console", "unreadable"]

# Interpreter options that take a value (`-X dev`, `-W ignore`, or glued: `-Xdev`).
_PY_VALUE_OPTIONS = frozenset("XW")
# Those that take none; -I and -P keep the script's folder off sys.path.
_PY_FLAGS = frozenset("bBdEhiIOPqsSuvx")
# torchrun's options without a value; every other option takes one (`--nnodes 2`, `-r 3`).
_TORCHRUN_FLAGS = frozenset(
    ("--standalone", "--no-python", "--no_python", "--run-path", "--run_path", "-m", "--module")
)
_TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
# A `sh -c` string envsync reads only when it is one plain command.
_SHELL_SYNTAX = re.compile(r"[;&|<>`$(){}*?\[\]\n#~]")
_SHELLS = frozenset(("sh", "bash", "dash", "zsh"))
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    """What a launch command starts: a module, a script, a console script, or unknown."""

    shape: Shape
    target: str | None = None  # the module, the script's path, or the console script's name
    args: tuple[str, ...] = ()  # the service's own arguments
    isolated: bool = False  # -I / -P: the script's folder is not put first on sys.path
    why: str = ""  # unreadable: what envsync could not read


def _python(token: str) -> bool:
    name = token.rsplit("/", 1)[-1]
    return token == "{python}" or re.fullmatch(r"python(\d+(\.\d+)?)?", name) is not None


def _after_interpreter(tokens: Sequence[str]) -> Launch:
    """`python [options] (-m MODULE | SCRIPT | -c CODE) args`: what it runs."""
    isolated = False
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "-m" or (token.startswith("-m") and not token.startswith("--")):
            module = token[2:] or (tokens[i + 1] if i + 1 < len(tokens) else "")
            rest = tokens[i + 1 :] if token[2:] else tokens[i + 2 :]
            if not module:
                return Launch(shape="unreadable", why="`-m` names no module")
            if module in _TORCHRUN_MODULES:
                return _after_torchrun(rest)
            return Launch(shape="module", target=module, args=tuple(rest), isolated=isolated)
        if token == "-c" or token.startswith("-c"):
            return Launch(shape="unreadable", why="the interpreter runs code given with -c")
        if token in ("-", "--"):
            return Launch(shape="unreadable", why="the interpreter reads its program from stdin")
        if token.startswith("--"):
            i += 1  # --check-hash-based-pycs and friends
            if token == "--check-hash-based-pycs":
                i += 1
            continue
        if token.startswith("-"):
            letters = token[1:]
            for j, letter in enumerate(letters):
                if letter in _PY_VALUE_OPTIONS:
                    i += 0 if letters[j + 1 :] else 1  # `-X dev`: the value is the next token
                    break
                if letter not in _PY_FLAGS:
                    return Launch(shape="unreadable", why=f"unknown interpreter option {token}")
                isolated = isolated or letter in "IP"
            i += 1
            continue
        return Launch(shape="script", target=token, args=tuple(tokens[i + 1 :]), isolated=isolated)
    return Launch(shape="unreadable", why="the interpreter is started with no program")


def _after_torchrun(tokens: Sequence[str]) -> Launch:
    """`torchrun [options] (SCRIPT | -m MODULE | --no-python PROGRAM) args`."""
    module = no_python = False
    i = 0
    while i < len(tokens) and tokens[i].startswith("-"):
        token = tokens[i]
        name = token.partition("=")[0]
        module = module or name in ("-m", "--module")
        no_python = no_python or name in ("--no-python", "--no_python")
        i += 1 if name in _TORCHRUN_FLAGS or "=" in token else 2
    if i >= len(tokens):
        return Launch(shape="unreadable", why="torchrun is started with no script")
    target, rest = tokens[i], tuple(tokens[i + 1 :])
    if no_python:
        return launch_of(tokens[i:])
    if module:
        return Launch(shape="module", target=target, args=rest)
    return Launch(shape="script", target=target, args=rest)


def launch_of(command: Sequence[str]) -> Launch:
    """What a launch command starts, through `env`, `sh -c`, torchrun and the interpreter.

    `python -m pkg.mod`, `python [-u -X.. -W.. -O] script.py`, a console script (`sglang
    serve`), `torchrun [...] script.py | -m mod`, `env VAR=x CMD`, `sh -c "CMD"`.
    """
    tokens = list(command)
    while tokens:
        head = tokens[0].rsplit("/", 1)[-1]
        if head == "env":
            tokens = tokens[1:]
            while tokens and (_ENV_NAME.match(tokens[0]) or tokens[0].startswith("-")):
                flag = tokens.pop(0)
                if flag in ("-u", "--unset", "-C", "--chdir") and tokens:
                    tokens.pop(0)
            continue
        if head == "exec" or head == "nohup":
            tokens = tokens[1:]
            continue
        if head in _SHELLS:
            if len(tokens) < 3 or tokens[1] != "-c":
                return Launch(shape="unreadable", why=f"{head} runs a script envsync does not read")
            text = tokens[2]
            if _SHELL_SYNTAX.search(re.sub(r"\{(python|port|inventory_dir)\}", "", text)):
                return Launch(
                    shape="unreadable", why=f"`{head} -c` runs more than one plain command"
                )
            tokens = shlex.split(text)
            continue
        if _ENV_NAME.match(tokens[0]):
            return Launch(shape="unreadable", why="the command starts with a variable assignment")
        break
    if not tokens:
        return Launch(shape="unreadable", why="the command is empty")
    if _python(tokens[0]):
        return _after_interpreter(tokens[1:])
    if tokens[0].rsplit("/", 1)[-1] == "torchrun":
        return _after_torchrun(tokens[1:])
    return Launch(shape="console", target=tokens[0].rsplit("/", 1)[-1], args=tuple(tokens[1:]))


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
