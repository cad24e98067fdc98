"""Rule packs: which lazy imports a service runs at startup, and which flags choose them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envsync.documents import read_toml
from envsync.errors import RulesError
from envsync.vocab import Context

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "rules"


@dataclass(frozen=True, slots=True, kw_only=True)
class StartupModule:
    module: str  # "pkg.sub.*": every module of that package
    reason: str
    unless: tuple[str, ...] = ()  # flags whose presence means it does not run
    guarded: bool = False  # imported inside a try/except that skips it when it fails


@dataclass(frozen=True, slots=True, kw_only=True)
class FlagValue:
    value: str
    modules: tuple[str, ...] = ()
    gives_up: str = ""  # what choosing this value costs; empty for the default
    used_when: tuple[str, ...] = ()  # command flags that mean what it gives up is in use


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionDefault:
    """The flag's default in the versions of the pack's package that `version` matches."""

    version: str  # a PEP 440 specifier set: "<0.4.4.post2"
    value: str
    source: str = ""  # where the package's source says so


@dataclass(frozen=True, slots=True, kw_only=True)
class FlagRule:
    flag: str
    reason: str
    default: str | None = None
    defaults: tuple[VersionDefault, ...] = ()  # the first that matches wins over `default`
    values: Mapping[str, FlagValue] = field(default_factory=dict)
    prefer: tuple[str, ...] = ()  # order in which values are offered as workarounds
    workaround: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptRule:
    """A console script's subcommand that starts the service: `sglang serve` runs what
    `python -m sglang.launch_server` runs, through the modules named here."""

    name: str  # the console script
    subcommand: str | None = None  # its first argument, when it selects what runs
    entrypoint: str  # the module whose startup it runs (and whose rule packs apply)
    modules: tuple[str, ...] = ()  # modules it imports on the way (run at startup too)
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RulePack:
    name: str
    origin: str
    description: str = ""
    package: str = ""  # the distribution whose version picks versioned defaults (its name)
    entrypoints: tuple[str, ...] = ()
    startup: tuple[StartupModule, ...] = ()
    flags: tuple[FlagRule, ...] = ()
    scripts: tuple[ScriptRule, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Root:
    """A module that startup imports, and why."""

    module: str
    reason: str
    label: str  # why it runs, in a few words: "--grammar-backend xgrammar (the default)"
    flag: str | None = None  # set when a flag value chose it
    value: str | None = None
    context: Context = "module"  # "try": startup imports it inside a try/except that goes on


def _str_list(value: Any, where: str, origin: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RulesError(f"{origin}: {where} must be a list of strings")
    return tuple(value)


def _str(
    table: Mapping[str, Any], key: str, where: str, origin: str, default: str | None = None
) -> str:
    value = table.get(key, default)
    if not isinstance(value, str):
        raise RulesError(f"{origin}: {where}.{key} must be a string")
    return value


def _bool(table: Mapping[str, Any], key: str, where: str, origin: str) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise RulesError(f"{origin}: {where}.{key} must be true or false")
    return value


def _array(data: Mapping[str, Any], key: str, origin: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise RulesError(f"{origin}: {key} must be an array of tables ([[{key}]])")
    return value


def parse_pack(data: Mapping[str, Any], origin: str) -> RulePack:
    pack = data.get("pack")
    if not isinstance(pack, dict):
        raise RulesError(f"{origin}: a rule pack needs a [pack] table")
    startup = []
    for i, item in enumerate(_array(data, "startup", origin)):
        where = f"startup[{i}]"
        if not isinstance(item, dict):
            raise RulesError(f"{origin}: {where} must be a table")
        startup.append(
            StartupModule(
                module=_str(item, "module", where, origin),
                reason=_str(item, "reason", where, origin, ""),
                unless=_str_list(item.get("unless", []), f"{where}.unless", origin),
                guarded=_bool(item, "guarded", where, origin),
            )
        )
    flags = []
    for i, item in enumerate(_array(data, "flags", origin)):
        where = f"flags[{i}]"
        if not isinstance(item, dict):
            raise RulesError(f"{origin}: {where} must be a table")
        flag = _str(item, "flag", where, origin)
        if not flag.startswith("--"):
            raise RulesError(f"{origin}: {where}.flag must start with --, got {flag!r}")
        values = {}
        raw_values = item.get("values", {})
        if not isinstance(raw_values, dict):
            raise RulesError(f"{origin}: {where}.values must be a table")
        for value, spec in raw_values.items():
            if not isinstance(spec, dict):
                raise RulesError(f"{origin}: {where}.values.{value} must be a table")
            values[value] = FlagValue(
                value=value,
                modules=_str_list(
                    spec.get("modules", []), f"{where}.values.{value}.modules", origin
                ),
                gives_up=_str(spec, "gives_up", f"{where}.values.{value}", origin, ""),
                used_when=_str_list(
                    spec.get("used_when", []), f"{where}.values.{value}.used_when", origin
                ),
            )
        prefer = _str_list(item.get("prefer", []), f"{where}.prefer", origin)
        unknown = [p for p in prefer if p not in values]
        if unknown:
            raise RulesError(f"{origin}: {where}.prefer names {unknown[0]!r}, which is not a value")
        default = item.get("default")
        if default is not None and (not isinstance(default, str) or default not in values):
            raise RulesError(f"{origin}: {where}.default {default!r} is not one of its values")
        versioned = []
        for j, entry in enumerate(_array(item, "defaults", origin)):
            at = f"{where}.defaults[{j}]"
            if not isinstance(entry, dict):
                raise RulesError(f"{origin}: {at} must be a table")
            spec = _str(entry, "version", at, origin)
            try:
                SpecifierSet(spec)
            except InvalidSpecifier as e:
                raise RulesError(f"{origin}: {at}.version {spec!r} is not a version range") from e
            value = _str(entry, "value", at, origin)
            if value not in values:
                raise RulesError(f"{origin}: {at}.value {value!r} is not one of its values")
            versioned.append(
                VersionDefault(
                    version=spec, value=value, source=_str(entry, "source", at, origin, "")
                )
            )
        workaround = item.get("workaround", True)
        if not isinstance(workaround, bool):
            raise RulesError(f"{origin}: {where}.workaround must be true or false")
        flags.append(
            FlagRule(
                flag=flag,
                reason=_str(item, "reason", where, origin, ""),
                default=default,
                defaults=tuple(versioned),
                values=values,
                prefer=prefer,
                workaround=workaround,
            )
        )
    scripts = []
    for i, item in enumerate(_array(data, "scripts", origin)):
        where = f"scripts[{i}]"
        if not isinstance(item, dict):
            raise RulesError(f"{origin}: {where} must be a table")
        sub = item.get("subcommand")
        if sub is not None and not isinstance(sub, str):
            raise RulesError(f"{origin}: {where}.subcommand must be a string")
        scripts.append(
            ScriptRule(
                name=_str(item, "name", where, origin),
                subcommand=sub,
                entrypoint=_str(item, "entrypoint", where, origin),
                modules=_str_list(item.get("modules", []), f"{where}.modules", origin),
                reason=_str(item, "reason", where, origin, ""),
            )
        )
    name = _str(pack, "name", "pack", origin)
    return RulePack(
        name=name,
        origin=origin,
        description=_str(pack, "description", "pack", origin, ""),
        package=_str(pack, "package", "pack", origin, name),
        entrypoints=_str_list(pack.get("entrypoints", []), "pack.entrypoints", origin),
        startup=tuple(startup),
        flags=tuple(flags),
        scripts=tuple(scripts),
    )


def read_pack(path: Path) -> RulePack:
    data = read_toml(path, RulesError, "rule pack", "invalid TOML in rule pack")
    return parse_pack(data, str(path))


def load_packs(extra: Sequence[str] = ()) -> tuple[RulePack, ...]:
    """The built-in packs, then the user's (inventory `defaults.rules`)."""
    paths = sorted(BUILTIN_DIR.glob("*.toml")) + [Path(p) for p in extra]
    return tuple(read_pack(p) for p in paths)


