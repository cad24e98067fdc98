"""Run the probe on a host through a Runner and turn its JSON into a Snapshot."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, get_type_hints

from envsync.collect import share, wire
from envsync.documents import NESTED, too_large
from envsync.errors import CollectError, CommandNotFound, DecodeError
from envsync.hostside import protocol
from envsync.hostside.shared import text_digest
from envsync.model.codec import decode, from_data
from envsync.model.environment import ModuleFacts, Snapshot
from envsync.model.inventory import HostSpec
from envsync.runner import CommandResult, Runner, capped, stoppable
from envsync.runner.bundle import host_argv, host_input

DEFAULT_TIMEOUT = 300.0


def probe_source(sealed: bool = True) -> bytes:
    """What the probe's command reads on stdin: the host side's bundle, and the key its
    caches are sealed with (`sealed`: it keeps caches, not --no-cache)."""
    return host_input(sealed=sealed)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeOptions:
    deep: bool = False
    timeout: float = DEFAULT_TIMEOUT
    # The host-side cache folder for file hashes, the import graph and the host side's
    # copy (None: ~/.cache/envsync on the host, "": none, nothing written). Startup import
    # graph: the modules to start from (none: no graph) and the top-level packages to follow.
    roots: tuple[str, ...] = ()
    internal: tuple[str, ...] = ()
    cache_dir: str | None = None
    # A script root ("script:PATH") is relative to the service's working folder on the
    # host (default: home); isolated (-I, -P): its folder is not put first on sys.path.
    workdir: str | None = None
    isolated: bool = False
    # The dynamic loader's settings in the service's own environment (LD_LIBRARY_PATH,
    # LD_PRELOAD, LD_BIND_NOW): the native layer judges its loads as the service runs.
    loader_env: tuple[tuple[str, str], ...] = ()
    # The root module that runs as __main__ (`python -m X`): its main block runs.
    main: str | None = None
    # envsync's side only: decode the graph's modules when they are looked at (the
    # reference's graph, of which a diff reads a few statements)
    lazy_graph: bool = False
    # The served model to read (hostside/graph/model.py): the command's model, the revision,
    # the service's Hugging Face variables, and the rule packs' registries (root, kind).
    model: ModelQuery | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelQuery:
    """What the probe needs to read the served model's config.json and its modules."""

    model: str | None  # None: the command names none
    revision: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)  # HF_HOME, HF_HUB_CACHE ...
    registries: tuple[tuple[str, str], ...] = ()  # ("sglang.srt.models.*", "entry-class")


def probe_argv(
    host: HostSpec,
    options: ProbeOptions,
    *,
    known: Mapping[str, object] | None = None,
    offered: share.Offer | None = None,
) -> list[str]:
    """The probe's command; `known`: the digests of the parts envsync holds for this
    request ("graph": the startup graph's modules; "distributions", "native"; "graphs":
    those of its last states): the host does not send again those that are the same;
    `offered`: the packs of facts given on stdin, and those envsync holds (share.py)."""
    payload: dict[str, object] = {
        "host": host.name,
        "watch": list(host.watch),
        "env": list(host.env),
        "deep": options.deep,
    }
    if options.roots:
        payload["roots"] = list(options.roots)
        payload["internal"] = list(options.internal)
        payload["workdir"] = options.workdir
        payload["isolated"] = options.isolated
        payload["loader_env"] = dict(options.loader_env)
        payload["main"] = options.main
    if options.model is not None:
        query = options.model
        payload["model"] = {
            "model": query.model,
            "revision": query.revision,
            "env": dict(query.env),
            "registries": [{"root": r, "registry": k} for r, k in query.registries],
        }
    if known:
        payload["known"] = dict(known)
    if offered is not None:
        payload["share"] = offered.options()
    options_json = json.dumps(payload, separators=(",", ":"))
    return host_argv(host.python, protocol.COLLECT, [options_json], cache_dir=options.cache_dir)


