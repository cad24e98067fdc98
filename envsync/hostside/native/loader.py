"""A process's link map, simulated from the files alone: start a program, dlopen objects.

`Linker.start(program)` gives the process a program begins as (the program, LD_PRELOAD,
their needed libraries: the global scope); `Linker.dlopen(process, path)` loads one more
object as dlopen does: its needed libraries breadth first (the order of ld.so's search
list), each found as `search` finds it or taken from what is loaded by name or by file;
then every version need of the new objects against its provider's definitions, then every
symbol their relocations look up against the lookup scope: the global scope, then the
object's own search list. Objects loaded RTLD_LOCAL by earlier loads answer a needed name
but lend their symbols only to objects that need them. The verdict carries the loader's
own messages; what the files cannot prove is Unknown, never Ok.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from .elf import ET_EXEC, ElfFile, Unreadable, read_elf
from .ldcache import cache_flags
from .search import (
    Disk,
    Found,
    Missing,
    PathList,
    Plan,
    Rejected,
    Searcher,
    Target,
    expand_dst,
    expand_list,
    rpath_lists,
)
from .verdicts import (
    BadObject,
    Fails,
    Load,
    NotFound,
    Ok,
    Request,
    Step,
    UndefinedSymbol,
    Unknown,
    VersionNotFound,
)

TYPE_CHECKING = False  # typing costs milliseconds on a host: for the checker only
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from .dynsym import Exports
    from .ldcache import LdCache
    from .ldso import LoaderFacts
    from .verdicts import Reason, Verdict

    Reader = Callable[[str], "ElfFile | Unreadable"]

EXECSTACK_REFUSED = (2, 41)  # glibc 2.41: dlopen no longer makes the stack executable


@dataclass(frozen=True)
class Environment:
    """The service's side of the search: its environment and working folder."""

    facts: LoaderFacts
    cache: LdCache | None = None
    library_path: str | None = None  # LD_LIBRARY_PATH
    preload: str | None = None  # LD_PRELOAD
    bind_now: bool = False  # LD_BIND_NOW set: lazy references are resolved at load too
    cwd: str = "/"


@dataclass(frozen=True)
class Loaded:
    """One object of the link map."""

    path: str  # l_name: how it was opened (a search folder and the name, or a dlopen path)
    elf: ElfFile
    names: frozenset[str]  # the names it answers a needed name by (l_name, requested, soname)
    key: tuple[int, int]  # (st_dev, st_ino): the same file by another name is this object
    origin: str  # what $ORIGIN expands to in its paths
    loader: str | None = None  # l_loader: the object that first needed it (None: a root)


@dataclass(frozen=True)
class Process:
    """A link map: the objects in load order and the global scope's lookup order."""

    target: Target
    main: Loaded
    objects: tuple[Loaded, ...]
    global_scope: tuple[tuple[int, int], ...]  # keys of the objects, in lookup order


@dataclass
class _Session:
    """The link map while one load runs (discarded when the load fails, as dlopen does)."""

    process_objects: list[Loaded]
    new: set[tuple[int, int]] = field(default_factory=set)
    steps: list[Step] = field(default_factory=list)
    failures: list[Reason] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    def match(self, name: str) -> Loaded | None:
        """The loaded object that answers `name` (_dl_map_object's first loop)."""
        for obj in self.process_objects:
            if name in obj.names:
                return obj
        return None

    def by_key(self, key: tuple[int, int]) -> Loaded | None:
        for obj in self.process_objects:
            if obj.key == key:
                return obj
        return None

    def rename(self, obj: Loaded, name: str) -> Loaded:
        """`obj` answering one more name (add_name_to_object)."""
        if name in obj.names:
            return obj
        renamed = replace(obj, names=obj.names | {name})
        self.process_objects[self.process_objects.index(obj)] = renamed
        return renamed

    def get(self, path: str) -> Loaded:
        return next(o for o in self.process_objects if o.path == path or path in o.names)