def packs_for(entrypoint: str | None, packs: Sequence[RulePack]) -> tuple[RulePack, ...]:
    if not entrypoint:
        return ()
    return tuple(p for p in packs if entrypoint in p.entrypoints)


# ---------------------------------------------------------------------------------------
# Startup roots


def all_modules(
    entrypoint: str, packs: Sequence[RulePack], launcher: Sequence[str] = ()
) -> tuple[str, ...]:
    """Every module any flag combination could run at startup: the probe's roots."""
    names = [*launcher, entrypoint]
    for pack in packs:
        names += [s.module for s in pack.startup]
        for rule in pack.flags:
            for value in rule.values.values():
                names += value.modules
    return tuple(dict.fromkeys(names))


def active_roots(
    entrypoint: str,
    packs: Sequence[RulePack],
    flags: Mapping[str, str],
    launcher: Sequence[str] = (),
    shown: str | None = None,
) -> tuple[Root, ...]:
    """The modules startup imports under these flags (the launcher's modules first)."""
    roots = [
        Root(module=m, reason=f"the launch command runs it ({shown})", label="the launcher")
        for m in launcher
    ]
    roots.append(
        Root(
            module=entrypoint,
            reason=f"the service's entrypoint ({shown or '-m ' + entrypoint})",
            label="the entrypoint",
        )
    )
    for pack in packs:
        for item in pack.startup:
            if any(flag in flags for flag in item.unless):
                continue
            roots.append(
                Root(
                    module=item.module,
                    reason=f"{pack.name} rule: {item.reason}",
                    label=item.reason.split(" (")[0],
                    context="try" if item.guarded else "module",
                )
            )
        for rule in pack.flags:
            value = flags.get(rule.flag, rule.default)
            if value is None or value not in rule.values:
                continue
            how = "" if rule.flag in flags else ", the default"
            for module in rule.values[value].modules:
                roots.append(
                    Root(
                        module=module,
                        reason=f"{pack.name} rule: {rule.flag} {value}{how}: {rule.reason}",
                        label=f"{rule.flag} {value}{how}",
                        flag=rule.flag,
                        value=value,
                    )
                )
    return tuple(roots)


def for_version(packs: Sequence[RulePack], versions: Mapping[str, str]) -> tuple[RulePack, ...]:
    """The packs with each flag's default as the installed version of the pack's package
    has it (`versions`: distribution name -> version on the target). A version envsync
    cannot read keeps the pack's plain default."""
    out = []
    for pack in packs:
        raw = versions.get(canonicalize_name(pack.package))
        try:
            version = Version(raw) if raw else None
        except InvalidVersion:
            version = None
        if version is None or not any(rule.defaults for rule in pack.flags):
            out.append(pack)
            continue
        flags = []
        for rule in pack.flags:
            match = next(
                (d for d in rule.defaults if version in SpecifierSet(d.version, prereleases=True)),
                None,
            )
            flags.append(replace(rule, default=match.value) if match else rule)
        out.append(replace(pack, flags=tuple(flags)))
    return tuple(out)