@stoppable()  # a collection changes nothing: SIGTERM may end it at once
@capped()  # the probe writes a document: past the largest envsync reads, it is ended
def collect(host: HostSpec, runner: Runner, options: ProbeOptions | None = None) -> Snapshot:
    """Collect a snapshot of `host` with one probe run; raise CollectError on failure.
    What envsync holds of the host's last answer is not sent again; if it turns out not to
    hold it after all (a damaged copy, one another envsync run on this machine pruned or
    cleared while the probe ran), the probe runs once more for everything. A host whose
    facts store was made anew (share.Again) is asked once more with every pack."""
    options = options or ProbeOptions()
    request = _request(host, options)
    held = wire.known(request) if request else {}
    offered = offer(host, options)
    fresh = False
    sealed = options.cache_dir != ""
    try:
        while True:  # at most three runs: each retry gives up what the one before relied on
            stdin = probe_source(sealed) + (offered.payload() if offered else b"")
            argv = probe_argv(host, options, known=held, offered=offered)
            result = runner.run(argv, input=stdin, timeout=options.timeout)
            try:
                return read_result(host, result, options, offered)
            except share.Again as e:  # its facts store was made anew: every pack given
                if fresh:  # a fresh offer asks nothing of the store
                    raise CollectError(f"{host.name}: its probe refused every pack twice") from e
                offered, fresh = offer(host, options, fresh=True), True
            except wire.Stale as e:  # a copy named went, or is damaged: all asked for
                if not held:
                    raise CollectError(
                        f"{host.name}: its probe said envsync holds parts it never named ({e})"
                    ) from e
                assert request is not None
                wire.forget(request)
                held = {}
    except CommandNotFound as e:
        raise CollectError(
            f"{host.name}: python {host.python!r} not found",
            tip=f"set hosts.{host.name}.python to the service's interpreter",
        ) from e


def offer(
    host: HostSpec, options: ProbeOptions, *, check: bool = True, fresh: bool = False
) -> share.Offer | None:
    """The packs of facts to give `host`'s probe (share.py; None: no cache, no graph);
    `check`: the probe may answer share.Again (its facts store was made anew); `fresh`:
    asked again, every pack given."""
    return share.offer(
        host,
        options.cache_dir,
        options.roots,
        options.internal,
        options.main,
        check=check,
        fresh=fresh,
    )


def waves(requests: Sequence[tuple[HostSpec, ProbeOptions] | None]) -> list[list[int]]:
    """The order in which to collect several hosts at once: waves of indexes of `requests`,
    each started once the one before has answered, so that a host is given the facts the
    hosts of its trust before it parsed, and each file is parsed once in all.

    Of the hosts envsync knows nothing of (no record of the packs they hold), one is
    collected first where envsync holds no pack of their command either. Then the rest are
    grouped by image (the command and the interpreter's path, as nodes of one image share
    them): of a group of two or more, one goes first and the others after it, as they
    will parse the same files that differ from what envsync holds. Every other host goes
    in the first wave: it waits for no one."""
    groups: dict[tuple[str, str], list[int]] = {}  # (command, interpreter) -> hosts
    for i, asked in enumerate(requests):
        if asked is None or asked[1].cache_dir == "" or not asked[1].roots:
            continue
        host, options = asked
        if not share.known_host(host, options.cache_dir):
            trust = share.circle(host, options.cache_dir)
            key = share.command_key(options.roots, options.internal, options.main, trust)
            groups.setdefault((key, host.python), []).append(i)
    commands: dict[str, list[int]] = {}
    for (key, _), members in groups.items():
        commands.setdefault(key, []).extend(members)
    leads: list[int] = []  # of a command envsync holds no pack of: one host first
    for members in commands.values():
        asked = requests[members[0]]
        assert asked is not None
        roots, internal, main = asked[1].roots, asked[1].internal, asked[1].main
        trust = share.circle(asked[0], asked[1].cache_dir)
        if len(members) >= 2 and not share.known_command(roots, internal, main, trust):
            leads.append(min(members))
    led = {image for image, members in groups.items() if set(members) & set(leads)}
    then: list[int] = []
    last: list[int] = []
    for image, members in groups.items():
        rest = [i for i in members if i not in leads]
        if image in led or len(rest) < 2:
            then.extend(rest)  # its image's files are the lead's: nothing to wait for
        else:
            then.append(rest[0])
            last.extend(rest[1:])
    grouped = {i for members in groups.values() for i in members}
    others = [i for i in range(len(requests)) if i not in grouped]
    found = [leads + others, then, last] if leads else [others + then, last]
    return [sorted(wave) for wave in found if wave]


def _request(host: HostSpec, options: ProbeOptions) -> str | None:
    """The request's key for what envsync keeps (None: caching is off, --no-cache)."""
    if options.cache_dir == "":
        return None
    return wire.request_key([host.name, *probe_argv(host, options)])