class Linker:
    """Simulates ld.so over files it reads but never maps."""

    def __init__(self, env: Environment, read: Reader = read_elf, disk: Disk | None = None) -> None:
        self.env = env
        self.read = read
        self.disk = disk if disk is not None else Disk(cwd=env.cwd)
        self._searchers: dict[Target, Searcher] = {}

    def start(self, program: str) -> tuple[Process | None, Load]:
        """The process `program` starts as, and whether it starts (None: it cannot)."""
        real = os.path.realpath(self.disk.absolute(program))
        elf = self.read(real)
        if isinstance(elf, Unreadable):
            return None, Load(verdict=Unknown(why=(f"{program}: {elf.why}",)))
        if self.env.facts.modelled is not None:
            return None, Load(verdict=Unknown(why=(self.env.facts.modelled,)))
        target = Target(elf_class=elf.elf_class, big_endian=elf.big_endian, machine=elf.machine)
        soname = elf.dynamic.soname if elf.dynamic else None
        main = Loaded(
            path=program,
            elf=elf,
            names=frozenset([soname] if soname else []),
            key=self._key(real),
            origin=os.path.dirname(real),
        )
        session = _Session(process_objects=[main])
        if elf.interp:
            self._admit_interpreter(session, elf.interp)
        first = [main, *self._preloads(session, main, target)]
        searchlist = self._breadth_first(session, first, target, main)
        self._check(session, searchlist, searchlist, self.env.bind_now)
        keys = tuple(o.key for o in searchlist)
        started = Process(target, main, tuple(session.process_objects), keys)
        return started, self._outcome(session, searchlist)

    def dlopen(
        self,
        process: Process,
        path: str,
        *,
        global_: bool = False,
        now: bool = True,
        caller: str | None = None,
        commit: bool = False,
    ) -> tuple[Process, Load]:
        """The process after dlopen(path, RTLD_NOW or RTLD_LAZY [| RTLD_GLOBAL]), and the
        load's verdict. On failure the process is unchanged, as dlopen leaves it, unless
        `commit` (what was found stays: to judge later loads as if this one had worked).
        A name without a slash is searched for as `caller` (an object of the process, by
        path; default the program) would search for its own needed names."""
        session = _Session(process_objects=list(process.objects))
        root = self._root(session, path, process, caller)
        if root is None:
            return process, self._outcome(session, [])
        searchlist = self._breadth_first(session, [root], process.target, process.main)
        new = [o for o in searchlist if o.key in session.new]
        self._check(session, new, self._scope(process, session, searchlist), now)
        load = self._outcome(session, searchlist)
        if load.verdict.kind != "ok" and not commit:
            return process, load
        scope = process.global_scope
        if global_ and load.verdict.kind == "ok":
            scope += tuple(o.key for o in searchlist if o.key not in scope)
        return replace(process, objects=tuple(session.process_objects), global_scope=scope), load

    def judge(self, program: str, requests: Sequence[Request]) -> tuple[Load, list[Load]]:
        """A startup: `program` starts, then each request is dlopen'ed in turn, each judged
        as if the ones before it had loaded (a fatal one is fixed before the next counts)."""
        process, started = self.start(program)
        loads: list[Load] = []
        for request in requests:
            if process is None:
                why = started.verdict.why if isinstance(started.verdict, Unknown) else ()
                loads.append(Load(verdict=Unknown(why=(f"{program} does not start", *why))))
                continue
            process, load = self.dlopen(
                process,
                request.path,
                global_=request.global_,
                now=request.now,
                caller=request.caller,
                commit=True,
            )
            loads.append(load)
        return started, loads

    # -- finding and admitting objects

    def _searcher(self, target: Target) -> Searcher:
        searcher = self._searchers.get(target)
        if searcher is None:
            flags = cache_flags(target.elf_class, target.machine)
            searcher = Searcher(self.env.facts, self.env.cache, target, self.disk, flags)
            self._searchers[target] = searcher
        return searcher

    def _key(self, path: str) -> tuple[int, int]:
        return self.disk.identity(path)

    def _admit_interpreter(self, session: _Session, interp: str) -> None:
        """ld.so itself, in the link map from the start (libc needs it by its soname)."""
        elf = self.read(interp)
        if isinstance(elf, Unreadable) or elf.dynamic is None:
            session.unknown.append(f"{interp}: the program's loader could not be read")
            return
        names = {interp} | ({elf.dynamic.soname} if elf.dynamic.soname else set())
        origin = os.path.dirname(interp)
        session.process_objects.append(
            Loaded(
                path=interp, elf=elf, names=frozenset(names), key=self._key(interp), origin=origin
            )
        )

    def _preloads(self, session: _Session, main: Loaded, target: Target) -> list[Loaded]:
        names = (self.env.preload or "").replace(":", " ").split()
        loaded = [self._need(session, main, name, target, main) for name in names]
        return [obj for obj in loaded if obj is not None]

    def _root(
        self, session: _Session, path: str, process: Process, caller: str | None
    ) -> Loaded | None:
        """The object dlopen(path) opens: loaded already by that name or file, or new."""
        known = session.match(path)
        if known is not None:
            session.steps.append(Step("dlopen", path, known.path, "already loaded"))
            return known
        if "/" not in path:
            requester = next(
                (o for o in session.process_objects if caller in (o.path, *o.names)), process.main
            )
            plan = self._plan(session, requester, process.main)
            found = self._searcher(process.target).find(path, plan)
        else:
            found = self._searcher(process.target).open_path(path)
        return self._admit_found(session, found, path, None, "dlopen")

    def _need(
        self, session: _Session, obj: Loaded, name: str, target: Target, main: Loaded
    ) -> Loaded | None:
        """The object one DT_NEEDED name of `obj` leads to (None: a failure, recorded)."""
        known = session.match(name)
        if known is not None:
            session.steps.append(Step(obj.path, name, known.path, "already loaded"))
            return known
        searcher = self._searcher(target)
        if "/" in name:
            expanded = expand_dst(name, obj.origin, self.env.facts)
            found = searcher.open_path(expanded) if expanded else Missing(name, ("path",))
        else:
            found = searcher.find(name, self._plan(session, obj, main))
        return self._admit_found(session, found, name, obj, obj.path)

    def _admit_found(
        self,
        session: _Session,
        found: Found | Missing | Rejected,
        name: str,
        loader: Loaded | None,
        needed_by: str,
    ) -> Loaded | None:
        if isinstance(found, Missing):
            session.failures.append(
                NotFound(
                    name=name,
                    needed_by=needed_by,
                    searched=found.searched,
                    other_class=found.other_class,
                    elf_class=self._elf_class(session),
                    tried=found.tried,
                )
            )
            session.steps.append(Step(needed_by, name, None, "not found"))
            return None
        if isinstance(found, Rejected):
            session.failures.append(BadObject(path=found.path, needed_by=needed_by, why=found.why))
            session.steps.append(Step(needed_by, name, None, "refused"))
            return None
        if found.uncertain:
            session.unknown.append(f"{found.path}: {found.uncertain}")
        session.steps.append(Step(needed_by, name, found.path, found.how))
        return self._admit(session, found.path, name, loader)

    @staticmethod
    def _elf_class(session: _Session) -> int:
        return session.process_objects[0].elf.elf_class if session.process_objects else 64

    def _admit(
        self, session: _Session, path: str, name: str, loader: Loaded | None
    ) -> Loaded | None:
        """A found file into the link map: the loaded object when it is the same file."""
        key = self._key(path)
        known = session.by_key(key)
        if known is not None:
            return session.rename(known, name)
        elf = self.read(self.disk.absolute(path))
        if isinstance(elf, Unreadable):
            session.unknown.append(f"{path}: {elf.why}")
            return None
        refused = self._refused(elf)
        if refused:
            session.failures.append(
                BadObject(path=path, needed_by=loader.path if loader else None, why=refused)
            )
            return None
        if elf.dynamic is not None and elf.dynamic.filters:
            session.unknown.append(f"{path}: filters (DT_FILTER, DT_AUXILIARY) are not modelled")
        soname = elf.dynamic.soname if elf.dynamic else None
        absolute = self.disk.absolute(path)
        obj = Loaded(
            path=path,
            elf=elf,
            names=frozenset(n for n in (path, name, soname) if n),
            key=key,
            origin=absolute.rsplit("/", 1)[0] or "/",
            loader=loader.path if loader else None,
        )
        session.process_objects.append(obj)
        session.new.add(key)
        return obj

    def _refused(self, elf: ElfFile) -> str | None:
        """Why _dl_map_object_from_fd refuses a file open_verify let through."""
        if elf.type == ET_EXEC:
            return "cannot dynamically load executable"
        if elf.dynamic is None:
            return "object file has no dynamic section"
        if elf.dynamic.pie:
            return "cannot dynamically load position-independent executable"
        glibc = self.env.facts.glibc
        if elf.exec_stack and glibc is not None and glibc >= EXECSTACK_REFUSED:
            return "cannot enable executable stack as shared object requires: Invalid argument"
        return None

    def _plan(self, session: _Session, obj: Loaded, main: Loaded) -> Plan:
        """The search lists for `obj`'s needed names (_dl_map_object's order)."""
        facts = self.env.facts
        dyn = obj.elf.dynamic
        lists: list[PathList] = []
        if dyn is None or not dyn.runpath:
            lists += rpath_lists(self._chain(session, obj), self._rpaths(main), facts)
        if self.env.library_path:
            dirs = expand_list(self.env.library_path, main.origin, facts, ":;")
            lists.append(PathList("LD_LIBRARY_PATH", dirs))
        if dyn is not None and dyn.runpath:
            lists.append(PathList("RUNPATH", expand_list(dyn.runpath, obj.origin, facts), obj.path))
        return Plan(lists=tuple(p for p in lists if p.dirs), nodeflib=bool(dyn and dyn.nodeflib))

    def _chain(
        self, session: _Session, obj: Loaded
    ) -> list[tuple[str, str | None, str | None, str]]:
        """`obj`, the object that loaded it, and on up (l_loader)."""
        chain = []
        current: Loaded | None = obj
        seen = set()
        while current is not None and current.path not in seen:
            seen.add(current.path)
            chain.append(self._rpaths(current))
            current = session.get(current.loader) if current.loader else None
        return chain

    @staticmethod
    def _rpaths(obj: Loaded) -> tuple[str, str | None, str | None, str]:
        dyn = obj.elf.dynamic
        return (obj.path, dyn.rpath if dyn else None, dyn.runpath if dyn else None, obj.origin)

    def _breadth_first(
        self, session: _Session, first: list[Loaded], target: Target, main: Loaded
    ) -> list[Loaded]:
        """The search list: `first`, then every needed object breadth first, each once."""
        searchlist = list(first)
        keys = {o.key for o in searchlist}
        index = 0
        while index < len(searchlist):
            obj = searchlist[index]
            index += 1
            for name in obj.elf.dynamic.needed if obj.elf.dynamic else ():
                dep = self._need(session, session.get(obj.path), name, target, main)
                if dep is not None and dep.key not in keys:
                    keys.add(dep.key)
                    searchlist.append(dep)
        return [session.by_key(o.key) or o for o in searchlist]

    # -- checking

    def _scope(
        self, process: Process, session: _Session, searchlist: Sequence[Loaded]
    ) -> list[Loaded]:
        """The lookup scope of the new objects: the global scope, then the root's list."""
        scope = [o for o in (session.by_key(k) for k in process.global_scope) if o is not None]
        keys = {o.key for o in scope}
        return scope + [o for o in searchlist if o.key not in keys]

    def _check(
        self, session: _Session, new: Sequence[Loaded], scope: Sequence[Loaded], now: bool
    ) -> None:
        """The version needs, then the looked-up symbols, of the new objects."""
        if session.failures:
            return  # ld.so stops at the first library it cannot load
        versions = [v for o in new for v in _version_failures(session, o, scope)]
        providers = [o.elf.symbols.exports for o in scope if o.elf.symbols is not None]
        names = tuple(o.path for o in scope)
        now = now or self.env.bind_now
        symbols = [  # relocated dependencies first: the last object of the list first
            s for o in reversed(new) for s in _symbol_failures(o, providers, names, now)
        ]
        session.failures += versions + symbols

    def _outcome(self, session: _Session, searchlist: Sequence[Loaded]) -> Load:
        verdict: Verdict = Ok()
        if session.unknown:
            why = list(session.unknown)
            if session.failures:
                why.append("otherwise the load fails: " + session.failures[0].message())
            verdict = Unknown(why=tuple(why))
        elif session.failures:
            verdict = Fails(reasons=tuple(session.failures))
        paths = tuple(o.path for o in searchlist)
        return Load(verdict=verdict, steps=tuple(session.steps), searchlist=paths)


