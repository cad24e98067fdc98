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
from envsync.errors import DecodeError, RulesError
from envsync.model.codec import decode
from envsync.model.environment import ServedModel, Unavailable
from envsync.model.vocab import Context

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "rules"


@dataclass(frozen=True, slots=True, kw_only=True)
class StartupModule:
    module: str  # "pkg.sub.*": every module of that package
    reason: str = ""
    unless: tuple[str, ...] = ()  # flags whose presence means it does not run
    guarded: bool = False  # imported inside a try/except that skips it when it fails
    # "architectures": a model registry; the modules that serve the architectures in the
    # served model's config.json are imported as startup itself (a failure is fatal),
    # found through `registry`: "entry-class" (each module's EntryClass) or
    # "table:MODULE:NAME" (a literal dict of architecture -> (module, class)).
    selected_by: str | None = None
    registry: str = ""
    only_selected: bool = False  # True: the registry imports no other model module
    versions: str = ""  # the versions of the pack's package it holds in (PEP 440); "": all


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
    versions: str = ""  # the versions of the pack's package that have the flag; "": all


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptRule:
    """A console script's subcommand that starts the service: `sglang serve` runs what
    `python -m sglang.launch_server` runs, through the modules named here."""

    name: str  # the console script
    subcommand: str | None = None  # its first argument, when it selects what runs
    entrypoint: str  # the module whose startup it runs (and whose rule packs apply)
    modules: tuple[str, ...] = ()  # modules it imports on the way (run at startup too)
    reason: str = ""
    model_argument: bool = False  # its first argument after the subcommand is the model


@dataclass(frozen=True, slots=True, kw_only=True)
class RulePack:
    name: str
    origin: str
    description: str = ""
    package: str = ""  # the distribution whose version picks versioned defaults (its name)
    entrypoints: tuple[str, ...] = ()
    model_flags: tuple[str, ...] = ()  # the flags that name the served model
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


# ---------------------------------------------------------------------------------------
# Reading a pack: its shape is checked by the codec (errors name the key: `flags[0].values.
# none.modules[1]: expected a string`), its meaning here.


@dataclass(frozen=True, slots=True, kw_only=True)
class _PackTable:
    name: str
    description: str = ""
    package: str | None = None  # default: the pack's name
    entrypoints: tuple[str, ...] = ()
    model_flags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class _ValueTable:
    modules: tuple[str, ...] = ()
    gives_up: str = ""
    used_when: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class _DefaultTable:
    version: str
    value: str
    source: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class _FlagTable:
    flag: str
    reason: str = ""
    default: str | None = None
    defaults: tuple[_DefaultTable, ...] = ()
    values: Mapping[str, _ValueTable] = field(default_factory=dict)
    prefer: tuple[str, ...] = ()
    workaround: bool = True
    versions: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class _PackDocument:
    pack: _PackTable
    startup: tuple[StartupModule, ...] = ()
    flags: tuple[_FlagTable, ...] = ()
    scripts: tuple[ScriptRule, ...] = ()


def parse_pack(data: Mapping[str, Any], origin: str) -> RulePack:
    if not isinstance(data.get("pack"), dict):
        raise RulesError(f"{origin}: a rule pack needs a [pack] table")
    try:
        document = decode(_PackDocument, data)
    except DecodeError as e:
        raise RulesError(f"{origin}: {e}") from e
    pack = document.pack
    for i, item in enumerate(document.startup):
        _check_startup(item, f"startup[{i}]", origin)
    return RulePack(
        name=pack.name,
        origin=origin,
        description=pack.description,
        package=pack.package if pack.package is not None else pack.name,
        entrypoints=pack.entrypoints,
        model_flags=pack.model_flags,
        startup=document.startup,
        flags=tuple(_flag(item, f"flags[{i}]", origin) for i, item in enumerate(document.flags)),
        scripts=document.scripts,
    )


def _check_versions(versions: str, where: str, origin: str) -> None:
    if versions:
        try:
            SpecifierSet(versions)
        except InvalidSpecifier as e:
            raise RulesError(
                f"{origin}: {where}.versions {versions!r} is not a version range"
            ) from e