def read_result(
    host: HostSpec,
    result: CommandResult,
    options: ProbeOptions,
    offered: share.Offer | None = None,
) -> Snapshot:
    """The snapshot in the probe's result, however it ran (a runner, or an engine);
    `offered`: the packs it was given (what it sends back is kept)."""
    if result.returncode != 0:
        tail = result.stderr_tail()
        if result.returncode == 127 or (
            "No such file or directory" in tail and host.python in tail
        ):
            raise CollectError(f"{host.name}: python {host.python!r} not found")
        raise CollectError(
            f"{host.name}: probe failed with exit code {result.returncode}: {tail or 'no output'}"
        )
    _keep_cache_note(host.name, result.stderr)
    return parse_probe_output(
        host.name,
        result.stdout,
        lazy_graph=options.lazy_graph,
        request=_request(host, options),
        offered=offered,
    )


_CACHE_NOTES: dict[str, str] = {}  # host -> why it kept no cache on its last collection
_UNSAFE_CACHE = "no cache is used"  # the host side's words for it (hostside/boot.py)


def _keep_cache_note(host: str, stderr: bytes) -> None:
    """The host side's note that its cache folder is not safe to use (another user's, or
    writable by others): it ran with no cache, and the user should hear it, with the fix."""
    for line in stderr.decode("utf-8", "replace").splitlines():
        if line.startswith("envsync: ") and _UNSAFE_CACHE in line:
            _CACHE_NOTES[host] = line.removeprefix("envsync: ")


def cache_note(host: str) -> str | None:
    """Why `host` kept no cache on its last collection in this process (None: it did)."""
    return _CACHE_NOTES.pop(host, None)


def parse_probe_output(
    host: str,
    stdout: bytes,
    *,
    lazy_graph: bool = False,
    request: str | None = None,
    offered: share.Offer | None = None,
) -> Snapshot:
    """The snapshot of a probe's output: its document, then the startup graph's modules,
    the distributions and the native facts on lines of their own or, those the host said
    are unchanged, from what envsync kept (wire.Stale when it has no good copy), then the
    packs of facts it sent. `request`: keep what was sent under its key; `offered`: the
    packs it was given (share.py: what it sent is kept)."""
    why = too_large(len(stdout), host, "the probe's output")
    if why:
        raise CollectError(why)
    line, _, rest = stdout.partition(b"\n")
    try:
        data = json.loads(line)
    except RecursionError as e:
        raise CollectError(f"{host}: probe output is {NESTED}") from e
    except ValueError as e:
        head = stdout[:80].decode("utf-8", "replace").strip()
        raise CollectError(
            f"{host}: probe output is not JSON ({e.__class__.__name__}: {e}); it began {head!r}",
            tip="is the host's `python` a Python 3.8+ interpreter?",
        ) from e
    if isinstance(data, dict) and "share_again" in data:
        raise share.Again(f"{host}: its facts store was made anew")
    lines = rest.split(b"\n")
    digests: dict[str, str] = {}
    texts: dict[str, bytes] = {}
    graph = data.get("startup") if isinstance(data, dict) else None
    text = digest = raw = None
    lazy = False
    if isinstance(graph, dict) and isinstance(graph.get("modules_digest"), str):
        digest = graph.pop("modules_digest")
        sent = graph.pop("modules_sent", True) is not False
        text = _part(host, "graph", digest, sent, lines, texts)
        digests["graph"] = digest
        # kept modules were read when they were sent: decoded when looked at
        lazy = lazy_graph or not sent
        graph["modules"] = {} if lazy else _json(host, text)
    elif isinstance(graph, dict) and lazy_graph and isinstance(graph.get("modules"), dict):
        lazy, raw = True, graph["modules"]  # a graph in one document
        data["startup"] = {**graph, "modules": {}}
    parts = _parts(host, data, lines, digests, texts) if isinstance(data, dict) else {}
    told = data.pop("packs", None) if isinstance(data, dict) else None
    if offered is not None:
        share.receive(host, offered, told, lines)
    try:
        snap = from_data(Snapshot, data, host)
        if parts:
            snap = replace(snap, **parts)
    except DecodeError as e:
        raise CollectError(f"{host}: probe output is not an envsync snapshot: {e}") from e
    if request is not None and digests:  # what it sent, and the digests it named
        wire.keep(request, digests, texts)
    if snap.startup is None:
        return snap
    where = f"{host}.startup.modules"
    if lazy:
        modules: Mapping[str, ModuleFacts] = LazyModules(raw, where, text=text, digest=digest)
    elif digest is not None:
        modules = Digested(snap.startup.modules, digest)
    else:
        return snap
    return replace(snap, startup=replace(snap.startup, modules=modules))


def _part(
    host: str, name: str, digest: str, sent: bool, lines: list[bytes], texts: dict[str, bytes]
) -> bytes:
    """The JSON text of a part sent apart: the output's next line (checked against its
    digest), or kept from an earlier answer (wire.Stale: not held)."""
    if not sent:
        return wire.load(digest, name)
    text = lines.pop(0) if lines else b""
    if text_digest(text) != digest:
        raise CollectError(
            f"{host}: the probe's {_LABELS[name]} do not match their digest (output cut short?)"
        )
    texts[name] = text
    return text