def _version_failures(session: _Session, obj: Loaded, searchlist: Sequence[Loaded]) -> list[Reason]:
    """_dl_check_map_versions: each version `obj` needs, defined by the file it names."""
    table = obj.elf.symbols
    if table is None:
        return []
    out: list[Reason] = []
    for need in table.verneeds:
        provider = _find_needed(session, need.file, searchlist)
        if provider is None:
            out.append(
                BadObject(
                    path=obj.path,
                    needed_by=None,
                    why=f"missing soname {need.file} in version dependency",
                )
            )
            continue
        defs = provider.elf.symbols.verdefs if provider.elf.symbols else ()
        if not defs or need.weak or any(d.hash == need.hash and d.name == need.name for d in defs):
            continue
        out.append(
            VersionNotFound(
                version=need.name, file=need.file, provider=provider.path, needed_by=obj.path
            )
        )
    return out


def _find_needed(session: _Session, name: str, searchlist: Iterable[Loaded]) -> Loaded | None:
    """dl-version.c's find_needed: any loaded object by that name, else one of the list."""
    known = session.match(name)
    if known is not None:
        return known
    return next((o for o in searchlist if name in o.names), None)


def _symbol_failures(
    obj: Loaded, providers: Sequence[Exports], scope: tuple[str, ...], now: bool
) -> list[Reason]:
    table = obj.elf.symbols
    if table is None:
        return []
    bind_now = now or bool(obj.elf.dynamic and obj.elf.dynamic.bind_now)
    out: list[Reason] = []
    for ref in table.references:
        if ref.weak or (ref.lazy and not bind_now):
            continue
        if not any(exports.provides(ref) for exports in providers):
            out.append(
                UndefinedSymbol(
                    symbol=ref.name,
                    needed_by=obj.path,
                    searched=scope,
                    version=ref.version,
                    file=ref.file,
                )
            )
    return out