def _check_startup(item: StartupModule, where: str, origin: str) -> None:
    _check_versions(item.versions, where, origin)
    if item.selected_by not in (None, "architectures"):
        raise RulesError(
            f'{origin}: {where}.selected_by must be "architectures", got {item.selected_by!r}'
        )
    if item.selected_by:
        kind = item.registry
        parts = kind.split(":")
        if not item.module.endswith(".*"):
            raise RulesError(f'{origin}: {where}: selected_by needs a module "pkg.*"')
        if kind != "entry-class" and not (len(parts) == 3 and parts[0] == "table" and all(parts)):
            raise RulesError(
                f'{origin}: {where}.registry must be "entry-class" or "table:MODULE:NAME", '
                f"got {kind!r}"
            )


def _flag(item: _FlagTable, where: str, origin: str) -> FlagRule:
    if not item.flag.startswith("--"):
        raise RulesError(f"{origin}: {where}.flag must start with --, got {item.flag!r}")
    _check_versions(item.versions, where, origin)
    values = {
        value: FlagValue(
            value=value, modules=spec.modules, gives_up=spec.gives_up, used_when=spec.used_when
        )
        for value, spec in item.values.items()
    }
    unknown = [p for p in item.prefer if p not in values]
    if unknown:
        raise RulesError(f"{origin}: {where}.prefer names {unknown[0]!r}, which is not a value")
    if item.default is not None and item.default not in values:
        raise RulesError(f"{origin}: {where}.default {item.default!r} is not one of its values")
    versioned = []
    for j, entry in enumerate(item.defaults):
        at = f"{where}.defaults[{j}]"
        try:
            SpecifierSet(entry.version)
        except InvalidSpecifier as e:
            raise RulesError(
                f"{origin}: {at}.version {entry.version!r} is not a version range"
            ) from e
        if entry.value not in values:
            raise RulesError(f"{origin}: {at}.value {entry.value!r} is not one of its values")
        versioned.append(
            VersionDefault(version=entry.version, value=entry.value, source=entry.source)
        )
    return FlagRule(
        flag=item.flag,
        reason=item.reason,
        default=item.default,
        defaults=tuple(versioned),
        values=values,
        prefer=item.prefer,
        workaround=item.workaround,
        versions=item.versions,
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


def _served(item: StartupModule, model: ServedModel) -> list[tuple[str, str]]:
    """(architecture, module) of the served model that this registry rule imports."""
    prefix = item.module[:-1]
    return [
        (arch, module)
        for arch in model.architectures
        for module in model.modules.get(arch, ())
        if module.startswith(prefix) and "." not in module[len(prefix) :]
    ]


def active_roots(
    entrypoint: str,
    packs: Sequence[RulePack],
    flags: Mapping[str, str],
    launcher: Sequence[str] = (),
    shown: str | None = None,
    model: ServedModel | Unavailable | None = None,
) -> tuple[Root, ...]:
    """The modules startup imports under these flags (the launcher's modules first); a
    model registry's module that serves the model's architecture is startup itself."""
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
            reason = f"{pack.name} rule: {item.reason}"
            label = item.reason.split(" (")[0]
            if item.selected_by and isinstance(model, ServedModel):
                served = _served(item, model)
                for arch, module in served:
                    roots.append(
                        Root(
                            module=module,
                            reason=f"{pack.name} rule: the model's config.json ({model.config}) "
                            f"names {arch}, which {module} serves: {item.reason}",
                            label=f"the served model's architecture, {arch}",
                        )
                    )
                if served and item.only_selected:
                    continue  # no other model module is imported
                if served:
                    reason += (
                        f"; the served model's ({', '.join(a for a, _ in served)}) count as startup"
                    )
                else:
                    archs = ", ".join(model.architectures)
                    reason += f"; no model module of this registry serves {archs}"
            elif item.selected_by:
                why = model.reason if isinstance(model, Unavailable) else "no model was read"
                reason += f"; which of them serves the model envsync cannot tell: {why}"
                label += f"; which of them serves the model envsync cannot tell: {why}"
            roots.append(
                Root(
                    module=item.module,
                    reason=reason,
                    label=label,
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
        if version is None:
            out.append(pack)  # every rule may hold: none is left out
            continue
        flags = []
        for rule in pack.flags:
            if not _holds(rule.versions, version):
                continue
            match = next(
                (d for d in rule.defaults if version in SpecifierSet(d.version, prereleases=True)),
                None,
            )
            flags.append(replace(rule, default=match.value) if match else rule)
        startup = tuple(s for s in pack.startup if _holds(s.versions, version))
        out.append(replace(pack, flags=tuple(flags), startup=startup))
    return tuple(out)


def _holds(versions: str, version: Version) -> bool:
    return not versions or version in SpecifierSet(versions, prereleases=True)