_FIELDS = get_type_hints(Snapshot)
_LABELS = {
    "graph": "startup graph's modules",
    "distributions": "distributions",
    "native": "native facts",
}


def _parts(
    host: str,
    data: dict[str, Any],
    lines: list[bytes],
    digests: dict[str, str],
    texts: dict[str, bytes],
) -> dict[str, Any]:
    """The decoded parts the first line lists ({name: [digest, sent]}), each decoded once
    per process; their places in `data` are left empty for the rest to decode."""
    listed = data.pop("parts", None)
    if not isinstance(listed, dict):
        return {}
    out: dict[str, Any] = {}
    for name, entry in listed.items():
        if (
            name not in ("distributions", "native")
            or not isinstance(entry, list)
            or len(entry) != 2
        ):
            raise CollectError(f"{host}: the probe's output lists an unknown part {name!r}")
        digest, sent = entry
        if not isinstance(digest, str):
            raise CollectError(f"{host}: the probe's {name} have no digest")
        text = _part(host, name, digest, sent is not False, lines, texts)
        digests[name] = digest

        def make(name: str = name, text: bytes = text) -> Any:
            return decode(_FIELDS[name], _json(host, text), f"{host}.{name}")

        out[name] = wire.decoded(name, digest, make)
        data[name] = [] if name == "distributions" else None
    return out


def _json(host: str, text: bytes) -> Any:
    try:
        return json.loads(text)
    except RecursionError as e:
        raise CollectError(f"{host}: probe output is {NESTED}") from e
    except ValueError as e:
        raise CollectError(f"{host}: the probe's startup graph is not JSON ({e})") from e


class LazyModules(Mapping[str, ModuleFacts]):
    """A graph's modules, each decoded when it is first looked at (their JSON text, if
    given, when any is). One that does not decode reads as an unreadable module (kind
    "error"): envsync cannot tell from it. `digest`: of the text, as the host sent it."""

    def __init__(
        self,
        raw: dict[str, Any] | None,
        where: str,
        *,
        text: bytes | None = None,
        digest: str | None = None,
    ) -> None:
        self._raw_data = raw
        self._text = text
        self._where = where
        self._done: dict[str, ModuleFacts] = {}
        self.digest = digest

    @property
    def _raw(self) -> dict[str, Any]:
        if self._raw_data is None:
            try:
                loaded = json.loads(self._text or b"{}")
            except (ValueError, RecursionError):
                loaded = {}
            self._raw_data = loaded if isinstance(loaded, dict) else {}
            self._text = None
        return self._raw_data

    def rows(self) -> dict[str, list[Any]]:
        """Each module's kind, sha256 and error, read from the raw data (classes.py); a
        module whose data does not decode answers as decoding it does."""
        out: dict[str, list[Any]] = {}
        for name, raw in self._raw.items():
            plain = isinstance(raw, dict) and isinstance(raw.get("kind"), str)
            if name in self._done or not plain or not _strings(raw, "sha256", "error"):
                facts = self[name]
                out[name] = [facts.kind, facts.sha256, facts.error]
            else:
                out[name] = [raw["kind"], raw.get("sha256"), raw.get("error")]
        return out

    def get(self, name: str, default: Any = None) -> Any:  # Mapping's, without its KeyError
        found = self._done.get(name)
        if found is not None:
            return found
        return self[name] if name in self._raw else default

    def __getitem__(self, name: str) -> ModuleFacts:
        found = self._done.get(name)
        if found is None:
            raw = self._raw[name]
            try:
                found = from_data(ModuleFacts, raw, f"{self._where}.{name}")
            except DecodeError as e:
                found = ModuleFacts(kind="error", error=str(e))
            self._done[name] = found
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __contains__(self, name: object) -> bool:
        return name in self._raw


def _strings(raw: dict[str, Any], *keys: str) -> bool:
    return all(raw.get(k) is None or isinstance(raw.get(k), str) for k in keys)


class Digested(Mapping[str, ModuleFacts]):
    """Decoded modules, with the digest of the text they were decoded from."""

    def __init__(self, modules: Mapping[str, ModuleFacts], digest: str) -> None:
        self._modules = modules
        self.digest = digest

    def __getitem__(self, name: str) -> ModuleFacts:
        return self._modules[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self._modules.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __contains__(self, name: object) -> bool:
        return name in self._modules
